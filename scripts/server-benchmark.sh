#!/usr/bin/env bash
# Server load benchmark: `e3dbkit-server run` (SQLite, and PostgreSQL when a URL is given) against a Hummingbird
# route that returns a fixed JSON body of the size of a record response (Benchmarks/ServerBaseline), with wrk, in
# the same run. For 1, 4, 16 and 64 connections it measures, one after the other: the fixed route; authenticated
# GET /v1/storage/records/{id} cycling over the records written at set-up; authenticated POST /v1/storage/records;
# and, when a build from before is given (--before), the same two routes of that build's server, on its own data.
# Prints a markdown table (requests/s, p50, p99, ratio to the fixed route at the same connection count, ratio of
# this build to the build before).
#
#   scripts/server-benchmark.sh [--postgres URL [--postgres-before URL]] [--before "COMMAND"]
#                               [--duration SECONDS] [--records N] [--connections "1 4 16 64"]
#   scripts/server-benchmark.sh --postgres URL --nodes N [--duration SECONDS] [--records N] [--connections "4 16 64"]
#
# --nodes N (2 or more; PostgreSQL only): instead of the above, records through N nodes against one, in one run.
# Starts N `e3dbkit-server run` processes, each with its own --data, on the one database (the URL reaches them and
# the admin commands through E3DBKIT_POSTGRES_URL, never argv), writes the records at set-up through each node in
# turn, then at each connection count C (a multiple of N) measures GET and POST records through node 1 alone
# (wrk -cC) and through all N at once (one wrk per node, -cC/N each: the same total connections and, for N = 2,
# the same two wrk threads). Prints total requests/s, p50 and p99 (of all the requests of all the wrk processes,
# merged from their quantiles) and the ratio N nodes / one node; then checks that the database holds exactly the
# records written at set-up plus every acknowledged write (plus at most the requests in flight when wrk stopped).
# --before: the server command of another release build, split on spaces (`"/path/e3dbkit-server"`, or
# `"/path/e3dbkit server"` for builds from before e3dbkit-server existed); with PostgreSQL it needs its own
# database, --postgres-before (`scripts/postgres.sh createdb DIR` makes one).
# Environment: E3DBKIT_BENCH_POSTGRES_URL (same as --postgres; a dedicated, disposable database),
# E3DBKIT_SERVER (the server command to use instead of building this checkout's `e3dbkit-server`, split on spaces),
# LOG_LEVEL (the server's --log-level, default warning: no access-log line per request, like the baseline; info
# adds one line on standard error per request).
# Installs wrk with apt-get when it is missing. wrk runs 2 threads (1 at one connection).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
lua_dir="$root/scripts/server-benchmark"
postgres="${E3DBKIT_BENCH_POSTGRES_URL:-}"
duration=10
records=10000
connections=""
nodes=1
before=()
postgres_before=""
log_level="${LOG_LEVEL:-warning}"
while [ $# -gt 0 ]; do
    case "$1" in
        --postgres) postgres="$2"; shift 2 ;;
        --postgres-before) postgres_before="$2"; shift 2 ;;
        --before) read -r -a before <<<"$2"; shift 2 ;;
        --duration) duration="$2"; shift 2 ;;
        --records) records="$2"; shift 2 ;;
        --connections) connections="$2"; shift 2 ;;
        --nodes) nodes="$2"; shift 2 ;;
        *) echo "usage: $0 [--postgres URL [--postgres-before URL]] [--before COMMAND] [--nodes N] [--duration SECONDS] [--records N] [--connections LIST]" >&2; exit 64 ;;
    esac
done
if [ "$nodes" = 1 ]; then
    connections="${connections:-1 4 16 64}"
else
    connections="${connections:-4 16 64}"
    if ! [[ "$nodes" =~ ^[0-9]+$ ]] || [ "$nodes" -lt 2 ] || [ -z "$postgres" ] || [ "${#before[@]}" -gt 0 ]; then
        echo "--nodes takes a number from 2, needs --postgres URL (or E3DBKIT_BENCH_POSTGRES_URL) and no --before" >&2
        exit 64
    fi
    for c in $connections; do
        if [ $((c % nodes)) != 0 ]; then echo "--nodes $nodes: connection count $c is not a multiple of $nodes" >&2; exit 64; fi
    done
fi

if ! command -v wrk >/dev/null; then
    echo "installing wrk" >&2
    if [ "$(id -u)" = 0 ]; then apt-get install -y wrk >&2; else sudo apt-get install -y wrk >&2; fi
fi

# server: the command that takes the server subcommands (run, token create, stats).
if [ -n "${E3DBKIT_SERVER:-}" ]; then
    read -r -a server <<<"$E3DBKIT_SERVER"  # another build (an A/B comparison of two commits)
    echo "the E3DB server is ${server[*]}" >&2
else
    echo "building the release server" >&2
    (cd "$root" && swift build -c release --product e3dbkit-server >&2)
    server=("$(cd "$root" && swift build -c release --show-bin-path)/e3dbkit-server")
fi
if [ "$nodes" = 1 ]; then
    (cd "$root/Benchmarks" && swift build -c release --product ServerBaseline >&2)
fi
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
# setup LABEL SERVER_ARRAY BACKEND STORAGE_ARGS...: registers a client with a fresh server of that build and
# backend, writes the records, and sets ${LABEL}_url and ${LABEL}_dir; returns 2 when the server refuses the backend.
setup() {
    local label="$1" backend="$3"
    local -n cmd="$2"
    shift 3
    local data="$work/data-$label" dir="$work/client-$label" registration
    mkdir -p "$data" "$dir"
    if ! "${cmd[@]}" migrate --data "$data" "$@" >/dev/null 2>"$work/migrate-$label.log" \
        || ! registration="$("${cmd[@]}" token create --data "$data" "$@" 2>"$work/token-$label.log")"; then
        return 2
    fi
    if ! start "server-$label" "${cmd[@]}" run --data "$data" "$@" --port 0 --log-level "$log_level"; then
        echo "$label: the server did not start: $(tail -n 3 "$work/server-$label.log")" >&2
        return 1
    fi
    echo "$label: writing $records records at $url" >&2
    python3 "$lua_dir/setup_client.py" "$url" "$registration" "$records" "$dir"
    printf -v "${label}_url" '%s' "$url"
    printf -v "${label}_dir" '%s' "$dir"
}

# route SCRIPT LABEL CONNECTIONS: measures one route of one server (read.lua or write.lua) and prints its result.
route() {
    local script="$1" label="$2" c="$3" u d
    u="${label}_url"
    d="${label}_dir"
    BENCH_IDS="${!d}/ids" BENCH_BODY="${!d}/body.json" BENCH_TOKEN="$(cat "${!d}/token")" \
        measure "$script" "${!u}" "$c"
}

# bench BACKEND STORAGE_ARGS...: sets up this checkout's server (and the build before, when given) with that
# backend and measures every route at every connection count. For PostgreSQL the build before gets its own database
# (--postgres-before).
bench() {
    local backend="$1" status=0
    shift
    setup "${backend}_now" server "$backend" "$@" || status=$?
    if [ "$status" = 2 ]; then
        echo "$backend: skipped (the server refused it: $(tail -n 1 "$work/token-${backend}_now.log"))" >&2
        rows+=("| $backend | — | — | — | — | — | — | skipped: $(tail -n 1 "$work/token-${backend}_now.log" | tr '|' '/') |")
        return 0
    elif [ "$status" != 0 ]; then
        return 1
    fi
    local with_before=""
    if [ "${#before[@]}" -gt 0 ]; then
        local before_args=("$@")
        if [ "$backend" = postgresql ]; then before_args=(--postgres "$postgres_before"); fi
        setup "${backend}_before" before "$backend" "${before_args[@]}" || return 1
        with_before=1
    fi
    if [ -z "${baseline_url:-}" ]; then
        local d="${backend}_now_dir"
        start baseline "$baseline" "${!d}/record.json" || { echo "the baseline did not start" >&2; return 1; }
        baseline_url="$url"
    fi
    echo "$backend: warming up; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    wrk -t2 -c16 -d2s "$baseline_url/fixed" >/dev/null
    local label
    for label in "${backend}_now" ${with_before:+"${backend}_before"}; do
        route read.lua "$label" 16 >/dev/null
        route write.lua "$label" 16 >/dev/null
    done
    local c fixed read write read_before="" write_before=""
    for c in $connections; do
        fixed="$(measure fixed.lua "$baseline_url" "$c")"
        read="$(route read.lua "${backend}_now" "$c")"
        write="$(route write.lua "${backend}_now" "$c")"
        if [ -n "$with_before" ]; then
            read_before="$(route read.lua "${backend}_before" "$c")"
            write_before="$(route write.lua "${backend}_before" "$c")"
        fi
        echo "$backend c=$c: fixed $fixed | read $read | write $write${with_before:+ | before: read $read_before | write $write_before} | load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
        rows+=("$(python3 - "$backend" "$c" "$fixed" "$read" "$write" "$read_before" "$write_before" <<'PY'
import sys
backend, c = sys.argv[1], sys.argv[2]
fixed, read, write = (list(map(float, a.split())) for a in sys.argv[3:6])
before = [list(map(float, a.split())) if a else None for a in sys.argv[6:8]]
def row(route, m, versus=None):
    ratio = "%.2f×" % (m[0] / versus[0]) if versus else "—"
    return "| %s | %s | %s | %.0f | %.2f | %.2f | %.2f× | %s |" % (
        backend, route, c, m[0], m[1], m[2], m[0] / fixed[0], ratio)
rows = [row("fixed route (baseline)", fixed), row("GET record (Bearer)", read, before[0]),
        row("POST record (Bearer)", write, before[1])]
if before[0]:
    rows += [row("GET record (Bearer), before", before[0]), row("POST record (Bearer), before", before[1])]
print("\n".join(rows))
PY
)")
    done
    echo "$backend: records in the database afterwards: $("${server[@]}" stats --data "$work/data-${backend}_now" "$@" 2>/dev/null | grep -i records || true)" >&2
}

# measure_nodes LUA CONNECTIONS URL...: one wrk per URL, all at once, CONNECTIONS split evenly between them (2 wrk
# threads in all when there are 1 or 2 URLs, else one per URL); prints "rps p50 p99 requests" of all of them
# together: summed requests/s and the latency percentiles of the merged distribution. Exits on any socket error or
# non-2xx response.
measure_nodes() {
    local script="$1" c="$2" k per threads=1 wrk_pids=() status=0
    shift 2
    per=$((c / $#))
    if [ $# = 1 ] && [ "$c" -ge 2 ]; then threads=2; fi
    for ((k = 1; k <= $#; k++)); do
        BENCH_LUA_DIR="$lua_dir" BENCH_IDS="$work/client-nodes/ids" BENCH_BODY="$work/client-nodes/body.json" \
            BENCH_TOKEN="$(cat "$work/client-nodes/token")" \
            wrk -t"$threads" -c"$per" -d"${duration}s" -s "$lua_dir/$script" "${!k}" >"$work/wrk-$k.out" &
        wrk_pids+=("$!")
    done
    for k in "${wrk_pids[@]}"; do wait "$k" || status=$?; done
    if [ "$status" != 0 ]; then echo "$script at $c connections: wrk failed ($status)" >&2; exit 1; fi
    local outs=()
    for ((k = 1; k <= $#; k++)); do outs+=("$work/wrk-$k.out"); done
    python3 - "$script" "$c" "${outs[@]}" <<'PY'
import bisect, sys
script, c, outs = sys.argv[1], sys.argv[2], sys.argv[3:]
rps, runs = 0.0, []  # runs: (responses, [latency ms at 0.1 %, 0.2 %, … 100 %])
for path in outs:
    lines = {l.split()[0]: l.split()[1:] for l in open(path) if l.startswith(("RESULT", "QUANTILES"))}
    r, q = lines["RESULT"], lines["QUANTILES"]
    if r[3] != "0" or r[4] != "0":
        sys.exit("%s at %s connections: %s socket errors, %s non-2xx responses\n%s" % (
            script, c, r[3], r[4], open(path).read()))
    print("  %s: %s requests/s, p50 %s ms, p99 %s ms" % (path.rsplit("/", 1)[1], r[0], r[1], r[2]), file=sys.stderr)
    rps += float(r[0])
    runs.append((int(float(q[0])), [float(x) for x in q[1:]]))
total = sum(n for n, _ in runs)
def below(x):  # the fraction of all responses at or below x ms: each run's quantile grid, weighted by its count
    return sum(n * bisect.bisect_right(qs, x) / len(qs) for n, qs in runs) / total
def percentile(p):
    return next(v for v in sorted(v for _, qs in runs for v in qs) if below(v) >= p - 1e-9)
print("%.1f %.3f %.3f %d" % (rps, percentile(0.50), percentile(0.99), total))
PY
}

# bench_nodes: the --nodes mode (the header says what it does). Adds rows to $rows.
bench_nodes() {
    export E3DBKIT_POSTGRES_URL="$postgres"  # to every node and admin command, not in their argv
    local i urls=() registration
    "${server[@]}" migrate --data "$work/data-node1" >/dev/null 2>"$work/migrate-nodes.log" \
        || { echo "migrate failed: $(tail -n 3 "$work/migrate-nodes.log")" >&2; return 1; }
    registration="$("${server[@]}" token create --data "$work/data-node1" 2>"$work/token-nodes.log")" \
        || { echo "token create failed: $(tail -n 3 "$work/token-nodes.log")" >&2; return 1; }
    for ((i = 1; i <= nodes; i++)); do
        mkdir -p "$work/data-node$i"
        if ! start "node$i" "${server[@]}" run --data "$work/data-node$i" --port 0 --log-level "$log_level"; then
            echo "node $i did not start: $(tail -n 3 "$work/node$i.log")" >&2
            return 1
        fi
        urls+=("$url")
    done
    mkdir -p "$work/client-nodes"
    echo "writing $records records through ${urls[*]} in turn" >&2
    python3 "$lua_dir/setup_client.py" "$(IFS=,; echo "${urls[*]}")" "$registration" "$records" "$work/client-nodes"
    local before_runs
    before_runs="$(stored_records)" || { echo "stats failed: $(tail -n 3 "$work/stats.log")" >&2; return 1; }
    # Warm-up: every node, at the largest connection count (each node's PostgreSQL pool opens its connections).
    local warm written in_flight most
    most="$(tr ' ' '\n' <<<"$connections" | sort -n | tail -n 1)"
    echo "warming up through every node at $most connections; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    measure_nodes read.lua "$most" "${urls[@]}" >/dev/null
    warm="$(measure_nodes write.lua "$most" "${urls[@]}")"
    written="$(cut -d' ' -f4 <<<"$warm")"
    in_flight="$most"
    local c route script one many
    for c in $connections; do
        for route in GET POST; do
            script=read.lua
            if [ "$route" = POST ]; then script=write.lua; fi
            one="$(measure_nodes "$script" "$c" "${urls[0]}")"
            many="$(measure_nodes "$script" "$c" "${urls[@]}")"
            echo "$route c=$c: one node $one | $nodes nodes $many | load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
            if [ "$route" = POST ]; then
                written=$((written + $(cut -d' ' -f4 <<<"$one") + $(cut -d' ' -f4 <<<"$many")))
                in_flight=$((in_flight + 2 * c))
            fi
            rows+=("$(python3 - "$route" "$c" "$nodes" "$one" "$many" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import sys
route, c, n, load = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[6]
one, many = (list(map(float, a.split())) for a in sys.argv[4:6])
print("| %s record | %s | %.0f | %.2f | %.2f | %.0f | %.2f | %.2f | %.2f× | %s |" % (
    route, c, one[0], one[1], one[2], many[0], many[1], many[2], many[0] / one[0], load))
PY
)")
        done
    done
    local stored expected=$((before_runs + written))
    stored="$(stored_records)" || { echo "stats failed: $(tail -n 3 "$work/stats.log")" >&2; return 1; }
    echo "records in the database: $stored; $before_runs after set-up, acknowledged writes $written, at most $in_flight in flight when wrk stopped" >&2
    if [ "$stored" -lt "$expected" ] || [ "$stored" -gt $((expected + in_flight)) ]; then
        echo "the database holds $stored records, not $expected to $((expected + in_flight))" >&2
        return 1
    fi
    checked="$records records written at set-up through each node in turn, and every read (GET of those records through every node) answered 2xx; afterwards the database holds $stored records: the $expected written and acknowledged, plus $((stored - expected)) of the POSTs still in flight when wrk stopped (at most $in_flight)"
}

# stored_records: the records table's row count, from `e3dbkit-server stats` (JSON on one line).
stored_records() {
    "${server[@]}" stats --data "$work/data-node1" 2>"$work/stats.log" \
        | python3 -c 'import json, sys; print(json.load(sys.stdin)["records"])'
}

started_load="$(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$nodes" != 1 ]; then
    bench_nodes
    echo
    echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) cores; load average at start $started_load, at end $(cut -d' ' -f1-3 /proc/loadavg)."
    echo "wrk -d${duration}s; one node: one wrk, -t2; $nodes nodes: one wrk per node at once, connections split evenly; server --log-level $log_level."
    echo "Correctness: $checked."
    echo
    echo "| route | connections (total) | one node: requests/s | p50 ms | p99 ms | $nodes nodes: requests/s | p50 ms | p99 ms | $nodes nodes / one | load (1 min) |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    printf '%s\n' "${rows[@]}"
    exit 0
fi
bench sqlite
if [ -n "$postgres" ]; then
    if [ "${#before[@]}" -gt 0 ] && [ -z "$postgres_before" ]; then
        echo "--before with PostgreSQL needs --postgres-before URL (a second database)" >&2
        exit 64
    fi
    bench postgresql --postgres "$postgres"
else
    rows+=("| postgresql | — | — | — | — | — | — | not measured: no --postgres URL given |")
fi

echo
echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) cores; load average at start $started_load, at end $(cut -d' ' -f1-3 /proc/loadavg)."
echo "wrk -t2 (-t1 at one connection) -d${duration}s; $records records written at set-up; server --log-level $log_level."
echo
echo "| backend | route | connections | requests/s | p50 ms | p99 ms | × fixed route | × before |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
