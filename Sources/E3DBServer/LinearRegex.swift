/// The REGEXP strategy of v2 search: a Lucene-style regular expression matched against a whole value in time
/// linear in the value (a Thompson NFA simulated over a set of states, no backtracking), so that no pattern can
/// make the server backtrack exponentially (Swift `Regex` does on `(a|a)*b`).
///
/// Syntax (Lucene's core, which Elasticsearch's `regexp` query uses): literals; `.` any character; `[abc]`,
/// `[a-z]`, `[^…]` classes; `(…)` groups; `|` alternation; `*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}` repetition;
/// `"…"` a quoted literal; `@` any string; `#` the empty language; `\c` the character `c` literally (Lucene has no
/// `\d`-style shorthands). Lucene's optional `~` (complement), `&` (intersection) and `<n-m>` (numeric interval)
/// operators are refused: escape them (`\~`) to match them literally. Matching is on Unicode scalars, case-sensitive.
///
/// Limits: a pattern compiles to at most ``maxStates`` states (repetition counts are expanded) and nests groups at
/// most ``maxDepth`` deep; larger patterns are refused.
struct LinearRegex {
    /// The most NFA states a pattern may compile to.
    static let maxStates = 2048
    /// The deepest group nesting a pattern may have.
    static let maxDepth = 64

    /// Why a pattern was refused (the message is for the `{"error": …}` body and names no input).
    struct SyntaxError: Error { let message: String }

    private indirect enum Node {
        case set(CharSet)
        case concat([Node])
        case alternation([Node])
        case repeatNode(Node, min: Int, max: Int?)
        case empty
    }

    struct CharSet {
        var negated = false
        var ranges: [ClosedRange<UInt32>] = []
        static let any = CharSet(negated: true, ranges: [])
        func contains(_ c: UInt32) -> Bool { ranges.contains { $0.contains(c) } != negated }
    }

    private enum State {
        case char(CharSet, next: Int)
        case split(Int, Int)
        case match
    }

    private var states: [State] = []
    private let start: Int

    /// Compiles a pattern.
    /// - Throws: ``SyntaxError`` when the pattern is malformed, uses an unsupported operator or is too large.
    init(_ pattern: String) throws(SyntaxError) {
        var parser = Parser(scalars: Array(pattern.unicodeScalars.map(\.value)))
        let ast = try parser.parseAlternation(depth: 0)
        guard parser.position == parser.scalars.count else {
            throw SyntaxError(message: "an unbalanced ) in the pattern")
        }
        states = [.match]
        start = try Self.compile(ast, next: 0, into: &states)
    }

    /// The automaton's states: the most it visits per character of a value.
    var stateCount: Int { states.count }

    /// The most work matching does per character of a value: each state, and each range of the class a state
    /// tests (a class of many ranges is tested range by range).
    var stepsPerCharacter: Int {
        states.reduce(0) { total, state in
            if case .char(let set, _) = state { return total + 1 + set.ranges.count }
            return total + 1
        }
    }

    /// Whether the whole of `value` matches.
    func wholeMatch(_ value: String) -> Bool {
        var marks = [Int](repeating: -1, count: states.count)
        var current: [Int] = []
        var next: [Int] = []
        var stack: [Int] = []
        var generation = 0
        func add(_ s: Int, to list: inout [Int]) -> Bool {
            var matched = false
            stack.append(s)
            while let t = stack.popLast() {
                guard marks[t] != generation else { continue }
                marks[t] = generation
                switch states[t] {
                case .split(let a, let b):
                    stack.append(b)
                    stack.append(a)
                case .match: matched = true
                case .char: list.append(t)
                }
            }
            return matched
        }
        var matched = add(start, to: &current)
        for scalar in value.unicodeScalars {
            generation += 1
            next.removeAll(keepingCapacity: true)
            matched = false
            for s in current {
                if case .char(let set, let to) = states[s], set.contains(scalar.value) {
                    if add(to, to: &next) { matched = true }
                }
            }
            swap(&current, &next)
            if current.isEmpty && !matched { return false }
        }
        return matched
    }

    // MARK: Compilation (built backwards from the continuation state)

    private static func allocate(_ state: State, _ states: inout [State]) throws(SyntaxError) -> Int {
        guard states.count < maxStates else {
            throw SyntaxError(
                message: "the pattern is too large (more than \(maxStates) states once repetitions are expanded)")
        }
        states.append(state)
        return states.count - 1
    }

    private static func compile(_ node: Node, next: Int, into states: inout [State]) throws(SyntaxError) -> Int {
        switch node {
        case .empty:
            return next
        case .set(let set):
            return try allocate(.char(set, next: next), &states)
        case .concat(let parts):
            var at = next
            for part in parts.reversed() { at = try compile(part, next: at, into: &states) }
            return at
        case .alternation(let options):
            var at = try compile(options[options.count - 1], next: next, into: &states)
            for option in options.dropLast().reversed() {
                let first = try compile(option, next: next, into: &states)
                at = try allocate(.split(first, at), &states)
            }
            return at
        case .repeatNode(let inner, let min, let max):
            // Repeating what compiles to no state is a no-op; skipping it keeps every loop below bounded by the
            // state budget (each iteration allocates).
            if compilesToNothing(inner) { return next }
            var at = next
            if let max {
                // (max - min) optional copies, innermost last: x? (x? …) chained.
                for _ in 0..<(max - min) {
                    let body = try compile(inner, next: at, into: &states)
                    at = try allocate(.split(body, next), &states)  // each optional copy may end it here
                }
            } else {
                let loop = try allocate(.split(0, next), &states)
                let body = try compile(inner, next: loop, into: &states)
                states[loop] = .split(body, next)
                at = loop
            }
            for _ in 0..<min { at = try compile(inner, next: at, into: &states) }
            return at
        }
    }

    /// Whether a node compiles to no state at all (groups of nothing, repeated).
    private static func compilesToNothing(_ node: Node) -> Bool {
        switch node {
        case .empty: true
        case .set, .alternation: false
        case .concat(let parts): parts.allSatisfy(compilesToNothing)
        case .repeatNode(let inner, _, _): compilesToNothing(inner)
        }
    }

    // MARK: Parsing

    private struct Parser {
        let scalars: [UInt32]
        var position = 0

        private func peek() -> UInt32? { position < scalars.count ? scalars[position] : nil }

        private static func ascii(_ c: Unicode.Scalar) -> UInt32 { c.value }

        mutating func parseAlternation(depth: Int) throws(SyntaxError) -> Node {
            guard depth <= LinearRegex.maxDepth else {
                throw SyntaxError(message: "the pattern nests groups more than \(LinearRegex.maxDepth) deep")
            }
            var options = [try parseConcat(depth: depth)]
            while peek() == Self.ascii("|") {
                position += 1
                options.append(try parseConcat(depth: depth))
            }
            return options.count == 1 ? options[0] : .alternation(options)
        }

        private mutating func parseConcat(depth: Int) throws(SyntaxError) -> Node {
            var parts: [Node] = []
            while let c = peek(), c != Self.ascii("|"), c != Self.ascii(")") {
                var atom = try parseAtom(depth: depth)
                while let op = peek() {
                    if op == Self.ascii("*") {
                        atom = .repeatNode(atom, min: 0, max: nil)
                    } else if op == Self.ascii("+") {
                        atom = .repeatNode(atom, min: 1, max: nil)
                    } else if op == Self.ascii("?") {
                        atom = .repeatNode(atom, min: 0, max: 1)
                    } else if op == Self.ascii("{") {
                        position += 1
                        let (lo, hi) = try parseCounts()
                        atom = .repeatNode(atom, min: lo, max: hi)
                        continue
                    } else {
                        break
                    }
                    position += 1
                }
                parts.append(atom)
            }
            return parts.count == 1 ? parts[0] : .concat(parts)
        }

        /// After `{`: `n}`, `n,}` or `n,m}`; counts up to ``LinearRegex/maxStates``.
        private mutating func parseCounts() throws(SyntaxError) -> (Int, Int?) {
            func number() -> Int? {
                var value: Int?
                while let c = peek(), c >= 48, c <= 57 {
                    value = min((value ?? 0) * 10 + Int(c - 48), LinearRegex.maxStates + 1)
                    position += 1
                }
                return value
            }
            guard let lo = number() else { throw SyntaxError(message: "a { repetition needs a count") }
            var hi: Int? = lo
            if peek() == Self.ascii(",") {
                position += 1
                hi = number()
            }
            guard peek() == Self.ascii("}") else { throw SyntaxError(message: "an unterminated { repetition") }
            position += 1
            if let hi, hi < lo { throw SyntaxError(message: "a {n,m} repetition needs n <= m") }
            guard lo <= LinearRegex.maxStates, (hi ?? 0) <= LinearRegex.maxStates else {
                throw SyntaxError(message: "a repetition count is too large")
            }
            return (lo, hi)
        }

        private mutating func parseAtom(depth: Int) throws(SyntaxError) -> Node {
            guard let c = peek() else { throw SyntaxError(message: "the pattern ends early") }
            position += 1
            switch c {
            case Self.ascii("("):
                let inner = peek() == Self.ascii(")") ? Node.empty : try parseAlternation(depth: depth + 1)
                guard peek() == Self.ascii(")") else { throw SyntaxError(message: "an unclosed ( in the pattern") }
                position += 1
                return inner
            case Self.ascii("["): return .set(try parseClass())
            case Self.ascii("."): return .set(.any)
            case Self.ascii("@"): return .repeatNode(.set(.any), min: 0, max: nil)
            case Self.ascii("#"): return .set(CharSet())
            case Self.ascii("\""):
                var parts: [Node] = []
                while let q = peek(), q != Self.ascii("\"") {
                    parts.append(.set(CharSet(ranges: [q...q])))
                    position += 1
                }
                guard peek() != nil else { throw SyntaxError(message: "an unterminated \" in the pattern") }
                position += 1
                return parts.isEmpty ? .empty : .concat(parts)
            case Self.ascii("\\"):
                guard let escaped = peek() else { throw SyntaxError(message: "the pattern ends with \\") }
                position += 1
                return .set(CharSet(ranges: [escaped...escaped]))
            case Self.ascii("*"), Self.ascii("+"), Self.ascii("?"), Self.ascii("{"):
                throw SyntaxError(message: "a repetition operator has nothing to repeat")
            case Self.ascii("~"), Self.ascii("&"), Self.ascii("<"):
                throw SyntaxError(message: "the ~, & and <n-m> operators are not supported; escape them with \\")
            default:
                return .set(CharSet(ranges: [c...c]))
            }
        }

        /// After `[`: members up to `]`, with `^` negation, `a-z` ranges and `\` escapes.
        private mutating func parseClass() throws(SyntaxError) -> CharSet {
            var set = CharSet()
            if peek() == Self.ascii("^") {
                set.negated = true
                position += 1
            }
            var first = true
            while true {
                guard var lo = peek() else { throw SyntaxError(message: "an unclosed [ in the pattern") }
                if lo == Self.ascii("]") && !first { break }
                first = false
                position += 1
                if lo == Self.ascii("\\") {
                    guard let e = peek() else { throw SyntaxError(message: "an unclosed [ in the pattern") }
                    lo = e
                    position += 1
                }
                var hi = lo
                if peek() == Self.ascii("-"), position + 1 < scalars.count, scalars[position + 1] != Self.ascii("]") {
                    position += 1
                    guard var h = peek() else { throw SyntaxError(message: "an unclosed [ in the pattern") }
                    position += 1
                    if h == Self.ascii("\\") {
                        guard let e = peek() else { throw SyntaxError(message: "an unclosed [ in the pattern") }
                        h = e
                        position += 1
                    }
                    guard lo <= h else { throw SyntaxError(message: "a [x-y] range needs x <= y") }
                    hi = h
                }
                set.ranges.append(lo...hi)
            }
            position += 1
            return set
        }
    }
}
