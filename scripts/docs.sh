#!/usr/bin/env bash
# Builds the DocC documentation of every library module with the toolchain's own `docc` (no plugin dependency
# in the manifest), treating warnings (broken symbol links, missing articles) as errors.
#   scripts/docs.sh [MODULE ...]      default: every module that has a .docc catalog
# Archives go to .build/docs/<MODULE>.doccarchive.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
docc="$(command -v docc || true)"
[ -n "$docc" ] || docc="$(dirname "$(command -v swift)")/docc"
[ -x "$docc" ] || { echo "docs.sh: docc not found next to swift" >&2; exit 1; }

modules=("$@")
if [ "${#modules[@]}" -eq 0 ]; then
    for catalog in Sources/*/*.docc; do modules+=("$(basename "$(dirname "$catalog")")"); done
fi

swift build >/dev/null
graphs=".build/docs/symbol-graphs"
rm -rf "$graphs" && mkdir -p "$graphs"
swift package dump-symbol-graph --minimum-access-level public --skip-synthesized-members >/dev/null
source_graphs="$(dirname "$(swift build --show-bin-path)")/symbolgraph"
status=0
for module in "${modules[@]}"; do
    mkdir -p "$graphs/$module"
    cp "$source_graphs/$module".symbols.json "$graphs/$module/" 2>/dev/null || true
    cp "$source_graphs/$module"@*.symbols.json "$graphs/$module/" 2>/dev/null || true
    catalog=(Sources/"$module"/*.docc)
    echo "== $module"
    if ! "$docc" convert "${catalog[0]}" \
        --additional-symbol-graph-dir "$graphs/$module" \
        --fallback-display-name "$module" --fallback-bundle-identifier "org.e3dbkit.$module" \
        --output-path ".build/docs/$module.doccarchive" \
        --warnings-as-errors --analyze; then
        status=1
    fi
done
exit "$status"
