import E3DBKit
import E3DBTestSupport
import Foundation
import GRDB
import Testing

/// `e3dbkit store` on edited store files (security review 3: 305 of 1,566 store commands died by a signal, `store
/// verify` among them). Every column of every table with rows, in the plain-file database and the key header, is
/// given a value of the wrong type, a NULL or a blob (in turn) after its `STRICT`, `NOT NULL` and `CHECK` went
/// through `writable_schema`; then every kind of store command runs as its own process. None may end by a signal or
/// an untyped failure: each exits 0, or with the typed code of what it found (2 authentication, 64 usage, 65 data).
@Suite("CLI: store commands on edited store files end with a typed exit, never a signal")
struct EditedStoreFilesCLITests {
    /// The commands run after each edit (after `store`, `--store DIR --key-file KEY`), with their standard input.
    static let commands: [(arguments: [String], stdin: String?)] = [
        (["ls"], nil), (["cat", "/docs/a.txt"], nil), (["get", "--collection", "people", "--key", "ada"], nil),
        (["find", "--collection", "notes"], nil), (["stats"], nil), (["verify"], nil),
        (["put", "--collection", "people", "--type", "person", "--key", "ada", "-"], #"{"email":"b@example.com"}"#),
        (["put", "--collection", "notes", "--type", "note", "-"], #"{"body":"new"}"#),
        (["delete", "--collection", "people", "--key", "ada"], nil), (["setting", "list"], nil),
        (["identity", "list"], nil), (["gc"], nil),
    ]

    static func run(_ store: URL, _ key: String, _ arguments: [String], stdin: String? = nil) async throws
        -> CLIRunner.Result
    {
        let command = Array(arguments.prefix(arguments.first == "setting" || arguments.first == "identity" ? 2 : 1))
        let rest = Array(arguments.dropFirst(command.count))
        return try await CLIRunner.run(
            ["store"] + command + ["--store", store.path, "--key-file", key] + rest, stdin: stdin.map { Data($0.utf8) })
    }

    @Test("every column of the plain database and the key header, edited: every store command exits typed")
    func everyColumn() async throws {
        let dir = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let key = dir.appendingPathComponent("key").path
        // 32 bytes in base64url without padding (a raw key: no Argon2id per command).
        try Data("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8".utf8).write(to: URL(fileURLWithPath: key))
        let template = dir.appendingPathComponent("template")
        let made = [
            try await Self.run(template, key, ["init", "--plain-database"]),
            try await Self.run(
                template, key, ["put", "--collection", "notes", "--type", "note", "-"], stdin: #"{"body":"hello"}"#),
            try await Self.run(
                template, key, ["put", "--collection", "people", "--type", "person", "--key", "ada", "-"],
                stdin: #"{"email":"ada@example.com"}"#),
            try await Self.run(template, key, ["index", "--collection", "people", "--field", "email"]),
            try await Self.run(template, key, ["setting", "set", "recent", "-"], stdin: #"["a"]"#),
            try await Self.run(template, key, ["attach", "/docs/a.txt", "-"], stdin: "attached"),
        ]
        for result in made { #expect(result.status == 0, "\(result.stderr)") }

        var edits: [(file: String, column: SQLiteEdits.Column, variant: SQLiteEdits.Variant)] = []
        for file in ["store.sqlite", "keys.sqlite"] {
            for column in try SQLiteEdits.columns(of: template.appendingPathComponent(file).path) {
                edits.append((file, column, SQLiteEdits.Variant.allCases[edits.count % 3]))
            }
        }
        #expect(edits.count > 60)

        let outcomes = try await withThrowingTaskGroup(of: [String].self) { group in
            var failures: [String] = []
            var next = 0
            func start() throws {
                guard next < edits.count else { return }
                let edit = edits[next]
                let copy = dir.appendingPathComponent("edit-\(next)")
                next += 1
                try FileManager.default.copyItem(at: template, to: copy)
                let changed = try SQLiteEdits.edit(
                    copy.appendingPathComponent(edit.file).path, edit.column, edit.variant)
                group.addTask {
                    defer { try? FileManager.default.removeItem(at: copy) }
                    guard changed else { return [] }
                    var failures: [String] = []
                    for command in Self.commands {
                        let result = try await Self.run(copy, key, command.arguments, stdin: command.stdin)
                        let name =
                            "\(edit.file) \(edit.column) \(edit.variant.rawValue): store "
                            + command.arguments.joined(separator: " ")
                        if result.uncaughtSignal {
                            failures.append("\(name): signal \(result.status)")
                        } else if ![0, 2, 64, 65].contains(result.status) {
                            failures.append("\(name): exit \(result.status): \(result.stderr)")
                        }
                    }
                    return failures
                }
            }
            for _ in 0..<4 { try start() }
            while let found = try await group.next() {
                failures += found
                try start()
            }
            return failures
        }
        #expect(outcomes.isEmpty, "\(outcomes.count) commands failed:\n\(outcomes.prefix(40).joined(separator: "\n"))")
    }
}
