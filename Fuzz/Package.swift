// swift-tools-version:6.2
//
// libFuzzer targets for E3DBKit. Not part of the main package: build and run them with Fuzz/run.sh, which uses
//   swift build -c release --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address
// One executable target per fuzz target, Sources/<Target>/main.swift, exporting LLVMFuzzerTestOneInput.
import PackageDescription

/// The documents-layer targets (FuzzDocuments, FuzzNDJSON) link the same modules.
let documentsDependencies: [Target.Dependency] = [
    .product(name: "E3DBDocuments", package: "E3DBKit"), .product(name: "E3DBKeys", package: "E3DBKit"),
    .product(name: "E3DBPrimitives", package: "E3DBKit"), .product(name: "E3DBCanonicalJSON", package: "E3DBKit"),
]

/// The server targets (FuzzServerRequests, FuzzAuthHeaders, FuzzSearchCost) drive `E3DBRequestHandler` in process.
let serverDependencies: [Target.Dependency] = [
    .product(name: "E3DBServer", package: "E3DBKit"), .product(name: "E3DBAPI", package: "E3DBKit"),
    .product(name: "E3DBPrimitives", package: "E3DBKit"), .product(name: "Hummingbird", package: "hummingbird"),
    .product(name: "HTTPTypes", package: "swift-http-types"),
]

let package = Package(
    name: "E3DBKitFuzz",
    dependencies: [
        .package(name: "E3DBKit", path: ".."),
        // FuzzStore corrupts the store's rows through its own SQLite connection (the version E3DBKit resolves).
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        // The server target builds Hummingbird requests; the versions are the ones E3DBKit resolves.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
    ],
    targets: [
        .executableTarget(
            name: "FuzzCanonicalJSON",
            dependencies: [.product(name: "E3DBCanonicalJSON", package: "E3DBKit")]
        ),
        .executableTarget(
            name: "FuzzFileDecrypt",
            dependencies: [.product(name: "E3DBFiles", package: "E3DBKit")]
        ),
        .executableTarget(
            name: "FuzzFileRange",
            dependencies: [
                .product(name: "E3DBFiles", package: "E3DBKit"), .product(name: "E3DBKeys", package: "E3DBKit"),
                .product(name: "E3DBPrimitives", package: "E3DBKit"),
            ]
        ),
        .executableTarget(
            name: "FuzzBase64URL",
            dependencies: [.product(name: "E3DBPrimitives", package: "E3DBKit")]
        ),
        .executableTarget(
            name: "FuzzSecretStream",
            dependencies: [.product(name: "E3DBPrimitives", package: "E3DBKit")]
        ),
        .executableTarget(
            name: "FuzzBLAKE2b",
            dependencies: [
                .product(name: "E3DBPrimitives", package: "E3DBKit"),
                .product(name: "E3DBBLAKE2bReference", package: "E3DBKit"),
            ]
        ),
        .executableTarget(
            name: "FuzzSealedBoxes",
            dependencies: [.product(name: "E3DBPrimitives", package: "E3DBKit")]
        ),
        .executableTarget(
            name: "FuzzKeys",
            dependencies: [
                .product(name: "E3DBKeys", package: "E3DBKit"), .product(name: "E3DBPrimitives", package: "E3DBKit"),
            ]
        ),
        .executableTarget(
            name: "FuzzDocuments",
            dependencies: documentsDependencies
        ),
        .executableTarget(
            name: "FuzzNDJSON",
            dependencies: documentsDependencies
        ),
        .executableTarget(
            name: "FuzzStore",
            dependencies: documentsDependencies + [
                .product(name: "E3DBStore", package: "E3DBKit"), .product(name: "E3DBFiles", package: "E3DBKit"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .executableTarget(
            name: "FuzzAPIBodies",
            dependencies: [.product(name: "E3DBAPI", package: "E3DBKit")]
        ),
        .executableTarget(
            name: "FuzzTSV1Verify",
            dependencies: [
                .product(name: "E3DBAPI", package: "E3DBKit"), .product(name: "E3DBPrimitives", package: "E3DBKit"),
            ]
        ),
        .executableTarget(
            name: "FuzzPageCodec",
            dependencies: [
                .product(name: "E3DBPageCodec", package: "E3DBKit"), .product(name: "E3DBPrimitives", package: "E3DBKit"),
            ]
        ),
        // FuzzSQLiteVFS reaches the VFS's file methods through GRDB's SQLite module (the same system library).
        .executableTarget(
            name: "FuzzSQLiteVFS",
            dependencies: [
                .product(name: "E3DBSQLite", package: "E3DBKit"), .product(name: "E3DBPageCodec", package: "E3DBKit"),
                .product(name: "E3DBPrimitives", package: "E3DBKit"), .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ]
        ),
        .executableTarget(name: "FuzzServerRequests", dependencies: serverDependencies),
        .executableTarget(name: "FuzzAuthHeaders", dependencies: serverDependencies),
        .executableTarget(name: "FuzzSearchCost", dependencies: serverDependencies),
    ]
)
