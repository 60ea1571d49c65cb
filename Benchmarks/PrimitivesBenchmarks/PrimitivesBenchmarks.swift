// E3DBPrimitives against the same libsodium calls made directly, in the same run.
//
// Every operation is registered twice, as "<operation> (API)" and "<operation> (libsodium)", with the same
// configuration, the same input bytes, the same keys and the same explicit nonces (a fixed nonce on both sides,
// so neither side pays for random nonces; reusing a nonce is only acceptable because nothing here is secret).
// `scripts/benchmarks.sh` pairs the two rows and reports throughput and the ratio API / direct.
//
// Conventions for the direct side, so that both sides do the same work:
// - The API returns owned results (`Data`, `String`), so each direct call writes into a freshly allocated,
//   uninitialised `[UInt8]` (one allocation, no zero fill) and returns it. Inputs are `[UInt8]` on the direct
//   side and `Data` on the API side.
// - Streaming states that the API keeps on the heap are also on the heap (allocated once) on the direct side.
// - `Pull` re-initialises the pull state for every chunk on both sides (a chunk opens only once per state).

import Benchmark
import CBenchSodium
import E3DBPrimitives
import Foundation

// MARK: - Sizes and fixed inputs

let chunk64K = 64 * 1024
let oneMiB = 1024 * 1024
let small = 32

/// Deterministic, non-secret input bytes.
func pattern(_ count: Int, seed: UInt8) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) }
}

/// `count` uninitialised bytes filled by `body` (the direct side's output allocation).
@inline(__always)
func fresh(_ count: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Void) -> [UInt8] {
    [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
        body(buffer.baseAddress!)
        initialized = count
    }
}

/// Throughput configurations: a few seconds per benchmark at most.
func config(_ scaling: BenchmarkScalingFactor, seconds: Int = 2) -> Benchmark.Configuration {
    .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        timeUnits: .nanoseconds,
        warmupIterations: 5,
        scalingFactor: scaling,
        maxDuration: .seconds(seconds),
        maxIterations: 1_000_000
    )
}

/// Registers the API and direct variants of one operation next to each other.
func pair(
    _ name: String,
    _ configuration: Benchmark.Configuration,
    api: @escaping @Sendable (Benchmark) throws -> Void,
    direct: @escaping @Sendable (Benchmark) throws -> Void
) {
    Benchmark("\(name) (API)", configuration: configuration, closure: api)
    Benchmark("\(name) (libsodium)", configuration: configuration, closure: direct)
}

let benchmarks: @Sendable () -> Void = {
    precondition(sodium_init() >= 0, "sodium_init failed")

    let keyBytes = pattern(32, seed: 1)
    let nonceBytes = pattern(24, seed: 2)
    let message64K = pattern(chunk64K, seed: 3)
    let message1M = pattern(oneMiB, seed: 4)
    let message32 = pattern(small, seed: 5)
    let data64K = Data(message64K)
    let data1M = Data(message1M)
    let data32 = Data(message32)

    // MARK: SecretBox (XSalsa20-Poly1305), 64 KiB and 32 bytes

    do {
        let key = try SecretBox.Key(rawRepresentation: keyBytes)
        let nonce = try SecretBox.Nonce(rawRepresentation: nonceBytes)

        for (label, data, bytes, scaling) in [
            ("SecretBox seal 64KiB", data64K, message64K, BenchmarkScalingFactor.one),
            ("SecretBox seal 32B", data32, message32, BenchmarkScalingFactor.kilo),
        ] {
            pair(
                label, config(scaling),
                api: { benchmark in
                    for _ in benchmark.scaledIterations {
                        blackHole(SecretBox.seal(data, using: key, nonce: nonce))
                    }
                },
                direct: { benchmark in
                    for _ in benchmark.scaledIterations {
                        blackHole(directSecretboxSeal(bytes, nonce: nonceBytes, key: keyBytes))
                    }
                })
        }

        for (label, bytes, scaling) in [
            ("SecretBox open 64KiB", message64K, BenchmarkScalingFactor.one),
            ("SecretBox open 32B", message32, BenchmarkScalingFactor.kilo),
        ] {
            let sealedBytes = directSecretboxSeal(bytes, nonce: nonceBytes, key: keyBytes)
            let sealed = try SecretBox.SealedBox(nonce: nonce, ciphertext: sealedBytes)
            precondition(SecretBox.seal(Data(bytes), using: key, nonce: nonce) == sealed, "secretbox ciphertexts differ")
            let opened = try SecretBox.open(sealed, using: key)
            precondition(opened == Data(bytes), "secretbox plaintexts differ")
            pair(
                label, config(scaling),
                api: { benchmark in
                    for _ in benchmark.scaledIterations {
                        blackHole(try SecretBox.open(sealed, using: key))
                    }
                },
                direct: { benchmark in
                    for _ in benchmark.scaledIterations {
                        blackHole(try directSecretboxOpen(sealedBytes, nonce: nonceBytes, key: keyBytes))
                    }
                })
        }

    } catch {
        fatalError("secretbox setup failed: \(error)")
    }

    // MARK: SecretStream (XChaCha20-Poly1305), 64 KiB chunks

    do {
        let key = try SecretStream.Key(rawRepresentation: keyBytes)
        pair(
            "SecretStream push 64KiB", config(.one),
            api: { benchmark in
                var encryptor = SecretStream.Encryptor(key: key)
                benchmark.startMeasurement()
                for _ in benchmark.scaledIterations {
                    blackHole(try encryptor.seal(data64K))
                }
            },
            direct: { benchmark in
                let state = DirectPushState(key: keyBytes)
                benchmark.startMeasurement()
                for _ in benchmark.scaledIterations {
                    blackHole(state.push(message64K))
                }
            })

        // One valid first chunk, opened with a fresh pull state each time on both sides.
        let stream = DirectPushState(key: keyBytes)
        let header = stream.header
        let chunk = stream.push(message64K)
        let chunkData = Data(chunk)
        let apiHeader = try SecretStream.Header(rawRepresentation: header)
        pair(
            "SecretStream pull 64KiB", config(.one),
            api: { benchmark in
                for _ in benchmark.scaledIterations {
                    var decryptor = SecretStream.Decryptor(key: key, header: apiHeader)
                    blackHole(try decryptor.open(chunkData))
                }
            },
            direct: { benchmark in
                let state = DirectPullState()
                benchmark.startMeasurement()
                for _ in benchmark.scaledIterations {
                    state.start(header: header, key: keyBytes)
                    blackHole(try state.pull(chunk))
                }
            })
    } catch {
        fatalError("secretstream setup failed: \(error)")
    }

    // MARK: BLAKE2b-256 over 1 MiB

    pair(
        "BLAKE2b 1MiB one-shot", config(.one),
        api: { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try BLAKE2b.hash(data: data1M, outputByteCount: 32))
            }
        },
        direct: { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(directGenericHash(message1M))
            }
        })

    // Streaming: 16 updates of 64 KiB each.
    let slices64K = stride(from: 0, to: oneMiB, by: chunk64K).map { Data(message1M[$0..<$0 + chunk64K]) }
    let arrays64K = slices64K.map { [UInt8]($0) }
    pair(
        "BLAKE2b 1MiB streaming", config(.one),
        api: { benchmark in
            for _ in benchmark.scaledIterations {
                var hasher = try BLAKE2b(outputByteCount: 32)
                for slice in slices64K { hasher.update(data: slice) }
                blackHole(hasher.finalize())
            }
        },
        direct: { benchmark in
            let state = DirectHashState()
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations {
                blackHole(state.hash(arrays64K))
            }
        })

    // MARK: Box (X25519 + XSalsa20-Poly1305), 32 bytes

    do {
        let alice = try Box.PrivateKey(rawRepresentation: pattern(32, seed: 6))
        let bob = try Box.PrivateKey(rawRepresentation: pattern(32, seed: 7))
        let nonce = try Box.Nonce(rawRepresentation: nonceBytes)
        let aliceSecret = pattern(32, seed: 6)
        let bobSecret = pattern(32, seed: 7)
        let bobPublic = [UInt8](bob.publicKey.rawRepresentation)
        let alicePublic = [UInt8](alice.publicKey.rawRepresentation)

        pair(
            "Box seal 32B", config(.one),
            api: { benchmark in
                for _ in benchmark.scaledIterations {
                    blackHole(try Box.seal(data32, to: bob.publicKey, from: alice, nonce: nonce))
                }
            },
            direct: { benchmark in
                for _ in benchmark.scaledIterations {
                    blackHole(try directBoxSeal(message32, nonce: nonceBytes, publicKey: bobPublic, secretKey: aliceSecret))
                }
            })

        let sealedBytes = try directBoxSeal(message32, nonce: nonceBytes, publicKey: bobPublic, secretKey: aliceSecret)
        let sealed = try Box.SealedBox(nonce: nonce, ciphertext: sealedBytes)
        let resealed = try Box.seal(data32, to: bob.publicKey, from: alice, nonce: nonce)
        let opened = try Box.open(sealed, from: alice.publicKey, to: bob)
        precondition(resealed == sealed, "box ciphertexts differ")
        precondition(opened == data32, "box plaintexts differ")
        pair(
            "Box open 32B", config(.one),
            api: { benchmark in
                for _ in benchmark.scaledIterations {
                    blackHole(try Box.open(sealed, from: alice.publicKey, to: bob))
                }
            },
            direct: { benchmark in
                for _ in benchmark.scaledIterations {
                    blackHole(
                        try directBoxOpen(sealedBytes, nonce: nonceBytes, publicKey: alicePublic, secretKey: bobSecret))
                }
            })
    } catch {
        fatalError("box setup failed: \(error)")
    }

    // MARK: Ed25519, 32-byte message

    do {
        let seedBytes = pattern(32, seed: 8)
        let signer = try Ed25519.PrivateKey(seed: SecureBytes(copying: seedBytes))
        let signingKey = [UInt8](unsafeUninitializedCapacity: 64) { sk, n in
            var pk = [UInt8](repeating: 0, count: 32)
            _ = crypto_sign_seed_keypair(&pk, sk.baseAddress!, seedBytes)
            n = 64
        }
        let publicBytes = [UInt8](signer.publicKey.rawRepresentation)
        pair(
            "Ed25519 sign 32B", config(.one),
            api: { benchmark in
                for _ in benchmark.scaledIterations {
                    blackHole(signer.signature(for: data32))
                }
            },
            direct: { benchmark in
                for _ in benchmark.scaledIterations {
                    blackHole(directSign(message32, secretKey: signingKey))
                }
            })

        let signature = directSign(message32, secretKey: signingKey)
        let signatureData = Data(signature)
        precondition(signer.signature(for: data32) == signatureData, "Ed25519 signatures differ")
        pair(
            "Ed25519 verify 32B", config(.one),
            api: { benchmark in
                for _ in benchmark.scaledIterations {
                    blackHole(signer.publicKey.isValidSignature(signatureData, for: data32))
                }
            },
            direct: { benchmark in
                for _ in benchmark.scaledIterations {
                    blackHole(
                        crypto_sign_verify_detached(signature, message32, UInt64(message32.count), publicBytes) == 0)
                }
            })
    } catch {
        fatalError("ed25519 setup failed: \(error)")
    }

    // MARK: base64url (unpadded), 32 bytes <-> 43 characters

    let encoded = Base64URL.encode(message32)
    // Both sides must produce the same bytes, or the comparison means nothing.
    precondition(encoded == directBase64URLEncode(message32), "base64url encodings differ")
    precondition((try? [UInt8](Base64URL.decode(encoded))) == message32, "base64url decode differs")
    pair(
        "Base64URL encode 32B", config(.kilo),
        api: { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(Base64URL.encode(data32))
            }
        },
        direct: { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(directBase64URLEncode(message32))
            }
        })
    pair(
        "Base64URL decode 32B", config(.kilo),
        api: { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try Base64URL.decode(encoded))
            }
        },
        direct: { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try directBase64URLDecode(encoded))
            }
        })
}

// MARK: - Direct libsodium calls

struct DirectFailure: Error {
    let what: String
}

@inline(never)
func directSecretboxSeal(_ m: [UInt8], nonce: [UInt8], key: [UInt8]) -> [UInt8] {
    fresh(m.count + Int(crypto_secretbox_MACBYTES)) { c in
        _ = crypto_secretbox_easy(c, m, UInt64(m.count), nonce, key)
    }
}

@inline(never)
func directSecretboxOpen(_ c: [UInt8], nonce: [UInt8], key: [UInt8]) throws -> [UInt8] {
    var status: Int32 = 0
    let m = fresh(c.count - Int(crypto_secretbox_MACBYTES)) { m in
        status = crypto_secretbox_open_easy(m, c, UInt64(c.count), nonce, key)
    }
    guard status == 0 else { throw DirectFailure(what: "secretbox open") }
    return m
}

@inline(never)
func directBoxSeal(_ m: [UInt8], nonce: [UInt8], publicKey: [UInt8], secretKey: [UInt8]) throws -> [UInt8] {
    var status: Int32 = 0
    let c = fresh(m.count + Int(crypto_box_MACBYTES)) { c in
        status = crypto_box_easy(c, m, UInt64(m.count), nonce, publicKey, secretKey)
    }
    guard status == 0 else { throw DirectFailure(what: "box seal") }
    return c
}

@inline(never)
func directBoxOpen(_ c: [UInt8], nonce: [UInt8], publicKey: [UInt8], secretKey: [UInt8]) throws -> [UInt8] {
    var status: Int32 = 0
    let m = fresh(c.count - Int(crypto_box_MACBYTES)) { m in
        status = crypto_box_open_easy(m, c, UInt64(c.count), nonce, publicKey, secretKey)
    }
    guard status == 0 else { throw DirectFailure(what: "box open") }
    return m
}

@inline(never)
func directGenericHash(_ data: [UInt8]) -> [UInt8] {
    fresh(32) { out in
        _ = crypto_generichash(out, 32, data, UInt64(data.count), nil, 0)
    }
}

@inline(never)
func directSign(_ m: [UInt8], secretKey: [UInt8]) -> [UInt8] {
    fresh(Int(crypto_sign_BYTES)) { sig in
        _ = crypto_sign_detached(sig, nil, m, UInt64(m.count), secretKey)
    }
}

@inline(never)
func directBase64URLEncode(_ bytes: [UInt8]) -> String {
    let variant = Int32(sodium_base64_VARIANT_URLSAFE_NO_PADDING)
    let length = sodium_base64_encoded_len(bytes.count, variant)  // includes the NUL
    return String(unsafeUninitializedCapacity: length) { out in
        out.withMemoryRebound(to: CChar.self) { chars in
            _ = sodium_bin2base64(chars.baseAddress!, length, bytes, bytes.count, variant)
        }
        return length - 1
    }
}

@inline(never)
func directBase64URLDecode(_ text: String) throws -> [UInt8] {
    var text = text
    let variant = Int32(sodium_base64_VARIANT_URLSAFE_NO_PADDING)
    return try text.withUTF8 { utf8 in
        let capacity = utf8.count * 3 / 4
        var written = 0
        var status: Int32 = 0
        let out = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, initialized in
            utf8.withMemoryRebound(to: CChar.self) { chars in
                status = sodium_base642bin(
                    buffer.baseAddress!, capacity, chars.baseAddress!, chars.count, nil, &written, nil, variant)
            }
            initialized = status == 0 ? written : 0
        }
        guard status == 0 else { throw DirectFailure(what: "base64 decode") }
        return out
    }
}

/// A push state on the heap, as the API keeps it.
final class DirectPushState {
    let state: UnsafeMutablePointer<crypto_secretstream_xchacha20poly1305_state>
    let header: [UInt8]

    init(key: [UInt8]) {
        state = .allocate(capacity: 1)
        let state = self.state
        header = fresh(Int(crypto_secretstream_xchacha20poly1305_HEADERBYTES)) { h in
            _ = crypto_secretstream_xchacha20poly1305_init_push(state, h, key)
        }
    }

    deinit { state.deallocate() }

    @inline(never)
    func push(_ m: [UInt8]) -> [UInt8] {
        fresh(m.count + Int(crypto_secretstream_xchacha20poly1305_ABYTES)) { c in
            _ = crypto_secretstream_xchacha20poly1305_push(
                state, c, nil, m, UInt64(m.count), nil, 0, UInt8(crypto_secretstream_xchacha20poly1305_TAG_MESSAGE))
        }
    }
}

/// A pull state on the heap, as the API keeps it.
final class DirectPullState {
    let state = UnsafeMutablePointer<crypto_secretstream_xchacha20poly1305_state>.allocate(capacity: 1)

    deinit { state.deallocate() }

    @inline(never)
    func start(header: [UInt8], key: [UInt8]) {
        _ = crypto_secretstream_xchacha20poly1305_init_pull(state, header, key)
    }

    @inline(never)
    func pull(_ c: [UInt8]) throws -> [UInt8] {
        var status: Int32 = 0
        var tag: UInt8 = 0
        let m = fresh(c.count - Int(crypto_secretstream_xchacha20poly1305_ABYTES)) { m in
            status = crypto_secretstream_xchacha20poly1305_pull(state, m, nil, &tag, c, UInt64(c.count), nil, 0)
        }
        guard status == 0 else { throw DirectFailure(what: "secretstream pull") }
        return m
    }
}

/// A 64-byte-aligned generic-hash state on the heap, as the API keeps it.
final class DirectHashState {
    let pointer = UnsafeMutableRawPointer.allocate(byteCount: crypto_generichash_statebytes(), alignment: 64)

    deinit { pointer.deallocate() }

    @inline(never)
    func hash(_ parts: [[UInt8]]) -> [UInt8] {
        let state = OpaquePointer(pointer)
        _ = crypto_generichash_init(state, nil, 0, 32)
        for part in parts {
            _ = crypto_generichash_update(state, part, UInt64(part.count))
        }
        return fresh(32) { out in
            _ = crypto_generichash_final(state, out, 32)
        }
    }
}
