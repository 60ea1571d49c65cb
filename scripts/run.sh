#!/usr/bin/env bash
# The main job: install what is missing, build `e3dbkit-vectors` (`e3dbkit vectors` alone: the same command type,
# without the client's, the store's and the server's stacks, so a fresh clone compiles neither NIO nor GRDB for
# it), and check this build against every committed cross-language vector suite (prints a table; exits non-zero on
# any failure). `e3dbkit vectors verify` runs the same command.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
swift build --product e3dbkit-vectors
"$(swift build --show-bin-path)/e3dbkit-vectors" verify "$@"
