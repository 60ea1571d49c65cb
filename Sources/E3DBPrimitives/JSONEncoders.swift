#if canImport(FoundationEssentials)
    package import FoundationEssentials
#else
    package import Foundation
#endif

/// The package's one home for `JSONEncoder` configurations: every module that encodes a `Codable` value as JSON
/// takes its encoder from here, one variant per purpose. Record bodies, search responses and stored `file_meta`
/// do not go through `JSONEncoder` at all (E3DBAPI's record writer).
///
/// The variants differ only where their output is kept: `wire` and `sorted` do not escape `/`, as the record
/// writer does not; `storeSettings` keeps Foundation's default escaping because sealed settings have been written
/// that way since the store's first version (their bytes are pinned by a test).
package enum JSONEncoders {
    /// API bodies on the wire, both ways (the server's responses and stored notes, the client's requests): one
    /// line, members in declaration order, `/` not escaped.
    package static func wire() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }

    /// Text that is compared or diffed: one line, member names sorted, `/` not escaped. The client's known-keys
    /// file (its bytes are pinned by a test) and what the command-line client prints.
    package static func sorted() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    /// The plaintext of the store's sealed settings: one line, member names sorted, `/` escaped as `\/`
    /// (Foundation's default), byte for byte what every version of the store has sealed.
    package static func storeSettings() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }
}
