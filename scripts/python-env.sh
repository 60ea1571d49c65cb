#!/usr/bin/env bash
# Creates (or reuses) the project's Python virtualenv at .venv with the vector peers pinned in
# TestVectors/generators/requirements.txt, and prints the interpreter path. Safe to run repeatedly.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
req="$root/TestVectors/generators/requirements.txt"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"
ready() { [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; }
if ! ready && command -v flock >/dev/null; then
    # Tests run in parallel and several may ask at once: one creates the virtualenv, the others wait for it.
    exec 9>"$root/.venv.lock"
    flock 9
fi
if ! ready; then
    command -v python3 >/dev/null || { echo "python3 is required to build the vector peers" >&2; exit 1; }
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req" >&2
    echo "$want" > "$stamp"
fi
echo "$venv/bin/python"
