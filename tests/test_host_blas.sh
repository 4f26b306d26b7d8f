#!/bin/sh
# The OpenBLAS kernels tfcore asks for (core/runtime/host_blas.c): with
# OPENBLAS_CORETYPE unset, on a CPU with AVX-512 (F, CD, BW, DQ, VL) backend-
# cpu runs OpenBLAS's SkylakeX kernels (Cooperlake with AVX512_BF16), also
# where OpenBLAS itself would fall back to its generic Prescott ones (a CPU
# model it does not know); a coretype the environment names always stands;
# and the programs that link OpenBLAS themselves (backend-cpu's op tests)
# run again with the same setting (OPENBLAS_VERBOSE=2 prints "Core: NAME"
# as each process loads OpenBLAS).
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
[ -x "$tfcore" ] || { echo "SKIP: no $tfcore"; exit 77; }
[ -d "$top_builddir/plugins/backend-cpu/.libs" ] || { echo "SKIP: backend-cpu is not built (no OpenBLAS)"; exit 77; }
tmp=$(mktemp -d /tmp/tfcore-host-blas-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

cat >"$tmp/tiny.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          max_position_embeddings = 32; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 16; num_examples = 8; };
backend = { plugin = "cpu"; threads = 1; };
training = { per_device_train_batch_size = 4; };
CFG
# kernels ENV...: the kernels backend-cpu's device line names, run with ENV
kernels() {
    env "$@" "$tfcore" bench -c "$tmp/tiny.cfg" --steps 1 --warmup 0 2>&1 |
        sed -n 's/^device .*OpenBLAS [^(]*(\([A-Za-z0-9]*\) kernels).*/\1/p'
}

flags=$(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
has() { case " $flags " in *" $1 "*) return 0 ;; esac; return 1; }
want=""
if has avx512f && has avx512cd && has avx512bw && has avx512dq && has avx512vl; then
    want=SkylakeX
    has avx512_bf16 && want=Cooperlake
fi

got=$(kernels -u OPENBLAS_CORETYPE)
if [ -n "$want" ]; then
    [ "$got" = "$want" ] && ok || bad "OPENBLAS_CORETYPE unset on an AVX-512 CPU: backend-cpu ran '$got' kernels, not $want"
else
    # no AVX-512: tfcore names none, OpenBLAS's own choice stands
    [ -n "$got" ] && ok || bad "OPENBLAS_CORETYPE unset: no kernels named in backend-cpu's device line"
    echo "note: no AVX-512 here: OpenBLAS chose '$got' itself"
fi
# the environment's choice stands (Prescott runs on any x86-64)
got=$(kernels OPENBLAS_CORETYPE=Prescott)
[ "$got" = Prescott ] && ok || bad "OPENBLAS_CORETYPE=Prescott: backend-cpu ran '$got' kernels"

# a program linked with OpenBLAS runs itself again with tfcore's setting
t="$top_builddir/tests/backend-cpu/test_runtime"
if [ -n "$want" ] && [ -x "$t" ]; then
    env -u OPENBLAS_CORETYPE OPENBLAS_VERBOSE=2 CK_RUN_CASE=none "$t" >"$tmp/verbose" 2>&1
    if grep -q "Core: $want" "$tmp/verbose"; then ok
    else bad "tests/backend-cpu/test_runtime did not run again with $want kernels:"; cat "$tmp/verbose"; fi
fi

echo "test_host_blas: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
