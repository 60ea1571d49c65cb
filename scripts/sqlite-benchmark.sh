#!/usr/bin/env bash
# E3DBSQLite against SQLCipher 4 on the same SQL, in one run: a bulk insert with an index in one transaction,
# point reads by primary key in a scattered order, filtered full scans (Benchmarks/SQLiteBaseline/workloads.sql),
# each with SQLite's default page cache and with 128 MiB, encrypted and plaintext; the open time (with a
# passphrase, with a raw key); the rekey of a database of about REKEY_MIB MiB. Prints a markdown table for
# docs/performance.md: both engines' times, each engine's encryption overhead (encrypted / its own plaintext time)
# and the goals: overhead(E3DBSQLite) ≤ overhead(SQLCipher) and time(E3DBSQLite encrypted) ≤ time(SQLCipher).
#
#   scripts/sqlite-benchmark.sh [ROWS] [RUNS]      # default 500000 rows, 2 runs (best of the runs)
#
# Environment: REKEY_MIB (default 1024): the size of the database on which E3DBSQLite.rekey and `PRAGMA rekey`
# are timed, in the first run only (0 skips it). WORKDIR: where the databases go (default: a new directory under
# $TMPDIR or /tmp; it needs about 2.5 × REKEY_MIB MiB free).
# E3DBSQLite's side is Benchmarks/SQLiteThroughput (release build; its plaintext rows use the system SQLite without
# the VFS); SQLCipher's is Benchmarks/SQLiteBaseline/sqlite_baseline.py through the sqlcipher3 module (SQLCipher 4,
# default settings; its plaintext rows are the same module without a key) in the project's venv. The two sides run
# one after the other, never at the same time.
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
"$python" -c 'import sqlcipher3' || { echo "the venv lacks sqlcipher3 (scripts/python-env.sh installs it)" >&2; exit 1; }

load_before="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo n/a)"
for ((run = 0; run < runs; run++)); do
    rekey=0
    [ "$run" -eq 0 ] && rekey="$rekey_mib"
    echo "run $((run + 1)) of $runs: SQLCipher" >&2
    mkdir -p "$work/sqlcipher"
    "$python" "$baseline" "$work/sqlcipher" "$rows" --rekey-mib "$rekey" >>"$work/results"
    rm -rf "$work/sqlcipher"
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
        results.setdefault((m["name"], m["mode"], m["cache"]), set()).add(m["result"])
# Both engines must have computed the same answers (the same SQL over the same rows).
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
def goal(x): return "" if x is None else ("met" if x <= 1.0 else "**not met**")

cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
swift = subprocess.run(["swift", "--version"], capture_output=True, text=True).stdout.splitlines()
v = info.get("sqlcipher", {})
print("## E3DBSQLite against SQLCipher 4\n")
print("- CPU: %s, 2 logical cores; load average before / after: %s / %s" % (cpu, load_before, load_after))
print("- %s rows, best of %d runs; E3DBSQLite on the system SQLite %s; SQLCipher %s (sqlcipher3-binary, SQLite %s); %s"
      % ("{:,}".format(rows), runs, info.get("e3dbkit", {}).get("sqlite", "?"), v.get("version", "?"), v.get("sqlite", "?"), swift[0] if swift else "swift ?"))
print()
print("| workload | page cache | E3DBSQLite plaintext | E3DBSQLite encrypted | E3DBSQLite overhead | SQLCipher plaintext | SQLCipher encrypted | SQLCipher overhead | overhead E3DB / SQLCipher (≤ 1) | encrypted time E3DB / SQLCipher (≤ 1) |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
labels = (("insert", "insert %s rows, index on k, one transaction"), ("point_reads", "%s point reads by id, scattered order"), ("scan", "3 filtered full scans of %s rows"))
for name, label in labels:
    for cache, cache_label in (("default", "default (2 MB)"), ("128MiB", "128 MiB")):
        ep, ee = t("e3dbkit", name, "plaintext", cache), t("e3dbkit", name, "encrypted", cache)
        sp, se = t("sqlcipher", name, "plaintext", cache), t("sqlcipher", name, "encrypted", cache)
        eo, so = ratio(ee, ep), ratio(se, sp)
        g1, g2 = ratio(eo, so), ratio(ee, se)
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s %s | %s %s |" % (
            label % "{:,}".format(rows), cache_label, fmt(ep), fmt(ee), fr(eo), fmt(sp), fmt(se), fr(so), fr(g1), goal(g1), fr(g2), goal(g2)))
for name, label in (("open_passphrase", "open + first read, passphrase (PBKDF2, 256,000 rounds)"), ("open_raw_key", "open + first read, raw key")):
    ep, sp = t("e3dbkit", "open_plaintext", "plaintext"), t("sqlcipher", "open_plaintext", "plaintext")
    ee, se = t("e3dbkit", name, "encrypted"), t("sqlcipher", name, "encrypted")
    g2 = ratio(ee, se)
    print("| %s | | %s | %s | | %s | %s | | | %s %s |" % (label, fmt(ep), fmt(ee), fmt(sp), fmt(se), fr(g2), goal(g2)))
cached = t("e3dbkit", "open_passphrase_cached", "encrypted")
if cached is not None:
    print("| open + first read, passphrase, another connection in the same process (derived key cached) | | | %s | | | | | | |" % fmt(cached))
for (engine, name, mode, cache), m in sorted(best.items()):
    if engine != "e3dbkit" or name != "rekey": continue
    other = best.get(("sqlcipher", "rekey", mode, cache))
    ee, se = m["seconds"], other["seconds"] if other else None
    g2 = ratio(ee, se)
    size = "%.0f MiB / %.0f MiB" % (m["bytes"] / 1048576, other["bytes"] / 1048576) if other else "%.0f MiB" % (m["bytes"] / 1048576)
    print("| rekey, %s rows (%s; E3DBSQLite.rekey / `PRAGMA rekey`), first run only | | | %s | | | %s | | | %s %s |" % (
        "{:,}".format(m["count"]), size, fmt(ee), fmt(se), fr(g2), goal(g2)))
PY
