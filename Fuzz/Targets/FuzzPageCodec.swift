// Fuzz target FuzzPageCodec: the page codec (E3DBPageCodec) in both formats (SQLCipher's, SQLite3 Multiple
// Ciphers' chacha20 and its sqleet legacy layout) and the key strings of `PRAGMA key`.
//
// Byte 0 chooses the mode (mod 3); byte 1 the settings (v4, v3, chacha20 or sqleet, page size 512 … 8192); bytes
// 2-5 a page number.
// - 0: "hostile page". The rest, repeated or cut to one page, is decrypted as a stored page: it must fail with
//   pageTampered naming the page number (an HMAC cannot be forged by the fuzzer), and the output must be all zero.
// - 1: "round trip". The rest is the plaintext page: encrypting then decrypting gives back every byte the cipher
//   covers (page 1: from byte 16), twice with different IVs; under another page number it fails with
//   pageTampered; with one byte of the stored page flipped (its position from the input) it fails likewise. For
//   chacha20 also under a nonce taken from the input, whose block counter may wrap at 2³² anywhere in the page (or
//   between the one-time key block and the data): it round-trips too, never traps.
// - 2: "key string". The rest is a `PRAGMA key` value: parse never traps; a raw key is 32 bytes and its salt 16;
//   an `x'…'` or `raw:` value of another length or with a non-hex digit is invalidKey.
import E3DBPageCodec
import E3DBPrimitives

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzPageCodec invariant violated: \(message())") }
}

private let codecs: [PageCodec] = {
    var made: [PageCodec] = []
    for settings in [SQLCipherSettings.v4, .v3, .chacha20, .sqleet] {
        for pageSize in [512, 1024, 4096, 8192] {
            var chosen = settings
            chosen.pageSize = pageSize
            chosen.kdfIterations = 2
            do {
                made.append(
                    try PageCodec(
                        key: .rawKey(SecureBytes(copying: [UInt8](repeating: 0x33, count: 32))),
                        salt: Array(0..<16), settings: chosen))
            } catch {
                fatalError("FuzzPageCodec: cannot make a codec: \(error)")
            }
        }
    }
    return made
}()

private func page(from bytes: ArraySlice<UInt8>, size: Int) -> [UInt8] {
    guard !bytes.isEmpty else { return [UInt8](repeating: 0, count: size) }
    return (0..<size).map { bytes[bytes.startIndex + $0 % bytes.count] }
}

func fuzzPageCodec(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = unsafe Array(UnsafeBufferPointer(start: data, count: size))
    guard bytes.count >= 6 else { return 0 }
    let codec = codecs[Int(bytes[1]) % codecs.count]
    let pageSize = codec.settings.pageSize
    let number = max(1, UInt32(bytes[2]) << 24 | UInt32(bytes[3]) << 16 | UInt32(bytes[4]) << 8 | UInt32(bytes[5]))
    let rest = bytes[6...]
    switch bytes[0] % 3 {
    case 0:
        do {
            _ = try codec.decrypt(page: page(from: rest, size: pageSize), number: number)
            require(false, "a page the fuzzer made authenticated")
        } catch {
            require(error.code == .pageTampered && error.context.actual == Int(number), "\(error)")
        }
    case 1:
        let plain = page(from: rest, size: pageSize)
        let start = number == 1 ? 16 : 0
        let end = pageSize - codec.settings.reserveByteCount
        do {
            let first = try codec.encrypt(page: plain, number: number)
            let second = try codec.encrypt(page: plain, number: number)
            require(first != second, "two encryptions share an IV")
            for stored in [first, second] {
                let back = try codec.decrypt(page: stored, number: number)
                require(Array(back[start..<end]) == Array(plain[start..<end]), "round trip")
                require(back[end...].allSatisfy { $0 == 0 }, "reserved bytes of a decrypted page are not zero")
            }
            if codec.settings.cipher == .chacha20 {
                let nonce = (0..<16).map { rest.isEmpty ? UInt8($0) : rest[rest.startIndex + ($0 * 7) % rest.count] }
                let chosen = try codec.encrypt(page: plain, number: number, nonce: nonce)
                let back = try codec.decrypt(page: chosen, number: number)
                require(Array(back[start..<end]) == Array(plain[start..<end]), "round trip under a chosen nonce")
            }
            var flipped = first
            let position = Int(rest.first ?? 0) << 8 | Int(rest.dropFirst().first ?? 0)
            let covered =
                codec.settings.cipher == .sqlcipher && codec.settings.algorithm == .sha1 ? end + 16 + 20 : pageSize
            flipped[position % covered] ^= 0x01
            if position % covered >= start || number != 1 {
                do {
                    _ = try codec.decrypt(page: flipped, number: number)
                    require(number == 1 && position % covered < 16, "a flipped byte authenticated")
                } catch {
                    require(error.code == .pageTampered, "\(error)")
                }
            }
            do {
                _ = try codec.decrypt(page: first, number: number &+ 1 == 0 ? 1 : number &+ 1)
                require(false, "a page authenticated under another page number")
            } catch {
                require(error.code == .pageTampered, "\(error)")
            }
        } catch {
            require(false, "encrypting a page failed: \(error)")
        }
    default:
        do {
            switch try SQLCipherKey.parse(SecureBytes(copying: rest)) {
            case .passphrase(let value): require(value.count == rest.count, "passphrase length")
            case .rawKey(let key): require(key.count == 32, "raw key length")
            case .rawKeyAndSalt(let key, let salt):
                require(key.count == 32 && salt.count == 16, "raw key and salt lengths")
            }
        } catch {
            require(error.code == .invalidKey, "\(error)")
        }
    }
    return 0
}
