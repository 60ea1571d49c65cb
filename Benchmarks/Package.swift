// swift-tools-version:6.2
//
// E3DBKit benchmarks: a separate package so that package-benchmark (and its malloc interposer) never becomes a
// dependency of the library. Run them with `scripts/benchmarks.sh` from the repository root, or
// `cd Benchmarks && swift package --disable-sandbox benchmark --target PrimitivesBenchmarks`.
//
// Every benchmark of a library call sits beside the same operation done directly (libsodium through
// CBenchSodium, or the peer), so each table row has a ratio measured in the same run.
import PackageDescription

let package = Package(
    name: "E3DBKitBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "E3DBKit", path: ".."),
        .package(url: "https://github.com/ordo-one/package-benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        // Plain SQLite through GRDB: the floor of the store benchmark (the same version the store uses).
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        // The fixed-route baseline of scripts/server-benchmark.sh (the same Hummingbird as E3DBServer).
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        // swift-crypto's own AES-CBC and HMAC calls beside the page codec (PageCodecThroughput); the version E3DBKit uses.
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
    ],
    targets: [
        // Direct libsodium calls for the baselines (the root package's CE3DBSodium is not a product).
        .systemLibrary(
            name: "CBenchSodium",
            path: "CBenchSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"]), .brew(["libsodium"]), .yum(["libsodium-devel"])]
        ),
    ]
)

/// A benchmark executable at `Benchmarks/<name>/`, discovered by the benchmark plugin.
func benchmark(_ name: String, dependencies: [Target.Dependency]) -> Target {
    .executableTarget(
        name: name,
        dependencies: [.product(name: "Benchmark", package: "package-benchmark")] + dependencies,
        path: name,
        plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
    )
}

package.targets += [
    benchmark("PrimitivesBenchmarks", dependencies: [.product(name: "E3DBPrimitives", package: "E3DBKit"), "CBenchSodium"]),
    benchmark("CanonicalJSONBenchmarks", dependencies: [.product(name: "E3DBCanonicalJSON", package: "E3DBKit")]),
]

// Record throughput: the E3DBDocuments API beside a C-style loop making the same libsodium calls one by one
// (randombytes_buf per key and nonce, crypto_secretbox_easy, sodium_bin2base64, ...), in the same process and run.
// A plain executable: it prints its own table of records per second and ratios.
package.targets += [
    .executableTarget(
        name: "DocumentsThroughput",
        dependencies: [
            .product(name: "E3DBDocuments", package: "E3DBKit"),
            .product(name: "E3DBKeys", package: "E3DBKit"),
            .product(name: "E3DBPrimitives", package: "E3DBKit"),
        ],
        path: "DocumentsThroughput"
    ),
    // File throughput: E3DBFiles encryption/decryption with checksums beside a loop that only calls secretstream
    // push (or pull) on the same data, in the same run.
    .executableTarget(
        name: "FilesThroughput",
        dependencies: [
            "CBenchSodium",
            .product(name: "E3DBFiles", package: "E3DBKit"),
            .product(name: "E3DBKeys", package: "E3DBKit"),
            .product(name: "E3DBPrimitives", package: "E3DBKit"),
        ],
        path: "FilesThroughput"
    ),
]

// Store throughput: E3DBStore (bulk insert, point reads, blind-index lookups, a full scan with its peak memory,
// the passphrase change) beside plain SQLite through GRDB doing the same inserts and reads, in the same run.
// scripts/store-benchmark.sh runs it with the SQLCipher 4 script (Benchmarks/StoreBaseline) and prints the ratios.
package.targets += [
    .executableTarget(
        name: "StoreThroughput",
        dependencies: [
            .product(name: "E3DBStore", package: "E3DBKit"),
            .product(name: "E3DBDocuments", package: "E3DBKit"),
            .product(name: "E3DBPrimitives", package: "E3DBKit"),
            .product(name: "GRDB", package: "GRDB.swift"),
        ],
        path: "StoreThroughput"
    ),
]

// Client throughput: E3DBClient writing and reading records against a running `e3dbkit-server`, with 1 and 16
// concurrent tasks; scripts/client-benchmark.sh runs it beside Tozny's Python SDK (ClientBaseline) on the same server.
package.targets += [
    .executableTarget(
        name: "ClientThroughput",
        dependencies: [
            .product(name: "E3DBClient", package: "E3DBKit"),
            .product(name: "E3DBAsyncHTTPClient", package: "E3DBKit"),
            .product(name: "E3DBDocuments", package: "E3DBKit"),
        ],
        path: "ClientThroughput"
    ),
]

// Server load baseline: a Hummingbird route returning a fixed JSON body, with E3DBServer's HTTP configuration;
// scripts/server-benchmark.sh drives it and `e3dbkit-server run` with wrk in the same run.
package.targets += [
    .executableTarget(
        name: "ServerBaseline",
        dependencies: [.product(name: "Hummingbird", package: "hummingbird")],
        path: "ServerBaseline"
    ),
]

// E3DBSQLite against SQLCipher 4: the same SQL (Benchmarks/SQLiteBaseline/workloads.sql: a bulk insert with an index,
// scattered point reads, filtered full scans; open; rekey) encrypted and plaintext, with the default page cache and
// 128 MiB. scripts/sqlite-benchmark.sh runs it with Benchmarks/SQLiteBaseline/sqlite_baseline.py (sqlcipher3).
package.targets += [
    .executableTarget(
        name: "SQLiteThroughput",
        dependencies: [
            .product(name: "E3DBSQLite", package: "E3DBKit"),
            .product(name: "E3DBPageCodec", package: "E3DBKit"),
            .product(name: "E3DBPrimitives", package: "E3DBKit"),
        ],
        path: "SQLiteThroughput"
    ),
    // E3DBPageCodec alone: µs per page encrypted and decrypted in each format, beside the crypto kernels' own time
    // and swift-crypto's own AES-CBC and HMAC calls on one page (what the SQLCipher format called until issue 35).
    .executableTarget(
        name: "PageCodecThroughput",
        dependencies: [
            .product(name: "E3DBPageCodec", package: "E3DBKit"),
            .product(name: "E3DBPrimitives", package: "E3DBKit"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "CryptoExtras", package: "swift-crypto"),
        ],
        path: "PageCodecThroughput"
    ),
]
