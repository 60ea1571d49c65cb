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
swift test --skip-build
echo "test.sh: swift test finished after $(( $(date +%s) - start ))s"
scripts/docs.sh
echo "test.sh: documentation built with warnings as errors after $(( $(date +%s) - start ))s"
if [ -x Fuzz/run.sh ]; then
    Fuzz/run.sh ci
    echo "test.sh: fuzzing pass finished after $(( $(date +%s) - start ))s"
fi
