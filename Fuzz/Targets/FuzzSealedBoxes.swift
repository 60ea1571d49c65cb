// Fuzz target FuzzSealedBoxes: parsing and opening of Box, SecretBox and anonymous sealed boxes with fixed keys.
//
// Byte 0 picks the kind. The rest is fed to `SealedBox(combined:)` (or `AnonymousBox.open`) and opened with fixed
// keys. Invariants: inputs shorter than nonce + tag are rejected with invalidLength; longer ones either open (only
// the round-trip half can produce such inputs in practice) or fail with authenticationFailed; the combined form
// round-trips; and sealing the same bytes with the fixed keys opens back to them.
import E3DBPrimitives
import Foundation

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzSealedBoxes invariant violated: \(message())") }
}

private struct Keys {
    let secret: SecretBox.Key
    let alice: Box.PrivateKey
    let bob: Box.PrivateKey
}

// Built per input rather than held in a global: LeakSanitizer cannot trace the storage of a `Data` kept in a
// global (its reference sits in a tagged enum payload) and reports it as leaked.
private func makeKeys() -> Keys {
    do {
        return Keys(
            secret: try SecretBox.Key(rawRepresentation: [UInt8](repeating: 1, count: 32)),
            alice: try Box.PrivateKey(rawRepresentation: [UInt8](repeating: 2, count: 32)),
            bob: try Box.PrivateKey(rawRepresentation: [UInt8](repeating: 3, count: 32)))
    } catch {
        fatalError("\(error)")
    }
}

func fuzzSealedBoxes(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = unsafe Array(UnsafeBufferPointer(start: data, count: size))
    guard let kind = bytes.first else { return 0 }
    let input = Data(bytes.dropFirst())
    let keys = makeKeys()
    switch kind % 4 {
    case 0:
        do {
            let box = try SecretBox.SealedBox(combined: input)
            require(box.combined == input, "combined round trip")
            _ = try SecretBox.open(box, using: keys.secret)
        } catch {
            require(error.code == (input.count < 40 ? .invalidLength : .authenticationFailed), "secretbox: \(error)")
        }
    case 1:
        do {
            let box = try Box.SealedBox(combined: input)
            require(box.combined == input, "combined round trip")
            _ = try Box.open(box, from: keys.alice.publicKey, to: keys.bob)
        } catch {
            require(error.code == (input.count < 40 ? .invalidLength : .authenticationFailed), "box: \(error)")
        }
    case 2:
        do {
            _ = try AnonymousBox.open(input, recipient: keys.bob)
        } catch {
            require(error.code == (input.count < 48 ? .invalidLength : .authenticationFailed), "sealed box: \(error)")
        }
    default:
        let sealed = SecretBox.seal(input, using: keys.secret)
        require(
            (try? SecretBox.open(SecretBox.SealedBox(combined: sealed.combined), using: keys.secret)) == input,
            "secretbox round trip")
        let boxed = try? Box.seal(input, to: keys.bob.publicKey, from: keys.alice)
        require(
            boxed.flatMap { try? Box.open($0, from: keys.alice.publicKey, to: keys.bob) } == input, "box round trip")
        let anonymous = try? AnonymousBox.seal(input, to: keys.bob.publicKey)
        require(anonymous.flatMap { try? AnonymousBox.open($0, recipient: keys.bob) } == input, "anonymous round trip")
    }
    return 0
}
