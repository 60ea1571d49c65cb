#!/usr/bin/env python3
"""A command-line peer around SQLCipher 4.12 (`sqlcipher3-binary`) and SQLite3 Multiple Ciphers (`apsw-sqlite3mc`:
2.6.1, `pysqlite3mc-binary`: 2.0.2) for E3DBSQLite's interoperability tests.

Every command prints one JSON document on stdout. Exit codes: 0 success; 2 the key does not open the database
(SQLCipher's "file is not a database", SQLITE_NOTADB); 1 anything else (including bad arguments). On failure
stderr holds one JSON line {"error": message, "kind": "wrongKey" | "usage" | "sqlite" | "other"}.

Usage:
  sqlcipher_peer.py write DB --key K [--raw-key] [--journal-mode wal|delete] [--rows N] [--start I]
                             [--compat 3|4] [--compat-after-key] [--page-size N] [--kdf-iter N]
      Opens (or creates) DB, creates the schema below when absent and inserts rows START..START+N-1 (default 0..9)
      in one transaction; closes the database normally (a WAL database is checkpointed and its -wal removed by
      SQLite on the last close). Prints {"ok": true}.
  sqlcipher_peer.py dump DB --key K [--raw-key] [cipher options]
      Prints {"tables": {name: [row, ...]}, "integrity_check": [...], "cipher_integrity_check": [...]}, every
      user table's rows ordered by primary key (rowid when there is none).
  sqlcipher_peer.py hot DB --key K [--raw-key] --journal-mode wal|delete --rows N --start I [cipher options]
      Leaves a database that needs recovery, then ends the process with os._exit(0) (no close, no cleanup):
      - wal: inserts the rows in one committed transaction with wal_autocheckpoint = 0, so they exist only as
        frames in DB-wal (beside DB-shm); the main file does not have them. Prints {"ok": true, "state": "wal", ...}.
      - delete: a tiny page cache and the rows (then more rows, until a cache spill has overwritten the main
        file) inside one transaction that never commits: SQLite has written and synced DB-journal (the original
        pages, encrypted like the database's) and overwritten pages of DB before the process ends. DB alone is a
        torn mixture; the next connection must roll DB-journal back, after which none of these rows exist.
        Prints {"ok": true, "state": "journal", ...} just before exiting.
  sqlcipher_peer.py rekey DB --key K [--raw-key] --new-key K2 [--new-raw-key] [cipher options]
      PRAGMA rekey (same cipher settings). Prints {"ok": true}.
  sqlcipher_peer.py plain-dump DB
      The dump above through Python's own sqlite3 module (the system SQLite, no SQLCipher), for plain databases;
      there is no "cipher_integrity_check" member.

Keys: K is a passphrase (any text), or with --raw-key 64 hex digits (a raw key) or 96 (a raw key and its salt),
given to SQLCipher as PRAGMA key = "x'...'".

Cipher options: --compat 3 sets SQLCipher 3's settings (1024-byte pages, PBKDF2-HMAC-SHA1 64,000 rounds,
HMAC-SHA1) with PRAGMA cipher_default_compatibility = 3 before the key, which is what a SQLCipher 3 file has
(48 reserved bytes per page); with --compat-after-key it is PRAGMA cipher_compatibility = 3 after the key instead,
SQLCipher's documented way to open old files, which on a NEW file leaves SQLite's header reserve at 80 (SQLite
never lets the reserve shrink) while the codec uses 48. --page-size (cipher_page_size), --kdf-iter (kdf_iter),
--hmac-algorithm HMAC_SHA1|HMAC_SHA256|HMAC_SHA512 (cipher_hmac_algorithm), --kdf-algorithm PBKDF2_HMAC_SHA1|…
(cipher_kdf_algorithm), --plaintext-header-size N (cipher_plaintext_header_size) and --cipher-salt HEX32
(cipher_salt) are set after the key and the compatibility, in that order, as SQLCipher's documentation does; on a
NEW file that leaves SQLite's header reserve at 80 while an HMAC_SHA1 or HMAC_SHA256 codec uses 48. With
--defaults-before-key the first three are PRAGMA cipher_default_* before the key instead (reserve 48 in a new file).

Engines: --engine sqlcipher (the default, SQLCipher 4.12), sqlite3mc (SQLite3 Multiple Ciphers 2.6.1 through apsw) or
sqlite3mc-2.0 (2.0.2 through pysqlite3mc). With a SQLite3 Multiple Ciphers engine the statements before the key are
PRAGMA cipher = 'chacha20' (or --cipher), PRAGMA legacy = 1 with --legacy, PRAGMA legacy_page_size with --page-size
and --legacy, PRAGMA kdf_iter with --kdf-iter, PRAGMA plaintext_header_size and PRAGMA cipher_salt with
--plaintext-header-size and --cipher-salt; a raw key is given as 'raw:<hex>'; --compat does not apply, and a
dump has no "cipher_integrity_check" member (SQLite3 Multiple Ciphers has no such pragma).

Schema (created by write and hot when the database has no `items` table):
  items(id INTEGER PRIMARY KEY, name TEXT, value REAL, data BLOB), index items_name on name,
  counts(bucket INTEGER PRIMARY KEY, n INTEGER NOT NULL), kept by triggers on items: one row per id % 10,
  tags(tag TEXT PRIMARY KEY, n INTEGER) WITHOUT ROWID: each row inserts or increments tag "tag-(id % 13)" (some
  tags are non-ASCII).
Row i: name "item i …" with non-ASCII text (NULL when i % 7 == 6), value i * 1.25 - 3 (NULL when i % 5 == 4),
data SHAKE-256("item i") of a size by i % 10: 3 → 2 pages and a half (overflow pages), 0 → NULL, 5 → empty,
otherwise 16 + i % 97 bytes.

Rows in a dump are JSON arrays: NULL null, INTEGER a number, REAL a number (an infinite REAL {"real": "Infinity"}
or "-Infinity"), TEXT a string, BLOB {"base64": "..."}.
"""
import argparse
import base64
import hashlib
import json
import math
import os
import sqlite3
import sys

try:
    from sqlcipher3 import dbapi2 as sqlcipher
except ImportError:  # plain-dump needs only sqlite3
    sqlcipher = None
try:
    import apsw
except ImportError:
    apsw = None
try:
    from pysqlite3mc import dbapi2 as sqlite3mc_2_0
except ImportError:
    sqlite3mc_2_0 = None

EXIT_OK, EXIT_OTHER, EXIT_WRONG_KEY = 0, 1, 2


class PeerError(Exception):
    def __init__(self, message, kind="other", code=EXIT_OTHER):
        super().__init__(message)
        self.kind, self.code = kind, code


def fail(error):
    sys.stdout.flush()
    sys.stderr.write(json.dumps({"error": str(error), "kind": error.kind}) + "\n")
    sys.stderr.flush()
    sys.exit(error.code)


def emit(doc):
    sys.stdout.write(json.dumps(doc, ensure_ascii=False, sort_keys=True) + "\n")
    sys.stdout.flush()


def quote(text):
    return "'" + text.replace("'", "''") + "'"


def key_literal(key, raw):
    if not raw:
        if key == "":
            raise PeerError("the passphrase is empty", "usage")
        return quote(key)
    digits = key[2:-1] if key[:2].lower() == "x'" and key.endswith("'") else key
    if len(digits) not in (64, 96) or any(c not in "0123456789abcdefABCDEF" for c in digits):
        raise PeerError("a raw key is 64 hex digits, or 96 with the salt", "usage")
    return "\"x'" + digits + "'\""


# ---------------------------------------------------------------- opening
def is_not_a_database(error):
    return getattr(error, "sqlite_errorcode", None) == 26 or "file is not a database" in str(error)


def open_sqlite3mc(args, key, raw):
    engine = args.engine
    if engine == "sqlite3mc":
        if apsw is None:
            raise PeerError("apsw-sqlite3mc is not installed", "other")
        connection = apsw.Connection(args.db)
    else:
        if sqlite3mc_2_0 is None:
            raise PeerError("pysqlite3mc-binary is not installed", "other")
        connection = sqlite3mc_2_0.connect(args.db, isolation_level=None)
    connection.execute(f"PRAGMA cipher = {quote(args.cipher)}").fetchall()
    if args.legacy:
        connection.execute("PRAGMA legacy = 1").fetchall()
        if getattr(args, "page_size", None):
            connection.execute(f"PRAGMA legacy_page_size = {int(args.page_size)}").fetchall()
    if getattr(args, "kdf_iter", None):
        connection.execute(f"PRAGMA kdf_iter = {int(args.kdf_iter)}").fetchall()
    if getattr(args, "plaintext_header_size", None):
        connection.execute(f"PRAGMA plaintext_header_size = {int(args.plaintext_header_size)}").fetchall()
    if getattr(args, "cipher_salt", None):
        connection.execute(f"PRAGMA cipher_salt = {quote(args.cipher_salt)}").fetchall()
    key, raw = (args.key if key is None else key), (args.raw_key if raw is None else raw)
    literal = quote("raw:" + key_literal(key, raw)[3:-2]) if raw else key_literal(key, raw)
    connection.execute(f"PRAGMA key = {literal}").fetchall()
    connection.execute("SELECT count(*) FROM sqlite_master").fetchall()  # reads page 1: checks the key
    return connection


def open_encrypted(args, key=None, raw=None):
    if getattr(args, "engine", "sqlcipher") != "sqlcipher":
        return open_sqlite3mc(args, key, raw)
    if sqlcipher is None:
        raise PeerError("sqlcipher3 is not installed", "other")
    connection = sqlcipher.connect(args.db, isolation_level=None)  # autocommit: transactions are explicit
    connection.execute("PRAGMA cipher_log_level = NONE")  # errors go to stderr as JSON, not as SQLCipher's log
    compat = getattr(args, "compat", None)
    after_key = getattr(args, "compat_after_key", False)
    if compat is not None and not after_key:
        connection.execute(f"PRAGMA cipher_default_compatibility = {compat}")
    before_key = getattr(args, "defaults_before_key", False)
    if before_key:
        if args.hmac_algorithm:
            connection.execute(f"PRAGMA cipher_default_hmac_algorithm = {args.hmac_algorithm}")
        if args.kdf_algorithm:
            connection.execute(f"PRAGMA cipher_default_kdf_algorithm = {args.kdf_algorithm}")
        if args.plaintext_header_size:
            connection.execute(f"PRAGMA cipher_default_plaintext_header_size = {int(args.plaintext_header_size)}")
    literal = key_literal(args.key if key is None else key, args.raw_key if raw is None else raw)
    rows = connection.execute(f"PRAGMA key = {literal}").fetchall()
    if rows != [("ok",)]:
        raise PeerError(f"PRAGMA key returned {rows!r}")
    if compat is not None and after_key:
        connection.execute(f"PRAGMA cipher_compatibility = {compat}")
    if getattr(args, "page_size", None):
        connection.execute(f"PRAGMA cipher_page_size = {int(args.page_size)}")
    if getattr(args, "kdf_iter", None):
        connection.execute(f"PRAGMA kdf_iter = {int(args.kdf_iter)}")
    if getattr(args, "hmac_algorithm", None) and not before_key:
        connection.execute(f"PRAGMA cipher_hmac_algorithm = {args.hmac_algorithm}")
    if getattr(args, "kdf_algorithm", None) and not before_key:
        connection.execute(f"PRAGMA cipher_kdf_algorithm = {args.kdf_algorithm}")
    if getattr(args, "plaintext_header_size", None) and not before_key:
        connection.execute(f"PRAGMA cipher_plaintext_header_size = {int(args.plaintext_header_size)}")
    if getattr(args, "cipher_salt", None):
        connection.execute(f"PRAGMA cipher_salt = \"x'{args.cipher_salt}'\"")
    connection.execute("SELECT count(*) FROM sqlite_master").fetchall()  # reads page 1: checks the key
    return connection


# ---------------------------------------------------------------- the schema and rows
SCHEMA = [
    "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, value REAL, data BLOB)",
    "CREATE INDEX items_name ON items(name)",
    "CREATE TABLE counts(bucket INTEGER PRIMARY KEY, n INTEGER NOT NULL)",
    """CREATE TRIGGER items_counted AFTER INSERT ON items BEGIN
         INSERT INTO counts(bucket, n) VALUES (NEW.id % 10, 1) ON CONFLICT(bucket) DO UPDATE SET n = n + 1;
       END""",
    """CREATE TRIGGER items_uncounted AFTER DELETE ON items BEGIN
         UPDATE counts SET n = n - 1 WHERE bucket = OLD.id % 10;
       END""",
    "CREATE TABLE tags(tag TEXT PRIMARY KEY, n INTEGER) WITHOUT ROWID",
]
TAG_NAMES = ["tag-%d", "étiquette-%d", "标签-%d", "tag-%d-🏷️"]


def ensure_schema(connection):
    if connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'items'").fetchone():
        return
    connection.execute("BEGIN IMMEDIATE")
    for statement in SCHEMA:
        connection.execute(statement)
    connection.execute("COMMIT")


def row(i, page_size):
    name = None if i % 7 == 6 else f"item {i} · naïve café ✓ {'€' * (i % 4)}"
    value = None if i % 5 == 4 else i * 1.25 - 3
    kind = i % 10
    if kind == 3:
        size = page_size * 5 // 2 + i  # larger than a page: overflow pages
    elif kind == 0:
        size = None
    elif kind == 5:
        size = 0
    else:
        size = 16 + i % 97
    data = None if size is None else hashlib.shake_256(f"item {i}".encode()).digest(size) if size else b""
    return (i, name, value, data)


def insert_rows(connection, start, count, page_size):
    for i in range(start, start + count):
        connection.execute("INSERT INTO items(id, name, value, data) VALUES (?, ?, ?, ?)", row(i, page_size))
        tag = TAG_NAMES[i % len(TAG_NAMES)] % (i % 13)
        connection.execute("INSERT INTO tags(tag, n) VALUES (?, 1) ON CONFLICT(tag) DO UPDATE SET n = n + 1", (tag,))


def page_size_of(connection):
    return int(connection.execute("PRAGMA page_size").fetchone()[0])


def set_journal_mode(connection, mode):
    if mode:
        got = connection.execute(f"PRAGMA journal_mode = {mode}").fetchone()[0]
        if got.lower() != mode.lower():
            raise PeerError(f"journal_mode is {got}, not {mode}")


# ---------------------------------------------------------------- dump
def cell(value):
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode()}
    if isinstance(value, float) and not math.isfinite(value):
        return {"real": "Infinity" if value > 0 else "-Infinity"}
    return value


def dump(connection, cipher):
    tables = {}
    names = [r[0] for r in connection.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    for name in names:
        info = connection.execute(f'PRAGMA table_info("{name}")').fetchall()
        keys = [c[1] for c in sorted((c for c in info if c[5] > 0), key=lambda c: c[5])]
        order = ", ".join(f'"{k}"' for k in keys) if keys else "rowid"
        tables[name] = [[cell(v) for v in r] for r in connection.execute(f'SELECT * FROM "{name}" ORDER BY {order}')]
    doc = {"tables": tables, "integrity_check": [r[0] for r in connection.execute("PRAGMA integrity_check")]}
    if cipher:
        doc["cipher_integrity_check"] = [r[0] for r in connection.execute("PRAGMA cipher_integrity_check")]
    return doc


# ---------------------------------------------------------------- commands
def command_write(args):
    connection = open_encrypted(args)
    set_journal_mode(connection, args.journal_mode)
    ensure_schema(connection)
    connection.execute("BEGIN IMMEDIATE")
    insert_rows(connection, args.start, args.rows, page_size_of(connection))
    connection.execute("COMMIT")
    connection.close()
    emit({"ok": True})


def require_file(path):
    if not os.path.isfile(path):
        raise PeerError(f"no such file: {path}")


def command_dump(args):
    require_file(args.db)
    connection = open_encrypted(args)
    doc = dump(connection, cipher=args.engine == "sqlcipher")
    connection.close()
    emit(doc)


def command_hot(args):
    connection = open_encrypted(args)
    if args.journal_mode == "wal":
        set_journal_mode(connection, "wal")
        connection.execute("PRAGMA wal_autocheckpoint = 0")
        ensure_schema(connection)
        connection.execute("BEGIN IMMEDIATE")
        insert_rows(connection, args.start, args.rows, page_size_of(connection))
        connection.execute("COMMIT")
        wal = args.db + "-wal"
        emit({"ok": True, "state": "wal", "wal": os.path.basename(wal), "walBytes": os.path.getsize(wal),
              "shm": os.path.exists(args.db + "-shm")})
    else:
        set_journal_mode(connection, "delete")
        ensure_schema(connection)
        connection.execute("PRAGMA cache_size = 1")  # every new dirty page spills the cache
        connection.execute("PRAGMA cache_spill = ON")
        page_size = page_size_of(connection)
        with open(args.db, "rb") as f:
            before = hashlib.sha256(f.read()).hexdigest()
        connection.execute("BEGIN IMMEDIATE")
        insert_rows(connection, args.start, args.rows, page_size)
        journal = args.db + "-journal"
        changed = False
        extra = 0
        # Go on (with rows that are rolled back anyway) until a spill has overwritten the main file.
        while True:
            with open(args.db, "rb") as f:
                changed = hashlib.sha256(f.read()).hexdigest() != before
            if (changed and os.path.exists(journal)) or extra >= 1000:
                break
            insert_rows(connection, args.start + args.rows + extra, 1, page_size)
            extra += 1
        if not (changed and os.path.exists(journal) and os.path.getsize(journal) > 0):
            raise PeerError("the transaction never spilled to the database file")
        emit({"ok": True, "state": "journal", "journal": os.path.basename(journal),
              "journalBytes": os.path.getsize(journal), "databaseChanged": changed, "extraRows": extra})
    sys.stderr.flush()
    os._exit(0)  # no COMMIT/ROLLBACK, no close: the WAL or the hot journal stays


def command_rekey(args):
    require_file(args.db)
    connection = open_encrypted(args)
    connection.execute(f"PRAGMA rekey = {key_literal(args.new_key, args.new_raw_key)}")
    connection.close()
    # The new key must open it.
    check = open_encrypted(args, key=args.new_key, raw=args.new_raw_key)
    check.close()
    emit({"ok": True})


def command_plain_dump(args):
    require_file(args.db)
    connection = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True, isolation_level=None)
    doc = dump(connection, cipher=False)
    connection.close()
    emit(doc)


# ---------------------------------------------------------------- arguments
class Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would exit 2, which means "wrong key" here
        raise PeerError(message, "usage")


def parser():
    top = Parser(prog="sqlcipher_peer.py", description="SQLCipher 4.12 peer for E3DBSQLite tests")
    commands = top.add_subparsers(dest="command", required=True, parser_class=Parser)

    def keyed(name):
        p = commands.add_parser(name)
        p.add_argument("db")
        p.add_argument("--key", required=True)
        p.add_argument("--raw-key", action="store_true")
        p.add_argument("--compat", type=int, choices=[3, 4])
        p.add_argument("--compat-after-key", action="store_true")
        p.add_argument("--page-size", type=int)
        p.add_argument("--kdf-iter", type=int)
        p.add_argument("--hmac-algorithm", choices=["HMAC_SHA1", "HMAC_SHA256", "HMAC_SHA512"])
        p.add_argument("--kdf-algorithm", choices=["PBKDF2_HMAC_SHA1", "PBKDF2_HMAC_SHA256", "PBKDF2_HMAC_SHA512"])
        p.add_argument("--plaintext-header-size", type=int)
        p.add_argument("--cipher-salt")
        p.add_argument("--defaults-before-key", action="store_true")
        p.add_argument("--engine", choices=["sqlcipher", "sqlite3mc", "sqlite3mc-2.0"], default="sqlcipher")
        p.add_argument("--cipher", default="chacha20")
        p.add_argument("--legacy", action="store_true")
        return p

    w = keyed("write")
    w.add_argument("--journal-mode", choices=["wal", "delete"])
    w.add_argument("--rows", type=int, default=10)
    w.add_argument("--start", type=int, default=0)
    w.set_defaults(run=command_write)
    keyed("dump").set_defaults(run=command_dump)
    h = keyed("hot")
    h.add_argument("--journal-mode", choices=["wal", "delete"], required=True)
    h.add_argument("--rows", type=int, required=True)
    h.add_argument("--start", type=int, required=True)
    h.set_defaults(run=command_hot)
    r = keyed("rekey")
    r.add_argument("--new-key", required=True)
    r.add_argument("--new-raw-key", action="store_true")
    r.set_defaults(run=command_rekey)
    p = commands.add_parser("plain-dump")
    p.add_argument("db")
    p.set_defaults(run=command_plain_dump)
    return top


def main(argv):
    try:
        args = parser().parse_args(argv)
        args.run(args)
    except PeerError as error:
        fail(error)
    except (
        sqlite3.DatabaseError,
        *((sqlcipher.DatabaseError,) if sqlcipher else ()),
        *((apsw.Error,) if apsw else ()),
        *((sqlite3mc_2_0.DatabaseError,) if sqlite3mc_2_0 else ()),
    ) as error:
        if is_not_a_database(error):
            fail(PeerError(f"the key does not open the database: {error}", "wrongKey", EXIT_WRONG_KEY))
        fail(PeerError(f"{type(error).__name__}: {error}", "sqlite"))
    except Exception as error:  # noqa: BLE001 - any other failure is exit 1 with a JSON error
        fail(PeerError(f"{type(error).__name__}: {error}"))


if __name__ == "__main__":
    main(sys.argv[1:])
