package import E3DBPrimitives
package import Foundation

/// The id of one kind of thing the server stores: a UUID, tagged with its kind so that a client id cannot be passed
/// where a record id is expected. Ids are parsed once where they enter the server (a path segment, a query
/// parameter, a JSON body, a storage row) and written as ``text`` where they leave it (SQL parameters, JSON).
///
/// One generic shape for every kind: ``ClientID``, ``RecordID`` and ``NoteID`` are its instances.
package struct Identifier<Kind: IdentifierKind>: Hashable, Sendable, CustomStringConvertible {
    /// The id.
    package let uuid: UUID

    /// The id `uuid`.
    package init(_ uuid: UUID) { self.uuid = uuid }

    /// Parses `8-4-4-4-12` hex digits of either case (old Swift SDKs send uppercase), nothing else: the strict form
    /// (`UUID(uuidString:)` also takes a few malformed forms); `nil` for anything else.
    package init?(_ text: String) {
        guard let uuid = UUID(hexText: text) else { return nil }
        self.uuid = uuid
    }

    /// Parses an id read back from storage, which holds ``text``.
    /// - Throws: `E3DBError` `.storageCorrupted` when the stored text is not a UUID (the message names the kind,
    ///   never the text).
    package init(stored text: String) throws(E3DBError) {
        guard let uuid = UUID(hexText: text) else {
            throw E3DBError(.storageCorrupted, "a stored \(Kind.name) is not a UUID")
        }
        self.uuid = uuid
    }

    /// A new random (version 4) id.
    package static func random() -> Self { Self(UUID()) }

    /// The id as the wire and the stores write it: lowercase `8-4-4-4-12` hex.
    package var text: String { uuid.lowercasedString }

    package var description: String { text }
}

/// A kind of ``Identifier``: a type that is never instantiated, naming the kind in messages.
package protocol IdentifierKind: Sendable {
    /// What the id names, for messages ("client id").
    static var name: String { get }
}

/// The kind of a registered client's id (also a record's writer and user, a policy's reader).
package enum ClientKind: IdentifierKind {
    package static let name = "client id"
}

/// The kind of a record's id (a file record's id is its pending upload's id and names its body).
package enum RecordKind: IdentifierKind {
    package static let name = "record id"
}

/// The kind of a note's id.
package enum NoteKind: IdentifierKind {
    package static let name = "note id"
}

/// A registered client's id.
package typealias ClientID = Identifier<ClientKind>
/// A record's id; a pending file's id, which becomes its record's id at commit.
package typealias RecordID = Identifier<RecordKind>
/// A note's id.
package typealias NoteID = Identifier<NoteKind>
