#!/usr/bin/env bash
# The main job: install what is missing, build the e3dbkit CLI, and check this build against every committed
# cross-language vector suite (prints a table; exits non-zero on any failure).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
swift build --product e3dbkit
"$(swift build --show-bin-path)/e3dbkit" vectors verify "$@"
