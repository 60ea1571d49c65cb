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

struct StoreVerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract:
            "Authenticate and decrypt every record and file, compare the query tables with the records, check the "
            + "database file; report each problem by id, index or path and go on (exit 65 if the file is damaged, "
            + "else 2 if any problem).")

    @OptionGroup var keys: StoreKeyOptions

    func run() throws {
        let store = try keys.open()
        let report = try libraryCall("verifying \(keys.store)") { try store.verify() }
        for problem in report.problems {
            StandardError.line("e3dbkit: \(problem.context.item ?? "?"): \(problem.code.rawValue): \(problem.message)")
        }
        try StandardOutput.line(
            CanonicalJSON.serialize(
                .object([
                    "checked": .number(Double(report.recordsChecked)), "files": .number(Double(report.filesChecked)),
                    "problems": .number(Double(report.problems.count)),
                    "database": .string(store.databaseEncryption.rawValue),
                ])))
        if report.problems.contains(where: { $0.code == .storeCorrupted }) { throw ExitStatus.dataError }
        if !report.problems.isEmpty { throw ExitStatus.authentication }
    }
}

struct StoreStatsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract:
            "Print record counts per collection, the database size, whether its file is encrypted and the store's write counter (for --min-write-counter)."
    )

    @OptionGroup var keys: StoreKeyOptions

    func run() throws {
        let store = try keys.open()
        let stats = try libraryCall("reading \(keys.store)") { try store.statistics() }
        let counter = try libraryCall("reading \(keys.store)") { try store.writeCounter }
        var collections = JSONObject()
        for (name, count) in stats.recordsPerCollection.sorted(by: { $0.key < $1.key }) {
            collections[name] = .number(Double(count))
        }
        try StandardOutput.line(
            CanonicalJSON.serialize(
                .object([
                    "collections": .object(collections), "database_bytes": .number(Double(stats.databaseBytes)),
                    "database": .string(stats.databaseEncryption.rawValue),
                    "store_id": .string(store.storeID.lowercasedString), "write_counter": .number(Double(counter)),
                ])))
    }
}
