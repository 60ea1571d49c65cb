#!/usr/bin/env python3
"""Round trips between the `e3dbkit` command line and Tozny's Python SDK (e3db 2.3.0), in both directions.

Usage: cli_interop.py E3DBKIT_BINARY SCRATCH_DIR

Driven by Tests/E3DBKitCLITests (run by the README's test command). The Python SDK is used offline, as in the
vector generators: its crypto classes and the private record/EAK helpers of ``e3db.Client`` with stand-in objects,
never a server. Each check prints one line; the last line is "N passed, M failed" and the exit status is 1 when
anything failed.

Directions:
  Python SDK -> e3dbkit: EAKs (API-shaped EAKInfo, as the service returns them), unsigned records (what the Python
  and Go SDKs and most stored records are), records signed over the canonical form (PyNaCl + rfc8785, as js-sdk,
  Java and old Swift sign), NDJSON batches of unsigned records (`record decrypt --ndjson`), notes (TFSP1), a
  credential file written in the Python SDK's shape.
  e3dbkit -> Python SDK: EAKs, records (with rec_sig, and with it removed), `record encrypt --ndjson` batches,
  notes, the credential file `keygen` writes (loaded by e3db.Config and used to unwrap).
"""
import base64
import json
import os
import socket
import subprocess
import sys
import traceback
import uuid


def _no_network(*args, **kwargs):
    raise RuntimeError("cli_interop.py never opens a network connection")


socket.socket.connect = _no_network  # the SDK is used offline only

import nacl.public  # noqa: E402
import nacl.signing  # noqa: E402
import nacl.utils  # noqa: E402
import rfc8785  # noqa: E402

import e3db  # noqa: E402
from e3db.client import Client  # noqa: E402
from e3db.sodium_crypto import SodiumCrypto as Crypto  # noqa: E402
from e3db.types import Meta, Record  # noqa: E402
from e3db.types.encyption_key_pair import EncryptionKeyPair  # noqa: E402
from e3db.types.note import Note  # noqa: E402
from e3db.types.note_options import NoteOptions  # noqa: E402
from e3db.types.signing_key_pair import SigningKeyPair  # noqa: E402

E3DBKIT, SCRATCH = sys.argv[1], sys.argv[2]
results = []


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def b64u_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def path(name):
    return os.path.join(SCRATCH, name)


def write_json(name, obj):
    with open(path(name), "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)
    return path(name)


def e3dbkit(*args, stdin=None, expect=0):
    res = subprocess.run([E3DBKIT, *args], input=stdin, capture_output=True)
    if res.returncode != expect:
        raise AssertionError(f"e3dbkit {' '.join(args)} exited {res.returncode} (expected {expect}): "
                             f"{res.stderr.decode(errors='replace').strip()}")
    return res.stdout


def check(name):
    def run(fn):
        try:
            fn()
            results.append((name, None))
            print(f"pass  {name}")
        except Exception as e:  # noqa: BLE001 - every failure is reported, none stops the others
            results.append((name, e))
            print(f"FAIL  {name}: {e}")
            traceback.print_exc(limit=2, file=sys.stdout)
        return fn
    return run


class PyClient:
    """A client whose keys are made by PyNaCl and written in the Python SDK's credential shape."""

    def __init__(self, name):
        self.id = str(uuid.uuid4())
        self.box = nacl.public.PrivateKey.generate()
        self.sign = nacl.signing.SigningKey.generate()
        self.pk = b64u(bytes(self.box.public_key))
        self.sk = b64u(bytes(self.box))
        self.spk = b64u(bytes(self.sign.verify_key))
        self.ssk = b64u(bytes(self.sign) + bytes(self.sign.verify_key))  # libsodium's 64-byte seed || pk
        config = e3db.Config(self.id, "api-key-id", "api-secret", self.pk, self.sk, client_email="",
                             public_signing_key=self.spk, private_signing_key=self.ssk)
        self.identity = write_json(f"{name}.json", config_dict(config))


def config_dict(config):
    # e3db.Config.write() writes this dict to ~/.tozny/<profile>/e3db.json; build it the same way, into SCRATCH.
    return {k: getattr(config, k) for k in ("version", "client_id", "api_key_id", "api_secret", "client_email",
                                             "public_key", "private_key", "api_url", "public_signing_key",
                                             "private_signing_key")}


def api_eakinfo(eak, authorizer, signer):
    """The EAKInfo object as the service returns it (spec §2.4)."""
    return {"eak": eak, "authorizer_id": authorizer.id, "authorizer_public_key": {"curve25519": authorizer.pk},
            "signer_id": signer.id, "signer_signing_key": {"ed25519": signer.spk}}


def python_unwrap(info, reader_sk):
    class Reader:
        private_key = reader_sk
    return Client._Client__decrypt_eak(Reader(), info)


def python_encrypt_record(writer, record_type, data, plain, ak):
    class Writer:
        client_id = writer.id

        def _Client__get_access_key(self, *a):
            return ak
    meta = {"writer_id": writer.id, "user_id": writer.id, "type": record_type, "plain": plain}
    return Client._Client__encrypt_record(Writer(), Record(Meta(meta), dict(data))).to_json()


def python_decrypt_record(doc, ak):
    class Reader:
        pass
    rec = Record(Meta(doc["meta"]), dict(doc["data"]))
    return dict(Client._Client__decrypt_record_with_key(Reader(), rec, ak).to_json()["data"])


def canonical_meta(meta):
    return {"plain": meta.get("plain") or {}, "type": meta["type"], "user_id": meta["user_id"],
            "writer_id": meta["writer_id"]}


def note_options():
    return NoteOptions(None, -1, None, None, False, "", {}, {})


alice, bob = PyClient("alice"), PyClient("bob")
DATA = {"name": "Zoë 😀", "ssn": "123-45-6789", "quote": "say \"hi\"\n", "empty": "", "10": "ten", "9": "nine"}
PLAIN = {"source": "python", "k": "v"}


# --- Python SDK -> e3dbkit ------------------------------------------------------------------------------------

AK = nacl.utils.random(32)
EAK_FOR_BOB = Crypto.encrypt_note_ak(alice.sk, bob.pk, AK)          # the SDK's own "ct.nonce" builder
BOB_INFO = write_json("bob_eakinfo.json", api_eakinfo(EAK_FOR_BOB, alice, alice))


@check("Python EAK (API-shaped EAKInfo) -> e3dbkit eak unwrap")
def _():
    out = e3dbkit("eak", "unwrap", "--identity", bob.identity, BOB_INFO).decode().strip()
    assert b64u_decode(out) == AK, "access key differs"


@check("Python unsigned record -> e3dbkit record decrypt --allow-unsigned; refused by default")
def _():
    doc = python_encrypt_record(alice, "contact", DATA, PLAIN, AK)
    assert "rec_sig" not in doc
    rec = write_json("py_unsigned.json", doc)
    e3dbkit("record", "decrypt", "--identity", bob.identity, "--eak-info", BOB_INFO, rec, expect=2)
    out = json.loads(e3dbkit("record", "decrypt", "--identity", bob.identity, "--eak-info", BOB_INFO,
                             "--allow-unsigned", rec))
    assert out["data"] == DATA, f"data differs: {out['data']}"
    assert out["meta"]["plain"] == PLAIN


@check("Python record signed over the canonical form (PyNaCl + rfc8785) -> e3dbkit record decrypt")
def _():
    doc = python_encrypt_record(alice, "contact", DATA, PLAIN, AK)
    message = rfc8785.dumps(canonical_meta(doc["meta"])) + rfc8785.dumps(DATA)
    doc["rec_sig"] = b64u(alice.sign.sign(message).signature)
    rec = write_json("py_signed.json", doc)
    out = json.loads(e3dbkit("record", "decrypt", "--identity", bob.identity, "--eak-info", BOB_INFO, rec))
    assert out["data"] == DATA
    doc["data"]["ssn"], doc["data"]["name"] = doc["data"]["name"], doc["data"]["ssn"]  # swap two ciphertexts
    e3dbkit("record", "decrypt", "--identity", bob.identity, "--eak-info", BOB_INFO,
            write_json("py_swapped.json", doc), expect=2)


@check("Python unsigned records as NDJSON -> e3dbkit record decrypt --ndjson --allow-unsigned, in order")
def _():
    rows = [dict(DATA, n=str(i)) for i in range(40)]
    lines = [json.dumps(python_encrypt_record(alice, "contact", row, PLAIN, AK), ensure_ascii=False) for row in rows]
    lines[7] = lines[7].replace('"contact"', '"other"')  # unsigned, so this only changes the type, still readable
    out = e3dbkit("record", "decrypt", "--identity", bob.identity, "--eak-info", BOB_INFO, "--allow-unsigned",
                  "--ndjson", "--jobs", "2", "-", stdin=("\n".join(lines) + "\n").encode())
    got = [json.loads(line) for line in out.decode().splitlines()]
    assert len(got) == 40, f"{len(got)} output lines"
    assert [g["data"] for g in got] == rows, "data differs or is out of order"
    assert all(g["verification"] == {"policy": "verify-if-present", "rec_sig": "absent"} for g in got)
    assert got[7]["meta"]["type"] == "other"


@check("Python note (Client.create_encrypted_note) -> e3dbkit note decrypt")
def _():
    note = Client.create_encrypted_note(dict(DATA), bob.pk, bob.spk, EncryptionKeyPair(alice.pk, alice.sk),
                                        SigningKeyPair(alice.spk, alice.ssk), note_options())
    js = note.to_json()
    body = {k: js[k] for k in ("data", "signature", "mode", "recipient_signing_key", "writer_signing_key",
                               "writer_encryption_key", "encrypted_access_key")}
    n = write_json("py_note.json", body)
    out = json.loads(e3dbkit("note", "decrypt", "--identity", bob.identity, "--writer-signing-key", alice.spk, n))
    assert out == DATA, f"note data differs: {out}"
    e3dbkit("note", "decrypt", "--identity", bob.identity, "--writer-signing-key", bob.spk, n, expect=2)


@check("Python SDK credential file -> e3dbkit (wraps for itself, unwraps)")
def _():
    info = e3dbkit("eak", "wrap", "--identity", alice.identity)
    ak = e3dbkit("eak", "unwrap", "--identity", alice.identity, stdin=info).decode().strip()
    assert len(b64u_decode(ak)) == 32
    assert python_unwrap(json.loads(info), alice.sk) == b64u_decode(ak)


# --- e3dbkit -> Python SDK ------------------------------------------------------------------------------------

SWIFT = path("swift.json")
e3dbkit("keygen", "--out", SWIFT, "--client-id", str(uuid.uuid4()))
with open(SWIFT) as f:
    swift_config = json.load(f)
SWIFT_INFO_SELF = path("swift_self.eak")
with open(SWIFT_INFO_SELF, "wb") as f:
    f.write(e3dbkit("eak", "wrap", "--identity", SWIFT))
SWIFT_AK = b64u_decode(e3dbkit("eak", "unwrap", "--identity", SWIFT, SWIFT_INFO_SELF).decode().strip())


@check("e3dbkit keygen credential file -> the Python SDK's Client loads it unchanged and decrypts with it")
def _():
    client = e3db.Client(swift_config)  # reads api_url, api_key_id, api_secret, keys and version "2"
    assert client.client_id == swift_config["client_id"]
    assert client.public_signing_key == swift_config["public_signing_key"], "version 2 signing keys not loaded"
    assert python_unwrap(json.load(open(SWIFT_INFO_SELF)), client.private_key) == SWIFT_AK


@check("e3dbkit eak wrap/share -> Python SDK unwraps")
def _():
    ak_file = path("ak.txt")
    with open(ak_file, "w") as f:
        f.write(b64u(AK))
    info = json.loads(e3dbkit("eak", "wrap", "--identity", SWIFT, "--access-key", ak_file,
                              "--reader-public-key", bob.pk))
    assert python_unwrap(info, bob.sk) == AK
    shared = json.loads(e3dbkit("eak", "share", "--identity", SWIFT, "--reader-public-key", bob.pk,
                                SWIFT_INFO_SELF))
    assert python_unwrap(shared, bob.sk) == SWIFT_AK


@check("e3dbkit record encrypt -> Python SDK decrypts (signed, and with rec_sig removed); PyNaCl verifies rec_sig")
def _():
    data = write_json("swift_data.json", DATA)
    plain = write_json("swift_plain.json", PLAIN)
    doc = json.loads(e3dbkit("record", "encrypt", "--type", "contact", "--identity", SWIFT, "--eak-info",
                             SWIFT_INFO_SELF, "--plain", plain, data))
    assert python_decrypt_record(doc, SWIFT_AK) == DATA
    message = rfc8785.dumps(canonical_meta(doc["meta"])) + rfc8785.dumps(DATA)
    nacl.signing.VerifyKey(b64u_decode(swift_config["public_signing_key"])).verify(message,
                                                                                  b64u_decode(doc["rec_sig"]))
    del doc["rec_sig"]
    assert python_decrypt_record(doc, SWIFT_AK) == DATA


@check("e3dbkit record encrypt --ndjson -> Python SDK decrypts every line; PyNaCl verifies every rec_sig")
def _():
    rows = [dict(DATA, n=str(i)) for i in range(30)]
    plain = write_json("swift_plain_batch.json", PLAIN)
    out = e3dbkit("record", "encrypt", "--type", "contact", "--identity", SWIFT, "--eak-info", SWIFT_INFO_SELF,
                  "--plain", plain, "--ndjson", "--jobs", "2", "-",
                  stdin="".join(json.dumps(r, ensure_ascii=False) + "\r\n" for r in rows).encode())
    docs = [json.loads(line) for line in out.decode().splitlines()]
    assert len(docs) == 30, f"{len(docs)} output lines"
    key = nacl.signing.VerifyKey(b64u_decode(swift_config["public_signing_key"]))
    for row, doc in zip(rows, docs):
        assert python_decrypt_record(doc, SWIFT_AK) == row
        key.verify(rfc8785.dumps(canonical_meta(doc["meta"])) + rfc8785.dumps(row), b64u_decode(doc["rec_sig"]))


@check("e3dbkit note encrypt -> Python SDK Client.decrypt_note")
def _():
    data = write_json("swift_note_data.json", DATA)
    body = json.loads(e3dbkit("note", "encrypt", "--identity", SWIFT, "--recipient-public-key", bob.pk,
                              "--recipient-signing-key", bob.spk, data))
    dec = Client.decrypt_note(Note.decode(body), bob.sk)
    assert dict(dec.data) == DATA, f"note data differs: {dec.data}"


failed = sum(1 for _, e in results if e is not None)
print(f"{len(results) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
