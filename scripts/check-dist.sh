#!/usr/bin/env bash
# The release tarball holds every file git tracks, except the few listed
# below that only a git checkout needs. make distcheck builds the tarball and
# runs some tests from it (scripts/test-all.sh, DIST_TESTS); this check is
# what lets the other tests run on the checkout only: a file they need that
# EXTRA_DIST forgot fails here, naming it, instead of in a user's build.
#
# Usage: scripts/check-dist.sh TARBALL (.tar.gz, made by make dist) in a git
# checkout. Exits 0 when every tracked file is in TARBALL, 1 (listing the
# missing ones) when not, 2 on a usage error or outside a git checkout.
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
tarball="${1:-}"
[ -f "$tarball" ] || { echo "usage: scripts/check-dist.sh TARBALL" >&2; exit 2; }
git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1 || {
    echo "check-dist.sh: $top is not a git checkout: no list of tracked files to compare" >&2
    exit 2
}
# tracked but not for the tarball: git's own ignore list, and the placeholder
# that keeps the empty m4/ folder in git (autoreconf fills it)
not_shipped='^(\.gitignore|m4/\.keep)$'

tracked="$(git -C "$top" ls-files | grep -Ev "$not_shipped" | sort)"
# the tarball's files without its top folder (tfcore-VERSION/)
shipped="$(tar -tzf "$tarball" | sed -n 's|^[^/]*/||p' | grep -v '/$' | sort)"
missing="$(comm -23 <(echo "$tracked") <(echo "$shipped"))"
if [ -n "$missing" ]; then
    echo "check-dist.sh: $(echo "$missing" | wc -l) tracked files are not in $tarball (add them to EXTRA_DIST):"
    echo "$missing" | sed 's/^/    /'
    exit 1
fi
echo "check-dist.sh: every tracked file ($(echo "$tracked" | wc -l)) is in $tarball"
