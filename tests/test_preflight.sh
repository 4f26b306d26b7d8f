#!/bin/sh
# Preflight agreement (core/runtime/trainer_preflight.h): ranks that would run different
# things stop before the first step, naming the first differing rank and
# what differs, within seconds, non-zero, nothing left running. The ranks are
# started by mpirun itself (its MPMD form gives each rank its own command
# line and working folder), as a user's job script may do:
#  - rank 1 started with another -o value: the line names the key;
#  - rank 1 reading another file under the same relative data.path: the data plan;
#  - the same command on both ranks trains.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
LSAN_OPTIONS="suppressions=$top_srcdir/tests/data/comm-mpi/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
OMPI_MCA_mca_base_component_disable_dlclose=1
OMPI_MCA_btl="self,vader"
export LSAN_OPTIONS ASAN_OPTIONS OMPI_MCA_mca_base_component_disable_dlclose OMPI_MCA_btl
mpirun=$(sed -n 's/^#define TF_MPIRUN "\(.*\)"$/\1/p' "$top_builddir/config.h" 2>/dev/null)
[ -x "${mpirun:-}" ] || mpirun=$(command -v mpirun 2>/dev/null)
if [ -z "${mpirun:-}" ] || [ ! -x "$mpirun" ] || ! "$tfcore" plugins 2>/dev/null | grep -Eq "^ *comm +mpi "; then
    echo "preflight: no mpirun or comm-mpi: skipped"
    exit 77
fi
root=""
[ "$(id -u)" = 0 ] && root="--allow-run-as-root"
tmp=$(mktemp -d /tmp/tfcore-preflight-XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
tfcore_abs=$(cd "$(dirname "$tfcore")" && pwd)/$(basename "$tfcore")
vocab=$(cd "$top_srcdir/tests/data/tokenizer" && pwd)/vocab.txt
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# the same config in folders A and B, each beside its own reviews.csv
for d in A B; do
    mkdir -p "$tmp/$d"
    cat >"$tmp/$d/run.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2; };
data = { plugin = "imdb"; path = "reviews.csv"; vocab_file = "$vocab"; max_length = 32; eval_fraction = 0.25; };
backend = { plugin = "cpu"; threads = 1; };
training = { output_dir = "$tmp/out"; overwrite_output_dir = true; max_steps = 2;
             per_device_train_batch_size = 2; save_strategy = "no"; };
comm = { plugin = "mpi"; world_size = 2; };
CFG
    cp "$top_srcdir/tests/data/imdb/reviews.csv" "$tmp/$d/"
done

# job NAME [RANK1_ARGS...]: rank 0 in A, rank 1 in WDIR1 (default A) with extra args
job() {
    name=$1
    shift
    start=$(date +%s)
    timeout 60 "$mpirun" $root -np 1 -wdir "$tmp/A" "$tfcore_abs" train -c run.cfg : \
        -np 1 -wdir "$tmp/${wdir1:-A}" "$tfcore_abs" train -c run.cfg "$@" >"$tmp/$name.out" 2>&1
    rc=$?
    secs=$(($(date +%s) - start))
}

# stopped NAME LINE: non-zero within 30 s, and the line is there
stopped() {
    if [ $rc = 0 ] || [ $rc = 124 ]; then bad "$1: exit status $rc"; tail -n 5 "$tmp/$1.out"; return; fi
    [ $secs -le 30 ] || bad "$1: took $secs s"
    if grep -qF "$2" "$tmp/$1.out"; then ok; else bad "$1: no line '$2'"; tail -n 5 "$tmp/$1.out"; fi
    grep -q "training:" "$tmp/$1.out" && bad "$1: training started"
}

job lr -o training.learning_rate=1e-4
stopped lr "preflight: rank 1's resolved config (training.learning_rate?) differs from rank 0's"

# B's file: the same rows, the labels swapped
sed 's/,positive$/,POS/; s/,negative$/,positive/; s/,POS$/,negative/' "$top_srcdir/tests/data/imdb/reviews.csv" >"$tmp/B/reviews.csv"
wdir1=B job data
stopped data "preflight: rank 1's data plan (rows, sequence length, steps, sampled training rows) differs from rank 0's"

job same
if [ $rc = 0 ] && [ -f "$tmp/out/results.json" ]; then ok; else bad "same: exit status $rc"; tail -n 5 "$tmp/same.out"; fi

echo "preflight: $pass passed, $fail failed"
[ $fail = 0 ]
