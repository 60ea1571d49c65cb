#!/usr/bin/env python3
"""Checks the cases `swift run generate-swift-vectors DIR` wrote, with Tozny's Python SDK (e3db==2.3.0) and PyNaCl.

Every valid case must decrypt / verify in Python and give the expected values; every invalid case must be
rejected. Record signatures and SignedDocument signatures are verified with PyNaCl over canonical bytes from
`rfc8785` (or Node's JSON.stringify in js-sdk sortObject order for cases with order "javaScript"), because the
Python SDK has no record-signature code. No network connection is ever opened.

Usage: .venv/bin/python TestVectors/generators/check_swift_output.py DIR
Prints "N passed, M failed" and exits 1 if anything failed (or a file is missing).
"""
import base64
import json
import os
import socket
import subprocess
import sys


def _no_network(*args, **kwargs):
    raise RuntimeError("network access is forbidden in the checker")


socket.socket.connect = _no_network
socket.socket.connect_ex = _no_network
socket.create_connection = _no_network

import nacl.bindings  # noqa: E402
import nacl.signing  # noqa: E402
import rfc8785  # noqa: E402

from e3db.client import Client  # noqa: E402
from e3db.sodium_crypto import SodiumCrypto as Crypto  # noqa: E402
from e3db.types import Meta, Record  # noqa: E402
from e3db.types.note import Note  # noqa: E402
from e3db.identity import Identity  # noqa: E402
from e3db.tsv1_auth import E3DBTSV1Auth  # noqa: E402
import requests  # noqa: E402  (PreparedRequest only; never sent)

FILES = ["eak.json", "eakinfo.json", "identity.json", "record_fields.json", "records.json", "signed_documents.json",
         "tfsp1.json", "notes.json", "derivation.json", "tsv1.json"]


def b64u_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


class Reader:
    def __init__(self, sk):
        self.private_key = sk


JS_MESSAGE = r"""
const [meta, data] = JSON.parse(require('fs').readFileSync(0, 'utf8'));
function sortObject(o) { if (typeof o !== 'object') return o; const out = {};
  for (const k of Object.keys(o).sort()) out[k] = sortObject(o[k]); return out; }
const obj = Object.fromEntries(data);
process.stdout.write(JSON.stringify(sortObject(meta)) + JSON.stringify(sortObject(obj)));
"""


def record_message(meta, data_pairs, order):
    signed_meta = {"plain": meta.get("plain") or {}, "type": meta["type"], "user_id": meta["user_id"].lower(),
                   "writer_id": meta["writer_id"].lower()}
    if order == "javaScript":
        out = subprocess.run(["node", "-e", JS_MESSAGE], input=json.dumps([signed_meta, data_pairs]).encode(),
                             capture_output=True, check=True)
        return out.stdout
    return rfc8785.dumps(signed_meta) + rfc8785.dumps({k: v for k, v in data_pairs})


def check_eak(t):
    ak = Client._Client__decrypt_eak(Reader(t["readerSecretKey"]), {
        "eak": t["eak"], "authorizer_public_key": {"curve25519": t["authorizerPublicKey"]}})
    assert ak.hex() == t["accessKey"], "access key differs"


def check_eakinfo(t):
    info = json.loads(t["json"])
    assert info["authorizer_id"] == info["authorizer_id"].lower(), "uppercase UUID"
    ak = Client._Client__decrypt_eak(Reader(t["readerSecretKey"]), info)
    assert ak.hex() == t["accessKey"], "access key differs"


def check_identity(t):
    cfg = json.loads(t["json"])
    pk, _ = nacl.bindings.crypto_box_seed_keypair(b"\0" * 32)  # warm-up; real check below
    derived_pk = nacl.bindings.crypto_scalarmult_base(b64u_decode(cfg["private_key"]))
    assert b64u(derived_pk) == cfg["public_key"], "public_key does not match private_key"
    auth = E3DBTSV1Auth(cfg["private_signing_key"], cfg["client_id"])  # the SDK's own key loading
    assert auth.public_b64 == cfg["public_signing_key"], "public_signing_key does not match"
    assert cfg["version"] == "2"
    assert cfg["client_id"] == cfg["client_id"].lower()


def check_field(t):
    value = Crypto.decrypt_field(t["field"], bytes.fromhex(t["accessKey"]))
    assert value == t["value"], "value differs"


def check_record(t):
    doc = json.loads(t["encryptedDocument"])
    meta = doc["meta"]
    ak = bytes.fromhex(t["accessKey"])
    rec = Record(Meta(meta), dict(doc["data"]))
    dec = Client._Client__decrypt_record_with_key(Reader(None), rec, ak).to_json()["data"]
    data_pairs = [[k, dec[k]] for k in doc["data"]]
    expected = t["data"]
    assert sorted(map(tuple, data_pairs)) == sorted(map(tuple, expected)), "decrypted data differs"
    msg = record_message(meta, data_pairs, t.get("order", "utf16"))
    nacl.signing.VerifyKey(b64u_decode(t["writerSigningPublicKey"])).verify(msg, b64u_decode(doc["rec_sig"]))
    assert meta["writer_id"] == meta["writer_id"].lower()


def check_signed(t):
    doc = json.loads(t["signedDocument"])
    nacl.signing.VerifyKey(b64u_decode(t["publicKey"])).verify(rfc8785.dumps(doc["doc"]), b64u_decode(doc["sig"]))
    if isinstance(doc["doc"], dict) and set(doc["doc"]) == {"doc", "sig"}:
        inner = doc["doc"]
        nacl.signing.VerifyKey(b64u_decode(t["publicKey"])).verify(rfc8785.dumps(inner["doc"]),
                                                                    b64u_decode(inner["sig"]))


def check_tfsp1(t):
    assert t["salt"] == t["salt"].lower(), "uppercase salt"
    value = Client.verify_field(t["key"], t["signed"], t["publicKey"], t["salt"])
    assert value == t["value"], "value differs"


def check_note(t):
    body = json.loads(t["note"])
    note = Note.decode(body)
    dec = Client.decrypt_note(note, t["readerSecretKey"])
    assert dec.data == {k: v for k, v in t["expectedData"]}, "note data differs"


def check_derivation(t):
    if t["type"] == "password":
        name, box, sig = Identity.derive_note_creds(t["username"], t["password"], t["realm"])
    else:
        prefix = {"email_otp": "broker:", "tozny_otp": "tozny_otp:"}[t["type"]]
        seed = f"{prefix}{t['username'].lower()}@realm:{t['realm']}"
        name = Crypto.base64encode(Crypto.hashString(seed)).decode()
        box = Crypto.derive_crypto_keypair(t["password"].encode(), seed.encode())
        sig = Crypto.derive_signing_keypair(t["password"].encode(), (box.public_key + box.private_key).encode())
    got = (name, box.public_key, box.private_key, sig.public_key, sig.private_key)
    want = (t["noteName"], t["boxPublicKey"], t["boxSecretKey"], t["signingPublicKey"], t["signingSecretKey"])
    assert got == want, f"derivation differs: {got} vs {want}"


def check_tsv1(t):
    url = "https://api.example" + t["path"] + ("?" + t["rawQuery"] if t["rawQuery"] else "")
    req = requests.Request(t["method"], url).prepare()
    auth = E3DBTSV1Auth(t["signingKey"], t["clientId"])
    E3DBTSV1Auth.create_tsv1_signature(req, auth.public_b64, auth.private_b64_decoded, t["clientId"], t["nonce"],
                                       int(t["timestamp"]))
    assert req.headers["Authorization"] == t["authorization"], "Authorization header differs"


CHECKS = {"eak.json": check_eak, "eakinfo.json": check_eakinfo, "identity.json": check_identity,
          "record_fields.json": check_field, "records.json": check_record, "signed_documents.json": check_signed,
          "tfsp1.json": check_tfsp1, "notes.json": check_note, "derivation.json": check_derivation,
          "tsv1.json": check_tsv1}


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    directory = sys.argv[1]
    passed = failed = 0
    for name in FILES:
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            print(f"FAIL {name}: missing")
            failed += 1
            continue
        with open(path, encoding="utf-8") as f:
            tests = json.load(f)["tests"]
        for t in tests:
            ok, why = True, ""
            try:
                CHECKS[name](t)
            except Exception as e:  # noqa: BLE001 - any failure of the peer counts
                ok, why = False, f"{type(e).__name__}: {e}"
            if t["result"] == "invalid":
                ok, why = (not ok), ("accepted an invalid case" if ok else "")
            if ok:
                passed += 1
            else:
                failed += 1
                print(f"FAIL {name} #{t['tcId']} ({t['comment']}): {why[:300]}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
