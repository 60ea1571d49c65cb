import E3DBPrimitives
import GRDB

// The one implementation of the store's operations that take several database accesses (a collection's keys, a
// write under the current key, a keyed put, a key rotation): each is a `StoreProcedure`, a value whose `step` holds
// every decision (what to read or write next, when to start over, when to give up) and asks for one database access
// at a time. `EncryptedStore.run` performs the accesses: its synchronous form through GRDB's synchronous access (the
// caller's thread waits), its async form through GRDB's async access (the caller's task is suspended, no thread is
// held). So the synchronous and async forms of an operation differ in one word, `await`, and spawn nothing.

/// Whether a `StoreAccess` runs in a read or a write transaction, of the store's database (its pool) or of the
/// key header (its own small database: credentials and enrolled identities).
enum StoreAccessKind: Sendable {
    case read
    case write
    case headerRead
    case headerWrite
}

/// One database access that a step of a procedure asks for: `body` in a read or a write transaction of the store's
/// pool (`doing` says what for, in errors). Its answer goes to the procedure's next step.
struct StoreAccess<Answer: Sendable>: Sendable {
    let kind: StoreAccessKind
    let doing: String
    let body: @Sendable (Database) throws -> Answer

    static func read(_ doing: String, _ body: @escaping @Sendable (Database) throws -> Answer) -> StoreAccess {
        StoreAccess(kind: .read, doing: doing, body: body)
    }

    static func write(_ doing: String, _ body: @escaping @Sendable (Database) throws -> Answer) -> StoreAccess {
        StoreAccess(kind: .write, doing: doing, body: body)
    }

    static func headerRead(_ doing: String, _ body: @escaping @Sendable (Database) throws -> Answer) -> StoreAccess {
        StoreAccess(kind: .headerRead, doing: doing, body: body)
    }

    static func headerWrite(_ doing: String, _ body: @escaping @Sendable (Database) throws -> Answer) -> StoreAccess {
        StoreAccess(kind: .headerWrite, doing: doing, body: body)
    }

    /// The same access, its answer passed through `transform` (a procedure wrapping the answers of a part of it).
    func map<Other: Sendable>(_ transform: @escaping @Sendable (Answer) -> Other) -> StoreAccess<Other> {
        StoreAccess<Other>(kind: kind, doing: doing) { [body] db in transform(try body(db)) }
    }
}

/// What a procedure does next: ask for a database access (its answer comes to the next step), or end with its
/// output.
enum StoreStep<Answer: Sendable, Output> {
    case access(StoreAccess<Answer>)
    case done(Output)
}

/// A store operation as steps (see the top of this file). Its parts' answers are wrapped in `@Sendable` closures
/// that name its type, hence `SendableMetatype`.
protocol StoreProcedure: SendableMetatype {
    associatedtype Answer: Sendable
    associatedtype Output

    /// The next step, given the answer to the access the last step asked for (nil at the first step, and after a
    /// step that ended with the output).
    mutating func step(_ answer: Answer?) throws(E3DBError) -> StoreStep<Answer, Output>
}

extension StoreProcedure {
    /// A step of this procedure as a part of another, whose answers wrap this one's with `wrap`; `answer` is the
    /// outer answer (nil, or one that is not this part's, at this part's first step), unwrapped by `unwrap`.
    mutating func step<Outer: Sendable>(
        _ answer: Outer?, unwrap: (Outer) -> Answer?, wrap: @escaping @Sendable (Answer) -> Outer
    ) throws(E3DBError) -> StoreStep<Outer, Output> {
        switch try step(answer.flatMap(unwrap)) {
        case .access(let access): .access(access.map(wrap))
        case .done(let output): .done(output)
        }
    }
}

/// A procedure of one access: its answer is the output.
struct SingleAccess<Output: Sendable>: StoreProcedure {
    let access: StoreAccess<Output>

    func step(_ answer: Output?) throws(E3DBError) -> StoreStep<Output, Output> {
        if let answer { return .done(answer) }
        return .access(access)
    }
}

extension EncryptedStore {
    /// Runs `procedure` to its output through GRDB's synchronous access: the caller's thread waits for each access.
    func run<Procedure: StoreProcedure>(_ procedure: Procedure) throws(E3DBError) -> Procedure.Output {
        var procedure = procedure
        var answer: Procedure.Answer?
        while true {
            switch try procedure.step(answer) {
            case .done(let output): return output
            case .access(let access): answer = try perform(access)
            }
        }
    }

    /// `run(_:)` through GRDB's async access: the caller's task is suspended during each access.
    func run<Procedure: StoreProcedure>(_ procedure: Procedure) async throws(E3DBError) -> Procedure.Output {
        var procedure = procedure
        var answer: Procedure.Answer?
        while true {
            switch try procedure.step(answer) {
            case .done(let output): return output
            case .access(let access): answer = try await perform(access)
            }
        }
    }

    /// One access, through GRDB's synchronous access.
    func perform<Answer>(_ access: StoreAccess<Answer>) throws(E3DBError) -> Answer {
        try databaseCall(access.doing) {
            switch access.kind {
            case .read: try pool.read(access.body)
            case .write: try pool.write(access.body)
            case .headerRead: try keyHeader.read(access.body)
            case .headerWrite: try keyHeader.write(access.body)
            }
        }
    }

    /// One access, through GRDB's async access.
    func perform<Answer>(_ access: StoreAccess<Answer>) async throws(E3DBError) -> Answer {
        try await databaseCall(access.doing) {
            switch access.kind {
            case .read: try await pool.read(access.body)
            case .write: try await pool.write(access.body)
            case .headerRead: try await keyHeader.read(access.body)
            case .headerWrite: try await keyHeader.write(access.body)
            }
        }
    }
}
