#!/usr/bin/env python3
"""Writes the seed corpora of the primitives, keys and documents fuzz targets from TestVectors/.

FuzzSecretStream: hostile-mode inputs (0x00, header, then length-prefixed chunks) from the secretstream vectors
whose chunks fit a one-byte length, and round-trip-mode inputs (0x01, then control-prefixed messages).
FuzzBLAKE2b: (output size, key length, split) prefixes with the key and message of BLAKE2b vectors.
FuzzSealedBoxes: the combined forms of the box and secretbox vectors, and sealed boxes, behind each kind byte.
FuzzKeys: EAK strings (mode 0), EAKInfo JSON texts (mode 1), client credential JSON (mode 2) and group-wrapped
EAKInfo JSON (mode 3, keys/group_wrappers.json) from TestVectors/keys.
FuzzDocuments: field strings (0), values (1), EncryptedDocument JSON (2), SignedDocument JSON (3), note JSON (4)
and TFSP1 strings (5) from TestVectors/documents.
FuzzFileRange: the files of TestVectors/files/e3db_file_v3.json sealed with the fuzz key (32 x 0x11: the one-chunk
and the three-chunk Appendix A.6 files), each behind a few 6-byte range prefixes (first byte, length - 1, both
24-bit little endian): chunk boundaries, single bytes, the whole plaintext, past the end.
FuzzNDJSON: NDJSON batches of record data and of encrypted records from TestVectors/documents under several
option bytes.
FuzzSQLiteExport: schema entries (entry, type and name bytes, then the SQL text): each entry's own statement, with
comments, with a second statement (the review's ATTACH payload, a PRAGMA, DETACH), of another kind, in another
schema, and a virtual table.

Deterministic; files are named by the SHA-1 of their content. Run from the project root:
  python3 Fuzz/make-layer-corpus.py
"""
import importlib.util
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
spec = importlib.util.spec_from_file_location("make_corpus", os.path.join(HERE, "make-corpus.py"))
make_corpus = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_corpus)


def vectors(name, folder="primitives"):
    with open(os.path.join(ROOT, "TestVectors", folder, name), encoding="utf-8") as f:
        return json.load(f)["tests"]


def utf8(text):
    return text.encode("utf-8", "surrogatepass")


def keys():
    items = []
    for t in vectors("eak.json", "keys")[::2]:
        if isinstance(t.get("eak"), str):
            items.append(b"\x00" + utf8(t["eak"]))
    for t in vectors("eakinfo.json", "keys"):
        if isinstance(t.get("json"), str):
            items.append(b"\x01" + utf8(t["json"]))
    for t in vectors("client_config.json", "keys"):
        if isinstance(t.get("json"), str):
            items.append(b"\x02" + utf8(t["json"]))
    for t in vectors("group_wrappers.json", "keys"):
        items.append(b"\x03" + utf8(t["json"]))
    return items


def documents():
    items = []
    for t in vectors("record_fields.json", "documents")[::6]:
        if isinstance(t.get("field"), str):
            items.append(b"\x00" + utf8(t["field"]))
        if isinstance(t.get("value"), str):
            items.append(b"\x01" + utf8(t["value"])[:200])
    for t in vectors("records.json", "documents")[::5]:
        if isinstance(t.get("encryptedDocument"), str) and len(t["encryptedDocument"]) < 4000:
            items.append(b"\x02" + utf8(t["encryptedDocument"]))
    for t in vectors("signed_documents.json", "documents")[::5]:
        if isinstance(t.get("signedDocument"), str) and len(t["signedDocument"]) < 4000:
            items.append(b"\x03" + utf8(t["signedDocument"]))
    for t in vectors("notes.json", "documents"):
        if isinstance(t.get("note"), str) and len(t["note"]) < 4000:
            items.append(b"\x04" + utf8(t["note"]))
    for t in vectors("tfsp1.json", "documents")[::4]:
        if isinstance(t.get("signed"), str):
            items.append(b"\x05" + utf8(t["signed"])[:400])
    return items


def ndjson():
    """FuzzNDJSON: byte 0 options (jobs, fail-fast, line limit), byte 1 piece size, then NDJSON."""
    records = [t["encryptedDocument"] for t in vectors("records.json", "documents")
               if isinstance(t.get("encryptedDocument"), str) and len(t["encryptedDocument"]) < 2000][:6]
    bodies = [
        b'{"a":"1"}\n{"b":"x","c":"y"}\r\n\n{"z":""}\n',
        b'{"name":"Zo\xc3\xab","e\\u0301":"1"}\n[]\n{"a":1}\n\n \t\r\n',
        b'{"k":"' + b"v" * 40 + b'"}\n{"s":"t"}',
        b"\n\n{}\n",
        utf8("\n".join(records) + "\n"),
        utf8("\r\n".join(records[:2])) + b"\r\n\r\n",
    ]
    items = []
    for i, body in enumerate(bodies):
        for options in (0x39, 0x3A | 0x04, 0x08 * (i % 6) | 0x01):
            items.append(bytes([options, (7 * i + 3) % 256]) + body)
    return items


def secretstream():
    items = []
    for t in vectors("secretstream.json"):
        chunks = [bytes.fromhex(c) for c in t["chunks"]]
        if all(len(c) < 256 for c in chunks):
            out = b"\x00" + bytes.fromhex(t["header"])
            for c in chunks:
                out += bytes([len(c)]) + c
            items.append(out)
        messages = [bytes.fromhex(m)[:63] for m in t["msgs"]]
        tags = {"message": 0, "push": 1, "rekey": 2, "final": 0}
        out = b"\x01"
        for m, tag in zip(messages, t["tags"]):
            out += bytes([(len(m) << 2) | tags[tag]]) + m
        items.append(out)
    return items


def blake2b():
    items = []
    for t in vectors("blake2b.json")[::7]:
        key = bytes.fromhex(t["key"])
        out_byte = (t["outLen"] - 16) % 49 if 16 <= t["outLen"] <= 64 else 0x80 | t["outLen"]
        key_byte = 0 if not key else ((len(key) - 16) % 49 if 16 <= len(key) <= 64 else 0x80 | len(key))
        items.append(bytes([out_byte, key_byte, 3]) + key + bytes.fromhex(t["msg"])[:512])
    return items


def sealed_boxes():
    items = []
    for t in vectors("secretbox.json")[:12]:
        items.append(b"\x00" + bytes.fromhex(t["nonce"]) + bytes.fromhex(t["ct"])[:600])
        items.append(b"\x03" + bytes.fromhex(t["msg"])[:200])
    for t in vectors("box.json")[:10]:
        items.append(b"\x01" + bytes.fromhex(t["nonce"]) + bytes.fromhex(t["ct"])[:600])
    for t in vectors("sealedbox.json"):
        items.append(b"\x02" + bytes.fromhex(t["sealed"])[:600])
    return items


def file_range():
    items = []
    fuzz_key = "ERERERERERERERERERERERERERERERERERERERERERE"
    for t in vectors("e3db_file_v3.json", folder="files"):
        if t.get("accessKey") != fuzz_key or t.get("result") != "valid" or "ciphertext" not in t:
            continue
        file = bytes.fromhex(t["ciphertext"])
        size = t["plaintextSize"]
        ranges = [(0, size), (0, 1), (size - 1, 1), (size // 2, 3), (size, 1), (0, size + 1)]
        if size > 65536:  # keep the committed corpus small: four seeds of the three-chunk file
            ranges = [(0, size), (65535, 2), (2 * 65536 - 5, 65536 + 10), (size - 1, 1)]
        for start, count in ranges:
            if start < 0 or count < 1:
                continue
            prefix = start.to_bytes(3, "little") + (count - 1).to_bytes(3, "little")
            items.append(prefix + file)
    return items


def key_header():
    """FuzzKeyHeader: edits of a key header as the review made them (security review 3: H1, M2, M4, L9), in the
    target's form: byte 0 (1 plain, 2 encrypted), then edits of (column, kind, length, bytes); kind 4 picks a telling
    name by its first byte. Column indexes: 0 format, 3 kdf_ops, 4 kdf_mem, 10 database_file, 11 database_encryption,
    13 rekey_pending.database_file."""
    def edit(column, kind, payload=b""):
        return bytes([column, kind, len(payload)]) + payload
    def integer(n):
        return n.to_bytes(8, "big", signed=True)
    telling = {"store.sqlite": 0, "store-0badf00d.sqlite": 1, "keys.sqlite": 3, "../outside/victim.txt": 4,
               "encrypted": 6, "plain": 7, "argon2id13": 8}
    items = []
    for form in (1, 2):
        head = bytes([form])
        items += [
            head + edit(10, 4, bytes([telling["keys.sqlite"]])) + edit(11, 4, bytes([telling["plain"]])),
            head + edit(10, 4, bytes([telling["store-0badf00d.sqlite"]])),
            head + edit(11, 4, bytes([telling["plain"] if form == 2 else telling["encrypted"]])),
            head + edit(2, 4, bytes([telling["argon2id13"]])) + edit(3, 1, integer(2_000_000_000)) + edit(4, 1, integer(1 << 16)),
            head + edit(2, 4, bytes([telling["argon2id13"]])) + edit(3, 1, integer(1)) + edit(4, 1, integer(3 << 30)),
            head + edit(13, 4, bytes([telling["../outside/victim.txt"]])),
            head + edit(13, 4, bytes([telling["store.sqlite"]])),
            head + edit(0, 2, b"1") + edit(5, 3, b"\x00" * 8) + edit(12, 0),
            head + edit(7, 1, integer(7)) + edit(9, 3, b"\xff"),
        ]
    items.append(b"\x00")
    items.append(b"\x00SQLite format 3\x00" + bytes(84))
    return items


def sqlite_export():
    own = [
        (0, "CREATE TABLE t(a, b)"), (1, "CREATE INDEX i ON t(a)"), (2, "CREATE VIEW v AS SELECT a FROM t"),
        (3, "CREATE TRIGGER g AFTER INSERT ON t BEGIN INSERT INTO u VALUES (new.a); END"),
        (4, "CREATE VIRTUAL TABLE vt USING fts5(x)"),
    ]
    tails = [
        "", " -- a note; ATTACH 'x' AS y", " /* ; */ ;",
        "; ATTACH DATABASE 'file:pwned.db?vfs=unix' AS p; CREATE TABLE p.owned(x); INSERT INTO p.owned VALUES (1)",
        "; PRAGMA writable_schema = ON", "; DETACH DATABASE source", "; DELETE FROM source.t",
    ]
    items = []
    for entry, sql in own:
        for tail in tails:
            items.append(bytes([entry, 0, 0]) + (sql + tail).encode())
    for entry, sql in [(0, "CREATE TABLE source.t(a, b)"), (0, "CREATE TEMP TABLE t(a, b)"), (1, "CREATE TABLE i(a)"),
                       (0, "ATTACH 'file:a.db?vfs=unix' AS a"), (2, "CREATE VIEW v AS SELECT * FROM source.t"),
                       (0, "CREATE TABLE t AS SELECT * FROM source.sqlite_schema")]:
        items.append(bytes([entry, 0, 0]) + sql.encode())
    for type_byte in range(1, 6):
        items.append(bytes([0, type_byte, 0]) + b"CREATE TABLE t(a, b)")
    for name_byte in range(1, 8):
        items.append(bytes([0, 0, name_byte]) + b"CREATE TABLE t(a, b)")
    return items


if __name__ == "__main__":
    for target, items in [("FuzzSecretStream", secretstream()), ("FuzzBLAKE2b", blake2b()), ("FuzzSealedBoxes", sealed_boxes()),
                          ("FuzzKeys", keys()), ("FuzzDocuments", documents()),
                          ("FuzzFileRange", file_range()), ("FuzzNDJSON", ndjson()),
                          ("FuzzKeyHeader", key_header()), ("FuzzSQLiteExport", sqlite_export())]:
        print(target, make_corpus.write(target, items))
