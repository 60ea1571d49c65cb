import E3DBPrimitives
import Foundation
import NIOCore
import Testing

@testable import E3DBServer

@Suite("FileBodyStore's seam: the local directory keeps its bodies behind this server's own URLs")
struct FileBodySeamTests {
    @Test("LocalFileBodyStore mints no URLs, reports unreceived bodies missing, and removes bodies (twice is fine)")
    func local() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-seam-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try LocalFileBodyStore(directory: directory)
        let id = RecordID.random()
        let body = Data("an encrypted body".utf8)
        let md5 = Hashes.md5(body)
        #expect(store.uploadURL(id: id, size: Int64(body.count), md5: md5, now: 0, expires: 3600) == nil)
        #expect(store.downloadURL(id: id, now: 0, expires: 3600) == nil)
        #expect(await store.verifyStored(id: id, size: Int64(body.count), md5: md5) == .missing)
        let chunks = AsyncThrowingStream<ByteBuffer, any Error> { continuation in
            continuation.yield(ByteBuffer(bytes: body))
            continuation.finish()
        }
        try await store.store(id: id, chunks: chunks, expectedSize: Int64(body.count), expectedMD5: md5)
        #expect(try store.size(id: id) == Int64(body.count))
        let path = directory.appendingPathComponent(id.text).path
        #expect(FileManager.default.contents(atPath: path) == body)
        try await store.remove(id: id)
        #expect(!FileManager.default.fileExists(atPath: path))
        try await store.remove(id: id)
        #expect(throws: E3DBError.self) { try store.size(id: id) }
    }
}
