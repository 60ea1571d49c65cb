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
        guard try codec.decrypt(page: stored, number: 2)[0..<(4096 - settings.reserveByteCount)]
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
if sink == 42 { print("") }
