#!/bin/sh
# Compiles the paging ABI headers as C99 and as C++11 with -Wall -Wextra -pedantic -Werror:
# the umbrella <paging/paging.h> and each header on its own (each must be self-contained).
# Usage: check_headers.sh INCLUDE_DIR      (the folder holding paging/; CC and CXX override cc/c++)
# Exits 0 when all compile; otherwise prints the failing command and the compiler's message and
# exits non-zero.
set -u
INCLUDE_DIR=${1:?usage: check_headers.sh INCLUDE_DIR}
CC=${CC:-cc}
CXX=${CXX:-c++}
[ -f "$INCLUDE_DIR/paging/paging.h" ] || { echo "check_headers.sh: no paging/paging.h in $INCLUDE_DIR" >&2; exit 2; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/paging-headers.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT INT TERM
status=0
for header in paging version types host interceptor source entry extensions; do
    # Include twice to check the guards; use one symbol so the TU is not empty.
    printf '#include <paging/%s.h>\n#include <paging/%s.h>\ntypedef int paging_check_tu_not_empty;\n' \
        "$header" "$header" > "$TMP/t.c"
    cp "$TMP/t.c" "$TMP/t.cpp"
    for lang in c99 cxx11; do
        if [ "$lang" = c99 ]; then
            set -- "$CC" -std=c99 -Wall -Wextra -pedantic -Wpadded -Werror -fsyntax-only -I "$INCLUDE_DIR" "$TMP/t.c"
        else
            set -- "$CXX" -std=c++11 -Wall -Wextra -pedantic -Wpadded -Werror -fsyntax-only -I "$INCLUDE_DIR" "$TMP/t.cpp"
        fi
        if ! out=$("$@" 2>&1); then
            echo "FAILED ($lang, paging/$header.h): $*" >&2
            echo "$out" >&2
            status=1
        fi
    done
done
[ $status -eq 0 ] && echo "paging headers OK ($CC -std=c99, $CXX -std=c++11)"
exit $status
