// swift-tools-version:6.2
//
// E3DBKit: Swift toolkit for end-to-end encrypted E3DB data.
// Layers (dependencies point only downward; C is imported by E3DBPrimitives, E3DBPageCodec (BoringSSL's AES and
// SHA-2), E3DBSQLite, E3DBSQLiteExtension and the libb2 oracle; docs/architecture.md draws every target):
//   L5 e3dbkit (CLI: keys, records, files, store, client; no server)  e3dbkit-server (E3DBServer only)
//      E3DBSQLiteExtension (the loadable SQLite extension, a dynamic library)
//      E3DBCommandLine (exit codes, checked standard streams, the one exit path; shared by the executables)
//      e3dbkit-vectors (`vectors verify` alone: the main job, scripts/run.sh) over E3DBVectorsCommand (the one
//      vectors command type, which `e3dbkit vectors` runs too)
//   L4 E3DBKit (umbrella)  E3DBStore (GRDB)  E3DBClient (no HTTP library: the transport protocol)
//      E3DBServer (Hummingbird, GRDB, postgres-nio; never a module that can decrypt)
//      the client's transports, leaves over E3DBClient: E3DBAsyncHTTPClient (AsyncHTTPClient, NIO, TLS options,
//      pinning, proxies)  E3DBURLSession (URLSession; no NIO)
//   L3 E3DBDocuments  E3DBFiles  E3DBIdentity  E3DBPageCodec (SQLCipher and chacha20 pages; no SQLite)
//   L3 E3DBSQLite (encrypting VFS over the system libsqlite3, CE3DBSQLite3; never GRDB)
//   L3 E3DBRows (the one reader of untrusted SQLite rows, over GRDB; the store and the server)
//   L2 E3DBKeys  E3DBCanonicalJSON   (E3DBKeys uses the stdlib-only E3DBCanonicalJSON's strict parser)
//      E3DBBLAKE2bReference (libb2's BLAKE2b, the oracle for tests, vector checks and a fuzz target; not a product)
//      E3DBAPI (the wire contract: endpoints, bodies, TSV1, refusal codes; E3DBPrimitives and the stdlib-only
//      E3DBCanonicalJSON only, neither of which decrypts anything, so the server and the client both link it)
//   Not products: E3DBConformance (vector checks for `e3dbkit vectors verify` and the tests), E3DBTestSupport,
//      e3dbkit-fuzz (Fuzz/Targets), generate-swift-vectors. Their API is `package`, not `public` (so is
//      E3DBCommandLine's): only this package uses them; the Benchmarks/ sub-package uses products only.
//   L1 E3DBPrimitives
//   L0 CE3DBSodium  CE3DBBlake2  CE3DBSQLite3 (the system SQLite, for E3DBSQLite and its extension only)
//      CE3DBBoringSSL (swift-crypto's own AES and SHA-2 block functions, for E3DBPageCodec's SQLCipher pages)
import PackageDescription

let upcoming: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]
// Every module, executable and fuzz target builds with strict memory safety (the test targets, which nothing links,
// do not): each unsafe expression is marked `unsafe`, with a `// Safety:` reason where it is not obvious; pointer
// APIs are `package`, never `public` (the C entry points of the SQLite extension and the fuzzer excepted).
let memorySafe = upcoming + [.strictMemorySafety()]

let package = Package(
    name: "E3DBKit",
    // What is built and tested: Linux, and macOS with Homebrew's libsodium and libb2. macOS 15 is what the code
    // needs (Synchronization's Mutex and Atomic in E3DBPrimitives and up; task executors in E3DBClient). No iOS,
    // tvOS, watchOS or visionOS: libsodium is found with pkg-config, which an Apple device SDK does not have
    // (README, "Platforms").
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "E3DBKit", targets: ["E3DBKit"]),
        .library(name: "E3DBPrimitives", targets: ["E3DBPrimitives"]),
        .library(name: "E3DBCanonicalJSON", targets: ["E3DBCanonicalJSON"]),
        .library(name: "E3DBKeys", targets: ["E3DBKeys"]),
        .library(name: "E3DBDocuments", targets: ["E3DBDocuments"]),
        .library(name: "E3DBFiles", targets: ["E3DBFiles"]),
        .library(name: "E3DBIdentity", targets: ["E3DBIdentity"]),
        .library(name: "E3DBPageCodec", targets: ["E3DBPageCodec"]),
        .library(name: "E3DBSQLite", targets: ["E3DBSQLite"]),
        // The loadable extension: `load_extension('…/libE3DBSQLiteExtension')` from any host of the system SQLite.
        .library(name: "E3DBSQLiteExtension", type: .dynamic, targets: ["E3DBSQLiteExtension"]),
        .library(name: "E3DBStore", targets: ["E3DBStore"]),
        .library(name: "E3DBAPI", targets: ["E3DBAPI"]),
        .library(name: "E3DBServer", targets: ["E3DBServer"]),
        .library(name: "E3DBClient", targets: ["E3DBClient"]),
        .library(name: "E3DBAsyncHTTPClient", targets: ["E3DBAsyncHTTPClient"]),
        .library(name: "E3DBURLSession", targets: ["E3DBURLSession"]),
        .executable(name: "e3dbkit", targets: ["e3dbkit"]),
        .executable(name: "e3dbkit-server", targets: ["e3dbkit-server"]),
        // `e3dbkit vectors` alone: what the main job (scripts/run.sh) builds and runs, without the client's, the
        // store's or the server's stacks.
        .executable(name: "e3dbkit-vectors", targets: ["e3dbkit-vectors"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        // Comes with async-http-client; named for E3DBAsyncHTTPClient's TLS options and pinning forwarder.
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        // Comes with hummingbird and postgres-nio; named for the server's services.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
    ],
    targets: [
        // L0: system libraries, found with pkg-config. Never products.
        .systemLibrary(
            name: "CE3DBSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"]), .brew(["libsodium"]), .yum(["libsodium-devel"])]
        ),
        .systemLibrary(
            name: "CE3DBBlake2",
            pkgConfig: "libb2",
            providers: [.apt(["libb2-dev"]), .brew(["libb2"]), .yum(["libb2-devel"])]
        ),

        // The system SQLite with the VFS file struct E3DBSQLite fills (E3DBSQLite only; GRDB has its own module).
        .systemLibrary(
            name: "CE3DBSQLite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),

        // swift-crypto's BoringSSL AES and SHA-2 block functions, declared for E3DBPageCodec's SQLCipher pages (AES-CBC
        // and HMAC into caller buffers); no library of its own: the symbols come with Crypto.
        .systemLibrary(name: "CE3DBBoringSSL"),

        // L1: the only module that touches C.
        .target(
            name: "E3DBPrimitives",
            dependencies: [
                "CE3DBSodium",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: memorySafe
        ),

        // libb2's BLAKE2b, the independent oracle that tests, vector checks and the BLAKE2b fuzz target compare
        // libsodium's against. Its own module, so that importing E3DBPrimitives needs libsodium alone.
        .target(
            name: "E3DBBLAKE2bReference",
            dependencies: ["CE3DBBlake2", "E3DBPrimitives"],
            swiftSettings: memorySafe
        ),

        // L2
        .target(name: "E3DBCanonicalJSON", swiftSettings: memorySafe),
        .target(name: "E3DBKeys", dependencies: ["E3DBPrimitives", "E3DBCanonicalJSON"], swiftSettings: memorySafe),

        // L3
        .target(
            name: "E3DBDocuments",
            dependencies: ["E3DBPrimitives", "E3DBKeys", "E3DBCanonicalJSON"],
            swiftSettings: memorySafe
        ),
        .target(name: "E3DBFiles", dependencies: ["E3DBPrimitives", "E3DBKeys"], swiftSettings: memorySafe),
        .target(name: "E3DBIdentity", dependencies: ["E3DBPrimitives", "E3DBKeys"], swiftSettings: memorySafe),

        // L3: the page transforms of SQLCipher 4 (and 3) and SQLite3 Multiple Ciphers' chacha20, no SQLite dependency.
        .target(
            name: "E3DBPageCodec",
            dependencies: [
                "E3DBPrimitives",
                // BoringSSL's AES-CBC and SHA-2 for SQLCipher pages; its symbols are linked through CryptoExtras (on
                // every platform: Crypto uses CryptoKit on Apple's).
                "CE3DBBoringSSL",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: memorySafe
        ),
        // L3: transparent whole-database encryption as a VFS over the system SQLite, reading and writing
        // SQLCipher 4 and SQLite3 Multiple Ciphers chacha20 files. Never GRDB: apps bring their own SQLite layer.
        .target(
            name: "E3DBSQLite",
            dependencies: ["E3DBPrimitives", "E3DBPageCodec", "CE3DBSQLite3"],
            swiftSettings: memorySafe
        ),

        // L3: the one reader of SQLite rows from files someone else could have written (the store's database and key
        // header, the server's database): a wrong type, a NULL or a missing column is a typed error naming the table
        // and column, never GRDB's trapping typed subscripts. Decrypts nothing, so the server links it.
        .target(
            name: "E3DBRows",
            dependencies: ["E3DBPrimitives", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: memorySafe
        ),

        // L5: the loadable SQLite extension around E3DBSQLite.
        .target(
            name: "E3DBSQLiteExtension", dependencies: ["E3DBSQLite", "CE3DBSQLite3"], swiftSettings: memorySafe),

        // L2: the wire (Codable bodies, timestamps, TSV1). E3DBPrimitives, the stdlib-only E3DBCanonicalJSON (its
        // JSON value model, `JSONValue`) and swift-http-types' HTTPTypes (pure Swift types: the API's header names,
        // shared by the server and the client) only, none of which decrypts anything: the server links it.
        .target(
            name: "E3DBAPI",
            dependencies: [
                "E3DBPrimitives", "E3DBCanonicalJSON", .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: memorySafe
        ),

        // L4: umbrella
        .target(
            name: "E3DBKit",
            dependencies: [
                "E3DBPrimitives", "E3DBCanonicalJSON", "E3DBKeys", "E3DBDocuments", "E3DBFiles", "E3DBIdentity",
                "E3DBAPI",
            ],
            swiftSettings: memorySafe
        ),

        // L4: the embedded encrypted store (SQLite through GRDB)
        .target(
            name: "E3DBStore",
            dependencies: [
                "E3DBPrimitives", "E3DBCanonicalJSON", "E3DBKeys", "E3DBDocuments", "E3DBFiles", "E3DBSQLite",
                "E3DBRows",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: memorySafe
        ),

        // L4: the E3DB-compatible API server. It must never depend on a module that can unwrap an access key or
        // decrypt a field (E3DBDocuments, E3DBKeys, E3DBFiles, E3DBIdentity, E3DBStore): it stores ciphertext by
        // construction. E3DBPrimitives gives it hashes, random bytes and Ed25519 verification; E3DBCanonicalJSON
        // (standard library only) the JSON value model of the wire.
        .target(
            name: "E3DBServer",
            dependencies: [
                "E3DBAPI", "E3DBCanonicalJSON", "E3DBPrimitives", "E3DBRows",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                // The storage's background work and the maintenance passes are services beside the server.
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                // HTTPParserError: a body cut off by the client's close (E3DBService.clientLeft).
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                // HEAD and DELETE against an S3-compatible file store (ObjectStore/S3FileBodyStore).
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            swiftSettings: memorySafe
        ),

        // L4: the E3DB client SDK over the HTTP API, behind a transport protocol. It links no HTTP library: the
        // transports are the two targets below (or an app's own). Requests and responses are swift-http-types'
        // (HTTPTypes: pure Swift types, no networking).
        .target(
            name: "E3DBClient",
            dependencies: [
                "E3DBAPI", "E3DBPrimitives", "E3DBKeys", "E3DBDocuments", "E3DBFiles", "E3DBIdentity",
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: memorySafe
        ),

        // L4: E3DBClient's transport over AsyncHTTPClient (SwiftNIO), with its TLS options (private CAs, public key
        // pins through the pinning forwarder) and HTTP proxies. What `e3dbkit client` uses.
        .target(
            name: "E3DBAsyncHTTPClient",
            dependencies: [
                "E3DBClient", "E3DBFiles", "E3DBPrimitives",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                // HTTPFields <-> HTTPHeaders and the method (swift-nio-extras' conversions, which the server builds).
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
            ],
            swiftSettings: memorySafe
        ),

        // L4: E3DBClient's transport over Foundation's URLSession (FoundationNetworking on Linux), for apps that do
        // not want AsyncHTTPClient: it links neither AsyncHTTPClient nor NIO.
        .target(
            name: "E3DBURLSession",
            dependencies: [
                "E3DBClient", "E3DBFiles", "E3DBPrimitives", .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: memorySafe),

        // L5: what the executables share (exit codes, checked standard output, the one exit path). Not a
        // product; it links nothing that can decrypt, so the server may use it.
        .target(
            name: "E3DBCommandLine",
            dependencies: ["E3DBPrimitives", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: memorySafe
        ),

        // L5: command line. Never E3DBServer: the key, record and file tool links no HTTP server or PostgreSQL.
        .executableTarget(
            name: "e3dbkit",
            dependencies: [
                "E3DBKit", "E3DBStore", "E3DBClient", "E3DBAsyncHTTPClient", "E3DBVectorsCommand", "E3DBSQLite",
                "E3DBCommandLine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: memorySafe
        ),

        // L5: `vectors verify`, the one command type both `e3dbkit` (its `vectors` group) and `e3dbkit-vectors` run.
        // Not a product; it links the formats and the vector suites, nothing with an HTTP or SQLite stack.
        .target(
            name: "E3DBVectorsCommand",
            dependencies: [
                "E3DBConformance", "E3DBCommandLine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: memorySafe
        ),
        // L5: the main job's executable (scripts/run.sh): `e3dbkit vectors` alone, so that a fresh clone checks the
        // vectors without compiling NIO, AsyncHTTPClient, GRDB or the client.
        .executableTarget(
            name: "e3dbkit-vectors",
            dependencies: [
                "E3DBVectorsCommand", "E3DBCommandLine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: memorySafe
        ),

        // L5: the API server's executable. Like E3DBServer it must never depend on a module that can decrypt
        // (E3DBDocuments, E3DBKeys, E3DBFiles, E3DBIdentity, E3DBStore, E3DBClient): the process boundary
        // between the server and the key-holding CLI is visible here.
        .executableTarget(
            name: "e3dbkit-server",
            dependencies: [
                "E3DBServer", "E3DBCommandLine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: memorySafe
        ),

        // The conformance checker (not a product): one suite per committed vector file, run by both the tests and
        // `e3dbkit vectors verify`, so there is one source of truth. No test-framework code and no #filePath: the
        // CLI links it.
        .target(
            name: "E3DBConformance",
            dependencies: ["E3DBKit", "E3DBPageCodec"],
            swiftSettings: memorySafe
        ),
        // The fuzz targets (Fuzz/Targets, one file each) as one executable, never a product: built with the package
        // it is the replay tool the FuzzReplayTests suite runs every corpus and FailCase through; Fuzz/run.sh builds
        // the same sources with libFuzzer and AddressSanitizer (docs/fuzzing.md).
        .executableTarget(
            name: "e3dbkit-fuzz",
            dependencies: [
                "E3DBAPI", "E3DBBLAKE2bReference", "E3DBCanonicalJSON", "E3DBDocuments", "E3DBFiles", "E3DBKeys",
                "E3DBPageCodec", "E3DBPrimitives", "E3DBSQLite", "E3DBServer", "E3DBStore", "E3DBTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Fuzz/Targets",
            swiftSettings: [.strictMemorySafety()]
        ),
        // A development tool, not a product: writes Swift-made vector cases for the Python SDK to check
        // (`swift run generate-swift-vectors DIR`; TestVectors/generators/check_swift_output.py DIR).
        .executableTarget(
            name: "generate-swift-vectors",
            dependencies: [
                "E3DBKit", "E3DBConformance", "E3DBCommandLine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: memorySafe
        ),
        // Test support (never linked by a product): the checkout's location from #filePath, child processes, edits of
        // SQLite files as someone who can write them makes them (GRDB).
        .target(
            name: "E3DBTestSupport",
            dependencies: ["E3DBConformance", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: memorySafe),
        // Test support for suites that run `e3dbkit-server` (never linked by a product): the PostgreSQL suite trait
        // and clients of a server process over either transport. Its own target, so that E3DBTestSupport (which the
        // fuzz targets link) imports neither the test framework nor the client.
        .target(
            name: "E3DBServerTestSupport",
            dependencies: ["E3DBTestSupport", "E3DBClient", "E3DBAsyncHTTPClient", "E3DBURLSession"],
            swiftSettings: memorySafe),

        .testTarget(name: "FuzzReplayTests", dependencies: ["E3DBTestSupport"], swiftSettings: upcoming),
        .testTarget(
            name: "E3DBPrimitivesTests",
            dependencies: ["E3DBPrimitives", "E3DBBLAKE2bReference", "E3DBTestSupport", "E3DBConformance"],
            swiftSettings: upcoming
        ),
        .testTarget(
            name: "E3DBCanonicalJSONTests",
            dependencies: [
                "E3DBCanonicalJSON", "E3DBTestSupport", "E3DBConformance",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: upcoming
        ),
        .testTarget(
            name: "E3DBKeysTests",
            dependencies: ["E3DBKeys", "E3DBTestSupport", "E3DBConformance"],
            swiftSettings: upcoming
        ),
        .testTarget(
            name: "E3DBDocumentsTests",
            dependencies: ["E3DBDocuments", "E3DBTestSupport", "E3DBConformance"],
            swiftSettings: upcoming
        ),
        .testTarget(
            name: "E3DBFilesTests",
            dependencies: ["E3DBFiles", "E3DBTestSupport", "E3DBConformance"],
            swiftSettings: upcoming
        ),
        .testTarget(
            name: "E3DBIdentityTests",
            dependencies: ["E3DBIdentity", "E3DBAPI", "E3DBTestSupport", "E3DBConformance"],
            swiftSettings: upcoming
        ),
        .testTarget(
            name: "E3DBKitCLITests",
            dependencies: [
                "E3DBKit", "E3DBTestSupport", "E3DBConformance", .product(name: "GRDB", package: "GRDB.swift"),
            ],
            exclude: ["cli_interop.py"],
            swiftSettings: upcoming
        ),
        .testTarget(
            name: "E3DBStoreTests",
            dependencies: ["E3DBStore", "E3DBKit", "E3DBTestSupport", .product(name: "GRDB", package: "GRDB.swift")],
            exclude: ["store_interop.py"],
            swiftSettings: upcoming
        ),
        .testTarget(
            name: "E3DBSQLiteTests",
            dependencies: [
                "E3DBSQLite", "E3DBPageCodec", "E3DBPrimitives", "E3DBTestSupport", "E3DBConformance",
                .product(name: "GRDB", package: "GRDB.swift"),
                // swift-crypto's own AES-CBC and HMAC: the oracle of the codec's SQLCipher pages.
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            exclude: ["sqlcipher_peer.py"],
            swiftSettings: upcoming
        ),
        .testTarget(
            name: "E3DBPageCodecTests", dependencies: ["E3DBPageCodec", "E3DBTestSupport", "E3DBConformance"],
            swiftSettings: upcoming),
        .testTarget(name: "E3DBAPITests", dependencies: ["E3DBAPI", "E3DBTestSupport"], swiftSettings: upcoming),
        // The client against a real `e3dbkit-server` process (and Tozny's Python SDK); Hummingbird, HTTPTypes,
        // Logging and NIOCore for the lying proxy of ClientTrustTests.
        .testTarget(
            name: "E3DBClientTests",
            dependencies: [
                "E3DBClient", "E3DBAsyncHTTPClient", "E3DBTestSupport", "E3DBServerTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: upcoming
        ),
        .testTarget(
            name: "E3DBURLSessionTests",
            dependencies: [
                "E3DBURLSession", "E3DBTestSupport", "E3DBServerTestSupport",
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: upcoming),
        .testTarget(
            name: "E3DBServerTests",
            dependencies: [
                "E3DBServer", "E3DBAPI", "E3DBClient", "E3DBAsyncHTTPClient", "E3DBKit", "E3DBTestSupport",
                "E3DBServerTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                // StorageLifecycleTests run a storage inside a service group.
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            // The Python drivers share python_sdk_driver.py's harness, so they stay together (E3DBClientTests runs
            // notes_interop.py).
            exclude: ["python_sdk_driver.py", "client_interop.py", "notes_interop.py", "multi_node_driver.py"],
            swiftSettings: upcoming
        ),
    ]
)
