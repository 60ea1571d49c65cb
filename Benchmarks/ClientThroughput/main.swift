// E3DBClient throughput against a running server: records written and read per second with 1 and 16 concurrent
// tasks. scripts/client-benchmark.sh runs it beside Tozny's Python SDK doing the same (ClientBaseline) against the
// same server, in the same run, and prints the ratios.
//
//   ClientThroughput API_URL TOKEN_FILE RECORDS TASKS...
// Prints one JSON line per measurement: {"sdk":"swift","op":"write"|"read","tasks":N,"records_per_second":X}.
import E3DBAsyncHTTPClient
import E3DBClient
import E3DBDocuments
import Foundation

let arguments = CommandLine.arguments
guard arguments.count >= 5, let records = Int(arguments[3]) else {
    FileHandle.standardError.write(Data("usage: ClientThroughput API_URL TOKEN_FILE RECORDS TASKS...\n".utf8))
    exit(64)
}
let apiURL = arguments[1]
let token = try String(contentsOfFile: arguments[2], encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
let taskCounts = arguments[4...].compactMap { Int($0) }
// CLIENT_AFFINITY=0 runs the tasks on the global executor instead of the transport's event loops.
let affinity = ProcessInfo.processInfo.environment["CLIENT_AFFINITY"] != "0"
func run<T: Sendable>(_ body: () async throws -> T) async throws -> T {
    affinity ? try await client.withTransportAffinity(body) : try await body()
}

func fields(_ i: Int) -> RecordData {
    var members: [(String, String)] = []
    for f in 0..<10 { members.append(("field\(f)", String(repeating: Character(UnicodeScalar(97 + (i + f) % 26)!), count: 32))) }
    return (try? RecordData(members)) ?? RecordData()
}

let transport = AsyncHTTPClientTransport()
let identity = try await E3DBClient.register(token: token, name: "bench-swift", apiURL: apiURL, transport: transport)
let client = try E3DBClient(identity: identity, transport: transport)
_ = try await client.write(type: "bench", data: fields(0))  // creates the access key and a token outside the timing

for tasks in taskCounts {
    let perTask = records / tasks
    var ids: [UUID] = []
    let writeStart = ContinuousClock.now
    try await withThrowingTaskGroup(of: [UUID].self) { group in
        for t in 0..<tasks {
            group.addTask {
                try await run {
                    var mine: [UUID] = []
                    for i in 0..<perTask { if let id = try await client.write(type: "bench", data: fields(t * perTask + i)).id { mine.append(id) } }
                    return mine
                }
            }
        }
        for try await part in group { ids += part }
    }
    let writeSeconds = (ContinuousClock.now - writeStart) / .seconds(1)
    print("{\"sdk\":\"swift\",\"op\":\"write\",\"tasks\":\(tasks),\"records_per_second\":\(Double(ids.count) / writeSeconds)}")
    let readStart = ContinuousClock.now
    let chunks = stride(from: 0, to: ids.count, by: max(ids.count / tasks, 1)).map { Array(ids[$0..<min($0 + max(ids.count / tasks, 1), ids.count)]) }
    var read = 0
    try await withThrowingTaskGroup(of: Int.self) { group in
        for chunk in chunks {
            group.addTask {
                try await run {
                    for id in chunk { _ = try await client.read(id) }
                    return chunk.count
                }
            }
        }
        for try await n in group { read += n }
    }
    let readSeconds = (ContinuousClock.now - readStart) / .seconds(1)
    print("{\"sdk\":\"swift\",\"op\":\"read\",\"tasks\":\(tasks),\"records_per_second\":\(Double(read) / readSeconds)}")
}
