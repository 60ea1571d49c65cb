import E3DBAPI
import E3DBCanonicalJSON
import E3DBPrimitives

/// How a v2 search term is compared with a value (spec api §6.2): case-sensitive, on the whole value.
enum MatchStrategy {
    case exact
    /// Edit distance within Elasticsearch's AUTO fuzziness (0 edits up to 2 characters, 1 up to 5, else 2);
    /// a transposition counts as one edit.
    case fuzzy
    /// `*` any sequence, `?` one character.
    case wildcard
    /// A regular expression anchored to the whole value.
    case regexp

    init(_ name: String?) throws {
        switch (name ?? "EXACT").uppercased() {
        case "EXACT", "": self = .exact
        case "FUZZY": self = .fuzzy
        case "WILDCARD": self = .wildcard
        case "REGEXP": self = .regexp
        default: throw E3DBError(.badRequest, "strategy must be EXACT, FUZZY, WILDCARD or REGEXP")
        }
    }
}

/// A compiled term.
///
/// Matching is bounded whatever the input: FUZZY, WILDCARD and REGEXP terms are at most ``maxPatternBytes`` long,
/// they never match a value longer than ``maxMatchedValueBytes`` (EXACT still does), FUZZY runs a banded edit
/// distance (O(n·5)), WILDCARD an iterative glob (O(n·m)) and REGEXP a linear-time NFA (``LinearRegex``, at most
/// 2048 states), so that no term can make a search backtrack exponentially.
struct SearchTerm {
    /// The longest FUZZY, WILDCARD or REGEXP term, in UTF-8 bytes; longer ones are a 400.
    static let maxPatternBytes = 1024
    /// The longest value a FUZZY, WILDCARD or REGEXP term is compared with, in UTF-8 bytes.
    static let maxMatchedValueBytes = 16 << 10

    let text: String
    let strategy: MatchStrategy
    let regex: LinearRegex?
    private let scalars: [Unicode.Scalar]

    init(_ text: String, _ strategy: MatchStrategy) throws {
        self.text = text
        self.strategy = strategy
        if strategy != .exact, text.utf8.count > Self.maxPatternBytes {
            throw E3DBError(
                .badRequest, "a FUZZY, WILDCARD or REGEXP term is longer than \(Self.maxPatternBytes) bytes")
        }
        scalars = strategy == .exact ? [] : Array(text.unicodeScalars)
        if strategy == .regexp {
            do { regex = try LinearRegex(text) } catch {
                throw E3DBError(.badRequest, "a REGEXP term is not a valid regular expression: \(error.message)")
            }
        } else {
            regex = nil
        }
    }

    /// Whether `value` matches, charging `budget` for the comparison: one step per 16 bytes compared for EXACT,
    /// the band's cells for FUZZY, the glob's iterations for WILDCARD, and value length × states for REGEXP
    /// (charged before it runs: the automaton may visit every state at every character).
    func matches(_ value: String, budget: inout WorkBudget) throws(E3DBError) -> Bool {
        let bytes = value.utf8.count
        // EXACT compares any length (its cost is linear); the other strategies skip values over the cap.
        guard strategy == .exact || bytes <= Self.maxMatchedValueBytes else { return false }
        switch strategy {
        case .exact:
            try budget.charge(1 + min(bytes, text.utf8.count) / 16)
            return value.utf8.elementsEqual(text.utf8)
        case .fuzzy:
            let count = scalars.count
            let allowed = count <= 2 ? 0 : (count <= 5 ? 1 : 2)
            try budget.charge(1 + bytes * (2 * allowed + 1))
            return Self.distance(scalars, Array(value.unicodeScalars), limit: allowed) <= allowed
        case .wildcard:
            var steps = 0
            let matched = Self.wildcard(
                scalars[...], Array(value.unicodeScalars)[...], steps: &steps,
                limit: budget.remaining)
            try budget.charge(1 + steps)  // past the limit when the glob stopped at it
            return matched
        case .regexp:
            guard let regex else { return false }
            try budget.charge((1 + bytes) * regex.stepsPerCharacter)
            return regex.wholeMatch(value)
        }
    }

    /// Optimal-string-alignment distance, computed in the diagonal band of width `2·limit + 1` (cells outside it
    /// exceed `limit`) and stopping early above `limit`; any result above `limit` is `limit + 1`.
    static func distance(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar], limit: Int) -> Int {
        let over = limit + 1
        if abs(a.count - b.count) > limit { return over }
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var prev2 = [Int](repeating: over, count: b.count + 1)
        var prev = [Int](repeating: over, count: b.count + 1)
        var cur = [Int](repeating: over, count: b.count + 1)
        for j in 0...min(b.count, limit) { prev[j] = j }
        for i in 1...a.count {
            let lo = max(1, i - limit)
            let hi = min(b.count, i + limit)
            guard lo <= hi else { return over }
            cur[lo - 1] = lo == 1 ? min(i, over) : over
            var rowMin = over
            for j in lo...hi {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                var v = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { v = min(v, prev2[j - 2] + 1) }
                cur[j] = min(v, over)
                rowMin = min(rowMin, cur[j])
            }
            if hi < b.count { cur[hi + 1] = over }
            if rowMin > limit { return over }
            (prev2, prev, cur) = (prev, cur, prev2)
        }
        return prev[b.count]
    }

    /// Glob matching with `*` and `?`, iterative with backtracking to the last star.
    /// - Parameters:
    ///   - steps: increased by the loop's iterations (at most about `p.count × s.count`).
    ///   - limit: the loop stops (no match) once `steps` passes it: the caller's budget is spent.
    static func wildcard(
        _ p: ArraySlice<Unicode.Scalar>, _ s: ArraySlice<Unicode.Scalar>, steps: inout Int,
        limit: Int = .max
    ) -> Bool {
        let p = Array(p)
        let s = Array(s)
        var pi = 0
        var si = 0
        var star = -1
        var mark = 0
        defer { steps += pi + si }
        while si < s.count {
            steps += 1
            if steps > limit { return false }
            if pi < p.count, p[pi] == "?" || p[pi] == s[si] {
                pi += 1
                si += 1
            } else if pi < p.count, p[pi] == "*" {
                star = pi
                mark = si
                pi += 1
            } else if star >= 0 {
                pi = star + 1
                mark += 1
                si = mark
            } else {
                return false
            }
        }
        while pi < p.count, p[pi] == "*" { pi += 1 }
        return pi == p.count
    }
}

/// A compiled v2 clause: OR or AND over its terms; no terms matches everything.
struct CompiledClause {
    enum Kind { case writer, user, record, type, key, value, tag(SearchTerm) }
    let all: Bool
    let terms: [(Kind, SearchTerm)]

    /// Compiles a clause; `states` counts the REGEXP automaton states compiled so far in the search, and the term
    /// that takes it past ``maxStatesPerSearch`` is refused before the next one compiles.
    init(_ clause: API.SearchClause, states: inout Int) throws {
        let strategy = try MatchStrategy(clause.strategy)
        switch (clause.condition ?? "OR").uppercased() {
        case "OR", "": all = false
        case "AND": all = true
        default: throw E3DBError(.badRequest, "condition must be OR or AND")
        }
        func term(_ text: String) throws -> SearchTerm {
            let compiled = try SearchTerm(text, strategy)
            states += compiled.regex?.stateCount ?? 0
            guard states <= Self.maxStatesPerSearch else {
                throw E3DBError(
                    .badRequest,
                    "the REGEXP terms of a search may compile to at most \(Self.maxStatesPerSearch) automaton states")
            }
            return compiled
        }
        var terms: [(Kind, SearchTerm)] = []
        let t = clause.terms ?? API.SearchClause.Terms()
        // Patterns over the ids' lowercase text: UUIDs compare case-insensitively.
        for w in t.writerIDs ?? [] { terms.append((.writer, try term(w.lowercased()))) }
        for u in t.userIDs ?? [] { terms.append((.user, try term(u.lowercased()))) }
        for r in t.recordIDs ?? [] { terms.append((.record, try term(r.lowercased()))) }
        for c in t.contentTypes ?? [] { terms.append((.type, try term(c))) }
        for k in t.keys ?? [] { terms.append((.key, try term(k))) }
        for v in t.values ?? [] { terms.append((.value, try term(v))) }
        for (k, v) in (t.tags ?? [:]).sorted(by: { $0.key < $1.key }) {
            terms.append((.tag(try term(v)), try term(k)))
        }
        self.terms = terms
    }

    /// The most terms one search may hold across its match and exclude clauses.
    static let maxTermsPerSearch = 1024
    /// The most UTF-8 bytes of FUZZY, WILDCARD and REGEXP terms one search may hold, all together.
    static let maxPatternBytesPerSearch = 4096
    /// The most automaton states the REGEXP terms of one search may compile to, all together (each term has at
    /// most ``LinearRegex``'s 2048; a counted repetition multiplies them).
    static let maxStatesPerSearch = 8192

    /// Compiles a search's clauses, refusing more than ``maxTermsPerSearch`` terms in all.
    static func compile(match: [API.SearchClause]?, exclude: [API.SearchClause]?) throws
        -> (match: [CompiledClause], exclude: [CompiledClause])
    {
        var total = 0
        for clause in (match ?? []) + (exclude ?? []) {
            let t = clause.terms
            total += (t?.writerIDs?.count ?? 0) + (t?.userIDs?.count ?? 0) + (t?.recordIDs?.count ?? 0)
            total += (t?.contentTypes?.count ?? 0) + (t?.keys?.count ?? 0) + (t?.values?.count ?? 0)
            total += 2 * (t?.tags?.count ?? 0)
            guard total <= maxTermsPerSearch else {
                throw E3DBError(.badRequest, "a search may hold at most \(maxTermsPerSearch) terms")
            }
        }
        // Pattern bytes are counted before anything is compiled, automaton states as the terms compile.
        var patternBytes = 0
        for clause in (match ?? []) + (exclude ?? []) where (try MatchStrategy(clause.strategy)) != .exact {
            let t = clause.terms
            for list in [t?.writerIDs, t?.userIDs, t?.recordIDs, t?.contentTypes, t?.keys, t?.values] {
                patternBytes += (list ?? []).reduce(0) { $0 + $1.utf8.count }
            }
            patternBytes += (t?.tags ?? [:]).reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        }
        guard patternBytes <= maxPatternBytesPerSearch else {
            throw E3DBError(
                .badRequest,
                "the FUZZY, WILDCARD and REGEXP terms of a search may hold at most \(maxPatternBytesPerSearch) bytes")
        }
        var states = 0
        let matches = try (match ?? []).map { try CompiledClause($0, states: &states) }
        return (matches, try (exclude ?? []).map { try CompiledClause($0, states: &states) })
    }

    /// Whether the record matches, charging `budget` for every comparison (``SearchTerm/matches(_:budget:)``).
    func matches(_ row: RecordRow, plain: RecordData, budget: inout WorkBudget) throws(E3DBError) -> Bool {
        if terms.isEmpty { return true }
        func one(_ kind: Kind, _ term: SearchTerm) throws(E3DBError) -> Bool {
            switch kind {
            case .writer: return try term.matches(row.writerID.text, budget: &budget)
            case .user: return try term.matches(row.userID.text, budget: &budget)
            case .record: return try term.matches(row.recordID.text, budget: &budget)
            case .type: return try term.matches(row.type, budget: &budget)
            case .key:
                for key in plain.keys where try term.matches(key, budget: &budget) { return true }
                return false
            case .value:
                for (_, value) in plain where try term.matches(value, budget: &budget) { return true }
                return false
            case .tag(let valueTerm):
                for (key, value) in plain where try term.matches(key, budget: &budget) {
                    if try valueTerm.matches(value, budget: &budget) { return true }
                }
                return false
            }
        }
        for (kind, term) in terms {
            let matched = try one(kind, term)
            if all && !matched { return false }
            if !all && matched { return true }
        }
        return all
    }
}
