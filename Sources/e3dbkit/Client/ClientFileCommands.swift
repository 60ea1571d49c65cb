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

struct ClientFilePutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "put",
        abstract: "Encrypt and upload a file (constant memory); prints the file record's {\"meta\":…,\"data\":{}}.")

    @OptionGroup var config: ClientConfigOptions

    @Option(help: "The record type.")
    var type: String

    @Option(help: "A file holding a JSON object of strings for meta.plain ('-' for stdin).")
    var plain: String?

    @Flag(help: "Report the encryption's progress on stderr (the upload follows it).")
    var progress = false

    @Argument(help: "The file to encrypt and upload.")
    var file: String

    func run() async throws {
        let client = try config.client()
        let plainValues = try plain.map { try DocumentCLI.recordData($0, what: "plain") } ?? RecordData()
        let report = ClientFileProgress(label: "encrypt", enabled: progress)
        try await printRecord("uploading \(file)") {
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
        let client = try config.client()
        let report = ClientFileProgress(label: "download", enabled: progress)
        try await printRecord("downloading file \(id.lowercasedString)") {
            defer { report.end() }
            return try await client.readFile(id, to: out, verifyChecksum: verifyChecksum, progress: report.callback)
        }
    }
}
