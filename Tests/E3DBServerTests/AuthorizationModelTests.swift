import E3DBAPI
import E3DBCanonicalJSON
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import HTTPTypes
import Testing

@testable import E3DBClient

/// Who may read, change and delete what on `e3dbkit-server run`, as a model-based test: five clients write,
/// read, update and delete records of three types, share and revoke `read` as writers and as authorizers (with
/// any target, the forbidden ones included), add and remove authorizers (per type and with the delete-all
/// endpoint), put, delete and get access keys, search (v1 and v2) and list policies, in a seeded random order.
/// Every step's status and answer, and a probe of the state it touched, are checked against a small reference
/// model (spec api §4, §4.7); every 500 steps and at the end, every client's searches, listings and access keys
/// are checked too. A mismatch is shrunk (delta debugging on fresh servers) and reported as a list of steps.
///
/// `E3DB_MODEL_SEED` replays a run, `E3DB_MODEL_STEPS` sets its length (3000 steps on SQLite, 400 on PostgreSQL;
/// 8000 take about a minute on SQLite and two on PostgreSQL).
@Suite("Authorization model: random operations against e3dbkit-server", .serialized, .postgresServer)
struct AuthorizationModelTests {
    @Test(
        "random operations by five clients on three types agree with the reference model after every step",
        .timeLimit(.minutes(10)), arguments: ClientTestBackend.allCases)
    func randomOperations(backend: ClientTestBackend) async throws {
        let environment = ProcessInfo.processInfo.environment
        let seed = environment["E3DB_MODEL_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0...UInt64.max)
        let count = environment["E3DB_MODEL_STEPS"].flatMap { Int($0) } ?? (backend == .sqlite ? 3000 : 400)
        print("authorization model (\(backend)): seed \(seed), \(count) steps; replay with E3DB_MODEL_SEED=\(seed)")
        let started = ContinuousClock.now
        guard let session = try await ModelRun.start(backend) else { return }
        var generator = StepGenerator(seed: seed)
        let outcome = await session.run(count: count) { model in generator.next(model) }
        await session.stop()
        print("authorization model (\(backend)): \(outcome.steps.count) steps in \(ContinuousClock.now - started)")
        guard outcome.failed else { return }
        let shrunk = await Shrinker(backend: backend, budget: .seconds(60)).shrink(outcome)
        let report = """
            authorization model (\(backend), seed \(seed)): the server disagrees with the model after \
            \(outcome.steps.count) steps; shrunk to \(shrunk.outcome.steps.count) steps \
            (\(shrunk.runs) runs on fresh servers, \(shrunk.elapsed)\(shrunk.stopped.map { "; \($0)" } ?? "")):
            \(shrunk.outcome.render())
            replay: E3DB_MODEL_SEED=\(seed) E3DB_MODEL_STEPS=\(count)
            """
        Issue.record(Comment(rawValue: report))
    }
}

// MARK: - Steps

/// The tuple (writer, writer, reader, type) of an access key or a policy, by client and type index.
struct ModelTuple: Hashable, Sendable, CustomStringConvertible {
    var writer: Int
    var reader: Int
    var type: Int
    var description: String { "(c\(writer),c\(writer),c\(reader),t\(type))" }
}

enum PolicyVerb: String, Sendable { case read, authorizer }

enum ListingKind: String, Sendable, CaseIterable { case outgoing, incoming, proxies, granted }

/// One operation: clients are c0…c4 (by index), types t0…t2, records r0, r1, … in the order of their write steps
/// (a step whose record was never written, in a shrunk sequence, is skipped).
enum ModelStep: Sendable, Hashable, CustomStringConvertible {
    case write(Int, record: Int, type: Int)
    case read(Int, record: Int)
    case update(Int, record: Int, currentVersion: Bool, value: Int)
    case delete(Int, record: Int, currentVersion: Bool)
    case policy(Int, ModelTuple, PolicyVerb, allow: Bool)
    /// `DELETE /v1/storage/policy/{writer}/{writer}/{reader}`: the reader is no longer an authorizer of any type.
    case removeAuthorizer(Int, writer: Int, reader: Int)
    case putKey(Int, ModelTuple, eak: Int)
    case deleteKey(Int, ModelTuple)
    case getKey(Int, ModelTuple)
    /// v1 (`POST /v1/storage/search`) or v2 (`POST /v2/search`) with `include_all_writers`, or only one writer's.
    case search(Int, v2: Bool, writer: Int?)
    case listing(Int, ListingKind)

    var description: String {
        switch self {
        case .write(let c, let r, let t): "c\(c) writes r\(r) (t\(t))"
        case .read(let c, let r): "c\(c) reads r\(r)"
        case .update(let c, let r, let current, let v):
            "c\(c) updates r\(r) to r\(r).u\(v) with \(current ? "its current" : "a stale") version"
        case .delete(let c, let r, let current):
            "c\(c) deletes r\(r) with \(current ? "its current" : "a stale") version"
        case .policy(let c, let t, let verb, let allow):
            "c\(c) PUT policy \(allow ? "allow" : "deny") \(verb.rawValue) on \(t)"
        case .removeAuthorizer(let c, let w, let x): "c\(c) DELETE policy c\(w)/c\(w)/c\(x) (all authorizer grants)"
        case .putKey(let c, let t, let eak): "c\(c) PUT access key \(t) = eak-\(eak)"
        case .deleteKey(let c, let t): "c\(c) DELETE access key \(t)"
        case .getKey(let c, let t): "c\(c) GET access key \(t)"
        case .search(let c, let v2, let w):
            "c\(c) \(v2 ? "v2" : "v1") search, " + (w.map { "writer c\($0)" } ?? "include_all_writers")
        case .listing(let c, let kind): "c\(c) GET policy/\(kind.rawValue)"
        }
    }

    /// Whether the step can change the server's state (the others only look).
    var changes: Bool {
        switch self {
        case .read, .getKey, .search, .listing: false
        default: true
        }
    }

    /// The record a step names, if any.
    var record: Int? {
        switch self {
        case .read(_, let r), .update(_, let r, _, _), .delete(_, let r, _): r
        default: nil
        }
    }
}

// MARK: - The reference model

/// What the server should hold: records, `read` and `authorizer` policies, access keys.
struct AuthorizationModel {
    struct Record {
        let writer: Int
        let type: Int
        var data: String
        var version: String
        var alive = true
    }

    struct Key: Equatable {
        var eak: String
        var authorizer: Int
    }

    var records: [Int: Record] = [:]
    var reads: Set<ModelTuple> = []
    var authorizers: Set<ModelTuple> = []
    var keys: [ModelTuple: Key] = [:]

    func isAuthorizer(_ client: Int, writer: Int, type: Int) -> Bool {
        authorizers.contains(ModelTuple(writer: writer, reader: client, type: type))
    }

    func mayRead(_ client: Int, _ record: Record) -> Bool {
        record.alive
            && (client == record.writer
                || reads.contains(ModelTuple(writer: record.writer, reader: client, type: record.type)))
    }

    /// Whether `caller` may put or delete the access key of `t`, or allow or deny `read` on it: the writer, or an
    /// authorizer of (writer, type) for a reader that is not the writer, not the authorizer itself and not an
    /// authorizer.
    func mayShare(_ caller: Int, _ t: ModelTuple) -> Bool {
        if caller == t.writer { return true }
        return isAuthorizer(caller, writer: t.writer, type: t.type) && t.reader != t.writer && t.reader != caller
            && !isAuthorizer(t.reader, writer: t.writer, type: t.type)
    }

    /// The authorizers of the tuple's (writer, type), for the step list.
    func authorizersNote(_ t: ModelTuple) -> String {
        let names = (0..<ModelRun.clientCount).filter { isAuthorizer($0, writer: t.writer, type: t.type) }
            .map { "c\($0)" }
        return "authorizers of c\(t.writer)/t\(t.type): " + (names.isEmpty ? "none" : names.joined(separator: ","))
    }
}

// MARK: - Observations

/// A status and the items of an answer (records, listing rows, a key), as the model expects them or as the server
/// gave them; equal or not.
struct Observation: Equatable, CustomStringConvertible {
    var status: Int
    var items: Set<String> = []
    /// A transport failure or an answer that does not decode.
    var problem: String?

    var description: String {
        if let problem { return "\(status == 0 ? "no answer" : "\(status)") (\(problem))" }
        guard !items.isEmpty else { return "\(status)" }
        if items.count > 4 { return "\(status) (\(items.count) items)" }
        return "\(status) [\(items.sorted().joined(separator: "; "))]"
    }
}

/// One check of a step: what was asked, what the model expected, what the server answered.
struct ModelCheck {
    var what: String
    var expected: Observation
    var actual: Observation
    var matches: Bool { expected == actual }

    var difference: String {
        let sameStatus = expected.status == actual.status && expected.problem == nil && actual.problem == nil
        var lines = [
            sameStatus
                ? "\(what): \(actual.status) as expected, but not the expected items"
                : "\(what): expected \(expected), got \(actual)"
        ]
        let missing = expected.items.subtracting(actual.items).sorted()
        let extra = actual.items.subtracting(expected.items).sorted()
        if !missing.isEmpty { lines.append("    missing: \(missing.joined(separator: "; "))") }
        if !extra.isEmpty { lines.append("    unexpected: \(extra.joined(separator: "; "))") }
        return lines.joined(separator: "\n")
    }
}

/// A step (or the audit after one) and its checks; `skipped` when it names a record that was never written.
struct ModelEntry {
    var step: ModelStep?
    var context: String?
    var checks: [ModelCheck] = []
    var skipped = false
    var failed: Bool { checks.contains { !$0.matches } }
}

/// The steps of a run and what each did; it stops at the first mismatch.
struct ModelOutcome {
    var steps: [ModelStep] = []
    var entries: [ModelEntry] = []
    var failed: Bool { entries.last?.failed == true }

    /// The steps with what the model expected and what the server did; the last `limit` of them when there are
    /// more (an unshrunk run: its seed replays it whole).
    func render(limit: Int = 200) -> String {
        var lines: [String] = []
        var number = 0
        for entry in entries {
            let head: String
            if let step = entry.step {
                number += 1
                head = "\(number). \(step)" + (entry.context.map { " [\($0)]" } ?? "")
            } else {
                head = "   audit after step \(number)"
            }
            if entry.skipped {
                lines.append(head + ": skipped (its record was never written)")
                continue
            }
            let failing = entry.checks.first { !$0.matches }
            if let failing {
                lines.append(head + ":  <-- MISMATCH")
                // A step's checks before the failing one (an audit's are many: only its failing one is shown).
                for check in entry.checks.prefix(while: { $0.matches }) where entry.step != nil {
                    lines.append("     \(check.what): expected and got \(check.actual)")
                }
                lines.append("     " + failing.difference.replacingOccurrences(of: "\n", with: "\n     "))
            } else if let first = entry.checks.first {
                let probes = entry.checks.dropFirst().map { "\($0.what): \($0.actual)" }
                lines.append(
                    head + ": expected and got \(first.actual)"
                        + (probes.isEmpty ? "" : "; " + probes.joined(separator: "; ")))
            } else {
                lines.append(head)
            }
        }
        let shown = lines.suffix(limit)
        let note = shown.count < lines.count ? ["(\(lines.count - shown.count) earlier lines not shown)"] : []
        return (note + shown).map { "  " + $0 }.joined(separator: "\n")
    }
}

// MARK: - Running steps against a server

/// One server with five registered clients, and the model of what it should hold.
final class ModelRun {
    static let clientCount = 5
    static let typeCount = 3
    /// The full audit (every client's searches, listings and keys) runs after every this many steps.
    static let auditInterval = 500
    /// A version no record has.
    static let staleVersion = "00000000-0000-4000-8000-000000000000"
    static let anyStatus = Set(100..<600)

    let server: ServerProcess
    let clients: [E3DBClient]
    let ids: [String]
    var model = AuthorizationModel()
    var recordIDs: [Int: String] = [:]
    var labels: [String: Int] = [:]

    private init(server: ServerProcess, clients: [E3DBClient]) {
        self.server = server
        self.clients = clients
        ids = clients.map { $0.clientID.uuidString.lowercased() }
    }

    /// A fresh server of `backend` (a new data directory or database) with clients c0…c4; nil when the backend
    /// is not installed.
    static func start(_ backend: ClientTestBackend) async throws -> ModelRun? {
        guard let server = try await backend.start() else { return nil }
        do {
            var clients: [E3DBClient] = []
            for i in 0..<clientCount { clients.append(try await server.register("c\(i)")) }
            return ModelRun(server: server, clients: clients)
        } catch {
            await server.stopped()
            throw error
        }
    }

    func stop() async {
        let server = self.server
        await server.stopped()
    }

    /// Runs `count` steps from `next` (given the model before each), with the audits, until the first mismatch.
    func run(count: Int, next: (AuthorizationModel) -> ModelStep) async -> ModelOutcome {
        var outcome = ModelOutcome()
        for i in 0..<count {
            let step = next(model)
            outcome.steps.append(step)
            outcome.entries.append(await perform(step))
            if outcome.failed { break }
            if (i + 1) % Self.auditInterval == 0 || i == count - 1 {
                let audit = await self.audit()
                if audit.failed {
                    outcome.entries.append(audit)
                    break
                }
            }
        }
        return outcome
    }

    /// Runs `steps` as given (a replay).
    func replay(_ steps: [ModelStep]) async -> ModelOutcome {
        var remaining = steps[...]
        return await run(count: steps.count) { _ in remaining.removeFirst() }
    }

    // MARK: HTTP

    /// One request by client `c` with its Bearer token, through the client library's own sender; any status.
    private func call(_ c: Int, _ method: String, _ path: [String], json: (some APIBody)? = Optional<API.NoBody>.none)
        async -> (status: Int, body: Data)
    {
        do {
            let (body, response) = try await clients[c].send(
                method, path, body: try json.map { try $0.encodeBody() },
                operation: "authorization model", idempotent: false,
                expect: Self.anyStatus)
            return (response.status.code, body)
        } catch {
            return (0, Data("\(error)".utf8))
        }
    }

    /// The status and, for a 2xx answer, what `items` makes of its decoded body.
    private func observe<T: APIBody>(
        _ reply: (status: Int, body: Data), as type: T.Type,
        items: (T) -> Set<String>
    ) -> Observation {
        guard reply.status != 0 else {
            return Observation(status: 0, problem: String(decoding: reply.body, as: UTF8.self))
        }
        guard (200..<300).contains(reply.status) else { return Observation(status: reply.status) }
        do {
            return Observation(status: reply.status, items: items(try T.decodeBody(reply.body)))
        } catch {
            return Observation(
                status: reply.status,
                problem: "undecodable: " + String(decoding: reply.body.prefix(200), as: UTF8.self))
        }
    }

    private func name(_ id: String) -> String {
        ids.firstIndex(of: id.lowercased()).map { "c\($0)" } ?? "?\(id.prefix(8))"
    }

    private func label(_ id: String?) -> String {
        guard let id else { return "?no-id" }
        return labels[id.lowercased()].map { "r\($0)" } ?? "?\(id.prefix(8))"
    }

    private static func short(_ version: String?) -> String { String((version ?? "none").prefix(8)) }

    private static func fields(_ data: RecordData) -> String {
        data.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
    }

    // MARK: Model items

    private func expectedRecord(_ label: Int) -> String {
        let r = model.records[label]!
        return "r\(label) by c\(r.writer) t\(r.type) v\(Self.short(r.version)) f=\(r.data)"
    }

    private func actualRecord(_ record: API.Record, version: Bool = true) -> String {
        "\(label(record.meta.recordID)) by \(name(record.meta.writerID)) \(record.meta.type)"
            + (version ? " v\(Self.short(record.meta.version))" : "") + " \(Self.fields(record.data))"
    }

    private func expectedKey(_ t: ModelTuple) -> Observation {
        guard let key = model.keys[t] else { return Observation(status: 404) }
        return Observation(status: 200, items: ["\(key.eak) by c\(key.authorizer)"])
    }

    private func keyItem(_ info: API.EAKInfo?) -> String {
        info.map { "\($0.eak) by \(name($0.authorizerID))" } ?? "none"
    }

    // MARK: Steps

    /// Runs one step: its request, checked against the model; on agreement the model takes the step's effect and
    /// a probe reads back the state the step touched.
    func perform(_ step: ModelStep) async -> ModelEntry {
        var entry = ModelEntry(step: step)
        if let r = step.record, recordIDs[r] == nil {
            entry.skipped = true
            return entry
        }
        switch step {
        case .write(let c, let r, let t):
            let body = API.Record(
                meta: .init(writerID: ids[c], userID: ids[c], type: "t\(t)", plain: ["label": "r\(r)"]),
                data: ["f": "r\(r)"])
            let reply = await call(c, "POST", ["v1", "storage", "records"], json: body)
            var written: API.Record?
            let actual = observe(reply, as: API.Record.self) { record in
                written = record
                return ["\(self.name(record.meta.writerID)) \(record.meta.type) \(Self.fields(record.data))"]
            }
            let expected = Observation(status: 201, items: ["c\(c) t\(t) f=r\(r)"])
            entry.checks.append(ModelCheck(what: "write", expected: expected, actual: actual))
            guard !entry.failed, let written, let id = written.meta.recordID?.lowercased() else { return entry }
            recordIDs[r] = id
            labels[id] = r
            model.records[r] = .init(writer: c, type: t, data: "r\(r)", version: written.meta.version ?? "")

        case .read(let c, let r):
            entry.checks.append(await readCheck(c, r, what: "read"))

        case .update(let c, let r, let current, let value):
            let record = model.records[r]!
            let version = current ? record.version : Self.staleVersion
            let data = "r\(r).u\(value)"
            let w = ids[record.writer]
            let body = API.Record(
                meta: .init(writerID: w, userID: w, type: "t\(record.type)", plain: ["label": "r\(r)"]),
                data: ["f": data])
            let reply = await call(c, "PUT", ["v1", "storage", "records", "safe", recordIDs[r]!, version], json: body)
            let expected: Observation
            if !record.alive || c != record.writer {
                expected = Observation(status: 403)
            } else if !current {
                expected = Observation(status: 409)
            } else {
                expected = Observation(
                    status: 200,
                    items: ["r\(r) by c\(record.writer) t\(record.type) f=\(data) new version"])
            }
            var newVersion: String?
            let actual = observe(reply, as: API.Record.self) { updated in
                newVersion = updated.meta.version
                return [
                    self.actualRecord(updated, version: false)
                        + (updated.meta.version != record.version ? " new version" : " same version")
                ]
            }
            entry.context = "writer c\(record.writer)" + (record.alive ? "" : ", deleted")
            entry.checks.append(ModelCheck(what: "update", expected: expected, actual: actual))
            guard !entry.failed else { return entry }
            if expected.status == 200 {
                model.records[r]!.data = data
                model.records[r]!.version = newVersion ?? ""
            }
            entry.checks.append(await readCheck(record.writer, r, what: "then c\(record.writer) reads r\(r)"))

        case .delete(let c, let r, let current):
            let record = model.records[r]!
            let version = current ? record.version : Self.staleVersion
            let reply = await call(c, "DELETE", ["v1", "storage", "records", "safe", recordIDs[r]!, version])
            let expected = Observation(status: !record.alive || c != record.writer ? 403 : current ? 204 : 409)
            entry.context = "writer c\(record.writer)" + (record.alive ? "" : ", deleted")
            entry.checks.append(
                ModelCheck(
                    what: "delete", expected: expected,
                    actual: Observation(status: reply.status)))
            guard !entry.failed else { return entry }
            if expected.status == 204 { model.records[r]!.alive = false }
            entry.checks.append(await readCheck(record.writer, r, what: "then c\(record.writer) reads r\(r)"))

        case .policy(let c, let t, let verb, let allow):
            entry.context = model.authorizersNote(t)
            let body = API.PolicyRequest(
                allow: allow ? [[verb.rawValue: .object([:])]] : nil,
                deny: allow ? nil : [[verb.rawValue: .object([:])]])
            let path = ["v1", "storage", "policy", ids[t.writer], ids[t.writer], ids[t.reader], "t\(t.type)"]
            let reply = await call(c, "PUT", path, json: body)
            let permitted = c == t.writer || (verb == .read && model.mayShare(c, t))
            entry.checks.append(
                ModelCheck(
                    what: "policy", expected: Observation(status: permitted ? 201 : 403),
                    actual: Observation(status: reply.status)))
            guard !entry.failed else { return entry }
            if permitted {
                switch (verb, allow) {
                case (.read, true): model.reads.insert(t)
                case (.read, false): model.reads.remove(t)
                case (.authorizer, true): model.authorizers.insert(t)
                case (.authorizer, false): model.authorizers.remove(t)
                }
            }
            let probe: ListingKind = verb == .read ? .incoming : .granted
            entry.checks.append(
                await listingCheck(
                    t.reader, probe,
                    what: "then c\(t.reader) GET policy/\(probe.rawValue)"))

        case .removeAuthorizer(let c, let w, let x):
            let reply = await call(c, "DELETE", ["v1", "storage", "policy", ids[w], ids[w], ids[x]])
            entry.checks.append(
                ModelCheck(
                    what: "delete policy", expected: Observation(status: c == w ? 200 : 403),
                    actual: Observation(status: reply.status)))
            guard !entry.failed else { return entry }
            if c == w { model.authorizers = model.authorizers.filter { $0.writer != w || $0.reader != x } }
            entry.checks.append(await listingCheck(x, .granted, what: "then c\(x) GET policy/granted"))
            if !entry.failed {
                entry.checks.append(await listingCheck(x, .incoming, what: "then c\(x) GET policy/incoming"))
            }

        case .putKey(let c, let t, let eak):
            entry.context = model.authorizersNote(t)
            let reply = await call(c, "PUT", keyPath(t), json: API.PutAccessKeyRequest(eak: "eak-\(eak)"))
            let permitted = model.mayShare(c, t)
            let status = !permitted ? 403 : model.keys[t] == nil ? 201 : 409
            entry.checks.append(
                ModelCheck(
                    what: "put key", expected: Observation(status: status),
                    actual: Observation(status: reply.status)))
            guard !entry.failed else { return entry }
            if status == 201 { model.keys[t] = .init(eak: "eak-\(eak)", authorizer: c) }
            entry.checks.append(await keyCheck(t.reader, t, what: "then c\(t.reader) GET the key"))

        case .deleteKey(let c, let t):
            entry.context = model.authorizersNote(t)
            let reply = await call(c, "DELETE", keyPath(t))
            let permitted = model.mayShare(c, t)
            entry.checks.append(
                ModelCheck(
                    what: "delete key", expected: Observation(status: permitted ? 204 : 403),
                    actual: Observation(status: reply.status)))
            guard !entry.failed else { return entry }
            if permitted { model.keys[t] = nil }
            entry.checks.append(await keyCheck(t.reader, t, what: "then c\(t.reader) GET the key"))

        case .getKey(let c, let t):
            entry.checks.append(await keyCheck(c, t, what: "get key"))

        case .search(let c, let v2, let w):
            entry.checks.append(await searchCheck(c, v2: v2, writer: w, what: "search"))

        case .listing(let c, let kind):
            entry.checks.append(await listingCheck(c, kind, what: kind.rawValue))
        }
        return entry
    }

    private func keyPath(_ t: ModelTuple) -> [String] {
        ["v1", "storage", "access_keys", ids[t.writer], ids[t.writer], ids[t.reader], "t\(t.type)"]
    }

    private func readCheck(_ c: Int, _ r: Int, what: String) async -> ModelCheck {
        let reply = await call(c, "GET", ["v1", "storage", "records", recordIDs[r]!])
        let expected =
            model.mayRead(c, model.records[r]!)
            ? Observation(status: 200, items: [expectedRecord(r)]) : Observation(status: 404)
        return ModelCheck(
            what: what, expected: expected,
            actual: observe(reply, as: API.Record.self) { [self.actualRecord($0)] })
    }

    private func keyCheck(_ c: Int, _ t: ModelTuple, what: String) async -> ModelCheck {
        let reply = await call(c, "GET", keyPath(t))
        let expected = c == t.reader ? expectedKey(t) : Observation(status: 403)
        return ModelCheck(
            what: what, expected: expected,
            actual: observe(reply, as: API.EAKInfo.self) { [self.keyItem($0)] })
    }

    private func listingCheck(_ c: Int, _ kind: ListingKind, what: String) async -> ModelCheck {
        let reply = await call(c, "GET", ["v1", "storage", "policy", kind.rawValue])
        func grant(_ t: ModelTuple) -> String {
            "authorizer c\(t.reader) writer c\(t.writer) user c\(t.writer) t\(t.type) by c\(t.writer)"
        }
        let expected: Set<String>
        let actual: Observation
        switch kind {
        case .outgoing:
            expected = Set(model.reads.filter { $0.writer == c }.map { "c\($0.reader) t\($0.type)" })
            actual = observe(reply, as: [API.OutgoingSharing].self) {
                Set($0.map { "\(self.name($0.readerID)) \($0.recordType)" })
            }
        case .incoming:
            expected = Set(model.reads.filter { $0.reader == c }.map { "c\($0.writer) t\($0.type)" })
            actual = observe(reply, as: [API.IncomingSharing].self) {
                Set($0.map { "\(self.name($0.writerID)) \($0.recordType)" })
            }
        case .proxies, .granted:
            expected = Set(model.authorizers.filter { kind == .proxies ? $0.writer == c : $0.reader == c }.map(grant))
            actual = observe(reply, as: [API.AuthorizerPolicy].self) {
                Set(
                    $0.map {
                        "authorizer \(self.name($0.authorizerID)) writer \(self.name($0.writerID)) "
                            + "user \(self.name($0.userID)) \($0.recordType) by \(self.name($0.authorizedBy))"
                    })
            }
        }
        return ModelCheck(what: what, expected: Observation(status: 200, items: expected), actual: actual)
    }

    /// A search of everything `c` may read (or only `writer`'s records), all pages.
    private func searchCheck(_ c: Int, v2: Bool, writer: Int?, what: String) async -> ModelCheck {
        var expected = Set(
            model.records.keys.filter { label in
                let r = model.records[label]!
                return model.mayRead(c, r) && (writer == nil || r.writer == writer)
            }.map { label in
                let r = model.records[label]!
                let key = model.keys[ModelTuple(writer: r.writer, reader: c, type: r.type)]
                return expectedRecord(label) + " key=" + (key.map { "\($0.eak) by c\($0.authorizer)" } ?? "none")
            })
        func item(_ result: API.SearchResult) -> String {
            actualRecord(API.Record(meta: result.meta, data: result.recordData ?? [:]))
                + (result.recordData == nil ? " no data" : "") + " key=" + keyItem(result.accessKey)
        }
        var actual = Observation(status: 200)
        if v2 {
            expected.insert("total_results=\(expected.count)")
            let match = writer.map { [API.SearchClause(terms: .init(writerIDs: [ids[$0]]))] }
            var token: Int64 = 0
            repeat {
                let reply = await call(
                    c, "POST", ["v2", "search"],
                    json: API.SearchRequest(
                        limit: 1000, nextToken: token, includeAllWriters: true, includeData: true, match: match))
                var next: Int64 = 0
                let page = observe(reply, as: API.SearchResponse.self) { response in
                    next = response.lastIndex
                    return Set(response.results.map(item)).union(["total_results=\(response.totalResults)"])
                }
                guard page.status == 200, page.problem == nil else {
                    actual = page
                    break
                }
                guard next > token || next == 0 else {
                    actual = Observation(status: page.status, problem: "last_index \(next) after next_token \(token)")
                    break
                }
                actual.items.formUnion(page.items)
                token = next
            } while token != 0
        } else {
            var after: Int64 = 0
            while true {
                let reply = await call(
                    c, "POST", ["v1", "storage", "search"],
                    json: API.QueryRequest(
                        count: 1000, afterIndex: after, includeData: true, writerIDs: writer.map { [ids[$0]] },
                        includeAllWriters: writer == nil))
                var response: API.QueryResponse?
                let page = observe(reply, as: API.QueryResponse.self) {
                    response = $0
                    return Set($0.results.map(item))
                }
                guard page.status == 200, page.problem == nil, let response else {
                    actual = page
                    break
                }
                actual.items.formUnion(page.items)
                if response.results.count < 1000 || response.lastIndex <= after { break }
                after = response.lastIndex
            }
        }
        return ModelCheck(what: what, expected: Observation(status: 200, items: expected), actual: actual)
    }

    /// Every client's v1 and v2 searches and four listings, and every access key read by its reader; the entry
    /// ends at the first mismatch.
    func audit() async -> ModelEntry {
        var entry = ModelEntry()
        for c in 0..<Self.clientCount {
            entry.checks.append(await searchCheck(c, v2: false, writer: nil, what: "c\(c) v1 search"))
            if entry.failed { return entry }
            entry.checks.append(await searchCheck(c, v2: true, writer: nil, what: "c\(c) v2 search"))
            if entry.failed { return entry }
            for kind in ListingKind.allCases {
                entry.checks.append(await listingCheck(c, kind, what: "c\(c) GET policy/\(kind.rawValue)"))
                if entry.failed { return entry }
            }
        }
        for w in 0..<Self.clientCount {
            for x in 0..<Self.clientCount {
                for t in 0..<Self.typeCount {
                    let tuple = ModelTuple(writer: w, reader: x, type: t)
                    entry.checks.append(await keyCheck(x, tuple, what: "c\(x) GET access key \(tuple)"))
                    if entry.failed { return entry }
                }
            }
        }
        return entry
    }
}

// MARK: - Generating steps

/// SplitMix64: a small seeded generator, so that a seed replays a run.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Random steps in random roles: callers are often the writer or a current authorizer of the tuple they act on,
/// targets any client (the writer, the caller and other authorizers included).
struct StepGenerator {
    var random: SplitMix64
    var records = 0
    var counter = 0

    init(seed: UInt64) { random = SplitMix64(state: seed) }

    mutating func below(_ n: Int) -> Int { Int.random(in: 0..<n, using: &random) }
    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
    mutating func client() -> Int { below(ModelRun.clientCount) }
    mutating func type() -> Int { below(ModelRun.typeCount) }
    mutating func pick(_ list: [Int]) -> Int? { list.isEmpty ? nil : list[below(list.count)] }

    mutating func fresh() -> Int {
        counter += 1
        return counter
    }

    /// A tuple for an access-key or policy step: often one whose (writer, type) has authorizers, any reader.
    mutating func tuple(_ m: AuthorizationModel) -> ModelTuple {
        let delegated = m.authorizers.sorted { ($0.writer, $0.type, $0.reader) < ($1.writer, $1.type, $1.reader) }
        if chance(60), let i = pick(Array(delegated.indices)) {
            return ModelTuple(writer: delegated[i].writer, reader: client(), type: delegated[i].type)
        }
        return ModelTuple(writer: client(), reader: client(), type: type())
    }

    /// The writer (sometimes), one of its authorizers of the type (often), or anyone.
    mutating func actor(_ m: AuthorizationModel, writer: Int, type: Int, writerPercent: Int) -> Int {
        if chance(writerPercent) { return writer }
        let authorizers = (0..<ModelRun.clientCount).filter {
            $0 != writer && m.isAuthorizer($0, writer: writer, type: type)
        }
        if chance(80), let a = pick(authorizers) { return a }
        return client()
    }

    mutating func next(_ m: AuthorizationModel) -> ModelStep {
        let labels = m.records.keys.sorted()
        var roll = below(100)
        if labels.isEmpty && roll >= 12 && roll < 34 { roll = 0 }
        switch roll {
        case 0..<12:
            records += 1
            return .write(client(), record: records - 1, type: type())
        case 12..<24:
            let r = pick(labels)!
            return .read(chance(30) ? m.records[r]!.writer : client(), record: r)
        case 24..<30:
            let r = pick(labels)!
            return .update(
                chance(60) ? m.records[r]!.writer : client(), record: r, currentVersion: chance(80),
                value: fresh())
        case 30..<34:
            let r = pick(labels)!
            return .delete(chance(60) ? m.records[r]!.writer : client(), record: r, currentVersion: chance(80))
        case 34..<44:
            let t = ModelTuple(writer: client(), reader: client(), type: type())
            return .policy(t.writer, t, chance(55) ? .read : .authorizer, allow: chance(65))
        case 44..<57:
            let t = tuple(m)
            let caller = actor(m, writer: t.writer, type: t.type, writerPercent: 0)
            return .policy(caller, t, chance(85) ? .read : .authorizer, allow: chance(65))
        case 57..<60:
            let w = client()
            let authorizers = Set(m.authorizers.filter { $0.writer == w }.map(\.reader)).sorted()
            return .removeAuthorizer(
                chance(75) ? w : client(), writer: w,
                reader: chance(70) ? (pick(authorizers) ?? client()) : client())
        case 60..<70:
            let t = tuple(m)
            return .putKey(actor(m, writer: t.writer, type: t.type, writerPercent: 35), t, eak: fresh())
        case 70..<77:
            var t = tuple(m)
            let keyed = m.keys.keys.filter { $0.writer == t.writer && $0.type == t.type }.map(\.reader).sorted()
            if chance(50), let x = pick(keyed) { t.reader = x }
            return .deleteKey(actor(m, writer: t.writer, type: t.type, writerPercent: 35), t)
        case 77..<83:
            let t = ModelTuple(writer: client(), reader: client(), type: type())
            return .getKey(chance(80) ? t.reader : client(), t)
        case 83..<88:
            return .search(client(), v2: false, writer: chance(30) ? client() : nil)
        case 88..<93:
            return .search(client(), v2: true, writer: chance(30) ? client() : nil)
        default:
            return .listing(client(), ListingKind.allCases[below(ListingKind.allCases.count)])
        }
    }
}

// MARK: - Shrinking

/// Delta debugging of a failing run: candidate subsequences run on fresh servers, the shortest that still fails
/// (any mismatch, cut after its failing step) is kept, within a time budget. A server that does not start ends
/// the shrinking with what it has.
struct Shrinker {
    let backend: ClientTestBackend
    let budget: Duration

    struct Result {
        var outcome: ModelOutcome
        var runs: Int
        var elapsed: Duration
        /// Why shrinking stopped early, if it did.
        var stopped: String?
    }

    func shrink(_ failing: ModelOutcome) async -> Result {
        let clock = ContinuousClock()
        let deadline = clock.now + budget
        let started = clock.now
        var best = failing
        var runs = 0
        var stopped: String?

        /// The candidate's outcome cut after its failing step, or nil when it passes (or no server started).
        func attempt(_ candidate: [ModelStep]) async -> ModelOutcome? {
            let session: ModelRun
            do {
                guard let started = try await ModelRun.start(backend) else { return nil }
                session = started
            } catch {
                stopped = "a server did not start: \(error)"
                return nil
            }
            runs += 1
            let outcome = await session.replay(candidate)
            await session.stop()
            return outcome.failed ? outcome : nil
        }

        // First without the steps that only look (but the failing one): they change nothing.
        let changing = best.steps.dropLast().filter(\.changes) + [best.steps.last!]
        if changing.count < best.steps.count, let outcome = await attempt(changing) { best = outcome }

        var granularity = 2
        while best.steps.count >= 2, clock.now < deadline, stopped == nil {
            let steps = best.steps
            let size = (steps.count + granularity - 1) / granularity
            var reduced = false
            for start in stride(from: 0, to: steps.count, by: size) where clock.now < deadline && stopped == nil {
                let candidate = Array(steps[..<start] + steps[min(start + size, steps.count)...])
                guard !candidate.isEmpty, let outcome = await attempt(candidate) else { continue }
                best = outcome
                granularity = max(granularity - 1, 2)
                reduced = true
                break
            }
            if !reduced {
                if granularity >= steps.count { break }
                granularity = min(granularity * 2, steps.count)
            }
        }
        return Result(outcome: best, runs: runs, elapsed: clock.now - started, stopped: stopped)
    }
}
