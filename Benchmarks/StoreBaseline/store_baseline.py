#!/usr/bin/env python3
"""The SQLCipher 4 side of scripts/store-benchmark.sh, and the record generator both sides read.

    store_baseline.py generate N PATH          # N records (NDJSON, one data object a line), deterministic
    store_baseline.py sqlcipher PATH WORKDIR [--rekey-rows M]

Records: 10 string fields field00..field09 of 32..53 ASCII letters and digits (about 555 bytes of JSON each),
from random.Random(20261125). field01 is the indexed field (distinct values).

SQLCipher (the sqlcipher3 module, SQLCipher 4 bundled, default settings: PBKDF2-HMAC-SHA512 256,000 iterations,
4 KiB pages, default page cache) stores each record as a row (id TEXT PRIMARY KEY, data TEXT, f TEXT) where data
is the record's JSON and f the indexed field's value, in WAL mode like the store. It prints one JSON object per
measurement on stdout: {"name": ..., "seconds": ..., "count": ...}.
"""
import json
import os
import random
import string
import sys
import time
import uuid

SEED = 20261125
FIELDS = 10
INDEXED = "field01"
ALPHABET = string.ascii_letters + string.digits


def records(n):
    rng = random.Random(SEED)
    for _ in range(n):
        yield {"field%02d" % j: "".join(rng.choices(ALPHABET, k=rng.randint(32, 53))) for j in range(FIELDS)}


def generate(n, path):
    with open(path, "w") as out:
        for record in records(n):
            out.write(json.dumps(record, separators=(",", ":")) + "\n")


def load(path):
    rows = []
    rng = random.Random(SEED + 1)
    with open(path) as f:
        for line in f:
            data = json.loads(line)
            rows.append((str(uuid.UUID(int=rng.getrandbits(128), version=4)), line.rstrip("\n"), data[INDEXED]))
    return rows


def emit(name, seconds, count=1, **extra):
    print(json.dumps(dict(name=name, seconds=seconds, count=count, **extra)), flush=True)


def connect(path, passphrase):
    import sqlcipher3

    db = sqlcipher3.connect(path, isolation_level=None)
    db.execute("PRAGMA key = '%s'" % passphrase)
    return db


def build(path, rows, indexed, passphrase="benchmark passphrase"):
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    db = connect(path, passphrase)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("CREATE TABLE records (id TEXT PRIMARY KEY, data TEXT NOT NULL, f TEXT NOT NULL)")
    if indexed:
        db.execute("CREATE INDEX records_f ON records(f)")
    start = time.perf_counter()
    db.execute("BEGIN")
    db.executemany("INSERT INTO records (id, data, f) VALUES (?, ?, ?)", rows)
    db.execute("COMMIT")
    seconds = time.perf_counter() - start
    return db, seconds


def sqlcipher(path, work, rekey_rows):
    import sqlcipher3

    version = sqlcipher3.connect(":memory:").execute("PRAGMA cipher_version").fetchone()[0]
    rows = load(path)
    n = len(rows)
    emit("sqlcipher_version", 0, 0, version=version)
    db_path = os.path.join(work, "sqlcipher.db")

    # Bulk insert in one transaction, without and with the index on one field (best of 2 each).
    for indexed in (False, True):
        best = None
        for _ in range(2):
            db, seconds = build(db_path, rows, indexed)
            db.close()
            best = seconds if best is None else min(best, seconds)
        emit("insert_indexed" if indexed else "insert", best, n)

    # The last database (with the index) for reads: random ids, default cache, a fresh connection.
    order = list(range(n))
    random.Random(SEED + 2).shuffle(order)
    db = connect(db_path, "benchmark passphrase")
    db.execute("SELECT count(*) FROM records").fetchone()
    for name, column, key in (("point_read", "id", 0), ("indexed_lookup", "f", 2)):
        sql = "SELECT data FROM records WHERE %s = ?" % column
        start = time.perf_counter()
        for i in order:
            row = db.execute(sql, (rows[i][key],)).fetchone()
            if row is None or row[0] != rows[i][1]:
                raise SystemExit("SQLCipher returned a wrong row")
        emit(name, time.perf_counter() - start, n)
    db.close()

    # Open: connect, key (PBKDF2), first query; best of 5.
    best = None
    for _ in range(5):
        start = time.perf_counter()
        db = connect(db_path, "benchmark passphrase")
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        seconds = time.perf_counter() - start
        db.close()
        best = seconds if best is None else min(best, seconds)
    emit("open", best, 1)

    # PRAGMA rekey on the N-row database, then on one of rekey_rows rows (the records repeated with new ids).
    for count in [n] + ([rekey_rows] if rekey_rows and rekey_rows != n else []):
        if count != n:
            rng = random.Random(SEED + 3)
            big = [(str(uuid.UUID(int=rng.getrandbits(128), version=4)), rows[i % n][1], rows[i % n][2]) for i in range(count)]
            db, _ = build(db_path, big, True)
            del big
        else:
            db = connect(db_path, "benchmark passphrase")
        db.execute("SELECT count(*) FROM records").fetchone()
        size = os.path.getsize(db_path) + (os.path.getsize(db_path + "-wal") if os.path.exists(db_path + "-wal") else 0)
        start = time.perf_counter()
        db.execute("PRAGMA rekey = 'another benchmark passphrase'")
        seconds = time.perf_counter() - start
        db.close()
        check = connect(db_path, "another benchmark passphrase")
        if check.execute("SELECT count(*) FROM records").fetchone()[0] != count:
            raise SystemExit("the rekeyed database does not open with the new passphrase")
        check.close()
        emit("rekey", seconds, count, bytes=size)


def main(argv):
    if len(argv) == 4 and argv[1] == "generate":
        generate(int(argv[2]), argv[3])
    elif len(argv) >= 4 and argv[1] == "sqlcipher":
        rekey_rows = int(argv[5]) if len(argv) == 6 and argv[4] == "--rekey-rows" else 0
        sqlcipher(argv[2], argv[3], rekey_rows)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
