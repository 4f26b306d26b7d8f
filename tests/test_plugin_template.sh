#!/bin/sh
# Install tfcore into a DESTDIR, build examples/plugin-template against that
# install with pkg-config exactly as its README says, and check the installed
# tfcore loads it through TFCORE_PLUGIN_PATH. Then move the installed tree
# elsewhere and check that its tfcore still finds every plugin of the build,
# from the moved tree's lib/tfcore/plugins (plugins are found beside the
# loaded libtfcore.so, not at a path compiled in; docs/PLUGINS.md).
set -eu
: "${top_builddir:?}" "${top_srcdir:?}"
tmp=$(mktemp -d /tmp/tfcore-template-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

make -s -C "$top_builddir" install DESTDIR="$tmp/root" >"$tmp/install.log" 2>&1 \
    || { cat "$tmp/install.log"; echo "FAIL: make install DESTDIR failed"; exit 1; }
prefix=$(sed -n 's/^prefix=//p' "$top_builddir/core/tfcore.pc")
libdir=$(sed -n 's/^libdir=//p' "$top_builddir/core/tfcore.pc" | sed "s|\${exec_prefix}|$prefix|; s|\${prefix}|$prefix|")
root="$tmp/root"
pcdir="$root$libdir/pkgconfig"
[ -f "$pcdir/tfcore.pc" ] || { echo "FAIL: tfcore.pc not installed in $pcdir"; exit 1; }
for h in tfcore.h plugin.h config.h backend.h model.h dataset.h comm.h precision.h; do
    [ -f "$root$prefix/include/tfcore/$h" ] || { echo "FAIL: header $h not installed"; exit 1; }
done

# Build the example out of tree, against the DESTDIR install only.
cp "$top_srcdir/examples/plugin-template/fixed_scale.c" "$top_srcdir/examples/plugin-template/Makefile" "$tmp/"
PKG_CONFIG_PATH="$pcdir" PKG_CONFIG_SYSROOT_DIR="$root" \
    make -s -C "$tmp" PKG_CONFIG="pkg-config --define-prefix" >"$tmp/build.log" 2>&1 \
    || { cat "$tmp/build.log"; echo "FAIL: the example plugin did not build against the install"; exit 1; }
[ -f "$tmp/tfcore-precision-fixed-scale.so" ] || { echo "FAIL: no .so built"; exit 1; }

# The installed tfcore finds and accepts it.
out=$(LD_LIBRARY_PATH="$root$libdir" TFCORE_PLUGIN_PATH="$tmp" "$root$prefix/bin/tfcore" plugins --json)
echo "$out" | grep -q '"name": "fixed-scale"' || { echo "$out"; echo "FAIL: fixed-scale not listed"; exit 1; }
echo "$out" | grep -q '"usable": true' || { echo "$out"; echo "FAIL: fixed-scale not usable"; exit 1; }
if echo "$out" | grep -q 'fixed-scale.so:'; then echo "$out"; echo "FAIL: fixed-scale rejected"; exit 1; fi
echo "PASS: example plugin built against a DESTDIR install with pkg-config and loaded"

# The installed tree, moved: every plugin built here is found in the moved
# lib/tfcore/plugins, with no search path given.
moved="$tmp/moved/somewhere else"
mkdir -p "$tmp/moved"
mv "$root$prefix" "$moved"
mlib="$moved${libdir#"$prefix"}"
out=$(env -u TFCORE_PLUGIN_PATH LD_LIBRARY_PATH="$mlib" "$moved/bin/tfcore" plugins --json) \
    || { echo "$out"; echo "FAIL: the moved tfcore did not run"; exit 1; }
built=$(cd "$top_builddir/plugins" && ls ./*/.libs/tfcore-*.so | sed 's|.*/||' | sort)
[ -n "$built" ] || { echo "FAIL: no plugin built in $top_builddir/plugins"; exit 1; }
printf '%s\n' "$out" | python3 -c '
import json, sys
mplugins, built = sys.argv[1], sys.argv[2].split()
d = json.load(sys.stdin)
found = {p["path"].rsplit("/", 1)[1]: p["path"] for p in d["plugins"]}
bad = [f for f in built if not found.get(f, "").startswith(mplugins + "/")]
for f in bad:
    print("FAIL: %s: %s" % (f, found.get(f, "not found")))
for r in d["rejected"]:
    print("FAIL: rejected: %s" % r["why"])
sys.exit(1 if bad or d["rejected"] else 0)
' "$mlib/tfcore/plugins" "$built" || { echo "searched: $out" | head -c 2000; echo; exit 1; }
echo "PASS: the installed tree moved to '$moved' finds its $(printf '%s\n' "$built" | wc -l) plugins"
