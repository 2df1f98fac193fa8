#!/usr/bin/env bash
# Installs what a fresh machine lacks to build and test SwiftPaging: the SQLite, hiredis and libpq
# headers (sqlite-store, redis-cache and postgres-store link the system libraries), the libcurl
# headers (the http source), GNU libmicrohttpd's (`pager serve`), a C compiler (C plugins are built
# with cc), the Redis and PostgreSQL servers the tests start on loopback, Python 3 (the http
# tests' fixture servers and the benchmark's urllib loop) and the openssl command (the https
# tests make their certificate).
set -euo pipefail
missing=()
[ -f /usr/include/sqlite3.h ] || missing+=(libsqlite3-dev)
[ -f /usr/include/hiredis/hiredis.h ] || missing+=(libhiredis-dev)
[ -f /usr/include/postgresql/libpq-fe.h ] || missing+=(libpq-dev)
pkg-config --exists libcurl 2>/dev/null || [ -f /usr/include/x86_64-linux-gnu/curl/curl.h ] || [ -f /usr/include/curl/curl.h ] || missing+=(libcurl4-openssl-dev)
[ -f /usr/include/microhttpd.h ] || missing+=(libmicrohttpd-dev)
command -v pkg-config >/dev/null || missing+=(pkg-config)
command -v redis-server >/dev/null || missing+=(redis-server)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v python3 >/dev/null || missing+=(python3)
command -v openssl >/dev/null || missing+=(openssl)
command -v cc >/dev/null || missing+=(gcc)
command -v script >/dev/null || missing+=(bsdutils)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}" >&2
    as_root=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null; then
            as_root=(sudo)
        else
            echo "install-deps.sh: installing needs root; run it as root, or run: apt-get install ${missing[*]}" >&2
            exit 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    ${as_root[@]+"${as_root[@]}"} apt-get update -qq
    ${as_root[@]+"${as_root[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
