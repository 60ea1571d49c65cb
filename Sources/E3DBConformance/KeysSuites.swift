import E3DBKeys
import E3DBPrimitives
import Foundation

/// Vector suites for E3DBKeys: `TestVectors/keys/*.json`, made by `TestVectors/generators/e3db_documents.py`
/// with Tozny's Python SDK (e3db 2.3.0), and `keys/group_wrappers.json` by `TestVectors/generators/group_keys.py`
/// with PyNaCl.
package enum KeysSuites {
    package static let all: [VectorSuite] = [eak, eakInfo, clientConfig, groupWrappers]

    static func suite<T: IdentifiedVector>(
        _ name: String, file: String, _ make: @escaping @Sendable (T) throws -> Void
    ) -> VectorSuite {
        VectorSuite(name: name) { locations in
            let file = try VectorFile<T>.load(locations.projectFile(file))
            return file.tests.map { test in
                VectorCase(suite: name, id: String(test.tcId), comment: test.comment) { try make(test) }
            }
        }
    }

    // MARK: EAK

    struct EAKTest: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let readerSecretKey: String, readerPublicKey: String, authorizerPublicKey: String
        let authorizerSecretKey: String?, accessKey: String?, nonce: String?, eak: String
        let error: String?, errorPart: String?, lenientResult: String?
    }

    package static let eak = suite("keys/eak", file: "keys/eak.json") { (t: EAKTest) in
        let reader = try Box.PrivateKey(base64URLEncoded: t.readerSecretKey)
        try requireEqual(reader.publicKey.base64URLEncoded, t.readerPublicKey, "reader public key")
        let authorizer = try Box.PublicKey(base64URLEncoded: t.authorizerPublicKey)
        func unwrap(_ decoding: Base64Decoding) throws -> Data {
            let ak = try EncryptedAccessKey(t.eak, decoding: decoding).unwrap(reader: reader, authorizer: authorizer)
            return unsafe ak.withUnsafeBytes { unsafe Data($0) }
        }
        if t.result == .valid {
            let expected = try Hex.decode(t.accessKey ?? "")
            try requireEqual(try unwrap(.strict), expected, "unwrapped access key")
            try requireEqual(try unwrap(.lenient), expected, "unwrapped access key (lenient)")
            if let sk = t.authorizerSecretKey, let nonce = t.nonce {
                let wrapped = try EncryptedAccessKey.wrap(
                    AccessKey(rawRepresentation: expected), for: reader.publicKey,
                    by: Box.PrivateKey(base64URLEncoded: sk), nonce: Box.Nonce(rawRepresentation: Hex.decode(nonce)))
                try requireEqual(wrapped.stringValue, t.eak, "wrapped EAK (known answer)")
            }
        } else {
            try requireE3DBError(t.error, part: t.errorPart) { _ = try unwrap(.strict) }
            if t.lenientResult == "valid" {
                try requireEqual(try unwrap(.lenient), try Hex.decode(t.accessKey ?? ""), "lenient unwrap")
            } else {
                try requireE3DBError(nil, part: nil) { _ = try unwrap(.lenient) }
            }
        }
    }

    // MARK: EAKInfo

    struct ExpectedEAKInfo: Decodable, Sendable {
        let eak: String, authorizerId: String, authorizerPublicKey: String
        let signerId: String?, signerSigningKey: String?
    }

    struct EAKInfoTest: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let json: String, readerSecretKey: String, accessKey: String?, expected: ExpectedEAKInfo?
        let error: String?, errorField: String?
    }

    package static let eakInfo = suite("keys/eakinfo", file: "keys/eakinfo.json") { (t: EAKInfoTest) in
        if t.result == .valid, let e = t.expected {
            let info = try EAKInfo(jsonData: Data(t.json.utf8))
            try requireEqual(info.eak.stringValue, e.eak, "eak")
            try requireEqual(info.authorizerID.lowercasedString, e.authorizerId, "authorizer_id")
            try requireEqual(info.authorizerPublicKey.base64URLEncoded, e.authorizerPublicKey, "authorizer key")
            try requireEqual(info.signerID?.lowercasedString, e.signerId, "signer_id")
            try requireEqual(info.signerSigningKey?.base64URLEncoded, e.signerSigningKey, "signer key")
            let reader = try Box.PrivateKey(base64URLEncoded: t.readerSecretKey)
            try unsafe requireEqual(
                info.unwrap(with: reader).withUnsafeBytes { unsafe Data($0) }, try Hex.decode(t.accessKey ?? ""),
                "access key")
            // Both written shapes read back to the same value; Codable agrees with jsonData(shape:).
            try requireEqual(try EAKInfo(jsonData: info.jsonData()), info, "API shape round trip")
            try requireEqual(try EAKInfo(jsonData: info.jsonData(shape: .javaFlat)), info, "Java shape round trip")
            let encoder = JSONEncoders.sorted()
            try requireEqual(
                String(decoding: try encoder.encode(info), as: UTF8.self),
                String(decoding: info.jsonData(), as: UTF8.self), "Codable encoding")
            try requireEqual(try JSONDecoder().decode(EAKInfo.self, from: info.jsonData()), info, "Codable decoding")
        } else {
            try requireE3DBError(t.error, field: t.errorField) { _ = try EAKInfo(jsonData: Data(t.json.utf8)) }
        }
    }

    // MARK: group wrappers

    struct GroupWrapperTest: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let json: String, readerSecretKey: String, accessKey: String?, wrapperCount: Int?
        let stage: String?, error: String?, errorField: String?, errorPart: String?
    }

    package static let groupWrappers = suite("keys/group_wrappers", file: "keys/group_wrappers.json") {
        (t: GroupWrapperTest) in
        let reader = try Box.PrivateKey(base64URLEncoded: t.readerSecretKey)
        if t.result == .valid {
            let info = try EAKInfo(jsonData: Data(t.json.utf8))
            try requireEqual(info.accessKeyWrappers.count, t.wrapperCount ?? -1, "wrapper count")
            let expected = try Hex.decode(t.accessKey ?? "")
            try unsafe requireEqual(
                info.unwrap(with: reader).withUnsafeBytes { unsafe Data($0) }, expected, "access key")
            // The wrappers survive both written shapes, Codable, and a lenient parse.
            try requireEqual(try EAKInfo(jsonData: info.jsonData()), info, "API shape round trip")
            try requireEqual(try EAKInfo(jsonData: info.jsonData(shape: .javaFlat)), info, "Java shape round trip")
            try requireEqual(try EAKInfo(jsonData: Data(t.json.utf8), decoding: .lenient), info, "lenient parse")
            let encoder = JSONEncoders.sorted()
            try requireEqual(
                String(decoding: try encoder.encode(info), as: UTF8.self),
                String(decoding: info.jsonData(), as: UTF8.self), "Codable encoding")
            try requireEqual(try JSONDecoder().decode(EAKInfo.self, from: info.jsonData()), info, "Codable decoding")
        } else if t.stage == "unwrap" {
            let info = try EAKInfo(jsonData: Data(t.json.utf8))
            try requireE3DBError(t.error, part: t.errorPart, field: t.errorField) { _ = try info.unwrap(with: reader) }
        } else {
            try requireE3DBError(t.error, field: t.errorField) { _ = try EAKInfo(jsonData: Data(t.json.utf8)) }
        }
    }

    // MARK: client configuration

    struct ExpectedConfig: Decodable, Sendable {
        let clientId: String, publicKey: String, privateKey: String
        let publicSigningKey: String?, privateSigningKey: String?
    }

    struct ConfigTest: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let json: String, expected: ExpectedConfig?, error: String?, errorField: String?
    }

    package static let clientConfig = suite("keys/client_config", file: "keys/client_config.json") { (t: ConfigTest) in
        if t.result == .valid, let e = t.expected {
            let identity = try ClientIdentity(configJSON: Data(t.json.utf8))
            try requireEqual(identity.clientID?.lowercasedString, e.clientId, "client_id")
            try requireEqual(identity.publicKey.base64URLEncoded, e.publicKey, "public_key")
            try requireEqual(identity.boxKey.base64URLEncoded, e.privateKey, "private_key")
            try requireEqual(identity.publicSigningKey?.base64URLEncoded, e.publicSigningKey, "public_signing_key")
            try requireEqual(identity.signingKey?.base64URLEncoded, e.privateSigningKey, "private_signing_key")
            let again = try ClientIdentity(configJSON: identity.configJSON())
            try requireEqual(again.configJSON(), identity.configJSON(), "write/read round trip")
        } else {
            try requireE3DBError(t.error, field: t.errorField) { _ = try ClientIdentity(configJSON: Data(t.json.utf8)) }
        }
    }
}

/// Throws unless `body` throws an ``E3DBError`` with code `expected` (any code when nil) and, when given, the
/// `context.part` and `context.field` named by the vector.
func requireE3DBError(
    _ expected: String?, part: String? = nil, field: String? = nil, _ body: () throws -> Void
) throws {
    do {
        try body()
    } catch let error as E3DBError {
        if let expected, error.code.rawValue != expected {
            throw ConformanceFailure("expected error \(expected), got \(error.code) (\(error.message))")
        }
        if let part, error.context.part != part {
            throw ConformanceFailure("expected part \(part), got \(error.context.part ?? "none") (\(error))")
        }
        if let field, error.context.field != field {
            throw ConformanceFailure("expected field \(field), got \(error.context.field ?? "none") (\(error))")
        }
        return
    } catch {
        throw ConformanceFailure("expected E3DBError \(expected ?? "any"), got \(error)")
    }
    throw ConformanceFailure("expected error \(expected ?? "any"), but it succeeded")
}
