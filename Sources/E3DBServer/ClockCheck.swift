import E3DBAPI
public import E3DBPrimitives
import Foundation
import Logging

extension E3DBError.Code {
    /// This node's clock and the database's differ by more than the server accepts
    /// (`ServerConfiguration.maximumClockSkew`).
    public static let clockSkew = Self("clockSkew", category: .io)
}

/// This node's clock against the database server's (`clock_timestamp()`): every expiry (TSV1 nonces, tokens,
/// capability URLs, notes, upload claims, the deletion outbox's leases) is compared with the clock of the node that
/// handles it, so the nodes of one deployment must agree (NTP). Checked at start and on every maintenance pass.
struct ClockCheck: Sendable, Equatable {
    /// Above this offset a warning is logged: 1 s, in microseconds.
    static let warningSkew: Int64 = 1_000_000

    /// This node's reading (the midpoint of the readings before and after the query, so that the round trip does
    /// not count as skew) and the database's, microseconds since the epoch.
    var node: Int64
    var database: Int64
    /// How far this node's clock is ahead of the database's (negative: behind), microseconds.
    var offset: Int64 { node.subtractingReportingOverflow(database).partialValue }

    /// Reads both clocks; nil when the storage has no clock of its own (SQLite).
    /// - Parameter now: this node's clock, microseconds since the epoch (tests pass a skewed one).
    static func read(_ storage: any ServerStorage, now: @Sendable () -> Int64) async throws -> ClockCheck? {
        let before = now()
        guard let database = try await storage.databaseTime() else { return nil }
        let after = now()
        return ClockCheck(node: before / 2 + after / 2, database: database)
    }

    /// What both clocks read and how far apart they are, for a message.
    var description: String {
        let seconds = Double(offset.magnitude) / 1e6
        return "this node's clock reads \(Self.format(node)) and the database's (clock_timestamp()) "
            + "\(Self.format(database)): this node is \(String(format: "%.3f", seconds)) s "
            + (offset >= 0 ? "ahead" : "behind")
    }

    /// Throws when the offset is above `maximumSkew` seconds; logs a warning above ``warningSkew``.
    /// - Throws: `E3DBError` `.clockSkew` naming both clocks and the offset.
    func verify(maximumSkew: Int64, logger: Logger) throws {
        let limit = maximumSkew.multipliedReportingOverflow(by: 1_000_000)
        if !limit.overflow, offset.magnitude > limit.partialValue.magnitude {
            throw E3DBError(
                .clockSkew,
                "\(description), more than the \(maximumSkew) s the server accepts: synchronise this machine's clock "
                    + "with the database server's (NTP)")
        }
        if offset.magnitude > Self.warningSkew.magnitude {
            logger.warning("clock skew: \(description); keep the clocks synchronised (NTP)")
        }
    }

    private static func format(_ micros: Int64) -> String { APITimestamp.format(micros: micros) }
}
