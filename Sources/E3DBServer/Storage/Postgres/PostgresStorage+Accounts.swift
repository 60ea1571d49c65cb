import E3DBPrimitives
import Logging
internal import PostgresNIO

#if canImport(FoundationEssentials)
    package import FoundationEssentials
#else
    package import Foundation
#endif

/// Registration tokens, clients, bearer tokens, nonces, access keys and policies.
extension PostgresStorage {
    package func serverSecret() async throws -> Data {
        try await perform("reading the server secret") { [self] in
            guard
                let secret = try await fetch(
                    "SELECT value FROM server_settings WHERE key = 'secret'", on: client,
                    { try $0.decode(Data.self) }
                ).first,
                secret.count == 32
            else {
                throw E3DBError(.storageCorrupted, "the server secret is missing; run migrate")
            }
            return secret
        }
    }

    // MARK: Registration tokens

    package func createRegistrationToken(hash: Data, uses: Int?, created: Int64) async throws {
        try await perform("creating a registration token") { [self] in
            try await execute(
                """
                INSERT INTO registration_tokens (token_hash, uses_left, created) VALUES (\(hash), \(uses), \(created))
                """, on: client)
        }
    }

    /// Uses the token and inserts the client in one transaction (a failed insert uses nothing).
    package func registerClient(_ c: ClientRow) async throws -> Bool {
        try await transaction("registering client \(c.clientID)") { [self] db -> Bool in
            guard
                try await execute(
                    """
                    UPDATE registration_tokens SET uses_left = uses_left - 1
                    WHERE token_hash = \(c.registrationTokenHash) AND (uses_left IS NULL OR uses_left > 0) RETURNING 1
                    """, on: db) == 1
            else { return false }
            try await execute(
                """
                INSERT INTO clients (\(unescaped: Self.clientColumns))
                VALUES (\(c.clientID.text), \(c.name), \(c.publicKey),
                    \(c.signingKey), \(c.apiKeyID), \(c.apiSecretHash), \(c.enabled), \(c.hasBackup),
                    \(c.registrationTokenHash), \(c.created))
                """, on: db)
            return true
        }
    }

    package func registrationTokenExists(hash: Data) async throws -> Bool {
        try await perform("looking up a registration token") { [self] in
            try await execute("SELECT 1 FROM registration_tokens WHERE token_hash = \(hash)", on: client) == 1
        }
    }

    package func backupClientID() async throws -> ClientID? {
        try await perform("reading the backup client") { [self] in
            try await fetch("SELECT value FROM server_settings WHERE key = 'backup_client'", on: client) {
                try ClientID(stored: String(decoding: try $0.decode(Data.self), as: UTF8.self))
            }.first
        }
    }

    package func setBackupClientID(_ id: ClientID) async throws {
        try await perform("setting the backup client") { [self] in
            try await execute(
                """
                INSERT INTO server_settings (key, value) VALUES ('backup_client', \(Data(id.text.utf8)))
                ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value
                """, on: client)
        }
    }

    // MARK: Clients

    static let clientColumns = """
        client_id, name, public_key, signing_key, api_key_id, api_secret_hash, enabled, has_backup,
        registration_token_hash, created
        """

    static func client(_ row: PostgresRow) throws -> ClientRow {
        let (id, name, publicKey, signingKey, apiKeyID, secretHash, enabled, hasBackup, tokenHash, created) =
            try row.decode((String, String, String, String?, String, Data, Bool, Bool, Data, Int64).self)
        return ClientRow(
            clientID: try ClientID(stored: id), name: name, publicKey: publicKey, signingKey: signingKey,
            apiKeyID: apiKeyID,
            apiSecretHash: secretHash, enabled: enabled, hasBackup: hasBackup,
            registrationTokenHash: tokenHash, created: created)
    }

    package func client(id: ClientID) async throws -> ClientRow? {
        try await first("reading client \(id)", PostgresStatements.Client(id: id))
    }

    package func client(apiKeyID: String) async throws -> ClientRow? {
        try await perform("reading a client by API key id") { [self] in
            try await fetch(
                "SELECT \(unescaped: Self.clientColumns) FROM clients WHERE api_key_id = \(apiKeyID)",
                on: client, Self.client
            ).first
        }
    }

    package func setHasBackup(clientID: ClientID) async throws {
        try await perform("marking client \(clientID) as backed up") { [self] in
            try await execute("UPDATE clients SET has_backup = true WHERE client_id = \(clientID.text)", on: client)
        }
    }

    package func setClientEnabled(id: ClientID, _ enabled: Bool) async throws -> Bool {
        try await perform("\(enabled ? "enabling" : "disabling") client \(id)") { [self] in
            try await execute(
                "UPDATE clients SET enabled = \(enabled) WHERE client_id = \(id.text) RETURNING 1", on: client) == 1
        }
    }

    // MARK: Tokens and nonces

    package func insertAccessToken(hash: Data, clientID: ClientID, expires: Int64) async throws {
        try await perform("storing an access token") { [self] in
            try await execute(
                """
                INSERT INTO access_tokens (token_hash, client_id, expires)
                VALUES (\(hash), \(clientID.text), \(expires))
                """, on: client)
        }
    }

    /// The client and expiry of an unexpired token, so that `E3DBService`'s bearer-token cache keeps it (for at
    /// most a second after this read: a token deleted in the database, by another process or an operator, is
    /// refused by every process at most that long later).
    package func accessToken(hash: Data, now: Int64) async throws -> (clientID: ClientID, expires: Int64)? {
        try await first("checking an access token", PostgresStatements.AccessToken(hash: hash, now: now))
            .map { (clientID: $0.0, expires: $0.1) }
    }

    /// One statement: inserts the nonce, or takes over an expired one; returns no row (a replay) when the nonce is
    /// present and unexpired.
    package func useNonce(_ nonce: String, expires: Int64, now: Int64) async throws -> Bool {
        try await perform("recording a TSV1 nonce") { [self] in
            try await execute(
                """
                INSERT INTO tsv1_nonces (nonce, expires) VALUES (\(nonce), \(expires))
                ON CONFLICT (nonce) DO UPDATE SET expires = EXCLUDED.expires WHERE tsv1_nonces.expires < \(now)
                RETURNING 1
                """, on: client) == 1
        }
    }

    // MARK: Access keys

    package func accessKey(_ t: AccessTuple) async throws -> AccessKeyRow? {
        try await perform("reading an access key") { [self] in
            try await fetch(
                """
                SELECT eak, authorizer_id, authorizer_public_key, signer_id, signer_signing_key FROM access_keys
                WHERE writer_id = \(t.writerID.text) AND user_id = \(t.userID.text)
                    AND reader_id = \(t.readerID.text) AND type = \(t.type)
                """, on: client
            ) { row in
                let (eak, authorizerID, authorizerKey, signerID, signerKey) =
                    try row.decode((String, String, String, String?, String?).self)
                return AccessKeyRow(
                    tuple: t, eak: eak, authorizerID: try ClientID(stored: authorizerID),
                    authorizerPublicKey: authorizerKey, signerID: try signerID.map { try ClientID(stored: $0) },
                    signerSigningKey: signerKey)
            }.first
        }
    }

    package func insertAccessKey(_ r: AccessKeyRow) async throws -> Bool {
        try await perform("inserting an access key") { [self] in
            try await execute(
                """
                INSERT INTO access_keys (writer_id, user_id, reader_id, type, eak, authorizer_id, authorizer_public_key,
                    signer_id, signer_signing_key)
                VALUES (\(r.tuple.writerID.text), \(r.tuple.userID.text), \(r.tuple.readerID.text), \(r.tuple.type),
                    \(r.eak), \(r.authorizerID.text), \(r.authorizerPublicKey), \(r.signerID?.text),
                    \(r.signerSigningKey))
                ON CONFLICT DO NOTHING RETURNING 1
                """, on: client) == 1
        }
    }

    package func deleteAccessKey(_ t: AccessTuple) async throws {
        try await perform("deleting an access key") { [self] in
            try await execute(
                """
                DELETE FROM access_keys WHERE writer_id = \(t.writerID.text) AND user_id = \(t.userID.text)
                    AND reader_id = \(t.readerID.text) AND type = \(t.type)
                """, on: client)
        }
    }

    // MARK: Policies

    private static let policyColumns = "user_id, writer_id, reader_id, type, can_read, can_authorize, authorized_by"

    private static func policy(_ row: PostgresRow) throws -> PolicyRow {
        let (user, writer, reader, type, canRead, canAuthorize, authorizedBy) =
            try row.decode((String, String, String, String, Bool, Bool, String?).self)
        return PolicyRow(
            tuple: AccessTuple(
                writerID: try ClientID(stored: writer), userID: try ClientID(stored: user),
                readerID: try ClientID(stored: reader), type: type),
            canRead: canRead, canAuthorize: canAuthorize,
            authorizedBy: try authorizedBy.map { try ClientID(stored: $0) })
    }

    package func policy(_ t: AccessTuple) async throws -> PolicyRow? {
        try await perform("reading a policy") { [self] in
            try await fetch(
                """
                SELECT \(unescaped: Self.policyColumns) FROM policies WHERE user_id = \(t.userID.text)
                    AND writer_id = \(t.writerID.text) AND reader_id = \(t.readerID.text) AND type = \(t.type)
                """, on: client, Self.policy
            ).first
        }
    }

    /// Inserts or replaces the tuple's policy; a replaced policy moves to the end of the listings (as SQLite's
    /// `INSERT OR REPLACE` gives it a new rowid).
    package func changePolicy(_ t: AccessTuple, read: Bool?, authorize: Bool?, by: ClientID?) async throws {
        let by = by?.text
        try await perform("writing a policy") { [self] in
            try await execute(
                """
                INSERT INTO policies (\(unescaped: Self.policyColumns))
                VALUES (\(t.userID.text), \(t.writerID.text), \(t.readerID.text), \(t.type),
                    coalesce(\(read)::boolean, false),
                    coalesce(\(authorize)::boolean, false), CASE WHEN \(authorize)::boolean THEN \(by)::text END)
                ON CONFLICT (user_id, writer_id, reader_id, type) DO UPDATE SET seq = DEFAULT,
                    can_read = coalesce(\(read)::boolean, policies.can_read),
                    can_authorize = coalesce(\(authorize)::boolean, policies.can_authorize),
                    authorized_by = CASE WHEN \(authorize)::boolean IS NULL THEN policies.authorized_by
                        WHEN \(authorize)::boolean THEN \(by)::text END
                """, on: client)
        }
    }

    package func removeAuthorizations(userID: ClientID, writerID: ClientID, readerID: ClientID) async throws {
        try await perform("removing authorizations") { [self] in
            try await execute(
                """
                UPDATE policies SET can_authorize = false, authorized_by = NULL
                WHERE user_id = \(userID.text) AND writer_id = \(writerID.text) AND reader_id = \(readerID.text)
                """, on: client)
        }
    }

    package func listPolicies(_ listing: PolicyListing, clientID: ClientID) async throws -> [PolicyRow] {
        let (column, permission) = listing.filter
        let query: PostgresQuery = """
            SELECT \(unescaped: Self.policyColumns) FROM policies
            WHERE \(unescaped: column) = \(clientID.text) AND \(unescaped: permission) ORDER BY seq
            """
        return try await perform("listing policies") { [self] in try await fetch(query, on: client, Self.policy) }
    }
}
