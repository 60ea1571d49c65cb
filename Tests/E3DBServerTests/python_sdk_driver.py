#!/usr/bin/env python3
"""Tozny's Python SDK (e3db 2.3.0) as an ordinary client of `e3dbkit-server run`.

Usage: python_sdk_driver.py E3DBKIT_BINARY WORK_DIR [--postgres URL] [--large-file-mib N]
(the server is the `e3dbkit-server` binary beside E3DBKIT_BINARY)

1. Starts the server (a real process on a free port) with a registration token and a backup client.
2. Runs the SDK's own integration suites (test_integration, test_notes, test_search_integration,
   test_share_integration, shipped inside the installed package) against it with pytest.
3. Checks what those suites do not: every deny path, malformed and hostile requests (each a 4xx with a JSON
   error, never a 500), TSV1 replay, expired tokens, concurrent updates (exactly one wins), a large file with the
   server's memory bounded, and `kill -9` of the server during a stream of writes and during an upload.

Prints one line per check and a summary "N passed, M failed"; exits 1 when anything failed.
"""
import base64
import concurrent.futures
import copy
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import requests

import e3db
from e3db.tsv1_auth import E3DBTSV1Auth

BINARY, WORK = sys.argv[1], sys.argv[2]
SERVER_BINARY = os.path.join(os.path.dirname(BINARY), "e3dbkit-server")
POSTGRES = sys.argv[sys.argv.index("--postgres") + 1] if "--postgres" in sys.argv else None
LARGE_MIB = int(sys.argv[sys.argv.index("--large-file-mib") + 1]) if "--large-file-mib" in sys.argv else 300
DATA = os.path.join(WORK, "data")
PASSED, FAILED = [], []
SECRETS = []  # tokens, API secrets and private keys that must never reach the server's log or metrics


def check(name, condition, detail=""):
    (PASSED if condition else FAILED).append(name)
    print(("ok   " if condition else "FAIL ") + name + ("" if condition or not detail else ": " + str(detail)[:600]),
          flush=True)


def storage_args():
    return ["--data", DATA] + (["--postgres", POSTGRES] if POSTGRES else [])


def cli(*args):
    r = subprocess.run([SERVER_BINARY, *args, *storage_args()], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError("e3dbkit-server %s failed: %s" % (args[0], r.stderr))
    return r.stdout.strip()


def listening(proc, log, timeout=60):
    """Reads a starting server's standard error into `log` until it says where it listens, and keeps draining it
    there on a thread; the URL."""
    deadline = time.time() + timeout
    url = None
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        log.write(line)
        m = re.search(r"listening on (https?://\S+)", line)
        if m:
            url = m.group(1)
            break
    if not url:
        raise RuntimeError("the server did not start: " + proc.stderr.read()[:2000])

    def drain():
        for line in proc.stderr:
            log.write(line)
            log.flush()

    threading.Thread(target=drain, daemon=True).start()
    return url


class Server:
    """`e3dbkit-server run --port 0`, waiting for its 'listening on' line."""

    def __init__(self, *extra):
        self.log = open(os.path.join(WORK, "server-%d.log" % time.time_ns()), "w+")
        self.proc = subprocess.Popen([SERVER_BINARY, "run", "--port", "0", "--log-level", "info",
                                      *storage_args(), *extra],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.url = listening(self.proc, self.log)

    def rss_peak_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return -1

    def stop(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def register(token, url, name=None, signing=True):
    pk, sk = e3db.Client.generate_keypair()
    spk, ssk = e3db.Client.generate_signing_keypair() if signing else ("", "")
    details = e3db.Client.register(token, name or "client-" + uuid.uuid4().hex[:8], pk, api_url=url,
                                   public_signing_key=spk or None, private_signing_key=ssk or None)
    config = e3db.Config(details.client_id, details.api_key_id, details.api_secret, pk, sk, api_url=url,
                         public_signing_key=spk, private_signing_key=ssk)
    return e3db.Client(config()), config


def bearer(config, url=None):
    c = config()
    r = requests.post((url or c["api_url"]) + "/v1/auth/token", data={"grant_type": "client_credentials"},
                      auth=(c["api_key_id"], c["api_secret"]))
    r.raise_for_status()
    return {"Authorization": "Bearer " + r.json()["access_token"]}


def is_json_error(r):
    try:
        return isinstance(r.json().get("error"), str)
    except ValueError:
        return False


def run_sdk_suites(url, token):
    import e3db.tests as suites
    folder = os.path.dirname(suites.__file__)
    env = dict(os.environ, DEFAULT_API_URL=url, REGISTRATION_TOKEN=token,
               # The SDK's range tests assume the machine's clock is at UTC-07:00 all year (they were written in
               # Arizona-like time): naive datetimes are labelled UTC and expected to miss by seven hours.
               TZ="America/Phoenix", PYTHONDONTWRITEBYTECODE="1",
               # test_integration writes ~/.tozny/e3db.json and fails if it exists: give it a fresh home.
               HOME=tempfile.mkdtemp(dir=WORK))
    for name, at_least in [("test_integration", 36), ("test_notes", 17), ("test_search_integration", 31),
                           ("test_share_integration", 3)]:
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            os.path.join(folder, name + ".py")], capture_output=True, text=True, env=env,
                           timeout=900, cwd=WORK)
        tail = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr[-500:]
        m = re.search(r"(\d+) passed", tail)
        passed = int(m.group(1)) if m else 0
        check("Tozny's own %s suite passes against the server (%s)" % (name, tail),
              r.returncode == 0 and passed >= at_least and "failed" not in tail, r.stdout[-3000:])


def deny_paths(url, token):
    owner, owner_config = register(token, url, "owner")
    reader, reader_config = register(token, url, "reader")
    stranger, stranger_config = register(token, url, "stranger")
    rec = owner.write("deny-type", {"secret": "s1"}, {"tag": "t"})
    rid = str(rec.meta.record_id)
    H = {n: bearer(c) for n, c in [("owner", owner_config), ("reader", reader_config), ("stranger", stranger_config)]}

    r = requests.get(url + "/v1/storage/records/" + rid)
    check("a request without credentials is 401 with a JSON error", r.status_code == 401 and is_json_error(r), r.text)
    r = requests.get(url + "/v1/storage/records/" + rid, headers={"Authorization": "Bearer " + "0" * 64})
    check("an unknown bearer token is 401", r.status_code == 401 and is_json_error(r), r.text)
    r = requests.get(url + "/v1/storage/records/" + rid, headers=H["stranger"])
    check("a client cannot read a record nobody shared with it (404)", r.status_code == 404, r.text)
    r = requests.delete(url + "/v1/storage/records/safe/%s/%s" % (rid, rec.meta.version), headers=H["stranger"])
    check("a client cannot delete another's record (403)", r.status_code == 403, r.text)
    body = {"meta": {"writer_id": str(owner.client_id), "user_id": str(owner.client_id), "type": "deny-type"},
            "data": {"x": "y"}}
    r = requests.put(url + "/v1/storage/records/safe/%s/%s" % (rid, rec.meta.version), headers=H["stranger"],
                     json=body)
    check("a client cannot update another's record (403)", r.status_code == 403, r.text)
    r = requests.post(url + "/v1/storage/records", headers=H["stranger"], json=body)
    check("a client cannot write a record as another writer (403)", r.status_code == 403, r.text)
    path = "/v1/storage/access_keys/%s/%s/%s/deny-type" % (owner.client_id, owner.client_id, owner.client_id)
    r = requests.get(url + path, headers=H["stranger"])
    check("a client cannot fetch an access key addressed to another (403)", r.status_code == 403, r.text)
    stranger_path = "/v1/storage/access_keys/%s/%s/%s/deny-type" % (owner.client_id, owner.client_id,
                                                                     stranger.client_id)
    r = requests.put(url + stranger_path, headers=H["stranger"], json={"eak": "x.y"})
    check("a client cannot store an access key for another's records (403)", r.status_code == 403, r.text)
    policy = "/v1/storage/policy/%s/%s/%s/deny-type" % (owner.client_id, owner.client_id, stranger.client_id)
    r = requests.put(url + policy, headers=H["stranger"], json={"allow": [{"read": {}}]})
    check("a client cannot grant itself read on another's records (403)", r.status_code == 403, r.text)
    r = requests.get(url + "/v1/storage/files/" + rid, headers=H["stranger"])
    check("a client cannot read another's file record (404)", r.status_code == 404, r.text)
    q = {"include_all_writers": True, "include_data": True, "count": 100}
    r = requests.post(url + "/v1/storage/search", headers=H["stranger"], json=q)
    check("search lists nothing another client did not share",
          r.status_code == 200 and all(x["meta"]["writer_id"] == str(stranger.client_id) for x in r.json()["results"]),
          r.text)
    r = requests.post(url + "/v2/search", headers=H["stranger"], json={"include_all_writers": True, "limit": 100})
    check("search v2 lists nothing another client did not share",
          r.status_code == 200 and all(x["meta"]["writer_id"] == str(stranger.client_id) for x in r.json()["results"]),
          r.text)

    # Share, then revoke: the reader keeps the key in its cache, only the server stops it.
    owner.share("deny-type", reader.client_id)
    check("a shared record is readable", reader.read(rec.meta.record_id).data["secret"] == "s1")
    owner.revoke("deny-type", reader.client_id)
    try:
        reader.read(rec.meta.record_id)
        check("revoking takes effect on the next read although the reader caches the key", False)
    except Exception as e:
        check("revoking takes effect on the next read although the reader caches the key", "404" in str(e), e)

    # Authorizers: a stranger cannot share on the owner's behalf until authorized, and loses it on removal.
    try:
        stranger.share_on_behalf_of(owner.client_id, reader.client_id, "deny-type")
        check("an unauthorized client cannot share on another's behalf", False)
    except Exception as e:
        check("an unauthorized client cannot share on another's behalf", "403" in str(e) or "404" in str(e), e)
    owner.add_authorizer("deny-type", stranger.client_id)
    stranger.share_on_behalf_of(owner.client_id, reader.client_id, "deny-type")
    check("an authorizer shares on behalf of the writer", reader.read(rec.meta.record_id).data["secret"] == "s1")
    r = requests.put(url + "/v1/storage/policy/%s/%s/%s/deny-type" % (owner.client_id, owner.client_id,
                                                                      stranger.client_id),
                     headers=H["stranger"], json={"allow": [{"authorizer": {}}]})
    check("an authorizer cannot grant authorizer rights (403)", r.status_code == 403, r.text)
    stranger.revoke_on_behalf_of(owner.client_id, reader.client_id, "deny-type")
    owner.remove_authorizer("deny-type", stranger.client_id)
    try:
        stranger.share_on_behalf_of(owner.client_id, reader.client_id, "deny-type")
        check("a removed authorizer can no longer share", False)
    except Exception as e:
        check("a removed authorizer can no longer share", "403" in str(e) or "409" in str(e), e)
    SECRETS.extend(h["Authorization"][7:] for h in H.values())
    SECRETS.extend(c()["api_secret"] for c in (owner_config, reader_config, stranger_config))
    SECRETS.extend(c()["private_key"] for c in (owner_config, reader_config, stranger_config))
    return owner, owner_config, H["owner"]


def hostile_requests(url, token, owner, owner_config, headers):
    oid = str(owner.client_id)
    cases = [
        ("malformed JSON", "POST", "/v1/storage/records", b"{not json", {"Content-Type": "application/json"}),
        ("JSON of the wrong shape", "POST", "/v1/storage/records", b'{"meta": 3}', {}),
        ("a non-string plain value", "POST", "/v1/storage/records",
         json.dumps({"meta": {"writer_id": oid, "user_id": oid, "type": "t", "plain": {"a": 1}},
                     "data": {"f": "v"}}).encode(), {}),
        ("empty data", "POST", "/v1/storage/records",
         json.dumps({"meta": {"writer_id": oid, "user_id": oid, "type": "t"}, "data": {}}).encode(), {}),
        ("a wrong content type with garbage", "POST", "/v1/storage/search", b"\x00\xff\xfe", {"Content-Type": "image/png"}),
        ("a negative after_index", "POST", "/v1/storage/search", b'{"after_index": -1}', {}),
        ("a v2 limit over 1000", "POST", "/v2/search", b'{"limit": 1001}', {}),
        ("a bad regular expression", "POST", "/v2/search",
         b'{"match": [{"strategy": "REGEXP", "terms": {"values": ["(unclosed"]}}]}', {}),
        ("a bad UUID in an access-key path", "GET", "/v1/storage/access_keys/not-a-uuid/x/y/t", b"", {}),
        ("an unknown policy verb", "PUT", "/v1/storage/policy/%s/%s/%s/t" % (oid, oid, oid),
         b'{"allow": [{"write": {}}]}', {}),
        ("a malformed percent escape", "GET", "/v1/storage/records/%zz", b"", {}),
        ("an unknown endpoint", "GET", "/v1/storage/nothing-here", b"", {}),
        ("a huge count", "POST", "/v1/storage/search", b'{"count": 99999999999999999999999}', {}),
    ]
    for name, method, path, body, extra in cases:
        r = requests.request(method, url + path, data=body, headers=dict(headers, **extra))
        check("%s is a 4xx with a JSON error (got %d)" % (name, r.status_code),
              400 <= r.status_code < 500 and is_json_error(r), r.text)
    r = requests.post(url + "/v1/storage/records", data=b"x" * (17 << 20), headers=headers)
    check("an oversized body is 413 (got %d)" % r.status_code, r.status_code == 413, r.text[:200])
    r = requests.get(url + "/v1/storage/clients/" + oid, headers={"Authorization": "Bearer"})
    check("an empty bearer token is 401", r.status_code == 401, r.text)

    # TSV1: a valid signature once, the same header again (replay), a tampered path, a stale timestamp.
    config = owner_config()
    auth = E3DBTSV1Auth(config["private_signing_key"], config["client_id"])
    prepared = requests.Request("GET", url + "/v2/storage/notes?note_id=" + str(uuid.uuid4()), auth=auth).prepare()
    first = requests.Session().send(prepared)
    check("a TSV1-signed read of an unknown note is 404", first.status_code == 404, first.text)
    again = requests.Session().send(prepared)
    check("a replayed TSV1 nonce is 401", again.status_code == 401 and "nonce" in again.text, again.text)
    tampered = prepared.copy()
    tampered.url = url + "/v2/storage/notes?note_id=" + str(uuid.uuid4())
    r = requests.Session().send(tampered)
    check("a TSV1 signature over another request is 401", r.status_code == 401, r.text)
    r = requests.get(url + "/v2/storage/notes?note_id=x",
                     headers={"Authorization": "TSV1-ED25519-BLAKE2B; garbage"})
    check("a malformed TSV1 header is 401", r.status_code == 401 and is_json_error(r), r.text)

    # Expect: 100-continue (Node's uploads wait for it) and any other expectation (417).
    import socket
    host, port = url[len("http://"):].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"PUT /v1/storage/blobs/" + str(uuid.uuid4()).encode() + b"?op=upload HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        interim = sock.recv(4096)
        sock.sendall(b"hello")
        final = interim
        while b"HTTP/1.1 403" not in final:
            more = sock.recv(4096)
            if not more:
                break
            final += more
    check("Expect: 100-continue is answered with 100 Continue before the body",
          interim.startswith(b"HTTP/1.1 100 Continue") and b"HTTP/1.1 403" in final, (interim, final))
    r = requests.post(url + "/v1/storage/search", headers=dict(headers, Expect="something-else"), json={})
    check("another Expect value is 417", r.status_code == 417 and is_json_error(r), r.text)


def concurrent_updates(owner):
    rec = owner.write("race", {"n": "0"})
    barrier = threading.Barrier(8)

    def attempt(i):
        mine = copy.deepcopy(rec)
        mine.data = {"n": str(i)}
        barrier.wait()
        try:
            owner.update(mine)
            return "ok"
        except e3db.ConflictError:
            return "409"

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(attempt, range(8)))
    check("eight concurrent updates of one version: exactly one wins, the others get 409 (%s)" % results,
          results.count("ok") == 1 and results.count("409") == 7)


def large_file(url, token, server):
    owner, _ = register(token, url, "large")
    src = os.path.join(WORK, "large.bin")
    with open(src, "wb") as f:
        block = os.urandom(1 << 20)
        for i in range(LARGE_MIB):
            f.write(block[i % 7:] + block[:i % 7])
    before = server.rss_peak_kib()
    started = time.time()
    rec = owner.write_file("large-file", src)
    dst = os.path.join(WORK, "large.out")
    owner.read_file(rec.record_id, dst)
    elapsed = time.time() - started

    def digest(p):
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.digest()

    check("a %d MiB file goes up and comes back byte for byte (%.1f s through the Python SDK)" % (LARGE_MIB, elapsed),
          digest(src) == digest(dst))
    after = server.rss_peak_kib()
    check("the server's peak memory grew by %d MiB for a %d MiB file (bounded: < 64 MiB)"
          % ((after - before) // 1024, LARGE_MIB), after - before < 64 * 1024, (before, after))
    os.remove(src)
    os.remove(dst)


def tls(token):
    cert, key = os.path.join(WORK, "cert.pem"), os.path.join(WORK, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    server = Server("--tls-cert", cert, "--tls-key", key)
    try:
        check("with --tls-cert/--tls-key the server says it listens on https", server.url.startswith("https://"),
              server.url)
        r = requests.get(server.url + "/healthz", verify=cert)
        check("HTTPS requests verify against the configured certificate", r.status_code == 200, r.text)
        os.environ["REQUESTS_CA_BUNDLE"] = cert
        client, _ = register(token, server.url, "tls-client")
        rec = client.write("tls-type", {"k": "v"})
        pending = client.read(rec.meta.record_id)
        check("the Python SDK registers, writes and reads over HTTPS", pending.data["k"] == "v")
        try:
            requests.get(server.url.replace("https://", "http://") + "/healthz", timeout=5)
            plain_refused = False
        except requests.exceptions.RequestException:
            plain_refused = True
        check("plain HTTP is not served on the TLS port", plain_refused)
    finally:
        os.environ.pop("REQUESTS_CA_BUNDLE", None)
        server.stop()


def several_processes(token):
    """Two server processes on one database (behind a load balancer): no state lives in a process."""
    a, b = Server(), Server()
    try:
        client, config = register(token, a.url, "two-processes")
        h = bearer(config, a.url)
        r = requests.get(b.url + "/v1/storage/clients/" + str(client.client_id), headers=h)
        check("a bearer token issued by one process works on another", r.status_code == 200, r.text)
        rec = client.write("lb-type", {"k": "v"})
        other = e3db.Client(dict(config(), api_url=b.url))
        check("a record written through one process reads back through the other",
              other.read(rec.meta.record_id).data["k"] == "v")
        c = config()
        auth = E3DBTSV1Auth(c["private_signing_key"], c["client_id"])
        prepared = requests.Request("GET", a.url + "/v2/storage/notes?note_id=" + str(uuid.uuid4()), auth=auth).prepare()
        first = requests.Session().send(prepared)
        replay = prepared.copy()
        replay.url = prepared.url.replace(a.url, b.url)
        again = requests.Session().send(replay)
        check("a TSV1 nonce used on one process is refused as a replay on the other",
              first.status_code == 404 and again.status_code == 401 and "nonce" in again.text, (first.text, again.text))
        v = rec.meta.version
        mine = copy.deepcopy(rec)
        mine.data = {"k": "a"}
        theirs = copy.deepcopy(rec)
        theirs.data = {"k": "b"}
        results = []
        for who, target in ((client, mine), (other, theirs)):
            try:
                who.update(target)
                results.append("ok")
            except e3db.ConflictError:
                results.append("409")
        check("the same version updated through two processes: one wins, the other gets 409 (%s)" % results,
              sorted(results) == ["409", "ok"])
    finally:
        a.stop()
        b.stop()


def expired_tokens(token):
    short = Server("--token-lifetime", "1")
    try:
        client, config = register(token, short.url, "short-lived")
        h = bearer(config)
        ok = requests.get(short.url + "/v1/storage/clients/" + str(client.client_id), headers=h)
        time.sleep(2.2)
        late = requests.get(short.url + "/v1/storage/clients/" + str(client.client_id), headers=h)
        check("a bearer token works until expires_at and is 401 after it",
              ok.status_code == 200 and late.status_code == 401 and is_json_error(late), (ok.text, late.text))
    finally:
        short.stop()


def kill_during_writes(token):
    server = Server()
    client, config = register(token, server.url, "crash")
    acknowledged = []
    stop = threading.Event()

    def writer():
        while not stop.is_set():
            try:
                rec = client.write("crash-type", {"n": str(len(acknowledged))})
                acknowledged.append(str(rec.meta.record_id))
            except Exception:
                return

    t = threading.Thread(target=writer)
    t.start()
    time.sleep(1.5)
    server.stop(signal.SIGKILL)
    stop.set()
    t.join()
    # An upload cut off by a kill: its pending file must stay uncommittable and its bytes invisible.
    server2 = Server()
    client = e3db.Client(dict(config(), api_url=server2.url))
    h = bearer(config, server2.url)
    missing = [rid for rid in acknowledged if requests.get(server2.url + "/v1/storage/records/" + rid,
                                                           headers=h).status_code != 200]
    check("kill -9 during %d acknowledged writes: every acknowledged record is there after a restart"
          % len(acknowledged), len(acknowledged) > 0 and not missing, missing[:5])
    readable = client.query(record_type=["crash-type"], data=True, page_size=1000)
    values = sorted(int(r.data["n"]) for r in readable)
    check("no half-written record is visible after the kill (%d records, all decrypt)" % len(values),
          len(values) >= len(acknowledged) and len(set(values)) == len(values))
    pending = requests.post(server2.url + "/v1/storage/files", headers=h, json={
        "meta": {"writer_id": str(client.client_id), "user_id": str(client.client_id), "type": "crash-file",
                 "file_meta": {"checksum": base64.b64encode(hashlib.md5(b"x" * (8 << 20)).digest()).decode(),
                               "compression": "raw", "size": 8 << 20}}, "data": {}}).json()

    def slow_body():
        for _ in range(4):
            yield b"x" * (1 << 20)
            time.sleep(0.3)
        time.sleep(60)
        yield b""

    t = threading.Thread(target=lambda: requests.put(pending["file_url"], data=slow_body(),
                                                     headers={"Content-Type": "application/octet-stream"}))
    t.daemon = True
    t.start()
    time.sleep(1.0)
    server2.stop(signal.SIGKILL)
    server3 = Server()
    h = bearer(config, server3.url)
    r = requests.patch(server3.url + "/v1/storage/files/" + pending["id"], headers=h)
    check("a file whose upload was cut by kill -9 cannot be committed (got %d)" % r.status_code,
          r.status_code == 400 and is_json_error(r), r.text)
    check("no partial body is visible under the data directory",
          not os.path.exists(os.path.join(DATA, "files", pending["id"])))
    server3.stop()


def main():
    os.makedirs(WORK, exist_ok=True)
    cli("migrate")  # administrative commands do not migrate
    token = cli("token", "create")
    server = Server("--metrics")
    try:
        backup = e3db.Client.register(token, "backup", e3db.Client.generate_keypair()[0], api_url=server.url)
        cli("backup-client", "--client-id", str(backup.client_id))
        run_sdk_suites(server.url, token)
        owner, owner_config, headers = deny_paths(server.url, token)
        hostile_requests(server.url, token, owner, owner_config, headers)
        concurrent_updates(owner)
        large_file(server.url, token, server)
        metrics = requests.get(server.url + "/metrics").text
        check("GET /metrics serves Prometheus counters by route and status",
              'e3db_http_requests_total{method="POST",route="/v1/storage/records",status="201"}' in metrics,
              metrics[:500])
        status = server.stop()
        server.log.flush()
        server.log.seek(0)
        log = server.log.read()
        leaked = [s[:8] for s in SECRETS if s and (s in log or s in metrics)]
        check("no token, API secret or private key appears in the server's log (%d lines) or metrics"
              % log.count("\n"), log.count("\n") > 100 and not leaked, leaked)
        check("SIGTERM stops the server cleanly (exit status %d)" % status, status == 0)
    finally:
        if server.proc.poll() is None:
            server.stop(signal.SIGKILL)
    several_processes(token)
    expired_tokens(token)
    tls(token)
    kill_during_writes(token)
    print("%d passed, %d failed" % (len(PASSED), len(FAILED)))
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
