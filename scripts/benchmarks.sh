#!/usr/bin/env bash
# Runs the Benchmarks/ sub-package (package-benchmark) and prints markdown tables: each library operation beside
# the same operation done directly (libsodium or the peer), with throughput and the ratio API / direct, all
# measured in this one run. The output is what docs/performance.md holds.
#
#   scripts/benchmarks.sh                          # every benchmark target
#   scripts/benchmarks.sh PrimitivesBenchmarks     # only these targets
#
# Malloc counts come from package-benchmark's MallocInterposer trait (no jemalloc needed on Swift 6.3+).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    targets=(PrimitivesBenchmarks CanonicalJSONBenchmarks)
fi

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

target_args=()
for t in "${targets[@]}"; do target_args+=(--target "^${t}\$"); done

cd "$root/Benchmarks"
# Build and run output goes to stderr; the tables go to stdout.
swift package --disable-sandbox benchmark "${target_args[@]}" \
    --format histogramPercentiles --path "$out" --scale --no-progress >&2

echo "## Machine"
echo
echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || sysctl -n machdep.cpu.brand_string), $(nproc 2>/dev/null || sysctl -n hw.ncpu) logical cores"
echo "- libsodium: $(pkg-config --modversion libsodium)"
echo "- Swift: $(swift --version 2>/dev/null | head -1)"
echo "- Date (UTC): $(date -u +%Y-%m-%dT%H:%MZ)"
echo
python3 "$root/scripts/benchmark-table.py" "$out" "${targets[@]}"
if [ "$#" -eq 0 ]; then
    # Record throughput is a plain executable with its own same-run table (API vs C-style libsodium loop).
    echo
    echo "## Documents"
    echo
    swift run -c release --package-path "$root/Benchmarks" DocumentsThroughput 2>/dev/null
    echo
    echo "## Files"
    echo
    swift run -c release --package-path "$root/Benchmarks" FilesThroughput 2>/dev/null
fi
