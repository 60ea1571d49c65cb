#!/usr/bin/env bash
# Batch-mode record throughput: `e3dbkit record encrypt --ndjson` (rec_sig) and `record decrypt --ndjson`
# (verification required) against single-threaded C loops over libsodium on the same number of records
# (Benchmarks/NDJSONBaseline/record_loop.c), in the same run. Prints a markdown table for docs/performance.md.
#
#   scripts/ndjson-benchmark.sh [RECORDS] [REPEATS]     # default 100000 records, best of 3
#
# Environment: JOBS (default: the CLI's default, one worker per processor), FIELDS (10), VALUE_BYTES (32).
# Records are FIELDS fields of VALUE_BYTES ASCII bytes. The e3dbkit timings are whole processes (start-up and key
# loading included) writing to /dev/null; the C loops time only their loop. Each row is the best of REPEATS runs.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
records="${1:-100000}"
repeats="${2:-3}"
fields="${FIELDS:-10}"
value_bytes="${VALUE_BYTES:-32}"
jobs_args=()
if [ -n "${JOBS:-}" ]; then jobs_args=(--jobs "$JOBS"); fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "building the release CLI and the C loop" >&2
(cd "$root" && swift build -c release --product e3dbkit >&2)
cli="$(cd "$root" && swift build -c release --show-bin-path)/e3dbkit"
# shellcheck disable=SC2046
cc -O2 -o "$work/record_loop" "$root/Benchmarks/NDJSONBaseline/record_loop.c" $(pkg-config --cflags --libs libsodium)

"$cli" keygen --out "$work/id.json" --client-id 4a2e6f0c-1b7d-4c55-9e0a-6f3c2d1b0a99 >&2
"$cli" eak wrap --identity "$work/id.json" >"$work/eak.json"
python3 - "$work/in.ndjson" "$records" "$fields" "$value_bytes" <<'PY'
import random, string, sys
path, records, fields, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(1)
alphabet = string.ascii_letters + string.digits
with open(path, "w") as f:
    for _ in range(records):
        f.write("{" + ",".join('"field%02d":"%s"' % (j, "".join(rng.choice(alphabet) for _ in range(size)))
                               for j in range(fields)) + "}\n")
PY
encrypt=("$cli" record encrypt --type bench --identity "$work/id.json" --eak-info "$work/eak.json" --ndjson "${jobs_args[@]}")
decrypt=("$cli" record decrypt --identity "$work/id.json" --eak-info "$work/eak.json" --ndjson "${jobs_args[@]}")
"${encrypt[@]}" "$work/in.ndjson" >"$work/enc.ndjson"
# The signed message is canonical(meta) || canonical(data): its length for the C verify loop.
message_bytes="$(python3 - "$work/in.ndjson" "$work/enc.ndjson" <<'PY'
import json, sys
data = open(sys.argv[1]).readline().rstrip("\n")
meta = json.loads(open(sys.argv[2]).readline())["meta"]
print(len(data.encode()) + len(json.dumps(meta, separators=(",", ":"), sort_keys=True).encode()))
PY
)"

# Best wall time of `repeats` runs; also prints the CPU seconds (user + sys) of that run.
best() {
    local best_wall="" best_cpu="" i t
    for ((i = 0; i < repeats; i++)); do
        t="$( { TIMEFORMAT='%R %U %S'; time "$@" >/dev/null 2>"$work/stderr"; } 2>&1 )"
        if [ -s "$work/stderr" ]; then cat "$work/stderr" >&2; exit 1; fi
        read -r wall user sys <<<"$t"
        if [ -z "$best_wall" ] || awk -v a="$wall" -v b="$best_wall" 'BEGIN { exit !(a < b) }'; then
            best_wall="$wall"
            best_cpu="$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')"
        fi
    done
    echo "$best_wall $best_cpu"
}

c_best() {
    local mode="$1" best="" i r
    for ((i = 0; i < repeats; i++)); do
        r="$("$work/record_loop" "$mode" "$records" "$fields" "$value_bytes" "$message_bytes" 2>/dev/null | awk '{ print $3 }')"
        if [ -z "$best" ] || awk -v a="$r" -v b="$best" 'BEGIN { exit !(a < b) }'; then best="$r"; fi
    done
    echo "$best"
}

echo "timing ($records records, best of $repeats)" >&2
read -r enc_wall enc_cpu <<<"$(best "${encrypt[@]}" "$work/in.ndjson")"
read -r dec_wall dec_cpu <<<"$(best "${decrypt[@]}" "$work/enc.ndjson")"
c_enc="$(c_best encrypt)"
c_dec="$(c_best decrypt)"
c_decv="$(c_best decrypt-verify)"

rate() { awk -v n="$records" -v s="$1" 'BEGIN { printf "%.0f", n / s }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b / a }'; }

echo "## Batch records (NDJSON)"
echo
echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || sysctl -n machdep.cpu.brand_string), $(nproc 2>/dev/null || sysctl -n hw.ncpu) logical cores; load average before the run: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo n/a)"
echo "- libsodium: $(pkg-config --modversion libsodium); records: $records × $fields fields × $value_bytes bytes; signed message $message_bytes bytes; jobs: ${JOBS:-default}"
echo "- Date (UTC): $(date -u +%Y-%m-%dT%H:%MZ)"
echo
echo "| operation | seconds (best of $repeats) | CPU s | records/s | ratio to the C loop |"
echo "| --- | ---: | ---: | ---: | ---: |"
echo "| \`e3dbkit record encrypt --ndjson\` (rec_sig, whole process) | $enc_wall | $enc_cpu | $(rate "$enc_wall") | $(ratio "$enc_wall" "$c_enc") × C encrypt |"
echo "| C encrypt loop (no signing, 1 thread) | $c_enc | | $(rate "$c_enc") | 1 |"
echo "| \`e3dbkit record decrypt --ndjson\` (rec_sig required, whole process) | $dec_wall | $dec_cpu | $(rate "$dec_wall") | $(ratio "$dec_wall" "$c_dec") × C decrypt, $(ratio "$dec_wall" "$c_decv") × C decrypt + verify |"
echo "| C decrypt loop (no verification, 1 thread) | $c_dec | | $(rate "$c_dec") | 1 |"
echo "| C decrypt + Ed25519 verify loop (1 thread) | $c_decv | | $(rate "$c_decv") | 1 |"
