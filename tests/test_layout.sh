#!/bin/sh
# The core's three folders depend one way, and no part of the core depends
# on itself in a loop (docs/ARCHITECTURE.md, "Layout" and "SDK, runtime,
# CLI"). Read from the sources and the built objects:
#
#   includes  every `#include "..."` of core/{sdk,runtime,cli}/*.[ch] and of
#             the public headers, resolved as the compiler does (beside the
#             file, then the folders its target's -I names);
#   calls     every function or variable an object of the core uses (nm: U)
#             and the object that defines it (nm: T, D, B, R).
#
# It fails when
#   - the SDK (core/sdk) includes or calls the runtime or the CLI, the runtime
#     (core/runtime) includes or calls the CLI, or a public header
#     (core/include/tfcore) includes a private one;
#   - the runtime or the CLI includes a private header of the SDK, or calls a
#     function libtfcore.so does not export (core/libtfcore.sym);
#   - a quoted include names no file of the core (a private header nobody
#     can see; "config.h" is configure's);
#   - files include each other in a loop, or modules include or call each
#     other in a loop. A module is X.c with X.h, and with X_internal.h (its
#     shared internals: the trainer's, the tokenizer's, ...) and the files
#     X_*.c/h of its folder that include it: one module split into files,
#     which may call each other either way. Other files that include
#     X_internal.h are its clients.
set -eu
: "${top_builddir:?}" "${top_srcdir:?}"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
exec python3 - "$top_srcdir" "$top_builddir" <<'PY'
import collections, glob, os, re, subprocess, sys

src, build = sys.argv[1], sys.argv[2]
FOLDERS = ("sdk", "runtime", "cli")
# what a folder's files may include, besides the public headers
SEES = {"sdk": ("sdk",), "runtime": ("runtime",), "cli": ("cli", "runtime"), "include": ()}
# what a folder's code may call (the SDK through libtfcore.so's exports only)
CALLS = {"sdk": ("sdk",), "runtime": ("runtime", "sdk"), "cli": ("cli", "runtime", "sdk")}
fails = []

def fail(msg):
    fails.append(msg)

# --- includes --------------------------------------------------------------
files = {}  # "sdk/x.c" -> path
for f in FOLDERS:
    for p in sorted(glob.glob(f"{src}/core/{f}/*.[ch]")):
        files[f"{f}/{os.path.basename(p)}"] = p
for p in sorted(glob.glob(f"{src}/core/include/tfcore/*.h")):
    files[f"include/tfcore/{os.path.basename(p)}"] = p
if len(files) < 50:
    print(f"FAIL: only {len(files)} core files found under {src}/core")
    sys.exit(1)
folder_of = lambda k: k.split("/")[0]
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"', re.M)

includes = collections.defaultdict(set)  # file -> files it includes
for k, p in files.items():
    here = folder_of(k)
    for name in INCLUDE.findall(open(p, encoding="utf-8").read()):
        if name.startswith("tfcore/"):
            target = f"include/{name}"
            if target not in files:
                fail(f"{k}: includes {name}, which is not a public header")
            else:
                includes[k].add(target)
            continue
        if here == "include":
            fail(f"{k}: a public header includes \"{name}\" (public headers include only tfcore/*.h)")
            continue
        beside = f"{here}/{name}"
        if beside in files:
            includes[k].add(beside)
            continue
        elsewhere = [f"{f}/{name}" for f in FOLDERS if f"{f}/{name}" in files]
        if not elsewhere:
            if name != "config.h":  # configure's, in the build tree
                fail(f"{k}: includes \"{name}\", which is no file of the core")
            continue
        target = elsewhere[0]
        includes[k].add(target)
        if folder_of(target) not in SEES[here]:
            fail(f"{k}: includes {target}: the {here} must not see the {folder_of(target)}'s headers")

def cycles(edges, nodes):
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1
        stack.append(v); on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(sorted(comp))
    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index: visit(v)
    return out

def describe(comp, edges, why=None):
    s = set(comp)
    parts = []
    for a in comp:
        for b in sorted(edges.get(a, ())):
            if b in s:
                parts.append(f"{a} -> {b}" + (f" ({', '.join(sorted(why[a, b])[:3])})" if why else ""))
    return "; ".join(parts)

for comp in cycles(includes, files):
    fail("files include each other in a loop: " + describe(comp, includes))

# modules: X.c + X.h; X_internal.h and the X_* files of its folder that
# include it are module X too
stem = lambda k: os.path.splitext(k)[0]
member = {}
for k in files:
    for t in includes[k]:
        x = stem(t)[: -len("_internal")]
        if t.endswith("_internal.h") and stem(k).startswith(x + "_"):
            member[stem(k)] = member[stem(t)] = x
module = lambda k: member.get(stem(k), stem(k))
mod_inc, inc_why = collections.defaultdict(set), collections.defaultdict(set)
for k in files:
    for t in includes[k]:
        if module(k) != module(t):
            mod_inc[module(k)].add(module(t))
            inc_why[module(k), module(t)].add(f"{k} includes {t}")
for comp in cycles(mod_inc, {module(k) for k in files}):
    fail("modules include each other in a loop: " + describe(comp, mod_inc, inc_why))

# --- calls -------------------------------------------------------------------
defs, uses = {}, {}
for f in FOLDERS:
    objs = sorted(glob.glob(f"{build}/core/{f}/.libs/*.o")) + sorted(glob.glob(f"{build}/core/{f}/*.o"))
    for o in objs:
        prefix, _, name = os.path.basename(o)[:-2].partition("-")
        if f == "cli" and prefix != "tfcore": continue  # a test's own copy of a CLI file
        k = f"{f}/{name}.c"
        if k not in files or k in defs: continue
        nm = subprocess.run(["nm", o], capture_output=True, text=True, check=True).stdout
        d, u = set(), set()
        for line in nm.splitlines():
            w = line.split()
            if len(w) == 3 and w[1] in "TDBRGSVW": d.add(w[2])
            elif len(w) == 2 and w[0] == "U": u.add(w[1])
        defs[k], uses[k] = d, u
missing = [k for k in files if k.endswith(".c") and k not in defs]
if missing:
    print(f"FAIL: no built object under {build}/core for: " + " ".join(missing))
    sys.exit(1)
exported = set(open(f"{build}/core/libtfcore.sym").read().split())
owner = {s: k for k, d in defs.items() for s in d}
calls, call_why = collections.defaultdict(set), collections.defaultdict(set)
for k, u in uses.items():
    for s in sorted(u):
        t = owner.get(s)
        if not t or t == k: continue
        if folder_of(t) not in CALLS[folder_of(k)]:
            fail(f"{k}: calls {s} of {t}: the {folder_of(k)} must not call the {folder_of(t)}")
        elif folder_of(t) == "sdk" and folder_of(k) != "sdk" and s not in exported:
            fail(f"{k}: calls {s} of {t}, which libtfcore.so does not export")
        if module(k) != module(t):
            calls[module(k)].add(module(t))
            call_why[module(k), module(t)].add(s)
for comp in cycles(calls, {module(k) for k in defs}):
    fail("modules call each other in a loop: " + describe(comp, calls, call_why))

for m in fails:
    print("FAIL: " + m)
if fails:
    sys.exit(1)
print(f"layout: {len(files)} files, {len(defs)} objects; the SDK, the runtime and the CLI depend one way, no loops")
PY
