/// The endpoints of the E3DB API (spec api §2): the client builds its requests from them and the server's router
/// registers its routes from them, so each method and path is written once.
extension API {
    /// A body-less request or response.
    public struct NoBody: APIBody, Codable, Hashable {}

    /// One endpoint: its method, its path template, and the types of its request and response bodies
    /// (``API/NoBody`` where there is none).
    public struct Endpoint<RequestBody: APIBody, ResponseBody: APIBody>: Sendable, Hashable, CustomStringConvertible {
        /// The HTTP method, uppercase.
        public let method: String
        /// The path's segments; a segment `{name}` is a parameter.
        public let segments: [String]

        init(_ method: String, _ template: String) {
            self.method = method
            segments = template.split(separator: "/").map(String.init)
        }

        /// The path template, `/v1/storage/records/{id}`.
        public var template: String { "/" + segments.joined(separator: "/") }

        public var description: String { method + " " + template }

        /// The path's segments with `parameters` in the places of the template's parameters, in order (not yet
        /// percent-encoded).
        /// - Parameter parameters: one value per parameter of the template.
        /// - Returns: the segments.
        public func path(_ parameters: [String]) -> [String] {
            var values = parameters.makeIterator()
            return segments.map { $0.hasPrefix("{") ? values.next() ?? "" : $0 }
        }
    }

    /// The endpoints, by what they do.
    public enum Endpoints {
        /// A Bearer token for a client's API key pair (HTTP Basic; the body is a form).
        public static let token = Endpoint<NoBody, TokenResponse>("POST", "v1/auth/token")
        /// Registers a client with a registration token.
        public static let register = Endpoint<RegistrationRequest, RegistrationResponse>(
            "POST", "v1/account/e3db/clients/register")
        /// Marks a client's credentials as backed up.
        public static let backup = Endpoint<NoBody, NoBody>("POST", "v1/account/backup/{token}/{client}")
        /// A client's public keys.
        public static let client = Endpoint<NoBody, ClientInfo>("GET", "v1/storage/clients/{id}")
        /// The access key of (writer, user, reader, type).
        public static let readAccessKey = Endpoint<NoBody, EAKInfo>(
            "GET", "v1/storage/access_keys/{writer}/{user}/{reader}/{type}")
        /// Stores an access key.
        public static let putAccessKey = Endpoint<PutAccessKeyRequest, NoBody>(
            "PUT", "v1/storage/access_keys/{writer}/{user}/{reader}/{type}")
        /// Deletes an access key.
        public static let deleteAccessKey = Endpoint<NoBody, NoBody>(
            "DELETE", "v1/storage/access_keys/{writer}/{user}/{reader}/{type}")
        /// Allows or denies `read` and `authorizer` on (writer, type) for a reader.
        public static let putPolicy = Endpoint<PolicyRequest, NoBody>(
            "PUT", "v1/storage/policy/{user}/{writer}/{reader}/{type}")
        /// Removes a reader's authorizations on every type of a writer.
        public static let removeAuthorizers = Endpoint<NoBody, NoBody>(
            "DELETE", "v1/storage/policy/{user}/{writer}/{reader}")
        /// The readers the caller shares types with.
        public static let outgoingSharing = Endpoint<NoBody, [OutgoingSharing]>("GET", "v1/storage/policy/outgoing")
        /// The writers that share types with the caller.
        public static let incomingSharing = Endpoint<NoBody, [IncomingSharing]>("GET", "v1/storage/policy/incoming")
        /// The authorizers the caller appointed.
        public static let proxies = Endpoint<NoBody, [AuthorizerPolicy]>("GET", "v1/storage/policy/proxies")
        /// The writers that appointed the caller an authorizer.
        public static let granted = Endpoint<NoBody, [AuthorizerPolicy]>("GET", "v1/storage/policy/granted")
        /// Writes a record.
        public static let writeRecord = Endpoint<Record, Record>("POST", "v1/storage/records")
        /// Reads a record.
        public static let readRecord = Endpoint<NoBody, Record>("GET", "v1/storage/records/{id}")
        /// Updates a record at a version.
        public static let updateRecord = Endpoint<Record, Record>("PUT", "v1/storage/records/safe/{id}/{version}")
        /// Deletes a record at a version.
        public static let deleteRecordVersion = Endpoint<NoBody, NoBody>(
            "DELETE", "v1/storage/records/safe/{id}/{version}")
        /// Deletes a record at any version.
        public static let deleteRecord = Endpoint<NoBody, NoBody>("DELETE", "v1/storage/records/{id}")
        /// Creates a pending file record, answered with its upload URL.
        public static let createFile = Endpoint<Record, PendingFile>("POST", "v1/storage/files")
        /// Commits an uploaded file.
        public static let commitFile = Endpoint<NoBody, Record>("PATCH", "v1/storage/files/{id}")
        /// Reads a file record, with its download URL.
        public static let readFile = Endpoint<NoBody, Record>("GET", "v1/storage/files/{id}")
        /// Uploads a file body (capability URL; the body is the ciphertext).
        public static let uploadBody = Endpoint<NoBody, NoBody>("PUT", "v1/storage/blobs/{id}")
        /// Downloads a file body (capability URL).
        public static let downloadBody = Endpoint<NoBody, NoBody>("GET", "v1/storage/blobs/{id}")
        /// Searches records (v1).
        public static let query = Endpoint<QueryRequest, QueryResponse>("POST", "v1/storage/search")
        /// Searches records (v2).
        public static let search = Endpoint<SearchRequest, SearchResponse>("POST", "v2/search")
        /// Writes a note.
        public static let writeNote = Endpoint<Note, Note>("POST", "v2/storage/notes")
        /// Reads a note (`note_id` or `id_string` in the query).
        public static let readNote = Endpoint<NoBody, Note>("GET", "v2/storage/notes")
        /// Replaces a named note.
        public static let replaceNote = Endpoint<Note, Note>("PUT", "v2/storage/notes")
        /// Deletes a note.
        public static let deleteNote = Endpoint<NoBody, NoBody>("DELETE", "v2/storage/notes/{id}")
    }
}
