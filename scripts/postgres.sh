#!/usr/bin/env bash
# A throwaway PostgreSQL server for tests (Debian's `postgresql` package; scripts/setup.sh installs it).
#
#   scripts/postgres.sh start DIR     initdb + start in DIR (created; must not exist or be empty) on a free port on
#                                     127.0.0.1, create a database and a user with a random password, print
#                                     postgres://USER:PASS@127.0.0.1:PORT/DB on stdout and write it to DIR/url
#   scripts/postgres.sh start-tls DIR as start, but the server accepts TCP connections over TLS only (`ssl=on`,
#                                     `hostssl` lines and no `host` line in pg_hba.conf) with a certificate for
#                                     127.0.0.1, ::1 and localhost signed by a CA made here (openssl): DIR/ca.crt.
#                                     The URL printed has no sslmode: add ?sslmode=verify-full&sslrootcert=DIR/ca.crt
#   scripts/postgres.sh createdb DIR  create one more empty database owned by the same user, print its URL
#   scripts/postgres.sh pause DIR     stop the server (fast shutdown: sessions are ended), keeping DIR
#   scripts/postgres.sh resume DIR    start a paused server again, on the same port with the same options
#   scripts/postgres.sh stop DIR      stop the server and remove DIR
#
# As root the server runs as the unprivileged `postgres` user (runuser, else su), otherwise as the current user.
# The unix socket lives inside DIR. The data directory is for tests only: fsync is off.
set -euo pipefail

usage() {
    echo "usage: $0 start|start-tls|createdb|pause|resume|stop DIR" >&2
    exit 64
}
[ $# -eq 2 ] || usage
command=$1
dir=$2
case "$dir" in
/*) ;;
*) dir="$(pwd)/$dir" ;;
esac

bin=""
for candidate in /usr/lib/postgresql/*/bin; do
    [ -x "$candidate/initdb" ] && [ -x "$candidate/pg_ctl" ] && bin=$candidate
done
if [ -z "$bin" ]; then
    echo "postgres.sh: PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb); run scripts/setup.sh" >&2
    exit 69
fi

# Runs a command as the server's owner.
as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        if command -v runuser >/dev/null 2>&1; then
            runuser -u postgres -- "$@"
        else
            su postgres -s /bin/sh -c '"$0" "$@"' -- "$@"
        fi
    else
        "$@"
    fi
}

# SQL on stdin, run as the superuser over the unix socket (so that no password appears in argv).
superuser_sql() {
    as_owner "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$(cat "$dir/port")" -U postgres -d postgres
}

random_hex() {
    od -An -tx1 -N"$1" /dev/urandom | tr -d ' \n'
}

# Closes every inherited descriptor above stderr (bash's own 255 aside): the server daemonizes, and a descriptor
# it keeps open can make the caller wait forever (Foundation's Process on Linux watches a socket for the child's exit).
close_inherited_fds() {
    local fd
    for fd in /proc/$BASHPID/fd/*; do
        fd=${fd##*/}
        if [ "$fd" -gt 2 ] && [ "$fd" -ne 255 ]; then
            eval "exec $fd>&-" 2>/dev/null || true
        fi
    done
}

# A CA (DIR/ca.crt) and a server certificate it signs (DIR/server.crt, DIR/server.key, private to the server's
# user) for 127.0.0.1, ::1 and localhost; the CA's key is removed once it signed.
make_certificates() {
    command -v openssl >/dev/null 2>&1 || {
        echo "postgres.sh: start-tls needs openssl (run scripts/setup.sh)" >&2
        exit 69
    }
    (
        cd "$dir"
        as_owner openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
            -subj "/CN=e3dbkit test CA" -keyout ca.key -out ca.crt
        as_owner openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
            -keyout server.key -out server.csr
        printf 'subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\nbasicConstraints=CA:FALSE\n' >san.ext
        as_owner openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
            -extfile san.ext -out server.crt
        as_owner chmod 0600 server.key
        rm -f ca.key ca.srl server.csr san.ext
    ) >"$dir/openssl.log" 2>&1 || {
        cat "$dir/openssl.log" >&2
        exit 70
    }
}

# Starts the server in DIR with the options in DIR/options.
pg_start() {
    (
        close_inherited_fds
        as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o "$(cat "$dir/options")" \
            start </dev/null >/dev/null
    )
}

free_port() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
    else
        echo $((20000 + RANDOM % 30000))
    fi
}

start() {
    local tls=$1
    if [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
        echo "postgres.sh: $dir exists and is not empty" >&2
        exit 73
    fi
    mkdir -p "$dir"
    chmod 0700 "$dir"
    [ "$(id -u)" -ne 0 ] || chown postgres: "$dir"
    as_owner test -w "$dir" || {
        echo "postgres.sh: the server's user cannot write $dir (is a parent directory private to root?)" >&2
        exit 73
    }
    as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth-local=trust --auth-host=scram-sha-256 -E UTF8 \
        --no-locale >"$dir/initdb.log" 2>&1 || {
        cat "$dir/initdb.log" >&2
        exit 70
    }
    local ssl_options=""
    if [ "$tls" = tls ]; then
        make_certificates
        # TCP over TLS only: the unix socket (the superuser's, for setup) and hostssl lines, no host line.
        printf '%s\n' 'local all all trust' 'hostssl all all 127.0.0.1/32 scram-sha-256' \
            'hostssl all all ::1/128 scram-sha-256' | as_owner tee "$dir/data/pg_hba.conf" >/dev/null
        ssl_options="-c ssl=on -c ssl_cert_file=$dir/server.crt -c ssl_key_file=$dir/server.key"
    fi
    local started=""
    for _ in 1 2 3 4 5; do
        local port
        port=$(free_port)
        echo "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=400 -c fsync=off \
-c full_page_writes=off -c synchronous_commit=off $ssl_options" >"$dir/options"
        if pg_start; then
            started=$port
            break
        fi
    done
    if [ -z "$started" ]; then
        echo "postgres.sh: the server did not start; its log:" >&2
        cat "$dir/server.log" >&2 || true
        exit 70
    fi
    echo "$started" >"$dir/port"
    local user=e3dbkit password database=e3dbkit
    password=$(random_hex 16)
    superuser_sql <<SQL
CREATE ROLE $user LOGIN CREATEDB PASSWORD '$password';
CREATE DATABASE $database OWNER $user;
SQL
    local url="postgres://$user:$password@127.0.0.1:$started/$database"
    (umask 077 && echo "$url" >"$dir/url")
    echo "$url"
}

createdb() {
    [ -f "$dir/url" ] || {
        echo "postgres.sh: no server started in $dir" >&2
        exit 66
    }
    local url name
    url=$(cat "$dir/url")
    name="e3dbkit_$(random_hex 8)"
    echo "CREATE DATABASE $name OWNER e3dbkit;" | superuser_sql
    echo "${url%/*}/$name"
}

started_here() {
    [ -f "$dir/options" ] && [ -f "$dir/port" ] || {
        echo "postgres.sh: no server started in $dir" >&2
        exit 66
    }
}

pause() {
    started_here
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null
}

resume() {
    started_here
    pg_start || {
        echo "postgres.sh: the server did not start again; its log:" >&2
        tail -n 50 "$dir/server.log" >&2 || true
        exit 70
    }
}

stop() {
    if [ ! -e "$dir" ]; then
        return 0
    fi
    if [ ! -f "$dir/data/PG_VERSION" ] && [ ! -f "$dir/initdb.log" ]; then
        echo "postgres.sh: $dir is not a directory made by '$0 start'; not removing it" >&2
        exit 65
    fi
    if [ -f "$dir/data/postmaster.pid" ]; then
        as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null || true
    fi
    rm -rf "$dir"
}

case "$command" in
start) start plain ;;
start-tls) start tls ;;
createdb) createdb ;;
pause) pause ;;
resume) resume ;;
stop) stop ;;
*) usage ;;
esac
