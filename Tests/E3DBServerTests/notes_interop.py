#!/usr/bin/env python3
"""Notes between `e3dbkit client note` and Tozny's Python SDK (e3db 2.3.0) through one `e3dbkit-server run`.

Usage: notes_interop.py E3DBKIT_BINARY WORK_DIR [--postgres URL]

Anonymous notes both ways (the SDK's write_anonymous_note / read_anonymous_note_by_id / _by_name against
`--anonymous-keys`), replace by name both ways (the Python SDK has no replace call: its own note builder and TSV1
signer send the PUT the Swift and js SDKs send), max views and expiry honoured, and refusals with their exit codes.
Prints one line per check and "N passed, M failed".
"""
import json
import os
import subprocess
import sys

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_sdk_driver as harness  # noqa: E402

import e3db  # noqa: E402
from e3db.tsv1_auth import E3DBTSV1Auth  # noqa: E402
from e3db.types import EncryptionKeyPair, NoteOptions, SigningKeyPair  # noqa: E402

BINARY, WORK = harness.BINARY, harness.WORK
check = harness.check
NO_EXPIRY = "0001-01-01T00:00:00Z"


def cli(*args):
    env = dict(os.environ, HOME=os.path.join(WORK, "home"))
    env.pop("E3DB_PROFILE", None)
    r = subprocess.run([BINARY, "client", "note", *args], capture_output=True, text=True, env=env, timeout=120,
                       cwd=WORK)
    return r.returncode, r.stdout, r.stderr


def key_pairs():
    """Python's anonymous key pairs: (EncryptionKeyPair, SigningKeyPair)."""
    pk, sk = e3db.Client.generate_keypair()
    spk, ssk = e3db.Client.generate_signing_keypair()
    return EncryptionKeyPair(pk, sk), SigningKeyPair(spk, ssk)


def key_file(name, enc, sig):
    """The key pairs as the JSON file `--anonymous-keys` reads (mode 0600)."""
    path = os.path.join(WORK, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"public_key": enc.public_key, "private_key": enc.private_key,
                   "public_signing_key": sig.public_key, "private_signing_key": sig.private_key}, f)
    return path


def data_file(name, fields):
    path = os.path.join(WORK, name)
    with open(path, "w") as f:
        json.dump(fields, f)
    return path


def options(writer_id="", max_views=-1, name=None, expiration=NO_EXPIRY, expires=False, eacp=None):
    # The SDK signs TSV1 with uid:<note_writer_client_id>: "" is anonymous (None would sign "uid:None").
    return NoteOptions(writer_id, max_views, name, expiration, expires, "", {}, {}, eacp)


def py_read(by, value, enc, sig, url):
    """An anonymous read by the Python SDK ("id" or "name"); a fresh params dict each call (the SDK's default
    argument is shared between calls)."""
    if by == "id":
        return e3db.Client.read_anonymous_note_by_id(value, enc.private_key, sig.private_key, {}, {}, url)
    return e3db.Client.read_anonymous_note_by_name(value, enc.private_key, sig.private_key, {}, {}, url)


def refused(fn, status):
    try:
        fn()
        return False
    except Exception as e:  # the SDK raises APIError/LookupError with the HTTP status in the message
        return status in str(e)


def main():
    os.makedirs(os.path.join(WORK, "home"), exist_ok=True)
    harness.cli("migrate")
    token = harness.cli("token", "create")
    server = harness.Server()
    url = server.url
    try:
        # A registered Swift client (alice) and a registered Python client (bob).
        token_file = os.path.join(WORK, "token")
        with open(token_file, "w") as f:
            f.write(token + "\n")
        alice_file = os.path.join(WORK, "alice.json")
        r = subprocess.run([BINARY, "client", "register", "--api-url", url, "--token-file", token_file, "--name",
                            "alice", "--out", alice_file], capture_output=True, text=True, timeout=120)
        check("Swift registers alice", r.returncode == 0, r.stderr)
        with open(alice_file) as f:
            alice = json.load(f)
        bob_enc, bob_sig = key_pairs()
        bob = e3db.Client.register(token, "bob", bob_enc.public_key, api_url=url,
                                   public_signing_key=bob_sig.public_key, private_signing_key=bob_sig.private_key)
        bob_id = str(bob.client_id)

        # Anonymous key pairs: Swift's from `e3dbkit keygen`, Python's from the SDK.
        sw_keys = os.path.join(WORK, "swift-anon.json")
        r = subprocess.run([BINARY, "keygen", "--out", sw_keys], capture_output=True, text=True, timeout=60)
        check("keygen writes Swift's anonymous key pairs", r.returncode == 0, r.stderr)
        with open(sw_keys) as f:
            sw = json.load(f)
        py_enc, py_sig = key_pairs()
        py_keys = key_file("python-anon.json", py_enc, py_sig)

        # Swift writes anonymously for Python's key pairs; Python reads anonymously by id, twice, then it is gone.
        code, out, err = cli("write", "--anonymous-keys", sw_keys, "--api-url", url, "--recipient-public-key",
                             py_enc.public_key, "--recipient-signing-key", py_sig.public_key, "--max-views", "2",
                             "--name", "ignored-" + os.urandom(4).hex(), data_file("d1.json", {"pin": "1234"}))
        written = json.loads(out) if code == 0 else {}
        check("Swift writes an anonymous note (no registered client)", code == 0 and written.get("note_id"), err)
        check("the anonymous note's name is dropped (id_string \"\")", written.get("id_string") == "", written)
        note_id = written.get("note_id", "")
        got = py_read("id", note_id, py_enc, py_sig, url)
        check("Python reads Swift's anonymous note anonymously by id and verifies it",
              got.data == {"pin": "1234"} and got.get_writer_signing_key() == sw["public_signing_key"],
              got.data)
        got = py_read("id", note_id, py_enc, py_sig, url)
        check("the second of max_views 2 reads works", got.data == {"pin": "1234"})
        check("a third read of max_views 2 is 404", refused(lambda: py_read("id", note_id, py_enc, py_sig, url), "404"))

        # Python writes anonymously (uid empty) for Swift's key pairs; Swift reads anonymously by id.
        sw_enc = EncryptionKeyPair(sw["public_key"], sw["private_key"])
        sw_sig = SigningKeyPair(sw["public_signing_key"], sw["private_signing_key"])
        note = e3db.Client.write_anonymous_note({"from": "python"}, sw["public_key"], sw["public_signing_key"],
                                                py_enc, py_sig, options(max_views=1), url)
        code, out, err = cli("read", "--anonymous-keys", sw_keys, "--api-url", url, "--id", str(note.note_id),
                             "--writer-signing-key", py_sig.public_key)
        got = json.loads(out) if code == 0 else {}
        check("Swift reads Python's anonymous note anonymously by id, writer pinned",
              got.get("data") == {"from": "python"} and got.get("views") == 1, (out, err))
        code, out, err = cli("read", "--anonymous-keys", sw_keys, "--api-url", url, "--id", str(note.note_id))
        check("max_views 1: the second read exits 1 with HTTP 404", code == 1 and "404" in err, (code, err))

        # By name: a name kept for a registered writer's uid (the Python test's write_anonymous_note with
        # note_writer_client_id), read anonymously by name on both sides.
        name = "py-named-" + os.urandom(6).hex()
        e3db.Client.write_anonymous_note({"named": "by python"}, sw["public_key"], sw["public_signing_key"],
                                         bob_enc, bob_sig, options(writer_id=bob_id, name=name), url)
        code, out, err = cli("read", "--anonymous-keys", sw_keys, "--api-url", url, "--name", name)
        got = json.loads(out) if code == 0 else {}
        check("Swift reads anonymously by name a note Python wrote",
              got.get("data") == {"named": "by python"} and got.get("id_string") == name, (out, err))
        sw_name = "sw-named-" + os.urandom(6).hex()
        code, out, err = cli("write", "--config", alice_file, "--recipient-public-key", py_enc.public_key,
                             "--recipient-signing-key", py_sig.public_key, "--name", sw_name,
                             data_file("d2.json", {"named": "by swift"}))
        check("Swift (registered) writes a named note for anonymous key pairs", code == 0, err)
        got = py_read("name", sw_name, py_enc, py_sig, url)
        check("Python reads it anonymously by name", got.data == {"named": "by swift"}, got.data)
        code, out, err = cli("write", "--config", alice_file, "--recipient", bob_id, "--name", sw_name,
                             data_file("d3.json", {"x": "y"}))
        check("a taken name exits 1 with HTTP 409", code == 1 and "409" in err, (code, err))

        # Replace by name, Swift -> Python: new fields, new id, the old id gone.
        old_id = py_read("name", sw_name, py_enc, py_sig, url).note_id
        code, out, err = cli("replace", "--config", alice_file, "--name", sw_name, "--recipient-public-key",
                             py_enc.public_key, "--recipient-signing-key", py_sig.public_key,
                             data_file("d4.json", {"named": "replaced by swift"}))
        replaced = json.loads(out) if code == 0 else {}
        check("Swift replaces its named note", code == 0 and replaced.get("note_id") not in (None, str(old_id)),
              (out, err))
        got = py_read("name", sw_name, py_enc, py_sig, url)
        check("Python reads the replacement by name", got.data == {"named": "replaced by swift"}, got.data)
        check("the replaced note's old id is 404",
              refused(lambda: py_read("id", str(old_id), py_enc, py_sig, url), "404"))

        # A replace keeps the limits it does not state; --reset-limits lifts them.
        kept_name = "sw-kept-" + os.urandom(6).hex()
        code, out, err = cli("write", "--config", alice_file, "--recipient-public-key", py_enc.public_key,
                             "--recipient-signing-key", py_sig.public_key, "--name", kept_name, "--max-views", "1",
                             data_file("k1.json", {"v": "1"}))
        check("Swift writes a named note with --max-views 1", code == 0, err)
        code, out, err = cli("replace", "--config", alice_file, "--name", kept_name, "--recipient-public-key",
                             py_enc.public_key, "--recipient-signing-key", py_sig.public_key,
                             data_file("k2.json", {"v": "2"}))
        check("Swift replaces it without limits", code == 0, err)
        got = py_read("name", kept_name, py_enc, py_sig, url)
        check("Python reads the replacement once", got.data == {"v": "2"}, got.data)
        check("the replacement kept max_views 1: a second read is 404",
              refused(lambda: py_read("name", kept_name, py_enc, py_sig, url), "404"))
        code, out, err = cli("replace", "--config", alice_file, "--name", kept_name, "--recipient-public-key",
                             py_enc.public_key, "--recipient-signing-key", py_sig.public_key, "--reset-limits",
                             data_file("k3.json", {"v": "3"}))
        check("Swift replaces it with --reset-limits", code == 0, err)
        reads = [py_read("name", kept_name, py_enc, py_sig, url).data for _ in range(3)]
        check("--reset-limits: three reads", reads == [{"v": "3"}] * 3, reads)

        # Replace by name, Python -> Swift: the SDK's note builder and TSV1 signer, PUT /v2/storage/notes.
        encrypted = e3db.Client.create_encrypted_note({"named": "replaced by python"}, sw["public_key"],
                                                      sw["public_signing_key"], bob_enc, bob_sig,
                                                      options(writer_id=bob_id, name=name))
        r = requests.put(url + "/v2/storage/notes", json=encrypted.to_json(),
                         auth=E3DBTSV1Auth(bob_sig.private_key, bob_id))
        check("Python replaces its named note (PUT, TSV1)", r.status_code == 200, r.text[:300])
        code, out, err = cli("read", "--anonymous-keys", sw_keys, "--api-url", url, "--name", name)
        got = json.loads(out) if code == 0 else {}
        check("Swift reads Python's replacement by name", got.get("data") == {"named": "replaced by python"},
              (out, err))
        code, out, err = cli("replace", "--config", alice_file, "--name", name, "--recipient", bob_id,
                             data_file("d5.json", {"hijack": "x"}))
        check("Swift cannot replace Python's note (exit 1, HTTP 403)", code == 1 and "403" in err, (code, err))

        # An access control policy the server cannot enforce (an email challenge) is refused, not stored.
        email_eacp = {"email_eacp": {"email_address": "jon@example.com", "template": "claim_secret",
                                     "provider_link": "https://example.com/claim", "default_expiration_minutes": 60}}
        check("a note with an email EACP is refused with 400",
              refused(lambda: e3db.Client.write_anonymous_note({"gated": "1"}, sw["public_key"],
                                                               sw["public_signing_key"], py_enc, py_sig,
                                                               options(eacp=email_eacp), url), "400"))

        # Expiry both ways: a past expiration is 404 at once.
        note = e3db.Client.write_anonymous_note({"late": "1"}, sw["public_key"], sw["public_signing_key"], py_enc,
                                                py_sig, options(expiration="2000-01-01T00:00:00Z", expires=True), url)
        code, out, err = cli("read", "--anonymous-keys", sw_keys, "--api-url", url, "--id", str(note.note_id))
        check("Swift's read of Python's expired note exits 1 with HTTP 404", code == 1 and "404" in err, (code, err))
        code, out, err = cli("write", "--anonymous-keys", sw_keys, "--api-url", url, "--recipient-public-key",
                             py_enc.public_key, "--recipient-signing-key", py_sig.public_key, "--expiration",
                             "2000-01-01T00:00:00Z", data_file("d6.json", {"late": "2"}))
        late = json.loads(out)["note_id"] if code == 0 else ""
        check("Swift writes a note with an expiration", code == 0 and late, err)
        check("Python's read of Swift's expired note is 404",
              refused(lambda: py_read("id", late, py_enc, py_sig, url), "404"))
        code, out, err = cli("write", "--anonymous-keys", sw_keys, "--api-url", url, "--recipient-public-key",
                             py_enc.public_key, "--recipient-signing-key", py_sig.public_key, "--expiration",
                             "2999-01-01T00:00:00Z", data_file("d7.json", {"later": "3"}))
        later = json.loads(out)["note_id"] if code == 0 else ""
        check("a future expiration is served", later and py_read("id", later, py_enc, py_sig, url).data == {"later": "3"})

        # Refusals: the wrong reader keys (403), a key file without a signing key, secrets never from argv.
        code, out, err = cli("read", "--anonymous-keys", py_keys, "--api-url", url, "--id", later)
        check("the recipient's key file reads the note with e3dbkit",
              code == 0 and json.loads(out)["data"] == {"later": "3"}, (code, err))
        code, out, err = cli("read", "--anonymous-keys", sw_keys, "--api-url", url, "--id", later)
        check("a reader that is not the recipient exits 1 with HTTP 403", code == 1 and "403" in err, (code, err))
        v1 = key_file("v1.json", py_enc, SigningKeyPair("", ""))
        code, out, err = cli("write", "--anonymous-keys", v1, "--api-url", url, "--recipient-public-key",
                             py_enc.public_key, "--recipient-signing-key", py_sig.public_key, data_file("d8.json", {"a": "b"}))
        check("a key file without a signing key is refused before any request", code != 0 and out == "", (code, err))
        # (keygen's file names the default API URL; Python's key file names none.)
        code, out, err = cli("write", "--anonymous-keys", py_keys, "--recipient-public-key", sw["public_key"],
                             "--recipient-signing-key", sw["public_signing_key"], data_file("d9.json", {"a": "b"}))
        check("anonymous mode without --api-url or a file's api_url exits 64", code == 64, (code, err))
        code, out, err = cli("write", "--anonymous-keys", sw_keys, "--api-url", url, "--recipient", bob_id,
                             data_file("d10.json", {"a": "b"}))
        check("anonymous mode refuses --recipient (no lookup without credentials)", code == 64, (code, err))
        code, out, err = cli("read", "--anonymous-keys", sw_keys, "--api-url", url, "--id", "not-a-uuid")
        check("a malformed id exits 64", code == 64, (code, err))
    finally:
        server.stop()
    print("%d passed, %d failed" % (len(harness.PASSED), len(harness.FAILED)))
    sys.exit(1 if harness.FAILED else 0)


if __name__ == "__main__":
    main()
