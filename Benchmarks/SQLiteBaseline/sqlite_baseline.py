#!/usr/bin/env python3
"""The peers' side of scripts/sqlite-benchmark.sh: the SQL of workloads.sql through SQLCipher 4 (the sqlcipher3
module) or SQLite3 Multiple Ciphers (the apsw module of apsw-sqlite3mc).

    sqlite_baseline.py WORKDIR [ROWS] [--rekey-mib M] [--engine sqlcipher|sqlite3mc]

Encrypted, SQLCipher: `PRAGMA key` with a passphrase (SQLCipher 4 defaults: PBKDF2-HMAC-SHA512 256,000 iterations,
4 KiB pages, AES-256-CBC, HMAC-SHA512). Encrypted, SQLite3 Multiple Ciphers: `PRAGMA cipher = 'chacha20'`, then
`PRAGMA key` with the passphrase (its chacha20 defaults: PBKDF2-HMAC-SHA256 64,007 iterations, ChaCha20-Poly1305,
4 KiB pages); the raw key is `raw:` and 64 hex digits there. Plaintext: the same module without a key (plain SQLite,
the version bundled with the engine). The rekey is SQLCipher's only. Journal mode DELETE (the default), temp_store MEMORY (as E3DBSQLite's connection and sqlcipher3's build
have it). Each workload runs in a fresh connection, its page cache set with `PRAGMA cache_size` to SQLite's default
(-2000, 2 MB; sqlcipher3-binary is built with -8000, so it is set explicitly) or to -131072 (128 MiB), after a first
read that derives the key; only the workload's statement is timed.

Prints one JSON object a line, as Benchmarks/SQLiteThroughput does:
{"engine": "sqlcipher", "name": ..., "mode": "encrypted"|"plaintext", "cache": "default"|"128MiB",
 "seconds": ..., "count": ..., "result": ...}
"""
import json
import os
import re
import sys
import time

ENGINE = sys.argv[sys.argv.index("--engine") + 1] if "--engine" in sys.argv else "sqlcipher"
if ENGINE == "sqlcipher":
    import sqlcipher3
elif ENGINE == "sqlite3mc":
    import apsw
else:
    raise SystemExit("--engine is sqlcipher or sqlite3mc")

HERE = os.path.dirname(os.path.abspath(__file__))
PASSPHRASE = "benchmark passphrase"
NEW_PASSPHRASE = "another benchmark passphrase"
RAW_KEY = bytes((i * 7 + 1) & 0xFF for i in range(32))  # the same bytes as SQLiteThroughput's raw key
CACHES = (("default", -2000), ("128MiB", -131072))
SCANS = 3
OPENS = 5
# Bytes per row of the rekey database (table and index, 4 KiB encrypted pages), to turn --rekey-mib into rows.
REKEY_BYTES_PER_ROW = 134


def sections(rows):
    """The named statements of workloads.sql with $ROWS replaced."""
    found, name = {}, None
    with open(os.path.join(HERE, "workloads.sql")) as f:
        for line in f:
            m = re.match(r"-- @(\w+)\s*$", line)
            if m:
                name = m.group(1)
                found[name] = []
            elif name is not None and not line.startswith("--"):
                found[name].append(line.rstrip("\n"))
    return {k: "\n".join(v).strip().replace("$ROWS", str(rows)) for k, v in found.items()}


def emit(name, seconds, count, mode="encrypted", cache="default", **extra):
    print(json.dumps(dict(engine=ENGINE, name=name, mode=mode, cache=cache, seconds=seconds, count=count, **extra)), flush=True)


def remove(path):
    for suffix in ("", "-journal", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)


def open_keyed(path, key):
    """A connection to `path`, keyed with `key` (the text of PRAGMA key) when it is not None."""
    if ENGINE == "sqlcipher":
        db = sqlcipher3.connect(path, isolation_level=None)
    else:
        db = apsw.Connection(path)
        if key is not None:
            db.execute("PRAGMA cipher = 'chacha20'").fetchall()
    if key is not None:
        db.execute("PRAGMA key = \"%s\"" % key).fetchall()
    return db


def connect(path, key, cache=-2000):
    db = open_keyed(path, key)
    db.execute("PRAGMA cache_size = %d" % cache)
    db.execute("PRAGMA temp_store = MEMORY")
    return db


def result(cursor):
    return ",".join(",".join(str(v) for v in row) for row in cursor.fetchall())


def timed(db, sql):
    start = time.perf_counter()
    value = result(db.execute(sql))
    return time.perf_counter() - start, value


def passphrase_key(passphrase):
    return passphrase.replace('"', '""')


def main(argv):
    if len(argv) < 2:
        raise SystemExit(__doc__)
    work = argv[1]
    rows = int(argv[2]) if len(argv) > 2 and not argv[2].startswith("--") else 500000
    rekey_mib = int(os.environ.get("REKEY_MIB", "0"))
    if "--rekey-mib" in argv:
        rekey_mib = int(argv[argv.index("--rekey-mib") + 1])
    sql = sections(rows)
    if ENGINE == "sqlcipher":
        probe = sqlcipher3.connect(":memory:")
        version = probe.execute("PRAGMA cipher_version").fetchone()[0]
    else:
        probe = apsw.Connection(":memory:")
        version = probe.execute("SELECT sqlite3mc_version()").fetchall()[0][0]
        rekey_mib = 0
    emit("version", 0, 0, version=version, sqlite=probe.execute("SELECT sqlite_version()").fetchall()[0][0])
    probe.close()
    path = os.path.join(work, ENGINE + ".db")

    for cache_name, cache in CACHES:
        for mode in ("plaintext", "encrypted"):
            key = passphrase_key(PASSPHRASE) if mode == "encrypted" else None
            remove(path)
            db = connect(path, key, cache)
            db.execute(sql["table"])
            db.execute(sql["index"])
            start = time.perf_counter()
            db.execute("BEGIN")
            db.execute(sql["insert"])
            db.execute("COMMIT")
            emit("insert", time.perf_counter() - start, rows, mode, cache_name, bytes=os.path.getsize(path))
            db.close()

            db = connect(path, key, cache)
            result(db.execute(sql["first_read"]))
            seconds, value = timed(db, sql["point_reads"])
            emit("point_reads", seconds, rows, mode, cache_name, result=value)
            db.close()

            db = connect(path, key, cache)
            result(db.execute(sql["first_read"]))
            total, values = 0.0, set()
            for _ in range(SCANS):
                seconds, value = timed(db, sql["scan"])
                total += seconds
                values.add(value)
            emit("scan", total, rows * SCANS, mode, cache_name, result=";".join(sorted(values)))
            db.close()
    remove(path)

    # Open + first read, best of OPENS, on a small database made with each key form (and without a key).
    raw = ("x'%s'" if ENGINE == "sqlcipher" else "raw:%s") % RAW_KEY.hex()
    forms = (("plaintext", None), ("passphrase", passphrase_key(PASSPHRASE)), ("raw_key", raw))
    for form, key in forms:
        small = os.path.join(work, "open-%s.db" % form)
        remove(small)
        db = connect(small, key)
        db.execute(sql["table"])
        db.close()
        best = None
        for _ in range(OPENS):
            start = time.perf_counter()
            db = open_keyed(small, key)
            result(db.execute(sql["first_read"]))
            seconds = time.perf_counter() - start
            db.close()
            best = seconds if best is None else min(best, seconds)
        emit("open_" + form, best, 1, "plaintext" if key is None else "encrypted")
        remove(small)

    # PRAGMA rekey of a database of about rekey_mib MiB (table, then the index), built with a 128 MiB cache.
    if rekey_mib > 0:
        big_rows = rekey_mib * 1048576 // REKEY_BYTES_PER_ROW
        big_sql = sections(big_rows)
        big = os.path.join(work, "rekey.db")
        remove(big)
        db = connect(big, passphrase_key(PASSPHRASE), -131072)
        db.execute(big_sql["table"])
        db.execute("BEGIN")
        db.execute(big_sql["insert"])
        db.execute("COMMIT")
        db.execute(big_sql["index"])
        db.close()
        size = os.path.getsize(big)
        db = connect(big, passphrase_key(PASSPHRASE))
        result(db.execute(sql["first_read"]))
        start = time.perf_counter()
        db.execute("PRAGMA rekey = \"%s\"" % passphrase_key(NEW_PASSPHRASE))
        seconds = time.perf_counter() - start
        db.close()
        check = connect(big, passphrase_key(NEW_PASSPHRASE))
        if check.execute("SELECT count(*) FROM t").fetchone()[0] != big_rows:
            raise SystemExit("the rekeyed database does not open with the new passphrase")
        check.close()
        emit("rekey", seconds, big_rows, "encrypted", "default", bytes=size)
        remove(big)


if __name__ == "__main__":
    main(sys.argv)
