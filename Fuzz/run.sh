#!/usr/bin/env bash
# Builds and runs E3DBKit's libFuzzer targets: the sources in Fuzz/Targets, one executable (`e3dbkit-fuzz`) built
# once with libFuzzer and AddressSanitizer; E3DB_FUZZ_TARGET picks the target.
#
#   Fuzz/run.sh TARGET [SECONDS]   fuzz one target (default 60 s)
#   Fuzz/run.sh all SECONDS        fuzz every target in turn, SECONDS each
#   Fuzz/run.sh replay             run every file of Corpus/*/ and FailCases/*/ through every target once, under ASan
#                                  (the regular test run replays them too, without sanitizers: FuzzReplayTests)
#   Fuzz/run.sh ci                 what scripts/test.sh runs: every target for FUZZ_CI_SECONDS (default 5) each,
#                                  FUZZ_CI_JOBS (default 2) at a time, on a debug build; skipped with a note where
#                                  libFuzzer is unavailable (macOS)
#   Fuzz/run.sh build              only build
#   Fuzz/run.sh list               print the targets
#
# FUZZ_TARGETS="A B" restricts all, replay and ci to those targets (replay still feeds them every corpus).
# FUZZ_CONFIGURATION=debug|release (default release; ci uses debug, which compiles in about half the time).
# Extra libFuzzer flags can be passed in FUZZ_FLAGS (e.g. FUZZ_FLAGS="-jobs=1 -rss_limit_mb=4096").
# The working corpus is Fuzz/Corpus-work/<TARGET>/ (not committed), seeded from the committed Fuzz/Corpus/<TARGET>/;
# crashes go to Fuzz/artifacts/<TARGET>/. Copy a reproducer into Fuzz/FailCases/<TARGET>/ when you fix it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$here"

# The targets: one file per target in Targets/, named like the target.
targets() {
    local all
    all="$(find Targets -maxdepth 1 -name 'Fuzz*.swift' -printf '%f\n' | sed 's/\.swift$//' | sort)"
    if [ -z "${FUZZ_TARGETS:-}" ]; then echo "$all"; return; fi
    local t
    for t in $FUZZ_TARGETS; do
        if ! grep -qx "$t" <<<"$all"; then echo "unknown target $t in FUZZ_TARGETS" >&2; exit 2; fi
        echo "$t"
    done
}

dict_for() {
    case "$1" in
        FuzzCanonicalJSON | FuzzNDJSON | FuzzAPIBodies | FuzzServerRequests) echo "$here/json.dict" ;;
        FuzzAuthHeaders) echo "$here/auth.dict" ;;
        FuzzSearchCost) echo "$here/search.dict" ;;
        FuzzSQLiteExport) echo "$here/sql.dict" ;;
        *) echo "$here/e3db.dict" ;;
    esac
}

# Per-target libFuzzer flags. The API targets get a 10 s per-input timeout (libFuzzer's default is 1200 s), so a
# search term that backtracks shows up as a hang in a short run (FuzzSearchCost itself traps past 2 s).
flags_for() {
    case "$1" in
        FuzzServerRequests | FuzzAuthHeaders | FuzzSearchCost) echo "-detect_leaks=0 -timeout=10" ;;
        FuzzAPIBodies | FuzzTSV1Verify) echo "-timeout=10" ;;
        FuzzStore | FuzzKeyHeader | FuzzSQLiteVFS | FuzzSQLiteExport | FuzzPageCodec) echo "-detect_leaks=0" ;;
        *) echo "" ;;
    esac
}

# Per-target ASAN_OPTIONS (added to the caller's). FuzzServerRequests keeps one server (GRDB's SQLite pool, its
# file store, the registered client's hashes and ids) alive in a global for the whole run and answers each input on
# the Swift concurrency pool. LeakSanitizer cannot trace `Data` and `String` storage referenced from those globals
# (the references sit in tagged payloads; see FuzzSealedBoxes) and reports the set-up's allocations as leaks, both
# per input (libFuzzer's -detect_leaks) and at exit (ASan's detect_leaks), so both are off for that target only.
# FuzzAuthHeaders and FuzzSearchCost keep a server in a global the same way.
# FuzzStore likewise keeps its fixture store (GRDB pool, SQLite caches) in a global: LeakSanitizer reports about
# 130 KB in 20 allocations, the same after 10 or 13,000 inputs; AddressSanitizer still checks every access.
# FuzzSQLiteVFS keeps its fixture database (a GRDB queue, the VFS's registered key and cached codec) the same way, and
# FuzzPageCodec its codecs (keyed HMAC states in enum payloads, which LeakSanitizer cannot trace); FuzzSQLiteExport
# keeps the VFS's cached codec of its one raw key for the run.
asan_options_for() {
    local extra=""
    case "$1" in
        FuzzServerRequests | FuzzAuthHeaders | FuzzSearchCost | FuzzStore | FuzzKeyHeader | FuzzSQLiteVFS | FuzzSQLiteExport | FuzzPageCodec) extra="detect_leaks=0" ;;
    esac
    echo "${ASAN_OPTIONS:-}${ASAN_OPTIONS:+${extra:+:}}${extra}"
}

configuration="${FUZZ_CONFIGURATION:-release}"
scratch="$root/.build-fuzz"

build() {
    # One flag set, exactly: `--sanitize=fuzzer` plus `-Xswiftc -sanitize=fuzzer,address` (passing the two
    # sanitizers as separate --sanitize flags silently loses coverage instrumentation), and E3DB_LIBFUZZER, which
    # leaves out the replay tool's `main` so that libFuzzer's is the entry point.
    (cd "$root" && swift build -c "$configuration" --scratch-path "$scratch" --product e3dbkit-fuzz \
        --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address -Xswiftc -DE3DB_LIBFUZZER >&2)
}

binary() { echo "$scratch/$configuration/e3dbkit-fuzz"; }

fuzz() {
    local target="$1" seconds="$2"
    mkdir -p "Corpus-work/$target" "artifacts/$target" "Corpus/$target"
    # shellcheck disable=SC2086
    E3DB_FUZZ_TARGET="$target" SWIFT_BACKTRACE=enable=no ASAN_OPTIONS="$(asan_options_for "$target")" "$(binary)" \
        -max_total_time="$seconds" \
        -dict="$(dict_for "$target")" \
        -artifact_prefix="artifacts/$target/" \
        -print_final_stats=1 \
        $(flags_for "$target") \
        ${FUZZ_FLAGS:-} \
        "Corpus-work/$target" "Corpus/$target"
}

replay() {
    local inputs=()
    while IFS= read -r -d '' f; do inputs+=("$f"); done < <(find Corpus FailCases -type f ! -name '.gitkeep' -print0 | sort -z)
    if [ "${#inputs[@]}" -eq 0 ]; then echo "no inputs to replay" >&2; return 0; fi
    local status=0
    for target in $(targets); do
        echo "== $target: replaying ${#inputs[@]} inputs" >&2
        # File arguments make libFuzzer run each file once and exit.
        # shellcheck disable=SC2046
        if ! E3DB_FUZZ_TARGET="$target" SWIFT_BACKTRACE=enable=no ASAN_OPTIONS="$(asan_options_for "$target")" "$(binary)" $(flags_for "$target") -runs=1 "${inputs[@]}" >"artifacts/replay-$target.log" 2>&1; then
            echo "!! $target failed on replay; see Fuzz/artifacts/replay-$target.log" >&2
            status=1
        else
            echo "   ok ($(grep -c '^Running:' "artifacts/replay-$target.log") executed)" >&2
        fi
    done
    return "$status"
}

targets >/dev/null  # an unknown name in FUZZ_TARGETS stops here
mkdir -p artifacts
case "${1:-}" in
    list) targets ;;
    build) build ;;
    replay) build; replay ;;
    ci)
        if [ "$(uname -s)" != "Linux" ] && [ -z "${FUZZ_FORCE:-}" ]; then
            echo "Fuzz/run.sh ci: libFuzzer is only set up on Linux here; skipped (set FUZZ_FORCE=1 to try)" >&2
            exit 0
        fi
        # The corpora and FailCases are replayed by the test run (FuzzReplayTests); here each target is fuzzed
        # briefly on a debug build with the sanitizers, built once.
        configuration="${FUZZ_CONFIGURATION:-debug}"
        started=$(date +%s)
        build
        echo "Fuzz/run.sh ci: built in $(( $(date +%s) - started ))s" >&2
        # FUZZ_CI_JOBS targets at a time (default 2, one per core of the CI machine), each logging to
        # artifacts/ci-TARGET.log, printed when the target fails.
        jobs="${FUZZ_CI_JOBS:-2}"
        status=0
        batch=()
        finish_batch() {
            local t
            for t in "${batch[@]}"; do
                if wait "${pids[$t]}"; then
                    echo "   $t ok: $(grep -ho 'stat::number_of_executed_units: [0-9]*' "artifacts/ci-$t.log" | sed 's/.*: //') runs" >&2
                else
                    echo "!! $t failed; its log (artifacts/ci-$t.log) follows" >&2
                    cat "artifacts/ci-$t.log" >&2
                    status=1
                fi
            done
            batch=()
        }
        declare -A pids=()
        for target in $(targets); do
            fuzz "$target" "${FUZZ_CI_SECONDS:-5}" >"artifacts/ci-$target.log" 2>&1 &
            pids[$target]=$!
            batch+=("$target")
            if [ "${#batch[@]}" -ge "$jobs" ]; then finish_batch; fi
        done
        if [ "${#batch[@]}" -gt 0 ]; then finish_batch; fi
        exit "$status"
        ;;
    all)
        seconds="${2:?usage: Fuzz/run.sh all SECONDS}"
        build
        for target in $(targets); do fuzz "$target" "$seconds"; done
        ;;
    "" | -h | --help)
        sed -n '2,18p' "$here/run.sh"
        ;;
    *)
        # Not grep -q: it may stop reading early, and pipefail would then fail on targets' SIGPIPE.
        if ! targets | grep -x "$1" >/dev/null; then echo "unknown target $1; targets: $(targets | tr '\n' ' ')" >&2; exit 2; fi
        build
        fuzz "$1" "${2:-60}"
        ;;
esac
