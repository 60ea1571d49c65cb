#!/usr/bin/env bash
# Server load benchmark: `e3dbkit server run` (SQLite, and PostgreSQL when a URL is given) against a Hummingbird
# route that returns a fixed JSON body of the size of a record response (Benchmarks/ServerBaseline), with wrk, in
# the same run. For 1, 4, 16 and 64 connections it measures, one after the other: the fixed route; authenticated
# GET /v1/storage/records/{id} cycling over the records written at set-up; authenticated POST /v1/storage/records.
# Prints a markdown table (requests/s, p50, p99, ratio to the fixed route at the same connection count).
#
#   scripts/server-benchmark.sh [--postgres URL] [--duration SECONDS] [--records N] [--connections "1 4 16 64"]
#
# Environment: E3DBKIT_BENCH_POSTGRES_URL (same as --postgres; a dedicated, disposable database), E3DBKIT_CLI (a
# release e3dbkit built elsewhere, used instead of building this checkout's: to compare two commits),
# LOG_LEVEL (the server's --log-level, default warning: no access-log line per request, like the baseline; info
# adds one line on standard error per request).
# Installs wrk with apt-get when it is missing. wrk runs 2 threads (1 at one connection).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
lua_dir="$root/scripts/server-benchmark"
postgres="${E3DBKIT_BENCH_POSTGRES_URL:-}"
duration=10
records=10000
connections="1 4 16 64"
log_level="${LOG_LEVEL:-warning}"
while [ $# -gt 0 ]; do
    case "$1" in
        --postgres) postgres="$2"; shift 2 ;;
        --duration) duration="$2"; shift 2 ;;
        --records) records="$2"; shift 2 ;;
        --connections) connections="$2"; shift 2 ;;
        *) echo "usage: $0 [--postgres URL] [--duration SECONDS] [--records N] [--connections LIST]" >&2; exit 64 ;;
    esac
done

if ! command -v wrk >/dev/null; then
    echo "installing wrk" >&2
    if [ "$(id -u)" = 0 ]; then apt-get install -y wrk >&2; else sudo apt-get install -y wrk >&2; fi
fi

if [ -n "${E3DBKIT_CLI:-}" ]; then
    cli="$E3DBKIT_CLI"  # another build of e3dbkit (an A/B comparison of two commits)
    echo "building the baseline server; e3dbkit is $cli" >&2
else
    echo "building the release CLI and the baseline server" >&2
    (cd "$root" && swift build -c release --product e3dbkit >&2)
    cli="$(cd "$root" && swift build -c release --show-bin-path)/e3dbkit"
fi
(cd "$root/Benchmarks" && swift build -c release --product ServerBaseline >&2)
baseline="$(cd "$root/Benchmarks" && swift build -c release --show-bin-path)/ServerBaseline"

work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# start NAME COMMAND...: runs a server in the background and sets $url from its "listening on" line (60 s at most);
# returns 1 when the process exits first.
start() {
    local name="$1" log="$work/$1.log" i
    shift
    "$@" >/dev/null 2>"$log" &
    pids+=("$!")
    for ((i = 0; i < 600; i++)); do
        url="$(grep -o 'listening on http://[^ ]*' "$log" 2>/dev/null | head -n 1 | cut -d' ' -f3 || true)"
        if [ -n "$url" ]; then return 0; fi
        if ! kill -0 "${pids[-1]}" 2>/dev/null; then return 1; fi
        sleep 0.1
    done
    return 1
}

# measure LUA URL CONNECTIONS: prints "rps p50 p99" (exits when wrk saw errors or non-2xx responses).
measure() {
    local script="$1" target="$2" c="$3" threads=2 out
    if [ "$c" -lt 2 ]; then threads=1; fi
    out="$(BENCH_LUA_DIR="$lua_dir" wrk -t"$threads" -c"$c" -d"${duration}s" -s "$lua_dir/$script" "$target")"
    read -r _ rps p50 p99 socket_errors non_2xx <<<"$(grep '^RESULT' <<<"$out")"
    if [ "$socket_errors" != 0 ] || [ "$non_2xx" != 0 ]; then
        echo "$script at $c connections: $socket_errors socket errors, $non_2xx non-2xx responses" >&2
        echo "$out" >&2
        exit 1
    fi
    echo "$rps $p50 $p99"
}

rows=()
# bench BACKEND STORAGE_ARGS...: sets up a server with that backend and measures every route.
bench() {
    local backend="$1" data="$work/data-$1" dir="$work/client-$1"
    shift
    mkdir -p "$data" "$dir"
    local registration
    if ! registration="$("$cli" server token create --data "$data" "$@" 2>"$work/token-$backend.log")"; then
        echo "$backend: skipped (the server refused it: $(tail -n 1 "$work/token-$backend.log"))" >&2
        rows+=("| $backend | — | — | — | — | — | skipped: $(tail -n 1 "$work/token-$backend.log" | tr '|' '/') |")
        return 0
    fi
    if ! start "server-$backend" "$cli" server run --data "$data" "$@" --port 0 --log-level "$log_level"; then
        echo "$backend: the server did not start: $(tail -n 3 "$work/server-$backend.log")" >&2
        return 1
    fi
    local server_url="$url"
    echo "$backend: writing $records records at $server_url" >&2
    python3 "$lua_dir/setup_client.py" "$server_url" "$registration" "$records" "$dir"
    if [ -z "${baseline_url:-}" ]; then
        start baseline "$baseline" "$dir/record.json" || { echo "the baseline did not start" >&2; return 1; }
        baseline_url="$url"
    fi
    export BENCH_IDS="$dir/ids" BENCH_TOKEN BENCH_BODY="$dir/body.json"
    BENCH_TOKEN="$(cat "$dir/token")"
    echo "$backend: warming up; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    wrk -t2 -c16 -d2s "$baseline_url/fixed" >/dev/null
    BENCH_LUA_DIR="$lua_dir" wrk -t2 -c16 -d2s -s "$lua_dir/read.lua" "$server_url" >/dev/null
    BENCH_LUA_DIR="$lua_dir" wrk -t2 -c16 -d2s -s "$lua_dir/write.lua" "$server_url" >/dev/null
    local c fixed read write
    for c in $connections; do
        fixed="$(measure fixed.lua "$baseline_url" "$c")"
        read="$(measure read.lua "$server_url" "$c")"
        write="$(measure write.lua "$server_url" "$c")"
        echo "$backend c=$c: fixed $fixed | read $read | write $write | load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
        rows+=("$(python3 - "$backend" "$c" "$fixed" "$read" "$write" <<'PY'
import sys
backend, c = sys.argv[1], sys.argv[2]
fixed, read, write = (list(map(float, a.split())) for a in sys.argv[3:])
def row(route, m):
    return "| %s | %s | %s | %.0f | %.2f | %.2f | %.2f× |" % (backend, route, c, m[0], m[1], m[2], m[0] / fixed[0])
rows = [row("fixed route (baseline)", fixed), row("GET record (Bearer)", read), row("POST record (Bearer)", write)]
print("\n".join(rows))
PY
)")
    done
    echo "$backend: records in the database afterwards: $("$cli" server stats --data "$data" "$@" 2>/dev/null | grep -i records || true)" >&2
}

started_load="$(cut -d' ' -f1-3 /proc/loadavg)"
bench sqlite
if [ -n "$postgres" ]; then
    bench postgresql --postgres "$postgres"
else
    rows+=("| postgresql | — | — | — | — | — | not measured: no --postgres URL given |")
fi

echo
echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) cores; load average at start $started_load, at end $(cut -d' ' -f1-3 /proc/loadavg)."
echo "wrk -t2 (-t1 at one connection) -d${duration}s; $records records written at set-up; server --log-level $log_level."
echo
echo "| backend | route | connections | requests/s | p50 ms | p99 ms | × fixed route |"
echo "|---|---|---:|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
