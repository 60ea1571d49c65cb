#!/usr/bin/env bash
# Installs what E3DBKit needs beyond the Swift toolchain, only when it is missing:
#   Debian/Ubuntu: libsodium-dev, libb2-dev, libsqlite3-dev and the sqlite3 shell, pkg-config, python3 + venv, openssl and tzdata (the
#                  server tests make a TLS certificate and run the Python SDK's suites in a fixed time zone),
#                  postgresql (the server's PostgreSQL tests start their own throwaway server, scripts/postgres.sh)
#                  (apt-get; sudo when not root)
#   macOS:         libsodium, libb2, pkg-config, python (Homebrew)
# then the Python peers used by the cross-language tests (.venv, see scripts/python-env.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

have_libs() {
    command -v pkg-config >/dev/null 2>&1 && pkg-config --exists libsodium libb2 2>/dev/null
}
have_sqlite() {
    # GRDB (E3DBStore) builds against the system SQLite; macOS has it, Linux needs the -dev package.
    # The sqlite3 shell hosts E3DBSQLite's loadable extension in the tests.
    [ "$(uname -s)" != Linux ] || { pkg-config --exists sqlite3 2>/dev/null && command -v sqlite3 >/dev/null 2>&1; }
}
have_postgres() {
    # E3DBServer's PostgreSQL backend is tested against a real server started from these binaries.
    compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
}
have_python_venv() {
    command -v python3 >/dev/null 2>&1 && python3 -c 'import venv, ensurepip' >/dev/null 2>&1
}

case "$(uname -s)" in
Linux)
    if ! have_libs || ! have_sqlite || ! have_python_venv || ! command -v b2sum >/dev/null 2>&1 \
        || ! command -v openssl >/dev/null 2>&1 || [ ! -e /usr/share/zoneinfo/America/Phoenix ] || ! have_postgres; then
        if command -v apt-get >/dev/null 2>&1; then
            sudo=""
            [ "$(id -u)" -eq 0 ] || sudo="sudo"
            echo "setup: installing system packages with apt-get" >&2
            $sudo apt-get update -qq >&2
            DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
                libsodium-dev libb2-dev libsqlite3-dev sqlite3 pkg-config python3 python3-venv python3-pip coreutils \
                openssl tzdata postgresql >&2
        else
            echo "setup: install libsodium, libb2, SQLite 3 (with pkg-config files), python3 with venv and PostgreSQL, then re-run" >&2
            exit 1
        fi
    fi
    ;;
Darwin)
    if ! have_libs || ! have_python_venv; then
        command -v brew >/dev/null 2>&1 || { echo "setup: Homebrew is required on macOS" >&2; exit 1; }
        echo "setup: installing packages with Homebrew" >&2
        brew install libsodium libb2 pkg-config python coreutils >&2
    fi
    ;;
*)
    have_libs || { echo "setup: install libsodium and libb2 with pkg-config files" >&2; exit 1; }
    ;;
esac

# Python peers for the cross-language tests (e3db 2.3.0, PyNaCl, ...): best effort, so that a machine without
# network access still builds and runs the Swift-only tests; those tests say clearly when they skip.
if ! "$root/scripts/python-env.sh" >/dev/null; then
    echo "setup: warning: could not prepare the Python peers; cross-language checks will be skipped" >&2
fi
