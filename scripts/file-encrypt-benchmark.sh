#!/usr/bin/env bash
# Wall time of `e3dbkit file encrypt` (BLAKE2b-512 and MD5 of the output included) against the C baseline
# Benchmarks/FileBaseline/file_pipeline.c (secretstream push on one thread, BLAKE2b-512 and MD5 each on their
# own thread) on the same input, in one run. The output file is removed before every run; the two programs
# alternate, RUNS times each, and the best (lowest) wall time of each is compared. Prints a markdown table row
# and the ratio e3dbkit / C (the goal is at most 1.05).
#
#   scripts/file-encrypt-benchmark.sh [MiB] [RUNS]     # default 512 MiB, 5 runs each
#
# Needs libsodium and OpenSSL's libcrypto headers (Debian: libsodium-dev, libssl-dev) for the C baseline.
# The input and outputs go to $BENCH_DIR (default: a new directory under /tmp), removed at the end.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
mib="${1:-512}"
runs="${2:-5}"
work="${BENCH_DIR:-$(mktemp -d /tmp/e3dbkit-file-bench.XXXXXX)}"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

echo "building e3dbkit (release) and the C baseline" >&2
(cd "$root" && swift build -c release --product e3dbkit >&2)
e3dbkit="$(cd "$root" && swift build -c release --show-bin-path)/e3dbkit"
# shellcheck disable=SC2046
cc -O2 -pthread "$root/Benchmarks/FileBaseline/file_pipeline.c" $(pkg-config --cflags --libs libsodium libcrypto) \
    -o "$work/file_pipeline"

head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n' > "$work/key"
head -c "$((mib * 1048576))" /dev/urandom > "$work/in"
sync

now() { date +%s.%N; }
: > "$work/swift.times"
: > "$work/c.times"
for _ in $(seq "$runs"); do
    rm -f "$work/out"
    start=$(now)
    "$e3dbkit" file encrypt -q --access-key-file "$work/key" "$work/in" "$work/out" > "$work/swift.txt"
    echo "$(now) - $start" | bc >> "$work/swift.times"
    size_swift=$(stat -c %s "$work/out")

    rm -f "$work/out"
    start=$(now)
    "$work/file_pipeline" "$work/key" "$work/in" "$work/out" > "$work/c.txt"
    echo "$(now) - $start" | bc >> "$work/c.times"
    size_c=$(stat -c %s "$work/out")
    [ "$size_swift" = "$size_c" ] || { echo "sizes differ: $size_swift vs $size_c" >&2; exit 1; }
done
best_swift=$(sort -g "$work/swift.times" | head -1)
best_c=$(sort -g "$work/c.times" | head -1)
echo "e3dbkit runs (s): $(tr '\n' ' ' < "$work/swift.times")" >&2
echo "C runs (s):       $(tr '\n' ' ' < "$work/c.times")" >&2
# The C output must be a valid E3DB file whose checksum lines match what e3dbkit computes for it.
"$e3dbkit" file checksum "$work/out" | diff - "$work/c.txt" >&2
rm -f "$work/out"

ratio=$(echo "scale=3; $best_swift / $best_c" | bc)
load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime)
echo "| file size | e3dbkit file encrypt (best of $runs) | C pipeline (best of $runs) | ratio | load average |"
echo "| --- | --- | --- | --- | --- |"
printf '| %d MiB | %.3f s | %.3f s | %s | %s |\n' "$mib" "$best_swift" "$best_c" "$ratio" "$load"
echo "ratio e3dbkit / C: $ratio"
