#!/usr/bin/env python3
"""Generates TestVectors/sqlcipher/pages.json: SQLCipher pages written by SQLCipher 4.12 and decrypted
independently.

Peer: SQLCipher 4.12 as bundled in `sqlcipher3-binary` (`from sqlcipher3 import dbapi2`). For each key form and
cipher setting the generator has SQLCipher write a small database (a table of a few rows, one with a blob larger
than a page so there are overflow pages), then reads the file back page by page and decrypts it WITHOUT SQLCipher:
PBKDF2 from `hashlib`, the page HMAC from `hmac`, AES-256-CBC from `cryptography` (OpenSSL). Every HMAC is
verified before a page is decrypted. The plaintext pages are then written to a file that Python's own `sqlite3`
module (the system SQLite) opens, and its rows must equal the rows SQLCipher reads: so the expected plaintext is
checked by a third implementation, not only by this script's reading of the format.

Page layout (SQLCipher 4; SQLCipher 3 in brackets): page size P = 4096 [1024], reserve R = 80 [48] at the end of
each page = IV (16) + HMAC-SHA512 (64) [HMAC-SHA1 (20) + 12 unauthenticated padding bytes]. Page 1's first 16
bytes on disk are the salt and its encrypted region is [16, P-R); other pages [0, P-R). The HMAC covers
ciphertext || IV || LE32(page number) under PBKDF2(encryption key, salt XOR 0x3a, 2 rounds, 32 bytes). The
encryption key is PBKDF2(passphrase, salt, kdf_iter, 32) or the raw key of `PRAGMA key = "x'<64 hex>'"` (96 hex
digits: the last 32 are the salt). The expected plaintext of a page is what E3DBPageCodec's `decrypt` returns:
page 1 starts with "SQLite format 3\\0" and the reserved tail (last R bytes) is zero.

Not byte-reproducible: SQLCipher draws a fresh salt (passphrase and plain raw-key databases) and a fresh IV for
every page write from OpenSSL's random generator, so `stored`, `salt` and the derived keys of those databases
change on every run. Keys, passphrases, rows and mutations come from a seeded PRNG, and the expected plaintext
pages are the same on every run with the same SQLCipher except for page 1's file change counter (header bytes
24-27, repeated at 92-95), which starts at a different value in every new file.

Regenerate from the project root:  $(scripts/python-env.sh) TestVectors/generators/sqlcipher_pages.py
"""
import base64
import hashlib
import hmac
import json
import os
import random
import sqlite3
import struct
import sys
import tempfile

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from sqlcipher3 import dbapi2 as sqlcipher

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sqlcipher")
GEN = "TestVectors/generators/sqlcipher_pages.py"
HEADER = b"SQLite format 3\x00"
rng = random.Random(0x5C1F)


def rb(n):
    return bytes(rng.getrandbits(8) for _ in range(n))


def hx(x):
    return x.hex()


# ---------------------------------------------------------------- the format, independently of SQLCipher
ALGORITHMS = {"sha512": (hashlib.sha512, 64), "sha1": (hashlib.sha1, 20)}


def derive_keys(key_form, key, salt, settings):
    """(encryption key, HMAC key) for a key form ("passphrase" text, "rawKey"/"rawKeyAndSalt" hex digits)."""
    algorithm = settings["algorithm"]
    if key_form == "passphrase":
        enc = hashlib.pbkdf2_hmac(algorithm, key.encode("utf-8"), salt, settings["kdfIterations"], 32)
    else:
        raw = bytes.fromhex(key)
        if key_form == "rawKeyAndSalt":
            assert raw[32:] == salt, "a raw key's salt is the file's salt"
        enc = raw[:32]
    mac_key = hashlib.pbkdf2_hmac(algorithm, enc, bytes(b ^ 0x3A for b in salt), 2, 32)
    return enc, mac_key


def reserve(settings):
    # IV + HMAC, rounded up to a multiple of the AES block (SQLCipher 3: 16 + 20 = 36 -> 48).
    need = 16 + ALGORITHMS[settings["algorithm"]][1]
    return (need + 15) // 16 * 16


def page_mac(mac_key, settings, page, number):
    size = settings["pageSize"]
    start, end = (16 if number == 1 else 0), size - reserve(settings)
    h = hmac.new(mac_key, page[start:end + 16] + struct.pack("<I", number), ALGORITHMS[settings["algorithm"]][0])
    return h.digest()


def authentic(mac_key, settings, page, number):
    end = len(page) - reserve(settings) + 16
    tag = page[end:end + ALGORITHMS[settings["algorithm"]][1]]
    return hmac.compare_digest(page_mac(mac_key, settings, page, number), tag)


def decrypt_page(enc, mac_key, settings, page, number):
    """The page's plaintext as E3DBPageCodec returns it, or None when the HMAC does not verify."""
    size = settings["pageSize"]
    assert len(page) == size
    if not authentic(mac_key, settings, page, number):
        return None
    start, end = (16 if number == 1 else 0), size - reserve(settings)
    iv = page[end:end + 16]
    dec = Cipher(algorithms.AES(enc), modes.CBC(iv)).decryptor()
    body = dec.update(page[start:end]) + dec.finalize()
    return (HEADER if number == 1 else b"") + body + bytes(reserve(settings))


# ---------------------------------------------------------------- rows, in the same shape as sqlcipher_peer.py dump
def cell(value):
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode()}
    return value


def read_rows(connection):
    tables = [r[0] for r in connection.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    return {t: [[cell(v) for v in row] for row in connection.execute(f'SELECT * FROM "{t}" ORDER BY rowid')]
            for t in tables}


# ---------------------------------------------------------------- the databases SQLCipher writes
def write_database(path, pragma_key, defaults, pragmas, page_size):
    blob = rb(max(5000, page_size + 1000))  # larger than a page: overflow pages
    rows = [
        (1, "alpha", 1.5, bytes(range(16))),
        (2, "βeta ✓ 𝄞", None, None),
        (3, None, -2.25, blob),
        (4, "", 1e100, b""),
        (5, "x" * 40, 0.0, rb(100)),
    ]
    c = sqlcipher.connect(path)
    for p in defaults:
        c.execute(f"PRAGMA {p}")
    assert c.execute(f"PRAGMA key = {quote(pragma_key)}").fetchall() == [("ok",)]
    for p in pragmas:
        c.execute(f"PRAGMA {p}")
    c.execute("PRAGMA journal_mode = DELETE")
    c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, value REAL, data BLOB)")
    c.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", rows)
    c.commit()
    assert c.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert c.execute("PRAGMA cipher_integrity_check").fetchall() == []
    written = read_rows(c)
    c.close()
    # Read back by a second connection, as any SQLCipher user would open it.
    c = sqlcipher.connect(path)
    c.execute(f"PRAGMA key = {quote(pragma_key)}")
    for p in pragmas + [d.replace("cipher_default_", "cipher_") for d in defaults]:
        c.execute(f"PRAGMA {p}")
    back = read_rows(c)
    c.close()
    for p in defaults:  # process-wide: put SQLCipher's defaults back
        sqlcipher.connect(":memory:").execute(f"PRAGMA {p.split('=')[0]} = 4")
    assert back == written
    return back


def quote(text):
    return "'" + text.replace("'", "''") + "'"


def check_with_system_sqlite(plain_pages, expected_rows):
    """Writes the plaintext pages to a file and reads its rows with Python's own sqlite3 (no SQLCipher)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "plain.db")
        with open(path, "wb") as f:
            for p in plain_pages:
                f.write(p)
        c = sqlite3.connect(path)
        assert c.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        rows = read_rows(c)
        c.close()
    assert rows == expected_rows, "the system SQLite reads the decrypted pages as SQLCipher reads the database"


V4 = {"pageSize": 4096, "kdfIterations": 256000, "algorithm": "sha512"}
V3 = {"pageSize": 1024, "kdfIterations": 64000, "algorithm": "sha1"}
DATABASES = [
    # (name, key form, key, pragmas set before PRAGMA key, pragmas set after it, settings, header reserve)
    ("v4-passphrase", "passphrase", "correct horse battery staple ✓", [], [], V4, 80),
    ("v4-raw-key", "rawKey", hx(rb(32)), [], [], V4, 80),
    ("v4-raw-key-and-salt", "rawKeyAndSalt", hx(rb(48)), [], [], V4, 80),
    ("v3-compatibility", "passphrase", "sqlcipher three", [], ["cipher_compatibility = 3"], V3, 80),
    ("v3-default-compatibility", "passphrase", "sqlcipher three, from the start",
     ["cipher_default_compatibility = 3"], [], V3, 48),
    ("v4-page-size-8192", "passphrase", "eight kibibyte pages", [], ["cipher_page_size = 8192"],
     {**V4, "pageSize": 8192}, 80),
    ("v4-kdf-iter-10000", "passphrase", "ten thousand rounds", [], ["kdf_iter = 10000"],
     {**V4, "kdfIterations": 10000}, 80),
]


def pragma_key_of(key_form, key):
    return key if key_form == "passphrase" else f"x'{key}'"


def flip(data, offset, bit=0):
    out = bytearray(data)
    out[offset] ^= 1 << bit
    return bytes(out)


def main():
    os.makedirs(OUT, exist_ok=True)
    tests = []
    made = {}
    with tempfile.TemporaryDirectory() as d:
        for name, key_form, key, defaults, pragmas, settings, expected_header_reserve in DATABASES:
            path = os.path.join(d, name + ".db")
            rows = write_database(path, pragma_key_of(key_form, key), defaults, pragmas, settings["pageSize"])
            with open(path, "rb") as f:
                data = f.read()
            size = settings["pageSize"]
            assert len(data) % size == 0 and len(data) // size >= 3, (name, len(data))
            salt = data[:16]
            if key_form == "rawKeyAndSalt":
                assert salt == bytes.fromhex(key)[32:], "SQLCipher stores the key's salt"
            enc, mac_key = derive_keys(key_form, key, salt, settings)
            pages, plain_pages = [], []
            for i in range(len(data) // size):
                number = i + 1
                stored = data[i * size:(i + 1) * size]
                plain = decrypt_page(enc, mac_key, settings, stored, number)
                assert plain is not None, f"{name}: page {number} authenticates"
                if number == 1:
                    assert plain.startswith(HEADER)
                    assert struct.unpack(">H", plain[16:18])[0] == (1 if size == 65536 else size)
                    # SQLite's header byte 20 is the btree's reserve. SQLCipher sets it from the codec when the
                    # key is applied, and SQLite never lets it shrink: `PRAGMA cipher_compatibility = 3` after
                    # `PRAGMA key` leaves 80 there (the codec uses 48, the btree 80 bytes less per page), while
                    # `cipher_default_compatibility = 3` before the key writes SQLCipher 3's own 48.
                    header_reserve = plain[20]
                    assert header_reserve == expected_header_reserve, (name, header_reserve)
                assert plain[size - reserve(settings):] == bytes(reserve(settings))
                pages.append({"number": number, "stored": hx(stored), "plaintext": hx(plain)})
                plain_pages.append(plain)
            check_with_system_sqlite(plain_pages, rows)
            flags = ["SQLCipher4" if settings["algorithm"] == "sha512" else "SQLCipher3"]
            flags.append({"passphrase": "Passphrase", "rawKey": "RawKey", "rawKeyAndSalt": "RawKeyAndSalt"}[key_form])
            if header_reserve != reserve(settings):
                flags.append("HeaderReserveDiffers")
            comment = f"{name}: every page of a database SQLCipher 4.12 wrote"
            if defaults:
                comment += f", PRAGMA {', '.join(defaults)} before PRAGMA key"
            if pragmas:
                comment += f", PRAGMA {', '.join(pragmas)} after it"
            if header_reserve != reserve(settings):
                comment += (f" (the SQLite header says {header_reserve} reserved bytes, "
                            f"the codec uses {reserve(settings)})")
            case = {"comment": comment, "result": "valid", "flags": flags, "database": name, "keyForm": key_form,
                    "key": key, "pragmaKey": pragma_key_of(key_form, key), "pragmasBeforeKey": defaults,
                    "pragmas": pragmas, "settings": settings, "reserve": reserve(settings),
                    "headerReserve": header_reserve, "salt": hx(salt), "encryptionKey": hx(enc),
                    "hmacKey": hx(mac_key), "pages": pages, "rows": rows}
            tests.append(case)
            made[name] = (case, data)
            print(f"{name}: {len(pages)} pages of {size} bytes", file=sys.stderr)

    # ------------------------------------------------------------ invalid (and one valid) single-page cases
    def single(base_name, comment, flags, number, stored, result="invalid", error="pageTampered", **changes):
        case, _ = made[base_name]
        out = {k: case[k] for k in ("database", "keyForm", "key", "pragmaKey", "pragmasBeforeKey", "pragmas",
                                    "settings", "reserve", "headerReserve", "salt")}
        out.update(changes)
        page = {"number": number, "stored": hx(stored)}
        # Check this script's own reading of the format agrees with the expected outcome.
        salt = bytes.fromhex(out["salt"])
        if out["keyForm"] == "rawKeyAndSalt" and bytes.fromhex(out["key"])[32:] != salt:
            assert result == "invalid" and error == "wrongKey"
        else:
            enc, mac_key = derive_keys(out["keyForm"], out["key"], salt, out["settings"])
            plain = decrypt_page(enc, mac_key, out["settings"], stored, number)
            if result == "valid":
                assert plain is not None
                page["plaintext"] = hx(plain)
            else:
                assert plain is None and error == "pageTampered"
        t = {"comment": f"{base_name}: {comment}", "result": result, "flags": flags, **out, "pages": [page]}
        if result == "invalid":
            t["error"] = error
        tests.append(t)

    def stored_page(name, number):
        case, data = made[name]
        size = case["settings"]["pageSize"]
        return data[(number - 1) * size:number * size]

    for name in ("v4-passphrase", "v3-default-compatibility"):
        case, _ = made[name]
        size, r = case["settings"]["pageSize"], case["reserve"]
        mac_size = ALGORITHMS[case["settings"]["algorithm"]][1]
        p1, p2 = stored_page(name, 1), stored_page(name, 2)
        single(name, "page 2, bit 0 of ciphertext byte 0 flipped", ["Tampered"], 2, flip(p2, 0))
        single(name, "page 2, bit 7 of the last ciphertext byte flipped", ["Tampered"], 2, flip(p2, size - r - 1, 7))
        single(name, "page 1, bit 0 of its first ciphertext byte (offset 16) flipped", ["Tampered"], 1, flip(p1, 16))
        single(name, "page 2, bit 3 of IV byte 0 flipped", ["Tampered"], 2, flip(p2, size - r, 3))
        single(name, "page 2, bit 0 of IV byte 15 flipped", ["Tampered"], 2, flip(p2, size - r + 15))
        single(name, "page 2, bit 0 of HMAC byte 0 flipped", ["Tampered"], 2, flip(p2, size - r + 16))
        single(name, "page 2, bit 6 of the last HMAC byte flipped", ["Tampered"], 2,
               flip(p2, size - r + 16 + mac_size - 1, 6))
        single(name, "page 2 presented as page 3", ["Moved"], 3, p2)
        single(name, "page 3 presented as page 2", ["Moved"], 2, stored_page(name, 3))
        single(name, "page 2 presented as page 1", ["Moved"], 1, p2)
        single(name, "page 1 presented as page 2", ["Moved"], 2, p1)
        single(name, "page 1 under a wrong passphrase", ["WrongKey"], 1, p1, key="wrong passphrase",
               pragmaKey="wrong passphrase")
        single(name, "page 1 under a passphrase differing in its last character", ["WrongKey"], 1, p1,
               key=case["key"][:-1] + "!", pragmaKey=case["key"][:-1] + "!")
        single(name, "page 1 with a salt byte changed (another salt derives other keys)", ["WrongSalt"], 1,
               flip(p1, 0), salt=hx(flip(p1[:16], 0)))
    # SQLCipher 3's 12 padding bytes after the HMAC are not authenticated: changing them changes nothing.
    p2 = stored_page("v3-default-compatibility", 2)
    single("v3-default-compatibility",
           "page 2, a padding byte after the HMAC flipped (not authenticated in SQLCipher 3)",
           ["UnauthenticatedPadding"], 2, flip(p2, 1024 - 1), result="valid")
    # The wrong kdf_iter derives another key.
    v4 = made["v4-kdf-iter-10000"][0]
    single("v4-kdf-iter-10000", "page 1 read with kdf_iter 256000 instead of 10000", ["WrongSettings"], 1,
           stored_page("v4-kdf-iter-10000", 1), settings={**v4["settings"], "kdfIterations": 256000})
    # Raw keys.
    wrong_raw = hx(rb(32))
    single("v4-raw-key", "page 1 under another raw key", ["WrongKey"], 1, stored_page("v4-raw-key", 1),
           key=wrong_raw, pragmaKey=f"x'{wrong_raw}'")
    single("v4-raw-key", "page 2, bit 0 of ciphertext byte 100 flipped", ["Tampered"], 2,
           flip(stored_page("v4-raw-key", 2), 100))
    salted = made["v4-raw-key-and-salt"][0]
    other_salt = hx(rb(16))
    single("v4-raw-key-and-salt", "a raw key whose own salt is not the file's salt: the codec refuses the key",
           ["WrongKey", "KeySaltMismatch"], 1, stored_page("v4-raw-key-and-salt", 1), error="wrongKey",
           key=salted["key"][:64] + other_salt, pragmaKey=f"x'{salted['key'][:64] + other_salt}'")
    single("v4-page-size-8192", "page 2, bit 0 of HMAC byte 63 flipped", ["Tampered"], 2,
           flip(stored_page("v4-page-size-8192", 2), 8192 - 80 + 16 + 63))

    for i, t in enumerate(tests, 1):
        t.setdefault("flags", [])
        tests[i - 1] = {"tcId": i, **t}
    version = sqlcipher.connect(":memory:").execute("PRAGMA cipher_version").fetchone()[0]
    doc = {"algorithm": "SQLCipher page codec (AES-256-CBC, HMAC-SHA512 / HMAC-SHA1, PBKDF2)",
           "source": f"SQLCipher {version} (sqlcipher3-binary 0.6.0) wrote the databases; pages decrypted "
                     f"independently with hashlib, hmac and cryptography (OpenSSL AES-256-CBC); decrypted pages read "
                     f"by the system SQLite {sqlite3.sqlite_version} through Python's sqlite3",
           "generator": GEN, "numberOfTests": len(tests), "tests": tests}
    with open(os.path.join(OUT, "pages.json"), "w") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"pages.json: {len(tests)} tests")


if __name__ == "__main__":
    main()
