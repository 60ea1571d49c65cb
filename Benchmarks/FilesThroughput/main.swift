// FilesThroughput: E3DBFiles streaming encryption/decryption with checksums versus a loop that only calls
// libsodium's secretstream push (or pull) on the same data, in the same run. Prints throughput and the ratio.
//
// The baselines call libsodium's `crypto_secretstream_xchacha20poly1305_push` / `_pull` directly (CBenchSodium)
// on 64 KiB chunks in place, with no copy (E3DBPrimitives' raw-buffer wrappers are package-only).
//
// Run: swift run -c release --package-path Benchmarks FilesThroughput [MiB]   (default 256 MiB, best of 5 runs each)
import CBenchSodium
import E3DBFiles
import E3DBKeys
import E3DBPrimitives
import Foundation

let mib = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 256
let size = mib * 1_048_576
let runs = 5
let plaintext = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) })
let accessKey = AccessKey()
let chunk = E3DBFileFormat.plaintextChunkSize

@MainActor func best(_ label: String, _ body: () throws -> Void) rethrows -> Double {
    var times: [Double] = []
    for _ in 0..<runs {
        let start = DispatchTime.now().uptimeNanoseconds
        try body()
        times.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
    }
    let seconds = times.min() ?? 0
    let throughput = Double(size) / seconds / 1e6
    print(String(format: "%-52@ %8.1f MB/s  (best of %d: %.3f s)", label as NSString, throughput, runs, seconds))
    return throughput
}

/// The stream key of the baselines (benchmark data, not a secret).
let baselineKey = [UInt8](repeating: 0x5c, count: 32)

/// Pushes every 64 KiB chunk of `plaintext` through libsodium; returns the header and, if `keep`, the stream.
@MainActor func pushAll(keep: Bool) -> ([UInt8], Data) {
    _ = sodium_init()
    var state = crypto_secretstream_xchacha20poly1305_state()
    var header = [UInt8](repeating: 0, count: 24)
    _ = crypto_secretstream_xchacha20poly1305_init_push(&state, &header, baselineKey)
    var out = [UInt8](repeating: 0, count: chunk + 17)
    var stream = Data()
    plaintext.withUnsafeBytes { (all: UnsafeRawBufferPointer) in
        let bytes = all.bindMemory(to: UInt8.self)
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + chunk)
            let tag: UInt8 = end == bytes.count ? 3 : 0  // TAG_FINAL : TAG_MESSAGE
            var written: UInt64 = 0
            _ = crypto_secretstream_xchacha20poly1305_push(
                &state, &out, &written, bytes.baseAddress.map { $0 + offset }, UInt64(end - offset), nil, 0, tag)
            if keep { stream.append(contentsOf: out[0..<Int(written)]) }
            offset = end
        }
    }
    return (header, stream)
}

@MainActor func pushOnly() throws { _ = pushAll(keep: false) }

@MainActor func encrypt(_ kinds: FileChecksumKinds, concurrent: Bool = true) throws -> Data? {
    var source = MemoryByteSource(plaintext)
    var sink = DiscardingByteSink()
    _ = try E3DBFileCipher.encrypt(
        from: &source, to: &sink, accessKey: accessKey,
        options: FileEncryptionOptions(checksums: kinds, concurrentChecksums: concurrent))
    return nil
}

// A real encrypted file for the decryption runs.
var encryptedSource = MemoryByteSource(plaintext)
var encryptedSink = MemoryByteSink()
_ = try E3DBFileCipher.encrypt(from: &encryptedSource, to: &encryptedSink, accessKey: accessKey)
let encrypted = encryptedSink.committed ?? Data()

// The pull baseline runs over its own stream of the same size (it needs the stream key).
let (pullHeader, pullStream) = pushAll(keep: true)

@MainActor func pullOnly() throws {
    var state = crypto_secretstream_xchacha20poly1305_state()
    _ = crypto_secretstream_xchacha20poly1305_init_pull(&state, pullHeader, baselineKey)
    var out = [UInt8](repeating: 0, count: chunk)
    pullStream.withUnsafeBytes { (all: UnsafeRawBufferPointer) in
        let bytes = all.bindMemory(to: UInt8.self)
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + chunk + 17)
            var tag: UInt8 = 0
            _ = crypto_secretstream_xchacha20poly1305_pull(
                &state, &out, nil, &tag, bytes.baseAddress.map { $0 + offset }, UInt64(end - offset), nil, 0)
            offset = end
        }
    }
}

@MainActor func decrypt(_ kinds: FileChecksumKinds, concurrent: Bool = true) throws {
    var source = MemoryByteSource(encrypted)
    var sink = DiscardingByteSink()
    _ = try E3DBFileCipher.decrypt(
        from: &source, to: &sink, accessKey: accessKey,
        options: FileDecryptionOptions(checksums: kinds, concurrentChecksums: concurrent))
}

@MainActor func hashOnly() throws {
    var b2 = try BLAKE2b(outputByteCount: 64)
    b2.update(data: encrypted)
    _ = b2.finalize()
}

print("E3DBFiles benchmark: \(mib) MiB, \(ProcessInfo.processInfo.activeProcessorCount) cores")
let push = try best("secretstream push only (baseline)") { try pushOnly() }
let encB2 = try best("E3DBFiles encrypt + BLAKE2b-512 (2 threads)") { _ = try encrypt([.ciphertextBLAKE2b512]) }
let encNone = try best("E3DBFiles encrypt, no checksum") { _ = try encrypt([]) }
let encB2Inline = try best("E3DBFiles encrypt + BLAKE2b-512 (1 thread)") {
    _ = try encrypt([.ciphertextBLAKE2b512], concurrent: false)
}
let encBoth = try best("E3DBFiles encrypt + BLAKE2b-512 + MD5 (2 threads)") {
    _ = try encrypt([.ciphertextBLAKE2b512, .ciphertextMD5])
}
let pull = try best("secretstream pull only (baseline)") { try pullOnly() }
let decB2 = try best("E3DBFiles decrypt + BLAKE2b-512 (2 threads)") { try decrypt([.ciphertextBLAKE2b512]) }
let decNone = try best("E3DBFiles decrypt, no checksum") { try decrypt([]) }
let hash = try best("BLAKE2b-512 only (libsodium, for reference)") { try hashOnly() }
print(String(format: "ratio encrypt+BLAKE2b / push:          %.3f", encB2 / push))
print(String(format: "ratio encrypt (no checksum) / push:     %.3f", encNone / push))
print(String(format: "ratio encrypt+BLAKE2b 1 thread / push:  %.3f", encB2Inline / push))
print(String(format: "ratio encrypt+BLAKE2b+MD5 / push:       %.3f", encBoth / push))
print(String(format: "ratio decrypt+BLAKE2b / pull:           %.3f", decB2 / pull))
print(String(format: "ratio decrypt (no checksum) / pull:     %.3f", decNone / pull))
print(String(format: "BLAKE2b-512 / push:                     %.3f (the ceiling for encrypt+BLAKE2b)", hash / push))
