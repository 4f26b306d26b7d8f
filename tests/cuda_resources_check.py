"""cuda_resources_check: the CI gate on backend-cuda's compiled kernels
(tests/test_cuda_resources.sh runs it).

    python3 cuda_resources_check.py LAUNCH_TABLE SPILL_BASELINE REPORT...

REPORT: ptxas's resource report of one kernel object, as the build keeps it
(scripts/nvcc-libtool.sh writes OBJECT.ptxas: the `ptxas info` lines of
`nvcc -Xptxas -v`, every architecture of CUDA_ARCHS). For every kernel
(entry function) and architecture it checks:
  - static shared memory <= 48 KB (49152 bytes: more needs the dynamic
    opt-in, cudaFuncSetAttribute, which backend-cuda does not use);
  - registers x the most threads per block it is launched with <= 65536 (the
    register file of an SM on sm_80 / sm_90), the block size read from
    LAUNCH_TABLE by the kernel's name ("bounded": the kernel declares
    __launch_bounds__ of its launch size, as CUB's do, so ptxas already
    caps its registers);
  - spill stores and spill loads <= SPILL_BASELINE's bytes for that kernel
    (by mangled name, anonymous namespaces spelled _GLOBAL__N_1) and
    architecture (0 when it is not listed).
Prints one line per problem and a summary per architecture; exit 1 on any
problem (a kernel missing from the table is one), 0 otherwise.
"""
import re
import subprocess
import sys

SMEM_LIMIT = 48 * 1024
REGFILE = 65536

ENTRY = re.compile(r"^ptxas info\s*: Compiling entry function '([^']+)' for '(sm_\d+a?)'")
PROPS = re.compile(r"^ptxas info\s*: Function properties for (\S+)")
SPILL = re.compile(r"^\s+(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"^ptxas info\s*: Used (\d+) registers(.*)")
SMEM = re.compile(r"(\d+) bytes smem")


ANON = re.compile(r"(\d+)_GLOBAL__N__")


def normalize(mangled):
    """nvcc names an anonymous namespace _GLOBAL__N__<hex>_<file>_<hex>:
    such names are compared under one spelling (the Itanium ABI's
    _GLOBAL__N_1), so the baseline does not hang on those hex parts."""
    out, i = [], 0
    for m in ANON.finditer(mangled):
        if m.start() < i:
            continue
        n = int(m.group(1))
        out.append(mangled[i:m.start()] + "12_GLOBAL__N_1")
        i = m.end(1) + n
    return "".join(out) + mangled[i:]


def parse(path):
    """{(arch, mangled): {regs, smem, stack, spill_st, spill_ld}} of one report."""
    kernels = {}
    cur = None        # the entry whose "Used" line comes next
    props_for = None  # the function the next stack/spill line belongs to
    spills = {}
    for line in open(path, encoding="utf-8", errors="replace"):
        m = ENTRY.match(line)
        if m:
            cur = (m.group(2), normalize(m.group(1)))
            continue
        m = PROPS.match(line)
        if m:
            props_for = normalize(m.group(1))
            continue
        m = SPILL.match(line)
        if m and props_for:
            spills[props_for] = tuple(int(x) for x in m.groups())
            continue
        m = USED.match(line)
        if m and cur:
            sm = SMEM.search(m.group(2))
            stack, st, ld = spills.get(cur[1], (0, 0, 0))
            kernels[cur] = {"regs": int(m.group(1)), "smem": int(sm.group(1)) if sm else 0,
                            "stack": stack, "spill_st": st, "spill_ld": ld, "report": path}
            cur = None
    return kernels


def demangle(names):
    if not names:
        return {}
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                             check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        out = list(names)
    return dict(zip(names, out))


def base_name(demangled):
    """'void ns::att_fwd_simt<float, 32>(...)' -> 'att_fwd_simt'."""
    s = re.sub(r"^void ", "", demangled).replace("(anonymous namespace)::", "")
    depth, cut = 0, len(s)
    for i, c in enumerate(s):  # the name ends at the first top-level '<' or '('
        if c in "<(" and depth == 0:
            cut = i
            break
    return s[:cut].split("::")[-1]


def read_table(path, fields):
    rows = []
    for n, line in enumerate(open(path), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != fields:
            sys.exit("%s:%d: want %d fields, got %r" % (path, n, fields, line))
        rows.append(parts)
    return rows


def main(argv):
    if len(argv) < 4:
        sys.exit(__doc__)
    launch = {}
    for name, threads in read_table(argv[1], 2):
        launch[name] = threads if threads == "bounded" else int(threads)
    baseline = {}
    for arch, mangled, st, ld in read_table(argv[2], 4):
        baseline[(arch, normalize(mangled))] = (int(st), int(ld))
    kernels = {}
    for report in argv[3:]:
        kernels.update(parse(report))
    if not kernels:
        print("FAIL: no kernel in %s" % " ".join(argv[3:]))
        return 1
    names = demangle(sorted({k[1] for k in kernels}))
    problems = 0
    per_arch = {}
    for (arch, mangled), k in sorted(kernels.items()):
        pretty = names.get(mangled, mangled)
        name = base_name(pretty)
        a = per_arch.setdefault(arch, {"n": 0, "smem": 0, "regfile": 0, "spill": 0, "worst": ""})
        a["n"] += 1
        a["smem"] = max(a["smem"], k["smem"])
        a["spill"] += k["spill_st"]
        where = "%s %s (%s)" % (arch, pretty, k["report"].rsplit("/", 1)[-1])
        if k["smem"] > SMEM_LIMIT:
            print("FAIL: %s: %d bytes of static shared memory, more than %d" % (where, k["smem"], SMEM_LIMIT))
            problems += 1
        threads = launch.get(name)
        if threads is None:
            print("FAIL: %s: no launch size for '%s' in %s (add its most threads per block)"
                  % (where, name, argv[1]))
            problems += 1
        elif threads != "bounded":
            use = k["regs"] * threads
            if use > a["regfile"]:
                a["regfile"], a["worst"] = use, "%s: %d registers x %d threads" % (name, k["regs"], threads)
            if use > REGFILE:
                print("FAIL: %s: %d registers x %d threads = %d, more than the %d-register file"
                      % (where, k["regs"], threads, use, REGFILE))
                problems += 1
        st, ld = baseline.get((arch, mangled), (0, 0))
        if k["spill_st"] > st or k["spill_ld"] > ld:
            print("FAIL: %s: spills %d bytes stored / %d loaded, the baseline is %d / %d (%s)"
                  % (where, k["spill_st"], k["spill_ld"], st, ld, argv[2]))
            problems += 1
        elif (k["spill_st"], k["spill_ld"]) != (st, ld):
            print("note: %s spills less than its baseline (%d/%d < %d/%d): lower the baseline in %s"
                  % (where, k["spill_st"], k["spill_ld"], st, ld, argv[2]))
    for arch, a in sorted(per_arch.items()):
        print("%s: %d kernels; most static shared memory %d bytes; most registers x threads %d (%s); %d bytes of spill stores in all"
              % (arch, a["n"], a["smem"], a["regfile"], a["worst"] or "-", a["spill"]))
    print("cuda_resources: %d problem(s)" % problems)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
