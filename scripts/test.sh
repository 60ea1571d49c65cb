#!/usr/bin/env bash
# The whole test suite: install what is missing, build with warnings as errors, run every test target
# (Swift Testing: unit, vector, property, CLI and cross-language tests), build the DocC catalogs with warnings as
# errors, then replay the fuzz corpora and FailCases and run a short fuzzing pass (Fuzz/run.sh ci; skipped with a
# note where libFuzzer is unavailable).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
start=$(date +%s)
scripts/setup.sh
swift build --build-tests -Xswiftc -warnings-as-errors
# One test at a time: many tests wait synchronously for child processes (e3dbkit, Python drivers, PostgreSQL),
# and on a 2-core machine two such waits hold both of Swift concurrency's cooperative threads, stalling every
# other test for tens of seconds (storage calls with deadlines then fail). Serial runs cost about 30 s more.
swift test --skip-build --no-parallel
echo "test.sh: swift test finished after $(( $(date +%s) - start ))s"
scripts/docs.sh
echo "test.sh: documentation built with warnings as errors after $(( $(date +%s) - start ))s"
if [ -x Fuzz/run.sh ]; then
    Fuzz/run.sh ci
    echo "test.sh: fuzzing pass finished after $(( $(date +%s) - start ))s"
fi
