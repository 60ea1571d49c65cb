#!/usr/bin/env python3
"""E3DBStore exports and imports against Tozny's Python SDK (e3db 2.3.0), offline.

Usage:
  store_interop.py decrypt EXPORT_DIR READER_PRIVATE_KEY_B64U
      Decrypts every record of EXPORT_DIR/records.ndjson with the access key of EXPORT_DIR/eak.json (unwrapped with
      the reader's Curve25519 private key), printing one JSON line per record: {"type":…,"plain":…,"data":…}.
  store_interop.py write OUT_DIR READER_PUBLIC_KEY_B64U COUNT
      Writes COUNT records encrypted by the Python SDK under a new access key, and an API-shaped eak.json wrapping
      that key for the reader (authorizer: a new PyNaCl key pair); prints the plaintexts as JSON lines.

The Python SDK's private record and EAK helpers of ``e3db.Client`` are used with stand-in objects, never a server.
"""
import base64
import json
import os
import socket
import sys
import uuid


def _no_network(*args, **kwargs):
    raise RuntimeError("store_interop.py never opens a network connection")


socket.socket.connect = _no_network  # type: ignore[assignment]

import nacl.public  # noqa: E402
import nacl.utils  # noqa: E402

from e3db.client import Client  # noqa: E402
from e3db.sodium_crypto import SodiumCrypto as Crypto  # noqa: E402
from e3db.types import Meta, Record  # noqa: E402


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def b64u_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def unwrap(info, reader_sk):
    class Reader:
        private_key = reader_sk
    return Client._Client__decrypt_eak(Reader(), info)


def decrypt_record(doc, ak):
    class Reader:
        pass
    rec = Record(Meta(doc["meta"]), dict(doc["data"]))
    return dict(Client._Client__decrypt_record_with_key(Reader(), rec, ak).to_json()["data"])


def encrypt_record(writer_id, record_type, data, plain, ak):
    class Writer:
        client_id = writer_id

        def _Client__get_access_key(self, *a):
            return ak
    meta = {"writer_id": writer_id, "user_id": writer_id, "type": record_type, "plain": plain}
    return Client._Client__encrypt_record(Writer(), Record(Meta(meta), dict(data))).to_json()


def decrypt(export_dir, reader_sk):
    with open(os.path.join(export_dir, "eak.json"), encoding="utf-8") as f:
        info = json.load(f)
    ak = unwrap(info, reader_sk)
    with open(os.path.join(export_dir, "records.ndjson"), encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            doc = json.loads(line)
            data = decrypt_record(doc, ak)
            print(json.dumps({"type": doc["meta"]["type"], "plain": doc["meta"].get("plain") or {}, "data": data},
                             sort_keys=True, ensure_ascii=False))


def write(out_dir, reader_pk, count):
    os.makedirs(out_dir, exist_ok=True)
    ak = nacl.utils.random(32)
    authorizer = nacl.public.PrivateKey.generate()
    writer_id = str(uuid.uuid4())
    eak = Crypto.encrypt_note_ak(b64u(bytes(authorizer)), reader_pk, ak)  # the SDK's own "ct.nonce" builder
    info = {"eak": eak, "authorizer_id": writer_id,
            "authorizer_public_key": {"curve25519": b64u(bytes(authorizer.public_key))}}
    with open(os.path.join(out_dir, "eak.json"), "w", encoding="utf-8") as f:
        json.dump(info, f)
    with open(os.path.join(out_dir, "records.ndjson"), "w", encoding="utf-8") as f:
        for i in range(count):
            data = {"n": str(i), "text": "Python ✓ %d" % i}
            plain = {"source": "python", "i": str(i)}
            f.write(json.dumps(encrypt_record(writer_id, "py-record", data, plain, ak), ensure_ascii=False) + "\n")
            print(json.dumps({"type": "py-record", "plain": plain, "data": data}, sort_keys=True, ensure_ascii=False))


if __name__ == "__main__":
    if sys.argv[1] == "decrypt":
        decrypt(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit("unknown command " + sys.argv[1])
