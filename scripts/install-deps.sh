#!/usr/bin/env bash
# Installs what a fresh machine lacks to build and test SwiftPaging: the SQLite headers (the
# sqlite-store plugin links the system libsqlite3), the libcurl headers (the http source is
# built on libcurl), GNU libmicrohttpd's (`pager serve`), a C compiler (C plugins are built with
# cc) and Python 3 (the http tests' fixture servers and the benchmark's urllib loop).
set -euo pipefail
missing=()
[ -f /usr/include/sqlite3.h ] || missing+=(libsqlite3-dev)
pkg-config --exists libcurl 2>/dev/null || [ -f /usr/include/x86_64-linux-gnu/curl/curl.h ] || [ -f /usr/include/curl/curl.h ] || missing+=(libcurl4-openssl-dev)
[ -f /usr/include/microhttpd.h ] || missing+=(libmicrohttpd-dev)
command -v python3 >/dev/null || missing+=(python3)
command -v cc >/dev/null || missing+=(gcc)
command -v script >/dev/null || missing+=(bsdutils)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
fi
