import Logging
internal import PostgresNIO

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Notes and row counts.
extension PostgresStorage {
    // MARK: Notes

    private static let noteColumns = """
        note_id, id_string, writer_client_id, recipient_signing_key, writer_signing_key, max_views, views, expires_at,
        created, body
        """

    private static func note(_ row: PostgresRow) throws -> NoteRow {
        let (id, name, writer, recipientKey, writerKey, maxViews, views, expiresAt, created, body) =
            try row.decode((String, String?, String?, String, String, Int?, Int, Int64?, Int64, String).self)
        return NoteRow(
            noteID: try NoteID(stored: id), idString: name,
            writerClientID: try writer.map { try ClientID(stored: $0) }, recipientSigningKey: recipientKey,
            writerSigningKey: writerKey, maxViews: maxViews, views: views, expiresAt: expiresAt,
            created: created, bodyJSON: body)
    }

    /// `INSERT INTO notes (…) VALUES (…)` for `n`, followed by `suffix`.
    private static func insertNote(_ n: NoteRow, _ suffix: String) -> PostgresQuery {
        """
        INSERT INTO notes (\(unescaped: noteColumns))
        VALUES (\(n.noteID.text), \(n.idString), \(n.writerClientID?.text), \(n.recipientSigningKey),
            \(n.writerSigningKey),
            \(n.maxViews), \(n.views), \(n.expiresAt), \(n.created), \(n.bodyJSON))
        \(unescaped: suffix)
        """
    }

    package func insertNote(_ n: NoteRow) async throws -> Bool {
        try await perform("inserting note \(n.noteID)") { [self] in
            try await execute(Self.insertNote(n, "ON CONFLICT (id_string) DO NOTHING RETURNING 1"), on: client) == 1
        }
    }

    package func note(id: NoteID) async throws -> NoteRow? {
        try await perform("reading note \(id)") { [self] in
            try await fetch(
                "SELECT \(unescaped: Self.noteColumns) FROM notes WHERE note_id = \(id.text)", on: client,
                Self.note
            ).first
        }
    }

    package func note(name: String) async throws -> NoteRow? {
        try await perform("reading a note by name") { [self] in
            try await fetch(
                "SELECT \(unescaped: Self.noteColumns) FROM notes WHERE id_string = \(name)", on: client,
                Self.note
            ).first
        }
    }

    package func viewNote(id noteID: NoteID, now: Int64) async throws -> NoteRow? {
        let id = noteID.text
        return try await transaction("viewing note \(id)") { [self] db -> NoteRow? in
            guard
                var n = try await fetch(
                    "SELECT \(unescaped: Self.noteColumns) FROM notes WHERE note_id = \(id) FOR UPDATE", on: db,
                    Self.note
                ).first
            else { return nil }
            if let expiry = n.expiresAt, expiry <= now {
                try await execute("DELETE FROM notes WHERE note_id = \(id)", on: db)
                return nil
            }
            n.views += 1
            if let m = n.maxViews, m > 0, n.views >= m {
                try await execute("DELETE FROM notes WHERE note_id = \(id)", on: db)
            } else {
                try await execute("UPDATE notes SET views = \(n.views) WHERE note_id = \(id)", on: db)
            }
            return n
        }
    }

    /// One statement for a named note (an upsert on the name, so that two processes replacing the same name
    /// concurrently both succeed and the later one wins); a plain insert for an unnamed one.
    package func replaceNote(_ n: NoteRow) async throws {
        let suffix =
            n.idString == nil
            ? ""
            : """
            ON CONFLICT (id_string) DO UPDATE SET note_id = EXCLUDED.note_id,
                writer_client_id = EXCLUDED.writer_client_id, recipient_signing_key = EXCLUDED.recipient_signing_key,
                writer_signing_key = EXCLUDED.writer_signing_key, max_views = EXCLUDED.max_views,
                views = EXCLUDED.views, expires_at = EXCLUDED.expires_at, created = EXCLUDED.created,
                body = EXCLUDED.body
            """
        try await perform("replacing note \(n.noteID)") { [self] in
            try await execute(Self.insertNote(n, suffix), on: client)
        }
    }

    package func deleteNote(id: NoteID) async throws -> Bool {
        try await perform("deleting note \(id)") { [self] in
            try await execute("DELETE FROM notes WHERE note_id = \(id.text) RETURNING 1", on: client) == 1
        }
    }

    package func statistics() async throws -> [String: Int] {
        try await perform("counting rows") { [self] in
            var out: [String: Int] = [:]
            for table in [
                "clients", "registration_tokens", "access_keys", "policies", "records", "pending_files",
                "notes", "access_tokens", "tsv1_nonces", "file_body_deletions",
            ] {
                out[table] =
                    try await fetch("SELECT COUNT(*) FROM \(unescaped: table)", on: client) {
                        try $0.decode(Int.self)
                    }.first ?? 0
            }
            return out
        }
    }
}
