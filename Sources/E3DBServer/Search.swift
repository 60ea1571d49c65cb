import E3DBAPI

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
        default: throw HTTPFailure.badRequest("strategy must be EXACT, FUZZY, WILDCARD or REGEXP")
        }
    }
}

/// A compiled term.
struct SearchTerm {
    let text: String
    let strategy: MatchStrategy
    let regex: Regex<AnyRegexOutput>?

    init(_ text: String, _ strategy: MatchStrategy) throws {
        self.text = text
        self.strategy = strategy
        if strategy == .regexp {
            do { regex = try Regex(text) } catch {
                throw HTTPFailure.badRequest("a REGEXP term is not a valid regular expression")
            }
        } else {
            regex = nil
        }
    }

    func matches(_ value: String) -> Bool {
        switch strategy {
        case .exact: return value == text
        case .fuzzy:
            let count = text.count
            let allowed = count <= 2 ? 0 : (count <= 5 ? 1 : 2)
            return Self.distance(Array(text.unicodeScalars), Array(value.unicodeScalars), limit: allowed) <= allowed
        case .wildcard: return Self.wildcard(Array(text.unicodeScalars)[...], Array(value.unicodeScalars)[...])
        case .regexp: return (try? regex?.wholeMatch(in: value)) != nil
        }
    }

    /// Optimal-string-alignment distance, stopping early above `limit`.
    static func distance(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar], limit: Int) -> Int {
        if abs(a.count - b.count) > limit { return limit + 1 }
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var prev2 = [Int](repeating: 0, count: b.count + 1)
        var prev = Array(0...b.count)
        var cur = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            cur[0] = i
            var rowMin = cur[0]
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                var v = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { v = min(v, prev2[j - 2] + 1) }
                cur[j] = v
                rowMin = min(rowMin, v)
            }
            if rowMin > limit { return limit + 1 }
            (prev2, prev, cur) = (prev, cur, prev2)
        }
        return prev[b.count]
    }

    /// Glob matching with `*` and `?`, iterative with backtracking to the last star.
    static func wildcard(_ p: ArraySlice<Unicode.Scalar>, _ s: ArraySlice<Unicode.Scalar>) -> Bool {
        let p = Array(p), s = Array(s)
        var pi = 0, si = 0, star = -1, mark = 0
        while si < s.count {
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

    init(_ clause: API.SearchClause) throws {
        let strategy = try MatchStrategy(clause.strategy)
        switch (clause.condition ?? "OR").uppercased() {
        case "OR", "": all = false
        case "AND": all = true
        default: throw HTTPFailure.badRequest("condition must be OR or AND")
        }
        var terms: [(Kind, SearchTerm)] = []
        let t = clause.terms ?? API.SearchClause.Terms()
        // UUIDs compare case-insensitively.
        for w in t.writerIDs ?? [] { terms.append((.writer, try SearchTerm(w.lowercased(), strategy))) }
        for u in t.userIDs ?? [] { terms.append((.user, try SearchTerm(u.lowercased(), strategy))) }
        for r in t.recordIDs ?? [] { terms.append((.record, try SearchTerm(r.lowercased(), strategy))) }
        for c in t.contentTypes ?? [] { terms.append((.type, try SearchTerm(c, strategy))) }
        for k in t.keys ?? [] { terms.append((.key, try SearchTerm(k, strategy))) }
        for v in t.values ?? [] { terms.append((.value, try SearchTerm(v, strategy))) }
        for (k, v) in (t.tags ?? [:]).sorted(by: { $0.key < $1.key }) {
            terms.append((.tag(try SearchTerm(v, strategy)), try SearchTerm(k, strategy)))
        }
        self.terms = terms
    }

    func matches(_ row: RecordRow, plain: [String: String]) -> Bool {
        if terms.isEmpty { return true }
        func one(_ kind: Kind, _ term: SearchTerm) -> Bool {
            switch kind {
            case .writer: term.matches(row.writerID)
            case .user: term.matches(row.userID)
            case .record: term.matches(row.recordID)
            case .type: term.matches(row.type)
            case .key: plain.keys.contains { term.matches($0) }
            case .value: plain.values.contains { term.matches($0) }
            case .tag(let valueTerm): plain.contains { term.matches($0.key) && valueTerm.matches($0.value) }
            }
        }
        return all ? terms.allSatisfy { one($0.0, $0.1) } : terms.contains { one($0.0, $0.1) }
    }
}
