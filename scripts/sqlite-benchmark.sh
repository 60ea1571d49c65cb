#!/usr/bin/env bash
# E3DBSQLite against SQLCipher 4 and SQLite3 Multiple Ciphers on the same SQL, in one run: a bulk insert with an index
# in one transaction, point reads by primary key in a scattered order, filtered full scans
# (Benchmarks/SQLiteBaseline/workloads.sql), each with SQLite's default page cache and with 128 MiB, encrypted and
# plaintext; the open time (with a passphrase, with a raw key); the rekey of a database of about REKEY_MIB MiB.
# E3DBSQLite runs each workload in both of its page formats: SQLCipher 4's and SQLite3 Multiple Ciphers' chacha20.
# Prints markdown tables for docs/performance.md: every engine's times, and for each row the goals
#   E3DBSQLite (SQLCipher format) / SQLCipher ≤ 1, E3DBSQLite (chacha20) / SQLCipher ≤ 0.6,
#   E3DBSQLite (chacha20) / SQLite3 Multiple Ciphers ≤ 1,
# with each engine's encryption overhead over its own plaintext as information only (the three run different SQLite
# builds).
#
#   scripts/sqlite-benchmark.sh [ROWS] [RUNS]      # default 500000 rows, 2 runs (best of the runs)
#
# Environment: REKEY_MIB (default 1024): the size of the database on which E3DBSQLite.rekey and `PRAGMA rekey`
# are timed, in the first run only (0 skips it). WORKDIR: where the databases go (default: a new directory under
# $TMPDIR or /tmp; it needs about 2.5 × REKEY_MIB MiB free).
# E3DBSQLite's side is Benchmarks/SQLiteThroughput (release build; its plaintext rows use the system SQLite without
# the VFS); the peers' is Benchmarks/SQLiteBaseline/sqlite_baseline.py in the project's venv: SQLCipher through the
# sqlcipher3 module (SQLCipher 4, default settings), SQLite3 Multiple Ciphers through apsw-sqlite3mc's apsw (chacha20,
# its default settings); each one's plaintext rows are the same module without a key. The engines run one after the
# other, never at the same time.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
rows="${1:-500000}"
runs="${2:-2}"
rekey_mib="${REKEY_MIB:-1024}"

if [ -n "${WORKDIR:-}" ]; then
    mkdir -p "$WORKDIR"
    work="$(mktemp -d "$WORKDIR/sqlite-benchmark.XXXXXX")"
else
    work="$(mktemp -d)"
fi
trap 'rm -rf "$work"' EXIT

echo "building SQLiteThroughput (release) and the Python environment" >&2
(cd "$root" && swift build -c release --package-path Benchmarks --product SQLiteThroughput >&2)
bench="$(cd "$root" && swift build -c release --package-path Benchmarks --show-bin-path)/SQLiteThroughput"
python="$("$root/scripts/python-env.sh")"
baseline="$root/Benchmarks/SQLiteBaseline/sqlite_baseline.py"
sql="$root/Benchmarks/SQLiteBaseline/workloads.sql"
"$python" -c 'import sqlcipher3, apsw' || {
    echo "the venv lacks sqlcipher3 or apsw (scripts/python-env.sh installs sqlcipher3-binary and apsw-sqlite3mc)" >&2
    exit 1
}

load_before="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo n/a)"
for ((run = 0; run < runs; run++)); do
    rekey=0
    [ "$run" -eq 0 ] && rekey="$rekey_mib"
    echo "run $((run + 1)) of $runs: SQLCipher" >&2
    mkdir -p "$work/sqlcipher"
    "$python" "$baseline" "$work/sqlcipher" "$rows" --rekey-mib "$rekey" >>"$work/results"
    rm -rf "$work/sqlcipher"
    echo "run $((run + 1)) of $runs: SQLite3 Multiple Ciphers" >&2
    mkdir -p "$work/sqlite3mc"
    "$python" "$baseline" "$work/sqlite3mc" "$rows" --engine sqlite3mc >>"$work/results"
    rm -rf "$work/sqlite3mc"
    echo "run $((run + 1)) of $runs: E3DBSQLite" >&2
    mkdir -p "$work/e3dbkit"
    "$bench" "$work/e3dbkit" "$rows" --rekey-mib "$rekey" --sql "$sql" >>"$work/results"
    rm -rf "$work/e3dbkit"
done
load_after="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo n/a)"

"$python" - "$work/results" "$rows" "$runs" "$load_before" "$load_after" "$rekey_mib" <<'PY'
import json, subprocess, sys
path, rows, runs, load_before, load_after, rekey_mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], int(sys.argv[6])
best, info, results = {}, {}, {}
for line in open(path):
    m = json.loads(line)
    key = (m["engine"], m["name"], m["mode"], m["cache"])
    if m["name"] == "version":
        info[m["engine"]] = m
        continue
    if key not in best or m["seconds"] < best[key]["seconds"]:
        best[key] = m
    if "result" in m:
        results.setdefault((m["name"], m["cache"]), set()).add(m["result"])
# Every engine and mode must have computed the same answers (the same SQL over the same rows).
for key, values in results.items():
    if len(values) != 1:
        sys.exit("the engines disagree on %s: %s" % (key, sorted(values)))

def t(engine, name, mode, cache="default"):
    m = best.get((engine, name, mode, cache))
    return m["seconds"] if m else None
def fmt(x):
    if x is None: return "—"
    return "%.3f s" % x if x >= 0.1 else "%.2f ms" % (x * 1000)
def ratio(a, b): return None if not a or not b else a / b
def fr(x): return "—" if x is None else "%.2f×" % x
def goal(x, limit): return "" if x is None else ("met" if x <= limit else "**not met**")
def fg(x, limit): return "—" if x is None else "%s %s" % (fr(x), goal(x, limit))

cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
swift = subprocess.run(["swift", "--version"], capture_output=True, text=True).stdout.splitlines()
v, mc = info.get("sqlcipher", {}), info.get("sqlite3mc", {})
print("## E3DBSQLite against SQLCipher 4 and SQLite3 Multiple Ciphers\n")
print("- CPU: %s, 2 logical cores; load average before / after: %s / %s" % (cpu, load_before, load_after))
print("- %s rows, best of %d runs; E3DBSQLite on the system SQLite %s; SQLCipher %s (sqlcipher3-binary, SQLite %s); %s (apsw-sqlite3mc, SQLite %s); %s"
      % ("{:,}".format(rows), runs, info.get("e3dbkit", {}).get("sqlite", "?"), v.get("version", "?"), v.get("sqlite", "?"),
         mc.get("version", "?"), mc.get("sqlite", "?"), swift[0] if swift else "swift ?"))
print("- E3DB: E3DBSQLite; E3DB SQLCipher and E3DB chacha20: its two page formats (SQLCipher 4 defaults; SQLite3 Multiple Ciphers' chacha20 defaults); 3MC: SQLite3 Multiple Ciphers (chacha20)")
print()
labels = (("insert", "insert %s rows, index on k, one transaction"), ("point_reads", "%s point reads by id, scattered order"), ("scan", "3 filtered full scans of %s rows"))
opens = (("open_passphrase", "open + first read, passphrase"), ("open_raw_key", "open + first read, raw key"))
rowspec = []
for name, label in labels:
    for cache, cache_label in (("default", "default (2 MB)"), ("128MiB", "128 MiB")):
        rowspec.append((name, cache, label % "{:,}".format(rows), cache_label))
for name, label in opens:
    rowspec.append((name, "default", label, ""))

def times(name, cache):
    plain = "open_plaintext" if name.startswith("open_") else name
    return dict(
        ep=t("e3dbkit", plain, "plaintext", cache), es=t("e3dbkit", name, "encrypted", cache), ec=t("e3dbkit", name, "chacha20", cache),
        sp=t("sqlcipher", plain, "plaintext", cache), se=t("sqlcipher", name, "encrypted", cache),
        mp=t("sqlite3mc", plain, "plaintext", cache), me=t("sqlite3mc", name, "encrypted", cache))

print("### Times\n")
print("| workload | page cache | E3DB plaintext | E3DB SQLCipher | E3DB chacha20 | SQLCipher plaintext | SQLCipher | 3MC plaintext | 3MC chacha20 |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for name, cache, label, cache_label in rowspec:
    x = times(name, cache)
    print("| %s | %s | %s |" % (label, cache_label, " | ".join(fmt(x[k]) for k in ("ep", "es", "ec", "sp", "se", "mp", "me"))))
print()
print("### Goals, and each engine's overhead over its own plaintext (information only)\n")
print("| workload | page cache | E3DB SQLCipher / SQLCipher (≤ 1) | E3DB chacha20 / SQLCipher (≤ 0.6) | E3DB chacha20 / 3MC (≤ 1) | overhead E3DB SQLCipher | overhead E3DB chacha20 | overhead SQLCipher | overhead 3MC |")
print("| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: |")
for name, cache, label, cache_label in rowspec:
    x = times(name, cache)
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        label, cache_label, fg(ratio(x["es"], x["se"]), 1.0), fg(ratio(x["ec"], x["se"]), 0.6), fg(ratio(x["ec"], x["me"]), 1.0),
        fr(ratio(x["es"], x["ep"])), fr(ratio(x["ec"], x["ep"])), fr(ratio(x["se"], x["sp"])), fr(ratio(x["me"], x["mp"]))))
print()
cached = [(mode, t("e3dbkit", "open_passphrase_cached", mode)) for mode in ("encrypted", "chacha20")]
if any(c for _, c in cached):
    print("- E3DBSQLite, open + first read with a passphrase from another connection in the same process (derived key cached): SQLCipher format %s, chacha20 %s"
          % tuple(fmt(c) for _, c in cached))
for (engine, name, mode, cache), m in sorted(best.items()):
    if engine != "e3dbkit" or name != "rekey": continue
    other = best.get(("sqlcipher", "rekey", mode, cache))
    ee, se = m["seconds"], other["seconds"] if other else None
    size = "%.0f MiB / %.0f MiB" % (m["bytes"] / 1048576, other["bytes"] / 1048576) if other else "%.0f MiB" % (m["bytes"] / 1048576)
    print("- Rekey, %s rows (%s; E3DBSQLite.rekey / SQLCipher's `PRAGMA rekey`), first run only: %s against %s, %s"
          % ("{:,}".format(m["count"]), size, fmt(ee), fmt(se), fg(ratio(ee, se), 1.0)))
PY
