#!/usr/bin/env bash
# The whole test suite: install what is missing, check the formatting, build once with warnings as errors, run every test target in
# parallel from that build (Swift Testing: unit, vector, property, CLI, cross-language tests, and the replay of every
# fuzz corpus and FailCase), build the DocC catalogs with warnings as errors, then a short libFuzzer pass
# (Fuzz/run.sh ci; skipped with a note where libFuzzer is unavailable). Each stage prints its time.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
start=$(date +%s)
stage_start=$start
stage() {
    local now
    now=$(date +%s)
    echo "test.sh: $1 took $(( now - stage_start ))s (total $(( now - start ))s)"
    stage_start=$now
}
scripts/setup.sh
stage "set-up"
# The formatting every Swift file follows (.swift-format: 4 spaces, 120 columns); `swift format -i -r --parallel
# Sources Tests Fuzz/Targets Package.swift` applies it.
swift format lint --strict --recursive --parallel Sources Tests Fuzz/Targets Package.swift
stage "format check"
swift build --build-tests -Xswiftc -warnings-as-errors
stage "build"
# In parallel: tests await their child processes (E3DBTestSupport's ChildProcess), so none holds one of Swift
# concurrency's cooperative threads while a child runs. At most 8 tests (or test cases) run at once: uncapped, Swift
# Testing starts all of them at once (about 570 tests and 5,800 cases), synchronous test bodies hold the cooperative
# threads (two on two cores) until they end, and a test that awaits anything resumes behind every start still queued:
# on a loaded 2-core machine, tests with a deadline waited over 15 minutes between two lines and the whole run took
# 24 min 27 s, against 10 min 56 s with the cap beside the same load (README).
swift test --skip-build --experimental-maximum-parallelization-width 8
stage "swift test"
scripts/docs.sh
stage "documentation (warnings as errors)"
if [ -x Fuzz/run.sh ]; then
    Fuzz/run.sh ci
    stage "fuzzing pass"
fi
