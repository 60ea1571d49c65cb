#!/usr/bin/env bash
# Client throughput against a local `e3dbkit-server run` (SQLite, release build): E3DBClient (Benchmarks/
# ClientThroughput) and Tozny's Python SDK (Benchmarks/ClientBaseline) write and read the same kind of records
# (10 fields of 32 bytes) with 1 and 16 concurrent tasks against the same server in the same run; then a file of
# SIZE_MIB (default 1024) MiB goes up and down through `e3dbkit client file put|get`, beside `e3dbkit file
# encrypt|decrypt` of the same file. Prints a markdown table for docs/performance.md.
#
#   scripts/client-benchmark.sh [RECORDS]     # default 2000 records per measurement
#   SERVER_FLAGS="--log-level warning" scripts/client-benchmark.sh   # extra `e3dbkit-server run` flags
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
records="${1:-2000}"
size_mib="${SIZE_MIB:-1024}"
work="$(mktemp -d)"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

python="$("$root/scripts/python-env.sh")"
echo "building release binaries" >&2
(cd "$root" && swift build -c release --product e3dbkit >&2)
(cd "$root" && swift build -c release --product e3dbkit-server >&2)
(cd "$root/Benchmarks" && swift build -c release --product ClientThroughput >&2)
cli="$(cd "$root" && swift build -c release --show-bin-path)/e3dbkit"
server="$cli-server"
bench="$(cd "$root/Benchmarks" && swift build -c release --show-bin-path)/ClientThroughput"

"$server" migrate --data "$work/srv" >/dev/null
"$server" token create --data "$work/srv" >"$work/token"
# shellcheck disable=SC2086
"$server" run --data "$work/srv" --port 0 --log-level warning ${SERVER_FLAGS:-} 2>"$work/server.err" &
server_pid=$!
for _ in $(seq 1 100); do
    grep -q "listening on" "$work/server.err" 2>/dev/null && break
    sleep 0.1
done
url="$(grep -o 'http://[^ ]*' "$work/server.err" | head -1)"
echo "server at $url${SERVER_FLAGS:+ with $SERVER_FLAGS}; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2

"$bench" "$url" "$work/token" "$records" 1 16 >"$work/swift.jsonl"
"$python" "$root/Benchmarks/ClientBaseline/client_baseline.py" "$url" "$work/token" "$records" 1 16 >"$work/python.jsonl"

# Files: the client's upload and download against the file cipher alone on the same file.
head -c "$((size_mib << 20))" /dev/urandom >"$work/big.bin"
"$cli" client register --api-url "$url" --token-file "$work/token" --name files --out "$work/files.json" >/dev/null
"$python" -c 'import base64, os; print(base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("="))' >"$work/key"
now() { date +%s.%N; }
# Each step starts with nothing dirty in the page cache (`sync`, untimed): with several GiB of RAM the kernel
# writes 1 GiB files back only when asked, and a step would otherwise pay for the one before it.
sync; t0=$(now); "$cli" file encrypt -q --access-key-file "$work/key" "$work/big.bin" "$work/big.e3db" >/dev/null; t1=$(now)
sync; t1s=$(now); "$cli" file decrypt -q --access-key-file "$work/key" "$work/big.e3db" "$work/big.plain" >/dev/null; t2=$(now)
sync; t2s=$(now); record="$("$cli" client file put --config "$work/files.json" --type bench-file "$work/big.bin")"; t3=$(now)
id="$(printf '%s' "$record" | "$python" -c 'import json,sys; print(json.load(sys.stdin)["meta"]["record_id"])')"
sync; t3s=$(now); "$cli" client file get --config "$work/files.json" "$id" "$work/big.down" >/dev/null; t4=$(now)
# The same two with the ciphertext's MD5 checked against the record (`file decrypt` against the checksum the
# encryption printed).
checksum="$("$cli" file checksum "$work/big.e3db" | sed -n 's/^checksum: //p')"
rm -f "$work/big.plain"
sync; t5=$(now); "$cli" file decrypt -q --access-key-file "$work/key" --expected-checksum "$checksum" \
    --expected-size "$(stat -c %s "$work/big.e3db")" "$work/big.e3db" "$work/big.plain" >/dev/null; t6=$(now)
sync; t7=$(now); "$cli" client file get --config "$work/files.json" --verify-checksum --force "$id" "$work/big.down" >/dev/null; t8=$(now)
cmp "$work/big.bin" "$work/big.down"

"$python" - "$work/swift.jsonl" "$work/python.jsonl" "$size_mib" "$records" "$t0" "$t1" "$t1s" "$t2" "$t2s" "$t3" \
    "$t3s" "$t4" "$t5" "$t6" "$t7" "$t8" <<'PY'
import json, sys
swift = [json.loads(l) for l in open(sys.argv[1])]
python = [json.loads(l) for l in open(sys.argv[2])]
size, records = int(sys.argv[3]), int(sys.argv[4])
t0, t1, t1s, t2, t2s, t3, t3s, t4, t5, t6, t7, t8 = map(float, sys.argv[5:17])
def rate(rows, op, tasks):
    return next(r["records_per_second"] for r in rows if r["op"] == op and r["tasks"] == tasks)
print("| operation | tasks | E3DBClient (records/s) | Python SDK (records/s) | ratio | goal |")
print("|---|---:|---:|---:|---:|---|")
for op in ("write", "read"):
    for tasks in (1, 16):
        s, p = rate(swift, op, tasks), rate(python, op, tasks)
        print(f"| {op} | {tasks} | {s:,.0f} | {p:,.0f} | {s / p:.2f}× | ≥ 3× |")
enc, dec, up, down = t1 - t0, t2 - t1s, t3 - t2s, t4 - t3s
dec_md5, down_md5 = t6 - t5, t8 - t7
print()
print(f"| file ({size} MiB) | e3dbkit client | e3dbkit file alone | ratio (throughput) | goal |")
print("|---|---:|---:|---:|---|")
print(f"| upload vs encrypt | {up:.2f} s ({size / up:.0f} MiB/s) | {enc:.2f} s ({size / enc:.0f} MiB/s) | {enc / up:.2f}× | ≥ 0.5× |")
print(f"| download vs decrypt | {down:.2f} s ({size / down:.0f} MiB/s) | {dec:.2f} s ({size / dec:.0f} MiB/s) | {dec / down:.2f}× | ≥ 0.5× |")
print(f"| download `--verify-checksum` vs decrypt `--expected-checksum` | {down_md5:.2f} s ({size / down_md5:.0f} MiB/s) "
      f"| {dec_md5:.2f} s ({size / dec_md5:.0f} MiB/s) | {dec_md5 / down_md5:.2f}× | |")
print(f"\n{records} records per measurement.")
PY
