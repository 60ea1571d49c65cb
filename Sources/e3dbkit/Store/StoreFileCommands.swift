import ArgumentParser
import E3DBCommandLine
import E3DBKit
import E3DBStore
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `e3dbkit store attach`: a file into the store's encrypted file tree.
struct StoreAttachCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attach",
        abstract: "Encrypt a file into the store's file tree at PATH; prints its entry as JSON.",
        discussion: """
            INPUT is any readable file or '-' for stdin, encrypted in constant memory as an E3DB v3 file beside the \
            database (files/<id>.e3f) under its own key; the entry (size, BLAKE2b-512) is committed only once the \
            body is complete. --record attaches it to a record. Paths are in clear (docs/store.md).
            """)

    @OptionGroup var keys: StoreKeyOptions

    @Option(help: "The id of the record the file belongs to.")
    var record: String?

    @Flag(help: "Replace an existing file at PATH.")
    var replace = false

    @Argument(help: "The path in the store's file tree (e.g. /docs/report.pdf).")
    var path: String

    @Argument(help: "The file to encrypt ('-' for stdin).")
    var input: String = "-"

    func run() throws {
        let recordID = try record.map(parseRecordID)
        let store = try keys.open()
        let (fd, owned) = try CLIInput.open(input, what: "input")
        defer { if owned { close(fd) } }
        var source = FileDescriptorSource(fileDescriptor: fd)
        let stored = try libraryCall("attaching \(input) as \(path)") {
            try store.putFile(at: path, from: &source, attachedTo: recordID, replace: replace)
        }
        try StandardOutput.line(CanonicalJSON.serialize(stored.jsonValue))
    }
}

/// `e3dbkit store cat`: a file of the tree, decrypted.
struct StoreCatCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cat",
        abstract: "Decrypt a file of the store's file tree to stdout or --out.",
        discussion: """
            To stdout nothing is written before the whole file authenticated (the body is read twice); --out is \
            written to a temporary file renamed only on success. --range START-END (END included) or START- reads \
            only the chunks holding those bytes. A damaged or swapped body exits 2, naming the file.
            """)

    @OptionGroup var keys: StoreKeyOptions

    @Option(help: "A plaintext byte range START-END or START-.")
    var range: PlaintextRange?

    @Option(help: "Write to this file instead of stdout.")
    var out: String?

    @Argument(help: "The path in the store's file tree.")
    var path: String

    func run() throws {
        let store = try keys.open()
        try libraryCall("reading \(path)") {
            let closed = try range.map { range throws(E3DBError) -> ClosedRange<Int> in
                guard let end = range.end else {
                    let size = try store.file(at: path).size
                    return range.start...max(range.start, size - 1)
                }
                return range.start...end
            }
            if let out {
                var sink = try createOutput(out)
                if let closed {
                    try store.readFile(at: path, range: closed, to: &sink)
                } else {
                    try store.readFile(at: path, to: &sink)
                }
                return
            }
            // Authenticate first: nothing reaches stdout from a body that does not verify.
            var discard = DiscardingByteSink()
            var stdout = FileDescriptorSink(fileDescriptor: STDOUT_FILENO)
            if let closed {
                try store.readFile(at: path, range: closed, to: &discard)
                try store.readFile(at: path, range: closed, to: &stdout)
            } else {
                try store.readFile(at: path, to: &discard)
                try store.readFile(at: path, to: &stdout)
            }
        }
    }
}

/// `e3dbkit store ls`: the entries of the file tree.
struct StoreListFilesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List the files under DIR (default /), or those attached to --record, as NDJSON sorted by path.")

    @OptionGroup var keys: StoreKeyOptions

    @Option(help: "Only the files attached to this record.")
    var record: String?

    @Argument(help: "A directory of the file tree.")
    var directory: String = "/"

    func validate() throws {
        if record != nil && directory != "/" { throw ValidationError("pass either DIR or --record, not both") }
    }

    func run() throws {
        let recordID = try record.map(parseRecordID)
        let store = try keys.open()
        let files = try libraryCall("listing \(directory)") {
            if let recordID { return try store.files(attachedTo: recordID) }
            return try store.files(under: directory)
        }
        for file in files { try StandardOutput.line(CanonicalJSON.serialize(file.jsonValue)) }
    }
}

/// `e3dbkit store mv`.
struct StoreMoveFileCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mv", abstract: "Move a file, or a directory of files, in the file tree; prints {\"moved\":N}.")

    @OptionGroup var keys: StoreKeyOptions

    @Argument(help: "The file or directory to move.")
    var source: String

    @Argument(help: "Its new path (it must not exist).")
    var destination: String

    func run() throws {
        let store = try keys.open()
        let moved = try libraryCall("moving \(source)") { try store.moveFile(from: source, to: destination) }
        try StandardOutput.line(CanonicalJSON.serialize(.object(["moved": .number(Double(moved))])))
    }
}

/// `e3dbkit store rm`.
struct StoreRemoveFileCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm", abstract: "Delete a file (with -r a directory of files); prints {\"deleted\":N}.")

    @OptionGroup var keys: StoreKeyOptions

    @Flag(name: [.short, .long], help: "Delete every file under PATH as well.")
    var recursive = false

    @Argument(help: "The path in the file tree.")
    var path: String

    func run() throws {
        let store = try keys.open()
        let deleted = try libraryCall("deleting \(path)") { try store.deleteFile(at: path, recursive: recursive) }
        try StandardOutput.line(CanonicalJSON.serialize(.object(["deleted": .number(Double(deleted))])))
    }
}

/// `e3dbkit store gc`.
struct StoreRemoveOrphansCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gc",
        abstract:
            "Remove what a crash left: file bodies no entry names, and old database files an interrupted rekey "
            + "left; prints {\"removed\":[…]}.")

    @OptionGroup var keys: StoreKeyOptions

    func run() throws {
        let store = try keys.open()
        let removed = try libraryCall("cleaning \(keys.store)") {
            try store.removeStaleDatabaseFiles() + store.removeOrphanFiles()
        }
        try StandardOutput.line(CanonicalJSON.serialize(.object(["removed": .array(removed.map { .string($0) })])))
    }
}
