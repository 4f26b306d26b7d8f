#!/bin/sh
# The GPU bundle (scripts/gpu-bundle.sh, docs/GPU.md) is self-contained and
# relocatable, proven without a GPU: pack this build tree (or check the
# bundle in $GPU_BUNDLE, as scripts/test-all.sh does with the real
# CUDA_ARCHS=90 --without-mpi one), move it elsewhere, delete the original,
# and from the moved copy, with nothing but the bundle's env.sh (env -i):
#   - ldd on every program and library: nothing unresolved but the CUDA
#     libraries the GPU machine provides (libcuda, libcudart, libcublas,
#     libcublasLt, libnccl), nothing from the build or source tree, every
#     other library from the bundle or glibc / the GCC runtime; no RUNPATH
#     into the build tree;
#   - `tfcore plugins` finds every plugin in the copy and rejects none;
#   - CPU tests: the backend-cpu op suite, the BERT model and precision
#     suites, test_precision_cpu.sh, and a short bert-tiny training whose
#     loss falls;
#   - the GPU tests skip saying "no CUDA device", fail with
#     TFCORE_REQUIRE_GPU=1, and when backend-cuda needs a CUDA library the
#     machine lacks they report the loader's reason, not "no CUDA device";
#   - scripts/gpu-run.sh stops at once: no GPU here; and, faking a GPU
#     (nvidia-smi stub, backend-cuda reported usable), runs every step to
#     its own line and log without tripping over the script;
#   - the size: printed; for the real recipe's bundle ($GPU_BUNDLE:
#     CUDA_ARCHS=90), at most 56 MiB unpacked, so even the folder fits the
#     64 MiB the GPU machine takes (the .tar.xz that docs/GPU.md carries is
#     about 7 MiB). A bundle packed from this build tree holds whatever
#     architectures it was configured for (80;90 by default: larger), so its
#     size is only printed.
# Skips (77) when backend-cuda is not built (no nvcc) or patchelf is missing.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
if [ -z "${GPU_BUNDLE:-}" ]; then
    [ -f "$top_builddir/plugins/backend-cuda/.libs/tfcore-backend-cuda.so" ] \
        || { echo "SKIP: backend-cuda is not built here (no nvcc / CUDA toolkit): the GPU bundle needs it"; exit 77; }
    command -v patchelf >/dev/null || { echo "SKIP: patchelf is not installed (scripts/install-deps.sh installs it)"; exit 77; }
fi
tmp=$(mktemp -d /tmp/tfcore-bundle-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() {
    fail=$((fail + 1))
    echo "FAIL: $*"
}
abs_build=$(cd "$top_builddir" && pwd -P)
# a given bundle was built in its own folder (scripts/gpu-bundle.sh: OUT.build)
[ -n "${GPU_BUNDLE:-}" ] && [ -d "$GPU_BUNDLE.build" ] && abs_build=$(cd "$GPU_BUNDLE.build" && pwd -P)
abs_src=$(cd "$top_srcdir" && pwd -P)

# --- make (or take) the bundle, move it, remove the original --------------------------
if [ -n "${GPU_BUNDLE:-}" ]; then
    [ -f "$GPU_BUNDLE/env.sh" ] || { echo "FAIL: $GPU_BUNDLE is not a GPU bundle (no env.sh)"; exit 1; }
    cp -a "$GPU_BUNDLE" "$tmp/made"
else
    if ! bash "$top_srcdir/scripts/gpu-bundle.sh" "$tmp/made" --build-dir "$top_builddir" --no-build \
        --no-archive >"$tmp/bundle.out" 2>&1; then
        cat "$tmp/bundle.out"
        echo "FAIL: scripts/gpu-bundle.sh failed"
        exit 1
    fi
    cat "$tmp/bundle.out"
fi
# an existing folder that is not a bundle is never replaced
mkdir -p "$tmp/mine"
echo keep >"$tmp/mine/file"
out=$(bash "$top_srcdir/scripts/gpu-bundle.sh" "$tmp/mine" --build-dir "$top_builddir" --no-build 2>&1)
rc=$?
if [ $rc -eq 1 ] && [ "$(cat "$tmp/mine/file")" = keep ] && printf '%s\n' "$out" | grep -q "exists and is not a GPU bundle"; then ok; else
    bad "gpu-bundle.sh on an existing folder: exit $rc: $out"
fi
b="$tmp/moved elsewhere/bundle"
mkdir -p "$tmp/moved elsewhere"
cp -a "$tmp/made" "$b"
rm -rf "$tmp/made"
mib=$(du -sb "$b" | awk '{printf "%.1f", $1 / 1048576}')
echo "bundle: $mib MiB, $(find "$b" -type f | wc -l) files"
if [ -n "${GPU_BUNDLE:-}" ]; then
    if awk -v m="$mib" 'BEGIN {exit !(m <= 56)}'; then ok; else bad "the bundle is $mib MiB, more than 56 MiB"; fi
fi

# run CMD... in the copy with only env.sh's environment
inb() { env -i HOME="$HOME" PATH=/usr/bin:/bin TMPDIR=/tmp bash -c '. "$0/env.sh" && "$@"' "$b" "$@"; }

# --- ldd: nothing unresolved but the GPU machine's CUDA libraries, nothing from the build ----
gpu_re='^(libcuda\.so\.1|libcudart\.so\.[0-9]+|libcublas\.so\.[0-9]+|libcublasLt\.so\.[0-9]+|libnccl\.so\.2)$'
base_re='^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libstdc\+\+\.so\.6|libgcc_s\.so\.1)$'
find "$b" -type f >"$tmp/files"
nelf=0
: >"$tmp/ldd.bad"
: >"$tmp/gpu-libs"
while IFS= read -r f; do
    [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
    nelf=$((nelf + 1))
    # twice: with only the bundle's own folders on LD_LIBRARY_PATH (as env.sh
    # has them, less pip's), and with no LD_LIBRARY_PATH at all (the
    # $ORIGIN RUNPATHs alone must find the bundle's libraries before this
    # machine's copies)
    { env -i LD_LIBRARY_PATH="$b/core/.libs:$b/lib" ldd "$f"; env -i ldd "$f"; } >"$tmp/ldd.out" 2>&1
    # "\tSONAME => PATH (0xADDR)" or "\tSONAME => not found"; PATH may hold spaces
    awk -v f="${f#"$b"/}" -v b="$b" -v gre="$gpu_re" -v bre="$base_re" -v build="$abs_build" -v src="$abs_src" -v gl="$tmp/gpu-libs" '
        $2 != "=>" { next }
        { so = $1; p = $0; sub(/^[^=]*=> /, "", p); sub(/ \(0x[0-9a-f]+\)$/, "", p) }
        so ~ gre { print so >> gl; next }
        p == "not found" { print f ": " so " not found"; next }
        index(p, build "/") == 1 || index(p, src "/") == 1 { print f ": " so " from the build tree: " p; next }
        so ~ bre { next }
        index(p, b "/") != 1 { print f ": " so " from outside the bundle: " p }
    ' "$tmp/ldd.out" >>"$tmp/ldd.bad"
    if readelf -d "$f" 2>/dev/null | grep -E 'R(UN)?PATH' | grep -Eq "$abs_build|$abs_src"; then
        echo "${f#"$b"/}: RUNPATH into the build tree: $(readelf -d "$f" | grep -E 'R(UN)?PATH')" >>"$tmp/ldd.bad"
    fi
done <"$tmp/files"
if [ -s "$tmp/ldd.bad" ]; then bad "ldd in the moved bundle:"; sed 's/^/    /' "$tmp/ldd.bad"; else ok; fi
[ "$nelf" -ge 14 ] && ok || bad "only $nelf ELF files in the bundle"
echo "ldd: $nelf ELF files resolve inside the bundle; left to the GPU machine: $(sort -u "$tmp/gpu-libs" | tr '\n' ' ')"

# env.sh's TFCORE_PYTHON is a path (tests/ref/run-python.sh checks it with -x)
if inb sh -c '[ -x "$TFCORE_PYTHON" ]'; then ok; else bad "env.sh's TFCORE_PYTHON is not an executable path: $(inb sh -c 'echo "$TFCORE_PYTHON"')"; fi

# --- tfcore plugins from the copy -------------------------------------------------------------
if inb "$b/core/tfcore" plugins --json >"$tmp/plugins.json" 2>"$tmp/plugins.err"; then ok; else
    bad "tfcore plugins failed in the moved bundle: $(cat "$tmp/plugins.err")"
fi
python3 - "$b" "$tmp/plugins.json" <<'PY' && ok || bad "the moved bundle's plugins (above)"
import glob, json, os, sys
b, d = sys.argv[1], json.load(open(sys.argv[2]))
shipped = sorted(os.path.basename(p) for p in glob.glob(b + "/plugins/*/.libs/tfcore-*.so"))
found = {os.path.basename(p["path"]): p for p in d["plugins"]}
bad = 0
for s in shipped:
    p = found.get(s)
    if not p or not p["path"].startswith(b + "/"):
        print("  %s: %s" % (s, "not found" if not p else "found outside the bundle: " + p["path"]))
        bad += 1
for r in d["rejected"]:
    print("  rejected: %s" % r["why"])
    bad += 1
cuda = found.get("tfcore-backend-cuda.so")
print("plugins: %d shipped, %d found in the copy; backend-cuda: %s" % (len(shipped), len(found),
      "usable" if cuda and cuda["usable"] else (cuda or {}).get("why", "missing")))
if len(shipped) < 10 or "tfcore-backend-cuda.so" not in shipped:
    print("  the bundle lacks plugins: %s" % shipped)
    bad += 1
sys.exit(1 if bad else 0)
PY

# --- CPU tests from the copy -------------------------------------------------------------------
for t in backend-cpu/test_runtime backend-cpu/test_gemm backend-cpu/test_elementwise \
    backend-cpu/test_dropout backend-cpu/test_layernorm backend-cpu/test_attention \
    backend-cpu/test_embedding backend-cpu/test_cross_entropy backend-cpu/test_optimizer \
    backend-cpu/test_threads test_model_bert test_precision; do
    o="$tmp/$(echo "$t" | tr / _).out"
    if inb "$b/tests/$t" >"$o" 2>&1; then ok; echo "$t: $(grep -E '^[0-9]+%' "$o" | tail -n 1)"; else
        bad "tests/$t in the moved bundle:"; tail -n 15 "$o"
    fi
done
if inb sh "$b/tests/test_precision_cpu.sh" >"$tmp/pcpu.out" 2>&1; then ok; tail -n 1 "$tmp/pcpu.out"; else
    bad "test_precision_cpu.sh in the moved bundle:"; tail -n 15 "$tmp/pcpu.out"
fi
cat >"$tmp/tiny.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          max_position_embeddings = 64; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 32;
         num_examples = 256; eval_examples = 64; learnable = true; };
backend = { plugin = "cpu"; threads = 2; };
training = { output_dir = "$tmp/train"; num_train_epochs = 3.0; per_device_train_batch_size = 16;
             learning_rate = 2e-3; warmup_ratio = 0.1; logging_steps = 4; eval_strategy = "epoch";
             save_strategy = "no"; seed = 7; };
CFG
if inb "$b/core/tfcore" train -c "$tmp/tiny.cfg" >"$tmp/train.out" 2>&1; then ok; else
    bad "a bert-tiny training in the moved bundle failed:"; tail -n 15 "$tmp/train.out"
fi
python3 - "$tmp/train" <<'PY' && ok || bad "the moved bundle's training did not learn (above)"
import json, sys
d = sys.argv[1]
r = json.load(open(d + "/results.json"))
losses = [x["loss"] for x in map(json.loads, open(d + "/log.jsonl")) if "loss" in x]
k = max(1, len(losses) // 4)
first, last = sum(losses[:k]) / k, sum(losses[-k:]) / k
print("training in the copy: %d steps, loss %.4f -> %.4f (first/last quarter), eval_accuracy %.4f"
      % (r["tfcore"]["global_step"], first, last, r["eval_accuracy"]))
sys.exit(0 if len(losses) >= 8 and last < 0.7 * first and r["eval_accuracy"] >= 0.9 else 1)
PY

# --- the GPU tests from the copy: skip, or fail with TFCORE_REQUIRE_GPU=1, saying why ---------
out=$(inb sh "$b/tests/test_gpu_ref.sh" 2>&1)
rc=$?
if [ $rc -eq 77 ] && printf '%s\n' "$out" | grep -q "^SKIP: backend-cuda cannot run here: no CUDA device: "; then ok; else
    bad "test_gpu_ref.sh in the copy: exit $rc: $out"
fi
out=$(inb env TFCORE_REQUIRE_GPU=1 sh "$b/tests/test_gpu_ref.sh" 2>&1)
rc=$?
if [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -q "^FAIL: TFCORE_REQUIRE_GPU=1 .*no CUDA device"; then ok; else
    bad "test_gpu_ref.sh in the copy with TFCORE_REQUIRE_GPU=1: exit $rc: $out"
fi
out=$(inb env TFCORE_REQUIRE_GPU=1 "$b/tests/test_backend_cuda" 2>&1)
rc=$?
if [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -q "^FAIL: TFCORE_REQUIRE_GPU=1 but test_backend_cuda cannot run: no CUDA device"; then ok; else
    bad "test_backend_cuda in the copy with TFCORE_REQUIRE_GPU=1: exit $rc: $out"
fi
# a backend-cuda that needs a CUDA library the machine lacks (a second copy,
# its libcublasLt.so.13 renamed .so.99; this machine's ld.so cache has the
# real one): the loader's reason, never "no CUDA device"
h="$tmp/hidden"
cp -a "$b" "$h"
patchelf --replace-needed libcublasLt.so.13 libcublasLt.so.99 "$h/plugins/backend-cuda/.libs/tfcore-backend-cuda.so"
out=$(env -i HOME="$HOME" PATH=/usr/bin:/bin bash -c '. "$0/env.sh" && TFCORE_REQUIRE_GPU=1 sh "$0/tests/test_gpu_ref.sh"' "$h" 2>&1)
rc=$?
if [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -q "^FAIL: TFCORE_REQUIRE_GPU=1 but the GPU test cannot run: the plugin loader rejected backend-cuda: .*libcublasLt\.so\.99: cannot open shared object file" &&
    ! printf '%s\n' "$out" | grep -q "no CUDA device"; then ok; else
    bad "with libcublasLt hidden: exit $rc: $out"
fi
rm -rf "$h"

# --- gpu-run.sh from the copy: stops at once, no GPU ---------------------------------------------
inb bash "$b/scripts/gpu-run.sh" "$tmp/run" >"$tmp/run.out" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "^FAIL .*preflight .*no NVIDIA GPU here" "$tmp/run/summary.txt"; then ok; else
    bad "gpu-run.sh in the copy: exit $rc:"; cat "$tmp/run.out"
fi

# --- gpu-run.sh past its preflight, in a third copy that fakes a GPU (an
# nvidia-smi that lists one, a tfcore wrapper that reports backend-cuda
# usable): every step starts, runs what it names and writes its line and log
# (the GPU work itself fails here: no device); none stumbles on the script
f="$tmp/fake-gpu"
cp -a "$b" "$f"
mv "$f/core/tfcore" "$f/core/tfcore.real"
cat >"$f/core/tfcore" <<'WRAP'
#!/bin/sh
d=$(dirname "$0")
if [ "$1" = plugins ] && [ "${2:-}" = --json ]; then
    "$d/tfcore.real" plugins --json | python3 -c 'import json, sys
d = json.load(sys.stdin)
for p in d["plugins"]:
    if p["kind"] == "backend" and p["name"] == "cuda":
        p["usable"] = True
print(json.dumps(d))'
    exit
fi
exec "$d/tfcore.real" "$@"
WRAP
mkdir -p "$tmp/fakebin"
cat >"$tmp/fakebin/nvidia-smi" <<'SMI'
#!/bin/sh
case "$*" in
-L) echo "GPU 0: FAKE GPU (UUID: GPU-0)" ;;
*query-gpu*) echo "FAKE GPU, 0.0, 0 MiB" ;;
*) echo "| Driver Version: 0.0   CUDA Version: 0.0 |" ;;
esac
SMI
chmod +x "$f/core/tfcore" "$tmp/fakebin/nvidia-smi"
env -i HOME="$HOME" PATH="$tmp/fakebin:/usr/bin:/bin" TMPDIR=/tmp bash "$f/scripts/gpu-run.sh" "$tmp/fake-run" --budget 300 \
    >"$tmp/fake-run.out" 2>&1
steps="preflight env ops-cuda ops-fused memcheck-train racecheck-attn synccheck-attn gpu-ref ft-fp32 ft-tf32 ft-fp16 ft-bf16 ft-agree comm-nccl bench-s128 bench-s512 sanitizer-suites cpu-bf16"
tar -tzf "$tmp/fake-run/logs.tar.gz" >"$tmp/fake-logs.list"
for st in $steps; do
    if [ "$st" = comm-nccl ] && [ ! -f "$f/plugins/comm-nccl/.libs/tfcore-comm-nccl.so" ]; then
        # left out of this bundle (built with MPI): one line says so
        grep -Eq "^FAIL +comm-nccl +- +comm-nccl is not in this bundle" "$tmp/fake-run/summary.txt" && ok ||
            bad "gpu-run.sh with a fake GPU: no line for the missing comm-nccl"
        continue
    fi
    if grep -Eq "^(PASS|FAIL|TIMEOUT) +$st " "$tmp/fake-run/summary.txt" &&
        grep -Eq "^gpu-run-logs/[0-9]+-$st\.log$" "$tmp/fake-logs.list"; then ok; else
        bad "gpu-run.sh with a fake GPU: no line or log for step $st"
    fi
done
grep -Eq "^PASS +preflight " "$tmp/fake-run/summary.txt" && ok || bad "gpu-run.sh with a fake GPU stopped at its preflight"
# cpu-bf16 runs only on a CPU with AVX512_BF16, and says so where there is none
if ! grep -qw avx512_bf16 /proc/cpuinfo; then
    grep -Eq "^PASS +cpu-bf16 .*not run: this machine's CPU .* has no AVX512_BF16$" "$tmp/fake-run/summary.txt" && ok ||
        bad "gpu-run.sh's cpu-bf16 on a CPU without AVX512_BF16: $(grep cpu-bf16 "$tmp/fake-run/summary.txt")"
fi
mkdir -p "$tmp/fake-logs"
tar -xzf "$tmp/fake-run/logs.tar.gz" -C "$tmp/fake-logs"
if grep -rE "command not found|not a function|syntax error|unbound variable|bad substitution" "$tmp/fake-logs" "$tmp/fake-run.out"; then
    bad "gpu-run.sh's steps stumbled on the script (above)"
else ok; fi
if [ -n "$(find "$tmp/fake-run" -mindepth 1 ! -name summary.txt ! -name logs.tar.gz ! -name bench.md)" ]; then
    bad "gpu-run.sh left more than summary.txt, logs.tar.gz, bench.md in OUT"
else ok; fi
rm -rf "$f"

echo "test_gpu_bundle: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
