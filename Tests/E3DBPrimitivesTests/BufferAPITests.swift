import E3DBPrimitives
import Foundation
import Testing

@Suite("Buffer APIs")
struct BufferAPITests {
    @Test(arguments: [0, 1, 16, 32, 1000])
    func secretBoxBuffersMatchDataAPI(_ size: Int) throws {
        let key = SecretBox.Key()
        let nonce = SecretBox.Nonce()
        let message = [UInt8](SecureRandom.bytes(count: size))
        var sealed = [UInt8](repeating: 0, count: size + 16)
        let written = try message.withUnsafeBytes { m in
            try nonce.rawRepresentation.withUnsafeBytes { n in
                try sealed.withUnsafeMutableBytes { o in try SecretBox.seal(m, nonce: n, using: key, into: o) }
            }
        }
        #expect(written == size + 16)
        #expect(Data(sealed) == SecretBox.seal(Data(message), using: key, nonce: nonce).ciphertext)
        var opened = [UInt8](repeating: 0, count: size)
        let count = try sealed.withUnsafeBytes { c in
            try nonce.rawRepresentation.withUnsafeBytes { n in
                try opened.withUnsafeMutableBytes { o in try SecretBox.open(c, nonce: n, using: key, into: o) }
            }
        }
        #expect(count == size && opened == message)
        let secret = try sealed.withUnsafeBytes { c in
            try nonce.rawRepresentation.withUnsafeBytes { n in try SecretBox.openSecret(c, nonce: n, using: key) }
        }
        #expect(secret.withUnsafeBytes { Array($0) } == message)
    }

    @Test func secretBoxBufferErrors() throws {
        let key = SecretBox.Key()
        let sealed = [UInt8](SecretBox.seal(Data("hello".utf8), using: key, nonce: SecretBox.Nonce()).ciphertext)
        var out = [UInt8](repeating: 0xAA, count: 64)
        func open(_ c: [UInt8], nonce: [UInt8], outCount: Int) throws(E3DBError) -> Int {
            let r = c.withUnsafeBytes { cb in
                nonce.withUnsafeBytes { nb in
                    out.withUnsafeMutableBytes { ob in
                        Result { () throws(E3DBError) in
                            try SecretBox.open(
                                cb, nonce: nb, using: key,
                                into: UnsafeMutableRawBufferPointer(rebasing: ob[0..<outCount]))
                        }
                    }
                }
            }
            return try r.get()
        }
        let nonce = [UInt8](repeating: 0, count: 24)
        #expect(throws: E3DBError(.invalidNonceLength)) { _ = try open(sealed, nonce: [1, 2, 3], outCount: 64) }
        #expect(throws: E3DBError(.invalidLength)) {
            _ = try open(Array(sealed.prefix(15)), nonce: nonce, outCount: 64)
        }
        #expect(throws: E3DBError(.invalidLength)) { _ = try open(sealed, nonce: nonce, outCount: 4) }
        #expect(throws: E3DBError(.authenticationFailed)) { _ = try open(sealed, nonce: nonce, outCount: 64) }
        // Nothing is written when authentication fails.
        #expect(out.allSatisfy { $0 == 0xAA })
    }

    @Test func base64DecodeIntoBuffer() throws {
        for n in 0..<80 {
            let bytes = SecureRandom.bytes(count: n)
            let text = Base64URL.encode(bytes)
            let room = Base64URL.maximumDecodedLength(ofEncodedLength: text.utf8.count)
            var out = [UInt8](repeating: 0, count: room)
            var utf8 = Array(text.utf8)
            let written = try utf8.withUnsafeMutableBufferPointer { u in
                try out.withUnsafeMutableBytes { o in try Base64URL.decode(utf8: UnsafeBufferPointer(u), into: o) }
            }
            #expect(Array(out.prefix(written)) == Array(bytes))
        }
        var padded = Array("AA==".utf8)
        var out = [UInt8](repeating: 0, count: 8)
        #expect(throws: E3DBError(.invalidBase64)) {
            _ = try padded.withUnsafeMutableBufferPointer { u in
                try out.withUnsafeMutableBytes { o in try Base64URL.decode(utf8: UnsafeBufferPointer(u), into: o) }
            }
        }
        let lenient = try padded.withUnsafeMutableBufferPointer { u in
            try out.withUnsafeMutableBytes { o in
                try Base64URL.decode(utf8: UnsafeBufferPointer(u), into: o, lenient: true)
            }
        }
        #expect(lenient == 1 && out[0] == 0)
        var long = Array("AAAAAAAA".utf8)
        var tiny = [UInt8](repeating: 0, count: 2)
        #expect(throws: E3DBError(.invalidLength)) {
            _ = try long.withUnsafeMutableBufferPointer { u in
                try tiny.withUnsafeMutableBytes { o in try Base64URL.decode(utf8: UnsafeBufferPointer(u), into: o) }
            }
        }
    }

    @Test func base64EncodeIntoBuffer() throws {
        for n in 0..<80 {
            let bytes = SecureRandom.bytes(count: n)
            var out = [UInt8](repeating: 0, count: Base64URL.encodedLength(of: n))
            let written = try bytes.withUnsafeBytes { b in
                try out.withUnsafeMutableBufferPointer { o in try Base64URL.encode(b, into: o) }
            }
            #expect(written == out.count)
            #expect(String(decoding: out, as: UTF8.self) == Base64URL.encode(bytes))
        }
        var tiny = [UInt8](repeating: 0, count: 3)
        #expect(throws: E3DBError(.invalidLength)) {
            _ = try Data([1, 2, 3]).withUnsafeBytes { b in
                try tiny.withUnsafeMutableBufferPointer { o in try Base64URL.encode(b, into: o) }
            }
        }
    }
}
