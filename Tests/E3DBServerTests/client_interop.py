#!/usr/bin/env python3
"""`e3dbkit client` and Tozny's Python SDK (e3db 2.3.0) through one `e3dbkit-server run`, both directions.

Usage: client_interop.py E3DBKIT_BINARY WORK_DIR [--postgres URL]

Credential files written by each load unchanged in the other (Python's profile layout ~/.tozny/<profile>/e3db.json
is read by `--config PROFILE`); records written and shared by each are read, queried and revoked by the other;
stale versions, unknown ids and ciphertext tampered with on the server are refused with the documented exit codes.
Prints one line per check and "N passed, M failed".
"""
import json
import os
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_sdk_driver as harness  # noqa: E402  (the Server class and check helpers; argv has the same layout)

import e3db  # noqa: E402

BINARY, WORK = harness.BINARY, harness.WORK
check = harness.check
HOME = os.path.join(WORK, "home")


def cli(*args, stdin=None):
    env = dict(os.environ, HOME=HOME)
    env.pop("E3DB_PROFILE", None)
    r = subprocess.run([BINARY, "client", *args], input=stdin, capture_output=True, text=True, env=env, timeout=120,
                       cwd=WORK)
    return r.returncode, r.stdout, r.stderr


def psql(sql):
    """Runs one statement on the test's PostgreSQL through psql (the password through PGPASSWORD, never argv)."""
    from urllib.parse import urlparse
    u = urlparse(harness.POSTGRES)
    env = dict(os.environ, PGPASSWORD=u.password or "")
    r = subprocess.run(["psql", "-h", u.hostname, "-p", str(u.port), "-U", u.username, "-d", u.path.lstrip("/"),
                        "-At", "-c", sql], capture_output=True, text=True, env=env, check=True)
    return r.stdout.strip()


def main():
    os.makedirs(HOME, exist_ok=True)
    harness.cli("migrate")
    token = harness.cli("token", "create")
    server = harness.Server()
    url = server.url
    try:
        token_file = os.path.join(WORK, "token")
        with open(token_file, "w") as f:
            f.write(token + "\n")

        # Swift registers alice; the file it writes drives the Python SDK unchanged.
        alice_file = os.path.join(WORK, "alice.json")
        code, out, err = cli("register", "--api-url", url, "--token-file", token_file, "--name", "alice",
                             "--out", alice_file)
        check("client register writes a credential file and prints the client id", code == 0 and "client_id" in out,
              err)
        check("the credential file is mode 0600", oct(os.stat(alice_file).st_mode & 0o777) == "0o600")
        with open(alice_file) as f:
            alice_config = json.load(f)
        alice_py = e3db.Client(alice_config)
        alice_id = alice_config["client_id"]

        # Python registers bob and saves a profile the way the SDK does; Swift reads it with --config PROFILE.
        pk, sk = e3db.Client.generate_keypair()
        spk, ssk = e3db.Client.generate_signing_keypair()
        bob = e3db.Client.register(token, "bob", pk, api_url=url, public_signing_key=spk, private_signing_key=ssk)
        bob_config = e3db.Config(bob.client_id, bob.api_key_id, bob.api_secret, pk, sk, api_url=url,
                                 public_signing_key=spk, private_signing_key=ssk)
        old_home = os.environ.get("HOME")
        os.environ["HOME"] = HOME
        try:
            bob_config.write("bobprofile")
        finally:
            if old_home is not None:
                os.environ["HOME"] = old_home
        bob_py = e3db.Client(bob_config())
        bob_id = str(bob.client_id)

        # Python writes (without rec_sig, as the SDK does online) and shares; Swift refuses the unsigned record by
        # default, and reads and queries it with --allow-unsigned.
        rec = bob_py.write("py-type", {"secret": "from python", "n": "1"}, {"origin": "py"})
        bob_py.share("py-type", alice_id)
        code, out, err = cli("read", "--config", alice_file, str(rec.meta.record_id))
        check("Swift refuses an unsigned record by default (exit 2)", code == 2 and out == "" and "rec_sig" in err,
              (code, err))
        code, out, err = cli("read", "--config", alice_file, "--allow-unsigned", str(rec.meta.record_id))
        got = json.loads(out) if code == 0 else {}
        check("Swift reads a record Python wrote and shared (signature_status absent)",
              got.get("data") == {"secret": "from python", "n": "1"} and got["meta"]["plain"] == {"origin": "py"}
              and got.get("signature_status") == "absent", err)
        code, out, err = cli("query", "--config", alice_file, "--writer", bob_id, "--include-data", "--allow-unsigned")
        lines = [json.loads(l) for l in out.splitlines() if l.strip()]
        check("Swift queries by writer and decrypts what Python shared",
              code == 0 and [l["data"]["secret"] for l in lines] == ["from python"], (out, err))

        # Swift writes (signed with rec_sig) and shares; Python reads.
        data_file = os.path.join(WORK, "data.json")
        with open(data_file, "w") as f:
            json.dump({"secret": "from swift", "emoji": "\U0001F510"}, f)
        code, out, err = cli("write", "--config", alice_file, "--type", "sw-type", data_file)
        written = json.loads(out) if code == 0 else {}
        check("Swift writes a record and prints it decrypted", written.get("data", {}).get("secret") == "from swift",
              err)
        rid = written["meta"]["record_id"]
        code, out, err = cli("share", "--config", alice_file, "--type", "sw-type", "--reader", bob_id)
        check("Swift shares a type", code == 0, err)
        py_read = bob_py.read(rid)
        check("Python reads and decrypts what Swift wrote and shared",
              py_read.data == {"secret": "from swift", "emoji": "\U0001F510"}, py_read.data)
        check("Python sees Swift in its incoming sharing",
              any(str(s.writer_id) == alice_id and s.record_type == "sw-type" for s in bob_py.incoming_sharing()))
        code, out, err = cli("read", "--config", "bobprofile", rid)
        check("Swift reads with a Python-written profile (--config PROFILE)",
              code == 0 and json.loads(out)["data"]["secret"] == "from swift", err)

        # Versions: a stale update and a stale delete are 409 (exit 1), a current one works.
        version = written["meta"]["version"]
        with open(data_file, "w") as f:
            json.dump({"secret": "v2"}, f)
        code, out, err = cli("update", "--config", alice_file, "--version", version, rid, data_file)
        check("Swift updates a record at its current version", code == 0 and json.loads(out)["data"] == {"secret": "v2"},
              err)
        code, out, err = cli("update", "--config", alice_file, "--version", version, rid, data_file)
        check("an update at a stale version exits 1 with HTTP 409", code == 1 and "409" in err, (code, err))
        check("Python reads the update", bob_py.read(rid).data == {"secret": "v2"})

        # Revoke: Python's cached key no longer helps.
        code, _, err = cli("revoke", "--config", alice_file, "--type", "sw-type", "--reader", bob_id)
        try:
            bob_py.read(rid)
            revoked = False
        except Exception as e:
            revoked = "404" in str(e)
        check("after Swift revokes, Python's read is refused", code == 0 and revoked, err)

        # Authorizers and sharing on behalf, both ways; carol (Swift) is the reader.
        carol_file = os.path.join(WORK, "carol.json")
        code, out, err = cli("register", "--api-url", url, "--token-file", token_file, "--name", "carol",
                             "--out", carol_file)
        carol_id = json.loads(out)["client_id"] if code == 0 else ""
        check("Swift registers carol", code == 0, err)

        def lines_of(out):
            return [json.loads(l) for l in out.splitlines() if l.strip()]

        py_auth = bob_py.write("py-auth", {"secret": "authorized by python"})
        bob_py.add_authorizer("py-auth", alice_id)
        code, out, err = cli("authorized-by", "--config", alice_file)
        check("Swift authorized-by lists the grant Python's add_authorizer made",
              code == 0 and any(l["authorized_by"] == bob_id and l["record_type"] == "py-auth" for l in lines_of(out)),
              (out, err))
        code, out, err = cli("share", "--config", alice_file, "--type", "py-auth", "--reader", carol_id,
                             "--on-behalf-of", bob_id)
        check("Swift, as Python's authorizer, shares on its behalf",
              code == 0 and json.loads(out)["on_behalf_of"] == bob_id, err)
        code, out, err = cli("read", "--config", carol_file, "--allow-unsigned", str(py_auth.meta.record_id))
        check("the reader Swift shared with on Python's behalf reads Python's record",
              code == 0 and json.loads(out)["data"] == {"secret": "authorized by python"}, err)
        check("Python's outgoing sharing shows the reader Swift added on its behalf",
              any(str(o.reader_id) == carol_id and o.record_type == "py-auth" for o in bob_py.outgoing_sharing()))
        code, out, err = cli("revoke", "--config", alice_file, "--type", "py-auth", "--reader", carol_id,
                             "--on-behalf-of", bob_id)
        check("Swift revokes on Python's behalf", code == 0, err)
        code, out, err = cli("read", "--config", carol_file, "--allow-unsigned", str(py_auth.meta.record_id))
        check("after the revocation on behalf, the reader gets 404", code == 1 and "404" in err, (code, err))
        bob_py.remove_authorizer("py-auth", alice_id)
        code, out, err = cli("share", "--config", alice_file, "--type", "py-auth", "--reader", carol_id,
                             "--on-behalf-of", bob_id)
        check("after Python's remove_authorizer, Swift can no longer share on its behalf", code != 0, (code, err))

        with open(data_file, "w") as f:
            json.dump({"secret": "authorized by swift"}, f)
        code, out, err = cli("write", "--config", alice_file, "--type", "sw-auth", data_file)
        sw_auth = json.loads(out)["meta"]["record_id"] if code == 0 else ""
        code, out, err = cli("authorizer", "add", "--config", alice_file, "--authorizer", bob_id, "--type", "sw-auth")
        check("Swift adds Python as an authorizer", code == 0 and json.loads(out)["authorizer"] == bob_id, err)
        check("Python's get_authorized_by lists Swift's grant",
              any(str(p.authorized_by) == alice_id and p.record_type == "sw-auth" for p in bob_py.get_authorized_by()))
        code, out, err = cli("authorizer", "list", "--config", alice_file)
        check("Swift authorizer list shows Python",
              code == 0 and [(l["authorizer_id"], l["record_type"]) for l in lines_of(out)] == [(bob_id, "sw-auth")],
              (out, err))
        bob_py.share_on_behalf_of(alice_id, carol_id, "sw-auth")
        code, out, err = cli("read", "--config", carol_file, sw_auth)
        check("Python shares Swift's record on its behalf; the reader verifies and reads it",
              code == 0 and json.loads(out)["data"] == {"secret": "authorized by swift"}
              and json.loads(out)["signature_status"] == "verified", err)
        code, out, err = cli("sharing", "incoming", "--config", carol_file)
        check("Swift sharing incoming lists the writer Python shared for",
              code == 0 and [(l["writer_id"], l["record_type"]) for l in lines_of(out)] == [(alice_id, "sw-auth")],
              (out, err))
        code, out, err = cli("sharing", "outgoing", "--config", alice_file)
        check("Swift sharing outgoing lists the reader Python added",
              code == 0 and any(l["reader_id"] == carol_id and l["record_type"] == "sw-auth" for l in lines_of(out)),
              (out, err))
        code, out, err = cli("sharing", "incoming", "--config", alice_file)
        check("Swift sharing incoming agrees with Python's outgoing sharing",
              code == 0 and {(l["writer_id"], l["record_type"]) for l in lines_of(out) if l["writer_id"] == bob_id}
              == {(bob_id, str(o.record_type)) for o in bob_py.outgoing_sharing() if str(o.reader_id) == alice_id},
              (out, err))
        bob_py.revoke_on_behalf_of(alice_id, carol_id, "sw-auth")
        code, out, err = cli("read", "--config", carol_file, sw_auth)
        check("Python revokes on Swift's behalf", code == 1 and "404" in err, (code, err))
        code, out, err = cli("authorizer", "remove", "--config", alice_file, "--authorizer", bob_id, "--all-types")
        check("Swift removes its authorizer for every type", code == 0, err)
        check("Python's get_authorized_by no longer lists Swift",
              not any(str(p.authorized_by) == alice_id for p in bob_py.get_authorized_by()))
        try:
            bob_py.share_on_behalf_of(alice_id, carol_id, "sw-auth")
            refused = False
        except Exception:
            refused = True
        check("Python can no longer share on Swift's behalf", refused)

        # Search v2: what each side wrote, found by the other's search; the same query gives the same records.
        from e3db.types import Search
        for color in ["teal", "teal", "red"]:
            with open(data_file, "w") as f:
                json.dump({"color": color}, f)
            plain_file = os.path.join(WORK, "plain.json")
            with open(plain_file, "w") as f:
                json.dump({"color": color}, f)
            cli("write", "--config", alice_file, "--type", "sw-search", "--plain", plain_file, data_file)
        py_found = alice_py.search(
            Search(include_data=True).match(condition="AND", record_types=["sw-search"], values=["teal"]))
        code, out, err = cli("search", "--config", alice_file, "--type", "sw-search", "--value", "teal",
                             "--condition", "AND", "--include-data")
        page = json.loads(out) if code == 0 else {}
        check("Python's search finds the records Swift wrote, decrypted",
              sorted(r.data["color"] for r in py_found.records) == ["teal", "teal"])
        check("Swift's search gives the same records as Python's",
              sorted(r["meta"]["record_id"] for r in page.get("records", []))
              == sorted(str(r.meta.record_id) for r in py_found.records) and page.get("total_results") == 2, (out, err))
        py_written = bob_py.write("py-search", {"k": "v"}, {"shape": "round"})
        code, out, err = cli("search", "--config", "bobprofile", "--key", "shape", "--include-data",
                             "--allow-unsigned")
        page = json.loads(out) if code == 0 else {}
        check("Swift's search finds and decrypts a record Python wrote",
              [r["meta"]["record_id"] for r in page.get("records", [])] == [str(py_written.meta.record_id)]
              and page["records"][0]["data"] == {"k": "v"}, (out, err))

        # Tampering on the server: a ciphertext byte changed in the database is an authentication failure (exit 2).
        tampered = alice_py.write("tamper-type", {"field": "original"})
        tamper_id = str(tampered.meta.record_id)
        if harness.POSTGRES:
            row = psql("SELECT data FROM records WHERE record_id = '%s'" % tamper_id)
        else:
            db = sqlite3.connect(os.path.join(harness.DATA, "server.sqlite"))
            row = db.execute("SELECT data FROM records WHERE record_id = ?", (tamper_id,)).fetchone()[0]
        data = json.loads(row)
        edk, edkn, ef, efn = data["field"].split(".")
        ef = ("B" if ef[0] != "B" else "C") + ef[1:]
        data["field"] = ".".join([edk, edkn, ef, efn])
        if harness.POSTGRES:
            psql("UPDATE records SET data = '%s' WHERE record_id = '%s'" % (json.dumps(data), tamper_id))
        else:
            db.execute("UPDATE records SET data = ? WHERE record_id = ?", (json.dumps(data), tamper_id))
            db.commit()
            db.close()
        code, out, err = cli("read", "--config", alice_file, "--allow-unsigned", str(tampered.meta.record_id))
        check("a ciphertext changed on the server fails authentication (exit 2), no plaintext printed",
              code == 2 and out == "", (code, out, err))

        # Files: Swift uploads, Python downloads; Python uploads, Swift downloads; a changed body never decrypts.
        big = os.path.join(WORK, "big.bin")
        with open(big, "wb") as f:
            for i in range(40):
                f.write(os.urandom(1 << 20))
        code, out, err = cli("file", "put", "--config", alice_file, "--type", "sw-file", big)
        check("Swift uploads a 40 MiB file through the file flow", code == 0 and "file_meta" in out, err)
        file_id = json.loads(out)["meta"]["record_id"] if code == 0 else ""
        cli("share", "--config", alice_file, "--type", "sw-file", "--reader", bob_id)
        got_py = os.path.join(WORK, "from-swift.bin")
        bob_py.read_file(file_id, got_py)
        check("Python downloads and decrypts the file Swift uploaded",
              open(got_py, "rb").read() == open(big, "rb").read())
        py_file = bob_py.write_file("py-file", big)
        bob_py.share("py-file", alice_id)
        got_sw = os.path.join(WORK, "from-python.bin")
        code, out, err = cli("file", "get", "--progress", "--config", alice_file, str(py_file.record_id), got_sw)
        check("Swift downloads and decrypts the file Python uploaded",
              code == 0 and open(got_sw, "rb").read() == open(big, "rb").read(), err)
        check("file get --progress reports on stderr up to 100%, stdout holds only the record",
              "download 100%" in err and len(out.splitlines()) == 1 and "file_meta" in out, (out, err))
        code, out, err = cli("file", "get", "--verify-checksum", "--force", "--config", alice_file,
                             str(py_file.record_id), got_sw)
        check("Swift checks the MD5 the Python SDK declared for its file (--verify-checksum)",
              code == 0 and open(got_sw, "rb").read() == open(big, "rb").read(), err)
        if not harness.POSTGRES:
            body = os.path.join(harness.DATA, "files", file_id)
            with open(body, "r+b") as f:
                f.seek(5 << 20)
                byte = f.read(1)
                f.seek(5 << 20)
                f.write(bytes([byte[0] ^ 1]))
            bad = os.path.join(WORK, "tampered.bin")
            code, out, err = cli("file", "get", "--config", alice_file, file_id, bad)
            check("a file body changed on the server is refused (exit 2) and nothing is written",
                  code == 2 and not os.path.exists(bad), (code, err))
        code, _, err = cli("file", "get", "--config", alice_file, file_id, got_sw)
        check("file get refuses to replace an existing output without --force", code != 0 and "exist" in err, err)

        # Notes: Swift writes for Python and Python reads; Python writes for Swift and Swift reads by id and name.
        with open(data_file, "w") as f:
            json.dump({"note": "for bob", "pin": "1234"}, f)
        code, out, err = cli("note", "write", "--config", alice_file, "--recipient", bob_id, "--max-views", "2",
                             data_file)
        note_id = json.loads(out)["note_id"] if code == 0 else ""
        check("Swift writes a note for a Python client", code == 0 and note_id, err)
        if note_id:
            got = bob_py.read_note(note_id)
            check("Python reads and verifies the note Swift wrote",
                  got.data == {"note": "for bob", "pin": "1234"}, got.data)
        from e3db.types.note_options import NoteOptions
        name = "interop-" + os.urandom(6).hex()
        options = NoteOptions(bob_id, -1, name, "0001-01-01T00:00:00Z", False, "", {}, {})
        written = bob_py.write_note({"from": "python"}, alice_config["public_key"], alice_config["public_signing_key"],
                                    options)
        code, out, err = cli("note", "read", "--config", alice_file, "--id", str(written.note_id))
        check("Swift reads and verifies a note Python wrote (by id)",
              code == 0 and json.loads(out)["data"] == {"from": "python"}, (out, err))
        code, out, err = cli("note", "read", "--config", alice_file, "--name", name)
        check("Swift reads a note by name", code == 0 and json.loads(out)["data"] == {"from": "python"}, (out, err))
        code, out, err = cli("note", "delete", "--config", alice_file, str(written.note_id))
        check("Swift cannot delete a note Python wrote (exit 1, HTTP 403)", code == 1 and "403" in err, err)
        code, out, err = cli("note", "delete", "--config", alice_file, note_id)
        check("Swift deletes its own note", code == 0, err)
        code, out, err = cli("note", "read", "--config", "bobprofile", "--id", note_id)
        check("a deleted note is 404", code == 1 and "404" in err, err)

        code, _, err = cli("read", "--config", alice_file, "00000000-0000-4000-8000-000000000000")
        check("an unknown record exits 1 with HTTP 404", code == 1 and "404" in err, err)
        code, _, err = cli("delete", "--config", alice_file, "--version", "stale", rid)
        check("a delete at a stale version exits 1 with HTTP 409", code == 1 and "409" in err, err)
        current = bob_py and alice_py.read(rid).meta.version
        code, out, err = cli("delete", "--config", alice_file, "--version", str(current), rid)
        check("a delete at the current version works", code == 0 and "deleted" in out, err)
    finally:
        server.stop()
    print("%d passed, %d failed" % (len(harness.PASSED), len(harness.FAILED)))
    sys.exit(1 if harness.FAILED else 0)


if __name__ == "__main__":
    main()
