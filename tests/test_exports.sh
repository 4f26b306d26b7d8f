#!/bin/sh
# libtfcore.so is the SDK: it exports exactly the functions the public
# headers (core/include/tfcore/*.h, the installed ones) declare. Lists the
# dynamic symbols the built library defines (nm -D) and the functions the
# compiler reads from the headers (gcc -aux-info on a file including them
# all), and fails on an exported symbol no header declares (a private helper
# that became ABI) or a declared function the library does not export.
set -eu
: "${top_builddir:?}" "${top_srcdir:?}"
lib="$top_builddir/core/.libs/libtfcore.so"
[ -f "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
cc="${CC:-gcc}"
tmp=$(mktemp -d /tmp/tfcore-exports-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# Every public header, included once (the installed ones: tfcore.pc's users
# see exactly these).
inc="$top_srcdir/core/include"
for h in "$inc"/tfcore/*.h; do echo "#include \"tfcore/$(basename "$h")\""; done >"$tmp/all.c"
if ! "$cc" -std=c17 -D_GNU_SOURCE -I"$inc" -fsyntax-only -aux-info "$tmp/aux.txt" "$tmp/all.c" 2>"$tmp/cc.log"; then
    if grep -q "aux-info" "$tmp/cc.log"; then echo "SKIP: $cc has no -aux-info"; exit 77; fi
    cat "$tmp/cc.log"; echo "FAIL: the public headers do not compile on their own"; exit 1
fi
# "/* FILE:LINE:NC */ extern TYPE NAME (ARGS);": declarations (C), not the
# static inline definitions (F), from the public headers only
grep "^/\* $inc/tfcore/[^:]*:[0-9]*:.C \*/ extern " "$tmp/aux.txt" |
    sed 's/ *(.*//; s/.*[ *]//' | LC_ALL=C sort -u >"$tmp/declared"
# defined dynamic symbols, not the linker's own (absolute ones)
nm -D --defined-only "$lib" | awk '$2 != "A" { print $3 }' | sed 's/@.*//' | LC_ALL=C sort -u >"$tmp/exported"

[ -s "$tmp/declared" ] || { echo "FAIL: no declaration read from $inc/tfcore"; exit 1; }
fail=0
extra=$(LC_ALL=C comm -13 "$tmp/declared" "$tmp/exported")
missing=$(LC_ALL=C comm -23 "$tmp/declared" "$tmp/exported")
if [ -n "$extra" ]; then
    echo "FAIL: libtfcore.so exports symbols no public header declares:" $extra
    fail=1
fi
if [ -n "$missing" ]; then
    echo "FAIL: declared in core/include/tfcore but not exported by libtfcore.so:" $missing
    fail=1
fi
[ $fail = 0 ] || exit 1
echo "exports: $(wc -l <"$tmp/exported") symbols, each declared in a public header"
