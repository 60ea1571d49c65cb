#!/usr/bin/env bash
# Builds and runs the libFuzzer targets of E3DBKit.
#
#   Fuzz/run.sh TARGET [SECONDS]   fuzz one target (default 60 s)
#   Fuzz/run.sh all SECONDS        fuzz every target in turn, SECONDS each
#   Fuzz/run.sh replay             run every file of Corpus/*/ and FailCases/*/ through every target once
#   Fuzz/run.sh ci                 what scripts/test.sh runs: replay, then every target for FUZZ_CI_SECONDS
#                                  (default 20) each; skipped with a note where libFuzzer is unavailable (macOS)
#   Fuzz/run.sh build [TARGET]     only build
#   Fuzz/run.sh list               print the targets
#
# FUZZ_TARGETS="A B" restricts all, replay and ci to those targets (replay still feeds them every corpus).
# Extra libFuzzer flags can be passed in FUZZ_FLAGS (e.g. FUZZ_FLAGS="-jobs=1 -rss_limit_mb=4096").
# The working corpus is Fuzz/Corpus-work/<TARGET>/ (not committed), seeded from the committed Fuzz/Corpus/<TARGET>/;
# crashes go to Fuzz/artifacts/<TARGET>/. Copy a reproducer into Fuzz/FailCases/<TARGET>/ when you fix it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

# FUZZ_TARGETS (space-separated names) restricts `all`, `replay` and `ci` to those targets.
targets() {
    local all
    all="$(find Sources -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort)"
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
        *) echo "$here/e3db.dict" ;;
    esac
}

# Per-target libFuzzer flags. The API targets get a 10 s per-input timeout (libFuzzer's default is 1200 s), so a
# search term that backtracks shows up as a hang in a short run (FuzzSearchCost itself traps past 2 s).
flags_for() {
    case "$1" in
        FuzzServerRequests | FuzzAuthHeaders | FuzzSearchCost) echo "-detect_leaks=0 -timeout=10" ;;
        FuzzAPIBodies | FuzzTSV1Verify) echo "-timeout=10" ;;
        FuzzStore | FuzzSQLiteVFS | FuzzPageCodec) echo "-detect_leaks=0" ;;
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
# FuzzPageCodec its codecs (keyed HMAC states in enum payloads, which LeakSanitizer cannot trace).
asan_options_for() {
    local extra=""
    case "$1" in
        FuzzServerRequests | FuzzAuthHeaders | FuzzSearchCost | FuzzStore | FuzzSQLiteVFS | FuzzPageCodec) extra="detect_leaks=0" ;;
    esac
    echo "${ASAN_OPTIONS:-}${ASAN_OPTIONS:+${extra:+:}}${extra}"
}

build() {
    # One flag set, exactly: `--sanitize=fuzzer` plus `-Xswiftc -sanitize=fuzzer,address`. Passing the two
    # sanitizers as separate --sanitize flags silently loses coverage instrumentation.
    local product_args=()
    if [ "$#" -gt 0 ]; then product_args=(--product "$1"); fi
    swift build -c release --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address "${product_args[@]}" >&2
}

binary() { echo "$(swift build -c release --show-bin-path)/$1"; }

fuzz() {
    local target="$1" seconds="$2"
    build "$target"
    mkdir -p "Corpus-work/$target" "artifacts/$target" "Corpus/$target"
    # shellcheck disable=SC2086
    SWIFT_BACKTRACE=enable=no ASAN_OPTIONS="$(asan_options_for "$target")" "$(binary "$target")" \
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
        build "$target"
        echo "== $target: replaying ${#inputs[@]} inputs" >&2
        # File arguments make libFuzzer run each file once and exit.
        # shellcheck disable=SC2046
        if ! SWIFT_BACKTRACE=enable=no ASAN_OPTIONS="$(asan_options_for "$target")" "$(binary "$target")" $(flags_for "$target") -runs=1 "${inputs[@]}" >"artifacts/replay-$target.log" 2>&1; then
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
    build) build "${2:-}" ;;
    replay) replay ;;
    ci)
        if [ "$(uname -s)" != "Linux" ] && [ -z "${FUZZ_FORCE:-}" ]; then
            echo "Fuzz/run.sh ci: libFuzzer is only set up on Linux here; skipped (set FUZZ_FORCE=1 to try)" >&2
            exit 0
        fi
        # Built one target at a time (by replay): linking every fuzz executable in one build fails.
        replay
        for target in $(targets); do fuzz "$target" "${FUZZ_CI_SECONDS:-20}"; done
        ;;
    all)
        seconds="${2:?usage: Fuzz/run.sh all SECONDS}"
        for target in $(targets); do fuzz "$target" "$seconds"; done
        ;;
    "" | -h | --help)
        sed -n '2,15p' "$0"
        ;;
    *)
        # Not grep -q: it may stop reading early, and pipefail would then fail on targets' SIGPIPE.
        if ! targets | grep -x "$1" >/dev/null; then echo "unknown target $1; targets: $(targets | tr '\n' ' ')" >&2; exit 2; fi
        fuzz "$1" "${2:-60}"
        ;;
esac
