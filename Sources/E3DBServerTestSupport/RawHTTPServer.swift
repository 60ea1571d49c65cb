import E3DBTestSupport
import Foundation

/// A raw HTTP/1.1 server (Python, on a free port) for what e3dbkit-server never does, for the transports' tests: a body cut short of its
/// Content-Length, an answer that never comes, a redirect, a large body made on the fly, an upload it counts,
/// `/status099`, which answers status 099 (three digits, no HTTP status), `/headers/N`, which answers with N header
/// fields besides its `Connection` and `Content-Length`, and `/echo…`, which answers with the
/// request target (path and query) exactly as it arrived. It closes every connection after one answer, and every
/// answer says so (`Connection: close`), so no client reuses a connection it closed. Over TLS with a certificate and key of the caller's.
package final class RawHTTPServer: Sendable {
    static let script = #"""
        import socket, ssl, sys, threading, time
        tls = None
        if len(sys.argv) == 3:
            tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            tls.load_cert_chain(sys.argv[1], sys.argv[2])
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        print(s.getsockname()[1], flush=True)
        block = bytes(range(256)) * 4096
        def handle(c):
            if tls is not None:
                try:
                    c = tls.wrap_socket(c, server_side=True)
                except (OSError, ssl.SSLError):
                    c.close()
                    return
            f = c.makefile("rb")
            path = f.readline().decode().split()[1]
            length = None
            while True:
                line = f.readline()
                if line in (b"\r\n", b""):
                    break
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            if path == "/status099":
                if length:
                    f.read(length)
                c.sendall(b"HTTP/1.1 099 Odd\r\nConnection: close\r\nContent-Length: 2\r\n\r\nno")
            elif path.startswith("/headers/"):
                fields = b"".join(b"X-Field-%d: %d\r\n" % (i, i) for i in range(int(path[9:])))
                c.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n" + fields + b"Content-Length: 2\r\n\r\nok")
            elif "/slow" in path:
                time.sleep(300)  # never answers within a test: longer than any client timeout (30 s by default)
            elif path == "/short":
                c.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 100000\r\n\r\n" + b"x" * 1000)
            elif path == "/redirect":
                c.sendall(b"HTTP/1.1 302 Found\r\nConnection: close\r\nLocation: http://127.0.0.1:1/elsewhere\r\nContent-Length: 0\r\n\r\n")
            elif path.startswith("/echo"):
                body = path.encode()
                c.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            elif path.startswith("/big/"):
                n = int(path[5:])
                c.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % n)
                sent = 0
                while sent < n:
                    k = min(len(block), n - sent)
                    c.sendall(block[:k])
                    sent += k
            elif path == "/upload":
                got = 0
                while length is not None and got < length:
                    piece = f.read(min(1 << 20, length - got))
                    if not piece:
                        break
                    got += len(piece)
                body = ("%s %d" % (length, got)).encode()
                c.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            try:
                c.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            c.close()
        while True:
            c, _ = s.accept()
            threading.Thread(target=handle, args=(c,), daemon=True).start()
        """#

    let process: RunningProcess
    /// `http://127.0.0.1:PORT`, or `https://127.0.0.1:PORT` over TLS.
    package let url: String

    /// Starts the server, over TLS with `tls`'s certificate (PEM, for 127.0.0.1) and key files if given.
    package init(tls: (cert: String, key: String)? = nil) async throws {
        let files = tls.map { [$0.cert, $0.key] } ?? []
        process = try RunningProcess(
            URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c", Self.script] + files, reading: .standardOutput)
        let line = try await process.readOutput { $0.contains(UInt8(ascii: "\n")) }
        let port = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard Int(port) != nil else {
            process.signal(SIGKILL)
            throw ServerProcess.ServerFailure(description: "the raw HTTP server did not start")
        }
        url = (tls == nil ? "http" : "https") + "://127.0.0.1:\(port)"
    }

    package func stop() { process.signal(SIGKILL) }
}
