import ArgumentParser
import E3DBClient
import E3DBCommandLine
import E3DBKit
import Foundation

struct ClientFileCommand: SubcommandGroup {
    static let configuration = CommandConfiguration(
        commandName: "file", abstract: "Large files (E3DB file format v3) through the server's file flow.",
        subcommands: [ClientFilePutCommand.self, ClientFileGetCommand.self])
}

/// `--file-origin` and `E3DBKIT_FILE_ORIGINS`: where else than the API's origin file bodies may be uploaded to and
/// downloaded from (an object store's presigned URLs). The API's origin stays the only default.
struct FileOriginOptions: ParsableArguments {
    @Option(
        name: .customLong("file-origin"),
        help: ArgumentHelp(
            "Also upload and download file bodies on this origin, scheme://host[:port] (repeatable; "
                + "default: $E3DBKIT_FILE_ORIGINS, comma-separated).",
            discussion: "A server on an object store (e3dbkit-server run --s3-…) hands out presigned URLs on the "
                + "store's public endpoint; without it such a URL is refused (exit 2), as any file_url off the API's "
                + "origin.",
            valueName: "origin"))
    var fileOrigins: [String] = []

    /// The origins of `--file-origin`, else of `E3DBKIT_FILE_ORIGINS` (comma-separated, blanks around each
    /// ignored), each `http(s)://host[:port]` with no path, query, fragment or user.
    /// - Throws: a usage error (exit 64) naming the origin that is not one and where it came from.
    func origins() throws -> Set<String> {
        let given: [String]
        let source: String
        if fileOrigins.isEmpty {
            let environment = ProcessInfo.processInfo.environment["E3DBKIT_FILE_ORIGINS"] ?? ""
            given = environment.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty }
            source = "E3DBKIT_FILE_ORIGINS"
        } else {
            given = fileOrigins
            source = "--file-origin"
        }
        var origins: Set<String> = []
        for text in given {
            let c = URLComponents(string: text)
            guard let c, let scheme = c.scheme?.lowercased(), scheme == "http" || scheme == "https",
                c.host?.isEmpty == false, c.user == nil, c.password == nil, c.path.isEmpty || c.path == "/",
                c.query == nil, c.fragment == nil
            else {
                throw CLIError(
                    "\(source): \(String(String(reflecting: text).prefix(200))) is not an origin: "
                        + "http://HOST[:PORT] or https://HOST[:PORT], without a path", exitCode: ExitStatus.usage)
            }
            origins.insert(text.hasSuffix("/") ? String(text.dropLast()) : text)
        }
        return origins
    }
}

/// ``printRecord(_:_:)`` for the file commands: a file URL off the allowed origins says how to allow it.
func printFileRecord(_ doing: String, _ call: () async throws -> ClientRecord) async throws {
    try await printRecord(doing) {
        do { return try await call() } catch let error as E3DBError where error.code == .foreignFileURL {
            throw CLIError(
                "\(doing): \(error.message); e3dbkit allows another origin with --file-origin ORIGIN or "
                    + "E3DBKIT_FILE_ORIGINS=ORIGIN[,ORIGIN…]", exitCode: ExitStatus.authentication)
        }
    }
}

struct ClientFilePutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "put",
        abstract: "Encrypt and upload a file (constant memory); prints the file record's {\"meta\":…,\"data\":{}}.")

    @OptionGroup var config: ClientConfigOptions

    @OptionGroup var files: FileOriginOptions

    @Option(help: "The record type.")
    var type: String

    @Option(help: "A file holding a JSON object of strings for meta.plain ('-' for stdin).")
    var plain: String?

    @Flag(help: "Report the encryption's progress on stderr (the upload follows it).")
    var progress = false

    @Argument(help: "The file to encrypt and upload.")
    var file: String

    func run() async throws {
        let client = try config.client(fileOrigins: try files.origins())
        let plainValues = try plain.map { try DocumentCLI.recordData($0, what: "plain") } ?? RecordData()
        let report = ClientFileProgress(label: "encrypt", enabled: progress)
        try await printFileRecord("uploading \(file)") {
            defer { report.end() }
            return try await client.writeFile(type: type, path: file, plain: plainValues, progress: report.callback)
        }
    }
}

struct ClientFileGetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Download and decrypt a file record into OUT, which appears only after the whole file authenticated.")

    @OptionGroup var config: ClientConfigOptions

    @OptionGroup var files: FileOriginOptions

    @Flag(help: "Replace OUT if it exists.")
    var force = false

    @Flag(help: "Report the download's progress on stderr (ciphertext bytes decrypted as they arrive).")
    var progress = false

    @Flag(
        help: ArgumentHelp(
            "Also check the body's MD5 against the record's file_meta.checksum.",
            discussion: "Every chunk is authenticated either way; the MD5 also catches another file's body served "
                + "for this record under the same access key, and roughly doubles the CPU a download costs."))
    var verifyChecksum = false

    @Argument(help: "The file record's id.")
    var recordID: String

    @Argument(help: "Where to write the plaintext.")
    var out: String

    func run() async throws {
        let id = try parseUUID(recordID, what: "RECORD_ID")
        try OutputFile.refuseExisting(out, force: force)
        let client = try config.client(fileOrigins: try files.origins())
        let report = ClientFileProgress(label: "download", enabled: progress)
        try await printFileRecord("downloading file \(id.lowercasedString)") {
            defer { report.end() }
            return try await client.readFile(id, to: out, verifyChecksum: verifyChecksum, progress: report.callback)
        }
    }
}
