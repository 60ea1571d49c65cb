internal import E3DBRows
internal import GRDB

/// Notes.
extension SQLiteStorage {
    // MARK: Notes

    private static let noteColumns = """
        note_id, id_string, writer_client_id, recipient_signing_key, writer_signing_key, max_views, views, expires_at,
        created, body
        """

    private static func note(_ row: Row) throws -> NoteRow {
        let r = UntrustedRow(server: row, table: "notes")
        return NoteRow(
            noteID: try NoteID(stored: r.value(at: 0, "note_id")), idString: try r.optional(at: 1, "id_string"),
            writerClientID: try r.optional(at: 2, "writer_client_id", as: String.self).map { text in
                try ClientID(stored: text)
            },
            recipientSigningKey: try r.value(at: 3, "recipient_signing_key"),
            writerSigningKey: try r.value(at: 4, "writer_signing_key"), maxViews: try r.optional(at: 5, "max_views"),
            views: try r.value(at: 6, "views"), expiresAt: try r.optional(at: 7, "expires_at"),
            created: try r.value(at: 8, "created"), bodyJSON: try r.value(at: 9, "body"))
    }

    private static func insert(_ n: NoteRow, _ db: Database) throws {
        try db.execute(
            sql: "INSERT INTO notes (\(noteColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            arguments: [
                n.noteID.text, n.idString, n.writerClientID?.text, n.recipientSigningKey, n.writerSigningKey,
                n.maxViews, n.views, n.expiresAt, n.created, n.bodyJSON,
            ])
    }

    package func insertNote(_ n: NoteRow) async throws -> Bool {
        try await write { db in
            if let name = n.idString,
                try Bool.fetchOne(db, sql: "SELECT 1 FROM notes WHERE id_string = ?", arguments: [name]) == true
            {
                return false
            }
            try Self.insert(n, db)
            return true
        }
    }

    package func note(id: NoteID) async throws -> NoteRow? {
        try await read { db in
            try Row.fetchOne(
                db, sql: "SELECT \(Self.noteColumns) FROM notes WHERE note_id = ?", arguments: [id.text]
            )
            .map(Self.note)
        }
    }

    package func note(name: String) async throws -> NoteRow? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.noteColumns) FROM notes WHERE id_string = ?", arguments: [name])
                .map(Self.note)
        }
    }

    package func viewNote(id: NoteID, now: Int64) async throws -> NoteRow? {
        let id = id.text
        return try await write { db in
            guard
                var n = try Row.fetchOne(
                    db, sql: "SELECT \(Self.noteColumns) FROM notes WHERE note_id = ?",
                    arguments: [id]
                ).map(Self.note)
            else { return nil }
            if let e = n.expiresAt, e <= now {
                try db.execute(sql: "DELETE FROM notes WHERE note_id = ?", arguments: [id])
                return nil
            }
            n.views += 1
            if let m = n.maxViews, m > 0, n.views >= m {
                try db.execute(sql: "DELETE FROM notes WHERE note_id = ?", arguments: [id])
            } else {
                try db.execute(sql: "UPDATE notes SET views = ? WHERE note_id = ?", arguments: [n.views, id])
            }
            return n
        }
    }

    package func replaceNote(_ n: NoteRow) async throws {
        try await write { db in
            if let name = n.idString {
                try db.execute(sql: "DELETE FROM notes WHERE id_string = ?", arguments: [name])
            }
            try Self.insert(n, db)
        }
    }

    package func deleteNote(id: NoteID) async throws -> Bool {
        try await write { db in
            try db.execute(sql: "DELETE FROM notes WHERE note_id = ?", arguments: [id.text])
            return db.changesCount == 1
        }
    }
}
