// DocumentsBenchmarks: record encryption and decryption through the E3DBDocuments API, compared in the same run
// with a C-style loop making the same libsodium calls one by one (randombytes_buf per key and nonce,
// crypto_secretbox_easy, sodium_bin2base64 / sodium_base642bin, crypto_secretbox_open_easy).
//
// libsodium is reached with dlopen/dlsym, so this target needs no C module of its own.
//
// Run: swift run -c release --package-path Benchmarks DocumentsBenchmarks [iterations]
import E3DBDocuments
import E3DBKeys
import E3DBPrimitives
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: libsodium through dlsym

struct Sodium {
    typealias Init = @convention(c) () -> Int32
    typealias Random = @convention(c) (UnsafeMutableRawPointer?, Int) -> Void
    typealias SecretBox = @convention(c) (
        UnsafeMutablePointer<UInt8>?, UnsafePointer<UInt8>?, UInt64, UnsafePointer<UInt8>?, UnsafePointer<UInt8>?
    ) -> Int32
    typealias Bin2Base64 = @convention(c) (UnsafeMutablePointer<CChar>?, Int, UnsafePointer<UInt8>?, Int, Int32)
        -> UnsafeMutablePointer<CChar>?
    typealias Base642Bin = @convention(c) (
        UnsafeMutablePointer<UInt8>?, Int, UnsafePointer<CChar>?, Int, UnsafePointer<CChar>?,
        UnsafeMutablePointer<Int>?, UnsafeMutablePointer<UnsafePointer<CChar>?>?, Int32
    ) -> Int32
    typealias SignDetached = @convention(c) (
        UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt64>?, UnsafePointer<UInt8>?, UInt64, UnsafePointer<UInt8>?
    ) -> Int32
    typealias VerifyDetached = @convention(c) (UnsafePointer<UInt8>?, UnsafePointer<UInt8>?, UInt64, UnsafePointer<UInt8>?)
        -> Int32
    typealias SignKeypair = @convention(c) (UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt8>?) -> Int32

    let random: Random
    let seal: SecretBox
    let open: SecretBox
    let bin2base64: Bin2Base64
    let base642bin: Base642Bin
    let sign: SignDetached
    let verify: VerifyDetached
    let signKeypair: SignKeypair

    static let urlSafeNoPadding: Int32 = 7

    init() {
        var handle: UnsafeMutableRawPointer?
        for name in ["libsodium.so", "libsodium.so.23", "libsodium.so.26", "libsodium.dylib",
            "/opt/homebrew/lib/libsodium.dylib", "/usr/local/lib/libsodium.dylib"]
        {
            handle = dlopen(name, RTLD_NOW)
            if handle != nil { break }
        }
        guard let handle else {
            print("cannot dlopen libsodium")
            exit(1)
        }
        func sym<T>(_ name: String, _: T.Type) -> T {
            guard let p = dlsym(handle, name) else {
                print("missing libsodium symbol \(name)")
                exit(1)
            }
            return unsafeBitCast(p, to: T.self)
        }
        _ = sym("sodium_init", Init.self)()
        random = sym("randombytes_buf", Random.self)
        seal = sym("crypto_secretbox_easy", SecretBox.self)
        open = sym("crypto_secretbox_open_easy", SecretBox.self)
        bin2base64 = sym("sodium_bin2base64", Bin2Base64.self)
        base642bin = sym("sodium_base642bin", Base642Bin.self)
        sign = sym("crypto_sign_detached", SignDetached.self)
        verify = sym("crypto_sign_verify_detached", VerifyDetached.self)
        signKeypair = sym("crypto_sign_keypair", SignKeypair.self)
    }

    func b64(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> String {
        let size = (count + 2) / 3 * 4 + 1
        var out = [CChar](repeating: 0, count: size)
        _ = bin2base64(&out, size, bytes, count, Sodium.urlSafeNoPadding)
        return String(decoding: out[0..<(size - 1)].prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    func unb64(_ text: UnsafeBufferPointer<UInt8>, into out: UnsafeMutablePointer<UInt8>, capacity: Int) -> Int {
        var length = 0
        let status = text.withMemoryRebound(to: CChar.self) {
            base642bin(out, capacity, $0.baseAddress, $0.count, nil, &length, nil, Sodium.urlSafeNoPadding)
        }
        return status == 0 ? length : -1
    }

    /// One field, the way a C SDK writes it: three randombytes_buf calls, two secretbox calls, four base64 calls.
    func encryptField(_ value: String, ak: UnsafePointer<UInt8>) -> String {
        var dk = [UInt8](repeating: 0, count: 32)
        var efN = [UInt8](repeating: 0, count: 24)
        var edkN = [UInt8](repeating: 0, count: 24)
        random(&dk, 32)
        random(&efN, 24)
        random(&edkN, 24)
        let m = Array(value.utf8)
        var ef = [UInt8](repeating: 0, count: m.count + 16)
        _ = seal(&ef, m, UInt64(m.count), efN, dk)
        var edk = [UInt8](repeating: 0, count: 48)
        _ = seal(&edk, dk, 32, edkN, ak)
        return b64(edk, 48) + "." + b64(edkN, 24) + "." + b64(ef, ef.count) + "." + b64(efN, 24)
    }

    /// One field, the way a C SDK reads it: find the dots (memchr-style), four base64 decodes into stack-sized
    /// buffers, two secretbox opens.
    func decryptField(_ field: String, ak: UnsafePointer<UInt8>) -> String? {
        var field = field
        return field.withUTF8 { buf -> String? in
            var dots: [Int] = []
            dots.reserveCapacity(3)
            for i in buf.indices where buf[i] == UInt8(ascii: ".") { dots.append(i) }
            guard dots.count == 3 else { return nil }
            let p0 = UnsafeBufferPointer(rebasing: buf[0..<dots[0]])
            let p1 = UnsafeBufferPointer(rebasing: buf[(dots[0] + 1)..<dots[1]])
            let p2 = UnsafeBufferPointer(rebasing: buf[(dots[1] + 1)..<dots[2]])
            let p3 = UnsafeBufferPointer(rebasing: buf[(dots[2] + 1)..<buf.count])
            var edk = [UInt8](repeating: 0, count: 64), edkN = [UInt8](repeating: 0, count: 32)
            var ef = [UInt8](repeating: 0, count: p2.count), efN = [UInt8](repeating: 0, count: 32)
            guard unb64(p0, into: &edk, capacity: 64) == 48, unb64(p1, into: &edkN, capacity: 32) == 24,
                case let efCount = unb64(p2, into: &ef, capacity: ef.count), efCount >= 16,
                unb64(p3, into: &efN, capacity: 32) == 24
            else { return nil }
            var dk = [UInt8](repeating: 0, count: 32)
            guard open(&dk, edk, 48, edkN, ak) == 0 else { return nil }
            var m = [UInt8](repeating: 0, count: efCount - 16)
            guard open(&m, ef, UInt64(efCount), efN, dk) == 0 else { return nil }
            return String(validating: m, as: UTF8.self)
        }
    }
}

// MARK: timing

func measure(_ iterations: Int, rounds: Int = 5, _ body: () -> Void) -> Double {
    var best = Double.infinity
    for _ in 0..<rounds {
        let start = ContinuousClock.now
        for _ in 0..<iterations { body() }
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        best = min(best, seconds)
    }
    return Double(iterations) / best
}

@inline(never) func blackHole<T>(_ x: T) { withExtendedLifetime(x) {} }

let iterations = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 20_000 : 20_000
let sodium = Sodium()
let akBytes = [UInt8](repeating: 0x11, count: 32)
let ak = try AccessKey(rawRepresentation: akBytes)
let values = (0..<10).map { i in String(repeating: Character(UnicodeScalar(UInt8(65 + i))), count: 32) }
let data = try RecordData(values.enumerated().map { ("field\($0.offset)", $0.element) })

// Sanity: both sides interoperate.
let cFields = values.map { sodium.encryptField($0, ak: akBytes) }
for (i, f) in cFields.enumerated() {
    guard (try? FieldCipher.decrypt(f, accessKey: ak)) == values[i] else { print("C field does not decrypt in Swift"); exit(1) }
}
let swiftFields = FieldCipher.encrypt(data, accessKey: ak)
for (i, m) in swiftFields.enumerated() {
    guard sodium.decryptField(m.value, ak: akBytes) == values[i] else { print("Swift field does not decrypt in C"); exit(1) }
}

print("record: 10 fields x 32 bytes; \(iterations) records per round, best of 5 rounds")
print(String(repeating: "-", count: 78))

let cEncrypt = measure(iterations) { blackHole(values.map { sodium.encryptField($0, ak: akBytes) }) }
let swiftEncrypt = measure(iterations) { blackHole(FieldCipher.encrypt(data, accessKey: ak)) }
let cDecrypt = measure(iterations) { blackHole(cFields.map { sodium.decryptField($0, ak: akBytes) }) }
let swiftDecrypt = measure(iterations) { blackHole(try? FieldCipher.decrypt(swiftFields, accessKey: ak)) }

func row(_ name: String, _ swift: Double, _ c: Double) {
    let ratio = swift / c
    print(
        name.padding(toLength: 34, withPad: " ", startingAt: 0)
            + String(format: "Swift %9.0f rec/s   C loop %9.0f rec/s   ratio %.2fx", swift, c, ratio))
}
row("encrypt data (FieldCipher)", swiftEncrypt, cEncrypt)
row("decrypt data (FieldCipher)", swiftDecrypt, cDecrypt)

// Whole documents: the API adds rec_sig (canonical JSON + Ed25519); the C loop adds one crypto_sign_detached /
// crypto_sign_verify_detached over a message of the same length.
let signer = Ed25519.PrivateKey()
let writer = UUID()
let doc = EncryptedDocument.encrypt(type: "bench", data: data, writerID: writer, accessKey: ak, signingKey: signer)
let message = RecordSignature.message(meta: doc.meta, data: data)
var pk = [UInt8](repeating: 0, count: 32), sk = [UInt8](repeating: 0, count: 64)
_ = sodium.signKeypair(&pk, &sk)
var cSig = [UInt8](repeating: 0, count: 64)
_ = sodium.sign(&cSig, nil, message, UInt64(message.count), sk)
let cDocEncrypt = measure(iterations / 2) {
    var sig = [UInt8](repeating: 0, count: 64)
    _ = sodium.sign(&sig, nil, message, UInt64(message.count), sk)
    blackHole((values.map { sodium.encryptField($0, ak: akBytes) }, sodium.b64(sig, 64)))
}
let swiftDocEncrypt = measure(iterations / 2) {
    blackHole(EncryptedDocument.encrypt(type: "bench", data: data, writerID: writer, accessKey: ak, signingKey: signer))
}
let cDocDecrypt = measure(iterations / 2) {
    blackHole(cFields.map { sodium.decryptField($0, ak: akBytes) })
    blackHole(sodium.verify(cSig, message, UInt64(message.count), pk))
}
let swiftDocDecrypt = measure(iterations / 2) {
    blackHole(try? doc.decrypt(accessKey: ak, verifyingKey: signer.publicKey))
}
row("encrypt + sign document", swiftDocEncrypt, cDocEncrypt)
row("decrypt + verify document", swiftDocDecrypt, cDocDecrypt)
