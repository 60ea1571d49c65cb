#!/usr/bin/env bash
# E3DBStore against SQLCipher 4 and plain SQLite on the same records, in one run: bulk insert in one transaction
# (with and without an index on one field), random point reads by id, lookups on the indexed field (blind index
# for the store), a full scan with its peak memory, and the passphrase change against `PRAGMA rekey`. The store runs
# twice: in an encrypted database file (E3DBSQLite, the default) and in a plain file (STORE_DATABASE=plain, the
# layout before). Prints markdown tables for docs/performance.md.
#
#   scripts/store-benchmark.sh [RECORDS] [RUNS]      # default 100000 records, 2 runs (best of the runs)
#
# Environment: REKEY_RECORDS (default 1000000): the size of the second store and SQLCipher database on which the
# passphrase change and `PRAGMA rekey` are timed, in the first run only (0 skips it).
# Records: Benchmarks/StoreBaseline/store_baseline.py generate (10 string fields, about 555 bytes of JSON, seeded).
# The store side is Benchmarks/StoreThroughput (release build; its plain SQLite rows go through GRDB); the SQLCipher
# side is the same script, through the sqlcipher3 module (SQLCipher 4, default settings) in the project's venv.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
records="${1:-100000}"
runs="${2:-2}"
rekey_records="${REKEY_RECORDS:-1000000}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "building StoreThroughput (release) and the Python environment" >&2
(cd "$root" && swift build -c release --package-path Benchmarks --product StoreThroughput >&2)
bench="$(cd "$root" && swift build -c release --package-path Benchmarks --show-bin-path)/StoreThroughput"
python="$("$root/scripts/python-env.sh")"
baseline="$root/Benchmarks/StoreBaseline/store_baseline.py"
"$python" -c 'import sqlcipher3' || { echo "the venv lacks sqlcipher3 (scripts/python-env.sh installs it)" >&2; exit 1; }

"$python" "$baseline" generate "$records" "$work/records.ndjson"
load_before="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo n/a)"
for ((run = 0; run < runs; run++)); do
    extra=()
    store_extra=()
    if [ "$run" -eq 0 ] && [ "$rekey_records" -gt "$records" ]; then
        extra=(--rekey-rows "$rekey_records")
        store_extra=(--change-records "$rekey_records")
    fi
    echo "run $((run + 1)) of $runs: SQLCipher" >&2
    mkdir -p "$work/sqlcipher" "$work/store"
    "$python" "$baseline" sqlcipher "$work/records.ndjson" "$work/sqlcipher" "${extra[@]}" | sed 's/^/sqlcipher /' >>"$work/results"
    rm -rf "$work/sqlcipher"
    echo "run $((run + 1)) of $runs: E3DBStore and SQLite" >&2
    "$bench" "$work/records.ndjson" "$work/store" "${store_extra[@]}" | sed 's/^/e3dbkit /' >>"$work/results"
    rm -rf "$work/store"
    echo "run $((run + 1)) of $runs: E3DBStore in a plain file" >&2
    mkdir -p "$work/store"
    STORE_DATABASE=plain "$bench" "$work/records.ndjson" "$work/store" | sed 's/^/e3dbkit-plain /' >>"$work/results"
    rm -rf "$work/store"
done
load_after="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo n/a)"

"$python" - "$work/results" "$records" "$runs" "$load_before" "$load_after" <<'PY'
import json, subprocess, sys
path, records, runs, load_before, load_after = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
best, extra = {}, {}
for line in open(path):
    side, text = line.split(" ", 1)
    m = json.loads(text)
    key = (side, m["name"], m["count"])
    if key not in best or m["seconds"] < best[key]:
        best[key] = m["seconds"]
        extra[key] = m
def s(side, name, count=records): return best.get((side, name, count))
def rate(x, count=records): return "—" if not x else "{:,.0f}/s".format(count / x)
def ratio(a, b): return "—" if not a or not b else "{:.2f}×".format(b / a)
def goal(value, target): return "" if value == "—" else ("met" if float(value.rstrip("×")) >= target else "**not met**")
version = extra.get(("sqlcipher", "sqlcipher_version", 0), {}).get("version", "?")
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
swift = subprocess.run(["swift", "--version"], capture_output=True, text=True).stdout.splitlines()
print("## Store (E3DBStore)\n")
print("- CPU: %s, 2 logical cores; load average before / after: %s / %s" % (cpu, load_before, load_after))
print("- %s records, best of %d runs; SQLCipher %s (sqlcipher3-binary); %s" % ("{:,}".format(records), runs, version, swift[0] if swift else "swift ?"))
print()
print("| operation | E3DBStore | SQLCipher 4 | plain SQLite (GRDB) | ratio | goal |")
print("| --- | ---: | ---: | ---: | ---: | --- |")
for label, store, cipher, plain in (
    ("bulk insert, one transaction", "store_insert", "insert", "sqlite_insert"),
    ("bulk insert, index on one field", "store_insert_indexed", "insert_indexed", "sqlite_insert_indexed"),
):
    r = ratio(s("e3dbkit", store), s("sqlcipher", cipher))
    print("| %s | %s | %s | %s | %s E3DBStore / SQLCipher | ≥ 0.8: %s |" % (label, rate(s("e3dbkit", store)), rate(s("sqlcipher", cipher)), rate(s("e3dbkit", plain)), r, goal(r, 0.8)))
r = ratio(s("e3dbkit", "store_point_read"), s("sqlcipher", "point_read"))
print("| random point reads by id (decrypted, verified) | %s | %s | %s | %s E3DBStore / SQLCipher | ≥ 1.0: %s |" % (rate(s("e3dbkit", "store_point_read")), rate(s("sqlcipher", "point_read")), rate(s("e3dbkit", "sqlite_point_read")), r, goal(r, 1.0)))
r = ratio(s("e3dbkit", "store_index_lookup"), s("e3dbkit", "sqlite_indexed_lookup"))
print("| lookup on the indexed field (blind index, decrypted) | %s | %s | %s | %s E3DBStore / SQLite | ≥ 0.5: %s |" % (rate(s("e3dbkit", "store_index_lookup")), rate(s("sqlcipher", "indexed_lookup")), rate(s("e3dbkit", "sqlite_indexed_lookup")), r, goal(r, 0.5)))
r = ratio(s("e3dbkit", "store_point_read_2threads"), s("sqlcipher", "point_read"))
print("| random point reads by id, E3DBStore on 2 threads | %s | | | %s E3DBStore / SQLCipher (1 thread) | |" % (rate(s("e3dbkit", "store_point_read_2threads")), r))
scan = extra.get(("e3dbkit", "store_scan", records), {})
print("| full scan with decryption (AsyncSequence, child process) | %s, peak RSS %.1f MiB (%.1f MiB after open) | | | | bounded |" % (rate(s("e3dbkit", "store_scan")), scan.get("peak_kib", 0) / 1024, scan.get("rss_open_kib", 0) / 1024))
print("| open with a passphrase | docs/store.md: interactive 0.070 s, moderate 0.345 s | %.3f s (PBKDF2) | | | |" % (s("sqlcipher", "open", 1) or 0))
for count in sorted({k[2] for k in best if k[1] == "rekey"}):
    rekey = s("sqlcipher", "rekey", count)
    for name, label in (("store_change_key", "raw key"), ("store_change_passphrase_interactive", "passphrase, interactive"), ("store_change_passphrase_moderate", "passphrase, moderate")):
        t = s("e3dbkit", name, count)
        r = ratio(t, rekey)
        g = ("≥ 100: " + goal(r, 100)) if count >= 1000000 else ""
        print("| change the passphrase, %s records: %s | %s | %s (`PRAGMA rekey`) | | %s SQLCipher / E3DBStore | %s |" % ("{:,}".format(count), label, "—" if t is None else "%.4f s" % t, "—" if rekey is None else "%.2f s" % rekey, r, g))
print()
print("## Store in an encrypted file (E3DBSQLite) against the plain file and SQLCipher 4\n")
print("| operation | encrypted file (default) | plain file (before) | SQLCipher 4 | encrypted / plain | encrypted / SQLCipher |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for label, store, cipher in (
    ("bulk insert, one transaction", "store_insert", "insert"),
    ("bulk insert, index on one field", "store_insert_indexed", "insert_indexed"),
    ("random point reads by id", "store_point_read", "point_read"),
    ("lookup on the indexed field", "store_index_lookup", "indexed_lookup"),
    ("full scan with decryption", "store_scan", None),
):
    enc, plain = s("e3dbkit", store), s("e3dbkit-plain", store)
    sc = s("sqlcipher", cipher) if cipher else None
    print("| %s | %s | %s | %s | %s | %s |" % (label, rate(enc), rate(plain), rate(sc), ratio(enc, plain), "—" if not sc else ratio(enc, sc)))
PY
