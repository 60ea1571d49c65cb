/// One case of a vector suite: an id (the file's `tcId`, prefixed with the file when a suite has several) and a
/// check that throws when this build disagrees with the vector.
package struct VectorCase: Sendable, CustomStringConvertible {
    package let suite: String
    package let id: String
    package let comment: String
    private let body: @Sendable () throws -> Void

    package init(suite: String, id: String, comment: String = "", body: @escaping @Sendable () throws -> Void) {
        self.suite = suite
        self.id = id
        self.comment = comment
        self.body = body
    }

    /// Runs the check. Throws ``ConformanceFailure`` (or the underlying error) on failure.
    package func check() throws { try body() }

    package var description: String { comment.isEmpty ? "\(suite) #\(id)" : "\(suite) #\(id) (\(comment))" }
}

/// A named collection of vector cases, loaded from files.
package struct VectorSuite: Sendable {
    package let name: String
    /// True when the suite reads `../shared/vectors` and is skipped without it.
    package let needsShared: Bool
    private let loader: @Sendable (VectorLocations) throws -> [VectorCase]

    package init(
        name: String,
        needsShared: Bool = false,
        loader: @escaping @Sendable (VectorLocations) throws -> [VectorCase]
    ) {
        self.name = name
        self.needsShared = needsShared
        self.loader = loader
    }

    /// Whether the suite can run with these locations.
    package func isAvailable(_ locations: VectorLocations = .default) -> Bool {
        !needsShared || locations.sharedVectors != nil
    }

    /// The cases, or an empty list when the suite needs `../shared` and it is absent.
    package func cases(_ locations: VectorLocations = .default) throws -> [VectorCase] {
        guard isAvailable(locations) else { return [] }
        return try loader(locations)
    }
}

// The comparisons the suites are written with. Internal: this module offers no assertion API (tests get theirs from
// Swift Testing); a disagreement is reported as the error of the case's ``VectorCase/check()``.

/// A disagreement between this build and a vector.
struct ConformanceFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Throws ``ConformanceFailure`` unless `actual == expected`.
func requireEqual<T: Equatable>(
    _ actual: T,
    _ expected: T,
    _ what: @autoclosure () -> String
) throws {
    guard actual == expected else {
        throw ConformanceFailure("\(what()): expected \(render(expected)), got \(render(actual))")
    }
}

/// Throws ``ConformanceFailure`` unless `body` throws an error accepted by `matches`.
func requireFailure(
    _ what: @autoclosure () -> String,
    matches: (any Error) -> Bool,
    _ body: () throws -> Void
) throws {
    do {
        try body()
    } catch {
        guard matches(error) else { throw ConformanceFailure("\(what()): wrong error \(error)") }
        return
    }
    throw ConformanceFailure("\(what()): expected a failure, but it succeeded")
}
/// Shows byte values as hex (so a mismatch is readable), everything else as `String(describing:)`.
func render(_ value: some Any) -> String {
    if let bytes = value as? any Sequence<UInt8>, !(value is String) {
        let all = Array(bytes)
        let hex = all.prefix(64).map { byte in
            let digits = String(byte, radix: 16)
            return digits.count == 1 ? "0" + digits : digits
        }.joined()
        return all.count > 64 ? "\(hex)... (\(all.count) bytes)" : hex
    }
    return String(describing: value)
}
