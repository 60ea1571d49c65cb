// Per-page cost of E3DBPageCodec, in µs per 4096-byte page, beside the kernel numbers of the page-cipher research
// (the crypto alone, measured in C on this kind of machine): what the codec adds around the crypto.
//
//   PageCodecThroughput [SECONDS]      # default 1 second per row (best of 40 rounds of SECONDS / 40: on a loaded
//                                      # machine the best round is the one least disturbed)
//
// Each row encrypts (or decrypts) page 2 again and again through the public `[UInt8]` API, which allocates the
// returned page; the row "allocate a 4096-byte [UInt8]" measures that allocation alone, so that the codec's own cost
// is the row minus it. The VFS uses the pointer form of the same call, which writes into SQLite's buffer.
//
// The last rows are swift-crypto's Swift API on one SQLCipher page, as the codec called it until issue 35:
// `AES._CBC.encrypt`/`decrypt` of the 4016 data bytes (each returns a new `Data` and copies its input into another,
// and expands the key schedule), and a keyed `HMAC<SHA512>`/`HMAC<SHA256>` copied, updated with the 4036 bytes the
// tag covers and finalised (the copy's hash states are copied on the heap at the first update). Against them, the
// codec's rows show what each of those costs per page.
import Crypto
import CryptoExtras
import E3DBPageCodec
import E3DBPrimitives
import Foundation

let seconds = CommandLine.arguments.count > 1 ? Double(CommandLine.arguments[1]) ?? 1 : 1
let rounds = 40

/// Best µs per call of `body` over `rounds` rounds of `seconds / rounds` each.
func measure(_ body: () throws -> Void) rethrows -> Double {
    var best = Double.infinity
    for _ in 0..<rounds {
        var calls = 0
        let start = ContinuousClock.now
        let deadline = start + .milliseconds(Int(seconds * 1000) / rounds)
        var now = start
        while now < deadline {
            for _ in 0..<64 { try body() }
            calls += 64
            now = ContinuousClock.now
        }
        let elapsed = now - start
        let micros = Double(elapsed.components.seconds) * 1e6 + Double(elapsed.components.attoseconds) / 1e12
        best = min(best, micros / Double(calls))
    }
    return best
}

func row(_ name: String, _ micros: Double, kernel: String) {
    print("| \(name) | \(String(format: "%.2f", micros)) | \(kernel) |")
}

let salt = (0..<16).map { UInt8($0) }
let key = SQLCipherKey.rawKey(SecureBytes(copying: (0..<32).map { UInt8(truncatingIfNeeded: $0 * 7 + 1) }))
let plaintext = (0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31) }
var sink = 0

print("| per 4096-byte page | µs | crypto kernels alone (research §3.3: OpenSSL / BoringSSL) |")
print("| --- | ---: | ---: |")
row(
    "allocate a 4096-byte [UInt8] (included in every row below)",
    measure {
        let page = [UInt8](repeating: 0, count: 4096)
        sink &+= Int(page[4095])
    }, kernel: "")
let formats: [(String, SQLCipherSettings, String, String)] = [
    ("SQLCipher 4 (AES-256-CBC, HMAC-SHA512)", .v4, "10.09 / 10.43", "5.69 / 6.15"),
    (
        "SQLCipher 4, cipher_hmac_algorithm HMAC_SHA256",
        SQLCipherSettings(pageSize: 4096, kdfIterations: 256_000, algorithm: .sha256), "≈6.4", "≈2.9"
    ),
    ("SQLite3MC chacha20", .chacha20, "4.37 (libsodium)", "4.36 (libsodium)"),
]
do {
    for (name, settings, encryptKernel, decryptKernel) in formats {
        let codec = try PageCodec(key: key, salt: salt, settings: settings)
        let stored = try codec.encrypt(page: plaintext, number: 2)
        guard
            try codec.decrypt(page: stored, number: 2)[0..<(4096 - settings.reserveByteCount)]
                == plaintext[0..<(4096 - settings.reserveByteCount)]
        else {
            FileHandle.standardError.write(Data("PageCodecThroughput: \(name) does not round-trip\n".utf8))
            exit(1)
        }
        row(
            "\(name): encrypt",
            try measure { sink &+= Int(try codec.encrypt(page: plaintext, number: 2)[100]) }, kernel: encryptKernel)
        row(
            "\(name): decrypt",
            try measure { sink &+= Int(try codec.decrypt(page: stored, number: 2)[100]) }, kernel: decryptKernel)
    }
} catch {
    FileHandle.standardError.write(Data("PageCodecThroughput: \(error)\n".utf8))
    exit(1)
}
do {
    let aesKey = SymmetricKey(data: (0..<32).map { UInt8(truncatingIfNeeded: $0 * 7 + 1) })
    let iv = try AES._CBC.IV(ivBytes: [UInt8](repeating: 9, count: 16))
    let data = Array(plaintext[0..<4016])
    let ciphertext = try AES._CBC.encrypt(data, using: aesKey, iv: iv, noPadding: true)
    try data.withUnsafeBytes { bytes in
        row(
            "swift-crypto `AES._CBC.encrypt`, 4016 bytes (a SQLCipher page's data), returns `Data`",
            try measure { sink &+= Int(try AES._CBC.encrypt(bytes, using: aesKey, iv: iv, noPadding: true).count) },
            kernel: "4.00 (BoringSSL kernel)")
    }
    try ciphertext.withUnsafeBytes { bytes in
        row(
            "swift-crypto `AES._CBC.decrypt`, 4016 bytes, returns `Data`",
            try measure { sink &+= Int(try AES._CBC.decrypt(bytes, using: aesKey, iv: iv, noPadding: true).count) },
            kernel: "0.51 (BoringSSL kernel)")
    }
    /// A keyed HMAC copied, updated with the 4036 bytes a SQLCipher tag covers, and finalised.
    func hmacRow<H: HashFunction>(_ keyed: HMAC<H>, _ name: String, kernel: String) {
        Array(plaintext[0..<4036]).withUnsafeBytes { bytes in
            row(
                "swift-crypto keyed `HMAC<\(name)>` copied, 4036 bytes, finalised",
                measure {
                    var mac = keyed
                    mac.update(data: bytes)
                    sink &+= mac.finalize().withUnsafeBytes { Int($0[0]) }
                }, kernel: kernel)
        }
    }
    hmacRow(HMAC<SHA512>(key: aesKey), "SHA512", kernel: "7.49 (BoringSSL `_nohw` kernel)")
    hmacRow(HMAC<SHA256>(key: aesKey), "SHA256", kernel: "≈2.4 (SHA-NI kernel)")
} catch {
    FileHandle.standardError.write(Data("PageCodecThroughput: \(error)\n".utf8))
    exit(1)
}

// Key derivation, as a passphrase open runs it: PBKDF2 through E3DBPrimitives (swift-crypto's BoringSSL), beside the
// same derivation by OpenSSL in two builds, in this run: the Python's `hashlib.pbkdf2_hmac` (its OpenSSL), and
// SQLCipher's own (sqlcipher3-binary's bundled OpenSSL, where the Python has it: a new database's first write with
// `kdf_iter` N less the same with `kdf_iter` 1). Best of 5, in ms. The Python is $PYTHON (default python3); give
// the project's .venv/bin/python for the SQLCipher column.
func kdfMillis(_ body: () throws -> Void) rethrows -> Double {
    var best = Double.infinity
    for _ in 0..<5 {
        let start = ContinuousClock.now
        try body()
        let elapsed = ContinuousClock.now - start
        best = min(best, Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) / 1e15)
    }
    return best
}

/// The peers' times for the same derivations: for each of SHA-512 256,000 rounds and SHA-256 64,007 rounds a line
/// "hashlib SQLCipher" in ms (SQLCipher "-" without sqlcipher3), then the Python's OpenSSL version; empty when the
/// Python cannot be run.
func peerMillis() -> [String] {
    let script = """
        import hashlib, os, ssl, tempfile, time
        try:
            from sqlcipher3 import dbapi2 as sqlcipher
        except ImportError:
            sqlcipher = None
        def best(body):
            times = []
            for _ in range(5):
                start = time.perf_counter()
                body()
                times.append(time.perf_counter() - start)
            return min(times) * 1e3
        def first_write(rounds, algorithm):
            path = os.path.join(tempfile.mkdtemp(), "kdf.db")
            connection = sqlcipher.connect(path)
            connection.execute("PRAGMA key = 'passphrase'")
            connection.execute("PRAGMA kdf_iter = %d" % rounds)
            connection.execute("PRAGMA cipher_kdf_algorithm = PBKDF2_HMAC_%s" % algorithm.upper())
            connection.execute("CREATE TABLE t (x)")
            connection.commit()
            connection.close()
            os.remove(path)
        for name, rounds in (("sha512", 256000), ("sha256", 64007)):
            ours = best(lambda: hashlib.pbkdf2_hmac(name, b"passphrase", bytes(range(16)), rounds, 32))
            if sqlcipher:
                theirs = "%.2f" % (best(lambda: first_write(rounds, name)) - best(lambda: first_write(1, name)))
            else:
                theirs = "-"
            print("%.2f %s" % (ours, theirs))
        print(ssl.OPENSSL_VERSION)
        """
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = [ProcessInfo.processInfo.environment["PYTHON"] ?? "python3", "-c", script]
    let output = Pipe()
    process.standardOutput = output
    guard (try? process.run()) != nil else { return [] }
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { return [] }
    return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
}

do {
    let password = Array("passphrase".utf8)
    let sha512 = try kdfMillis {
        sink &+= try PBKDF2.sha512(password: password, salt: salt, rounds: 256_000, outputByteCount: 32).count
    }
    let sha256 = try kdfMillis {
        sink &+= try PBKDF2.sha256(password: password, salt: salt, rounds: 64_007, outputByteCount: 32).count
    }
    let peers = peerMillis()
    let library = peers.count == 3 ? peers[2] : "the Python's OpenSSL (not run)"
    print("")
    print(
        "| key derivation, ms | E3DBPrimitives (BoringSSL) | \(library) | SQLCipher 4 (its OpenSSL) | ours / SQLCipher |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    let rows = [
        ("PBKDF2-HMAC-SHA512, 256,000 rounds (SQLCipher 4)", sha512),
        ("PBKDF2-HMAC-SHA256, 64,007 rounds (chacha20)", sha256),
    ]
    for (index, (name, ours)) in rows.enumerated() {
        let fields = peers.count == 3 ? peers[index].split(separator: " ").map { Double($0) } : [nil, nil]
        func text(_ value: Double?) -> String { value.map { String(format: "%.2f", $0) } ?? "n/a" }
        let ratio = fields[1].map { String(format: "%.2f×", ours / $0) } ?? "n/a"
        print("| \(name) | \(text(ours)) | \(text(fields[0])) | \(text(fields[1])) | \(ratio) |")
    }
} catch {
    FileHandle.standardError.write(Data("PageCodecThroughput: \(error)\n".utf8))
    exit(1)
}
if sink == 42 { print("") }
