#!/bin/sh
# public-symbols.sh HEADER... — the functions the public headers declare, one
# a line, sorted: libtfcore.so exports exactly these (core/local.mk turns the
# list into libtool's -export-symbols; tests/test_exports.sh checks the built
# library against the compiler's reading of the same headers).
#
# A declaration starts at the beginning of a line with its return type and
# names the function before the first '(' of that line; typedefs (the
# vtables' slots), static inline helpers and macros are not exported.
set -eu
awk '
    /^[A-Za-z_]/ && !/^(typedef|static|struct|union|enum|extern|#)/ && /\(/ {
        line = $0
        sub(/\(.*/, "", line)
        n = split(line, w, /[^A-Za-z0-9_]+/)
        if (n && w[n] ~ /^tf_/) print w[n]
    }' "$@" | LC_ALL=C sort -u
