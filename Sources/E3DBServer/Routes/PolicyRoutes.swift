import E3DBAPI
import E3DBCanonicalJSON
import E3DBPrimitives
import Foundation
import HTTPTypes
import Hummingbird

extension E3DBService {
    /// Sharing policies (`/v1/storage/policy`), for registered clients: put one, remove a reader's authorizers,
    /// list them.
    func addPolicyRoutes(to router: Router<E3DBRequestContext>) {
        router.group().add(middleware: Authentication(service: self, requirement: .client))
            .on(API.Endpoints.putPolicy) {
                try await self.putPolicy(
                    $0, user: $0.parameter("user"), writer: $0.parameter("writer"),
                    reader: $0.parameter("reader"), type: $0.parameter("type"))
            }
            .on(API.Endpoints.removeAuthorizers) {
                try await self.deleteAuthorizers(
                    $0, user: $0.parameter("user"), writer: $0.parameter("writer"),
                    reader: $0.parameter("reader"))
            }
            .on(API.Endpoints.outgoingSharing) { try await self.listPolicies($0, .outgoing) }
            .on(API.Endpoints.incomingSharing) { try await self.listPolicies($0, .incoming) }
            .on(API.Endpoints.proxies) { try await self.listPolicies($0, .proxies) }
            .on(API.Endpoints.granted) { try await self.listPolicies($0, .granted) }
    }

    func putPolicy(_ r: APIRequest, user: String, writer: String, reader: String, type: String) async throws
        -> Response
    {
        let caller = try r.caller()
        let t = try tuple(writer: writer, user: user, reader: reader, type: type)
        guard t.userID == t.writerID else { throw E3DBError(.badRequest, "user and writer must be the same client") }
        let req = try JSONBody.decode(
            API.PolicyRequest.self, from: try await body(r, for: .client(caller.clientID)),
            what: "policy")
        func verbs(_ list: [JSONObject]?) throws -> Set<String> {
            var out = Set<String>()
            for element in list ?? [] {
                for key in element.keys {
                    guard key == "read" || key == "authorizer" else {
                        throw E3DBError(
                            .badRequest, "unknown policy verb \(key.prefix(40)); expected read or authorizer")
                    }
                    out.insert(key)
                }
            }
            return out
        }
        let allow = try verbs(req.allow)
        let deny = try verbs(req.deny)
        guard !allow.isEmpty || !deny.isEmpty else {
            throw E3DBError(.badRequest, "a policy needs allow or deny with at least one verb")
        }
        let verbs = allow.union(deny)
        if verbs.contains("authorizer") { try await authorize(.changeAuthorizer, caller: caller.clientID, tuple: t) }
        if verbs.contains("read") { try await authorize(.changeRead, caller: caller.clientID, tuple: t) }
        // Deny wins over allow for a verb named in both. One statement: a concurrent change of the other verb stays.
        func change(_ verb: String) -> Bool? { deny.contains(verb) ? false : (allow.contains(verb) ? true : nil) }
        try await storage.changePolicy(t, read: change("read"), authorize: change("authorizer"), by: caller.clientID)
        return JSONBody.raw("{}", status: .created)
    }

    func deleteAuthorizers(_ r: APIRequest, user: String, writer: String, reader: String) async throws
        -> Response
    {
        let caller = try r.caller()
        let t = try tuple(writer: writer, user: user, reader: reader, type: "-")
        try await authorize(.removeAuthorizers, caller: caller.clientID, tuple: t)
        try await storage.removeAuthorizations(userID: t.userID, writerID: t.writerID, readerID: t.readerID)
        return JSONBody.raw("{}", status: .ok)
    }

    func listPolicies(_ r: APIRequest, _ listing: PolicyListing) async throws -> Response {
        let caller = try r.caller()
        let rows = try await storage.listPolicies(listing, clientID: caller.clientID)
        var names: [ClientID: String] = [:]
        func name(_ id: ClientID) async throws -> String {
            if let n = names[id] { return n }
            let n = try await storage.client(id: id)?.name ?? ""
            names[id] = n
            return n
        }
        /// Each row as `make(id, name, type)` of the client `party` names (the other side of the sharing).
        func sharing<T: Encodable>(
            _ party: KeyPath<AccessTuple, ClientID>, _ make: (String, String, String) -> T
        ) async throws -> Response {
            var out: [T] = []
            for p in rows {
                let id = p.tuple[keyPath: party]
                out.append(make(id.text, try await name(id), p.tuple.type))
            }
            return try JSONBody.response(out)
        }
        switch listing {
        case .outgoing:
            return try await sharing(\.readerID, API.OutgoingSharing.init(readerID:readerName:recordType:))
        case .incoming:
            return try await sharing(\.writerID, API.IncomingSharing.init(writerID:writerName:recordType:))
        case .proxies, .granted:
            return try JSONBody.response(
                rows.map {
                    API.AuthorizerPolicy(
                        authorizerID: $0.tuple.readerID.text, writerID: $0.tuple.writerID.text,
                        userID: $0.tuple.userID.text, recordType: $0.tuple.type,
                        authorizedBy: ($0.authorizedBy ?? $0.tuple.writerID).text)
                })
        }
    }
}
