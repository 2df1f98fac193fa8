#!/usr/bin/env bash
# Installs what a fresh machine lacks to build and test SwiftPaging: the SQLite headers (the
# sqlite-store plugin links the system libsqlite3), GNU libmicrohttpd's (`pager serve`) and a C
# compiler (C plugins are built with cc).
set -euo pipefail
missing=()
[ -f /usr/include/sqlite3.h ] || missing+=(libsqlite3-dev)
[ -f /usr/include/microhttpd.h ] || missing+=(libmicrohttpd-dev)
command -v cc >/dev/null || missing+=(gcc)
command -v script >/dev/null || missing+=(bsdutils)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
fi
