import ArgumentParser
import E3DBClient
import E3DBCommandLine
import E3DBKit
import Foundation

struct ClientSearchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "search",
        abstract: "Search v2, one page; prints {\"next_token\":…,\"records\":[…],\"total_results\":…}.",
        discussion: """
            The term options make one match clause (--exclude-* the same terms, excluded): terms of one kind \
            match any of their values; --condition AND requires every kind to match (OR, the default, any). \
            --strategy is EXACT (default), FUZZY, WILDCARD or REGEXP. --range-key CREATED or MODIFIED with \
            --after/--before (RFC 3339) bounds the time. --request FILE takes the whole POST /v2/search body \
            instead of the term and range options ('-' for stdin); --limit, --next-token, --include-data and \
            --all-writers apply to it as well. A page's "next_token" (null on the last page) is the next page's \
            --next-token. Each record is printed as 'client read' prints it.
            """)

    @OptionGroup var config: ClientConfigOptions

    @OptionGroup var unsigned: AllowUnsignedFlag

    @Option(help: "A file holding the whole search request as JSON ('-' for stdin).")
    var request: String?

    @Option(help: "Match this record type (repeatable).")
    var type: [String] = []

    @Option(help: "Match this writer id (repeatable).")
    var writer: [String] = []

    @Option(help: "Match this user id (repeatable).")
    var user: [String] = []

    @Option(help: "Match this record id (repeatable).")
    var recordID: [String] = []

    @Option(help: "Match this plain metadata key (repeatable).")
    var key: [String] = []

    @Option(help: "Match this plain metadata value (repeatable).")
    var value: [String] = []

    @Option(help: ArgumentHelp("Match this plain metadata key and value (repeatable).", valueName: "name=value"))
    var tag: [String] = []

    @Option(help: "Exclude this record type (repeatable).")
    var excludeType: [String] = []

    @Option(help: "Exclude this writer id (repeatable).")
    var excludeWriter: [String] = []

    @Option(help: "How terms match: EXACT, FUZZY, WILDCARD or REGEXP.")
    var strategy: String?

    @Option(help: "AND: every kind of term must match; OR (default): any.")
    var condition: String?

    @Option(help: "CREATED or MODIFIED, for --after and --before.")
    var rangeKey: String?

    @Option(help: "Only records after this time (RFC 3339).")
    var after: String?

    @Option(help: "Only records before this time (RFC 3339).")
    var before: String?

    @Option(help: "Records per page.")
    var limit: Int?

    @Option(help: "The next_token of the previous page.")
    var nextToken: Int64?

    @Flag(help: "Decrypt and print the data (otherwise metadata only, data {}).")
    var includeData = false

    @Flag(help: "Every record you may read, not only your own.")
    var allWriters = false

    func validate() throws {
        if let limit, !(1...1000).contains(limit) { throw ValidationError("--limit must be from 1 to 1000") }
        if let nextToken, nextToken < 0 {
            throw ValidationError("--next-token must not be negative")
        }
        let termsGiven =
            !(type + writer + user + recordID + key + value + tag + excludeType + excludeWriter).isEmpty
            || [strategy, condition, rangeKey, after, before].contains { $0 != nil }
        if request != nil, termsGiven {
            throw ValidationError("--request takes the whole request: give the term and range options in it instead")
        }
    }

    /// The request the options describe (or the one --request names), with the page options applied.
    func searchRequest() throws -> API.SearchRequest {
        var body: API.SearchRequest
        if let request {
            let data = try CLIIO.readAll(request, what: "search request")
            do { body = try API.SearchRequest.decodeBody(data) } catch {
                throw CLIError(
                    "the search request \(CLIInput.display(request)) is not a search body: \(error)",
                    exitCode: ExitStatus.dataError)
            }
        } else {
            var tags: [String: String] = [:]
            for text in tag {
                guard let equals = text.firstIndex(of: "="), equals != text.startIndex else {
                    throw CLIError("--tag takes NAME=VALUE", exitCode: ExitStatus.usage)
                }
                tags[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            func ids(_ texts: [String], _ what: String) throws -> [String]? {
                guard !texts.isEmpty else { return nil }
                return try texts.map { try parseUUID($0, what: what).lowercasedString }
            }
            let terms = API.SearchClause.Terms(
                writerIDs: try ids(writer, "--writer"), userIDs: try ids(user, "--user"),
                recordIDs: try ids(recordID, "--record-id"), contentTypes: type.isEmpty ? nil : type,
                keys: key.isEmpty ? nil : key, values: value.isEmpty ? nil : value, tags: tags.isEmpty ? nil : tags)
            let excluded = API.SearchClause.Terms(
                writerIDs: try ids(excludeWriter, "--exclude-writer"),
                contentTypes: excludeType.isEmpty ? nil : excludeType)
            let hasExclusions = excluded != API.SearchClause.Terms()
            if (after != nil || before != nil) && rangeKey == nil {
                throw CLIError("--after and --before need --range-key CREATED or MODIFIED", exitCode: ExitStatus.usage)
            }
            body = API.SearchRequest(
                match: [API.SearchClause(condition: condition, strategy: strategy, terms: terms)],
                exclude: hasExclusions ? [API.SearchClause(strategy: strategy, terms: excluded)] : nil,
                range: rangeKey.map { API.SearchRange(rangeKey: $0, after: after, before: before) })
        }
        if let limit { body.limit = limit }
        if let nextToken { body.nextToken = nextToken }
        if includeData { body.includeData = true }
        if allWriters { body.includeAllWriters = true }
        return body
    }

    func run() async throws {
        let body = try searchRequest()
        let client = try config.client(allowUnsigned: unsigned.allowUnsigned)
        let page = try await libraryCall("searching") { try await client.search(body) }
        struct Line: Encodable {
            let records: [JSONValue]
            let nextToken: Int64?
            let totalResults: Int
            enum CodingKeys: String, CodingKey {
                case records, nextToken = "next_token", totalResults = "total_results"
            }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(records, forKey: .records)
                try c.encode(nextToken, forKey: .nextToken)  // null on the last page
                try c.encode(totalResults, forKey: .totalResults)
            }
        }
        try StandardOutput.line(
            jsonLine(
                Line(
                    records: try page.records.map(recordValue), nextToken: page.nextToken,
                    totalResults: page.totalResults)))
    }
}
