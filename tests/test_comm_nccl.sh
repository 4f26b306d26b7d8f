#!/bin/sh
# comm-nccl. Everywhere: it was built, `tfcore plugins` shows whether it can
# run here (and why not), check_config rejects each bad key with file:line,
# and every bootstrap path (launcher, file, mpi) hands the ncclUniqueId over
# and reports failures, up to the point where a GPU is needed (through the
# driver, with a fake backend). With a CUDA device and backend-cuda: world
# size 1 (and every GPU of the machine) through each bootstrap path, with
# all-reduce, reduce, broadcast and barrier checked against known values;
# without one, that part prints "SKIP: GPU part ...: comm-nccl probe: <its
# reason>" and does not fail, unless TFCORE_REQUIRE_GPU=1
# (tests/gpu_backend.sh): then it fails, with the probe's reason.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
. "$top_srcdir/tests/gpu_backend.sh"
drv="$top_builddir/plugins/comm-nccl/comm-nccl-driver"
so="$top_builddir/plugins/comm-nccl/.libs/tfcore-comm-nccl.so"
cuda_so="$top_builddir/plugins/backend-cuda/.libs/tfcore-backend-cuda.so"
cpu_so="$top_builddir/plugins/backend-cpu/.libs/tfcore-backend-cpu.so"
tfcore="$top_builddir/core/tfcore"
data="$top_srcdir/tests/data/comm-nccl"
tmp=$(mktemp -d /tmp/tfcore-nccl-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
TFCORE_LOG=debug
export TFCORE_LOG
# Open MPI refuses root unless told; harmless otherwise
OMPI_ALLOW_RUN_AS_ROOT=1
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM

ok() { pass=$((pass + 1)); }
bad() {
    fail=$((fail + 1))
    echo "FAIL: $*"
}

# expect CODE PATTERN CMD...: CMD exits CODE (any non-zero for "nz") and its
# output (stdout and stderr) matches every line of PATTERN (grep -E each)
expect() {
    code=$1 patterns=$2
    shift 2
    out=$("$@" 2>&1)
    rc=$?
    good=yes
    if [ "$code" = nz ]; then [ "$rc" -ne 0 ] || good=no; else [ "$rc" -eq "$code" ] || good=no; fi
    printf '%s\n' "$patterns" >"$tmp/patterns"
    while IFS= read -r p; do
        printf '%s\n' "$out" | grep -Eq -- "$p" || good=no
    done <"$tmp/patterns"
    if [ $good = yes ]; then ok; else
        bad "$* -> exit $rc (want $code), output:"
        printf '%s\n' "$out" | sed 's/^/    /' | head -30
        echo "    (wanted every line of: $patterns)"
    fi
}

# --- it was built and loads -------------------------------------------------------
if [ -f "$so" ]; then ok; else bad "$so was not built"; fi

# --- can it run here: the probe and `tfcore plugins` ------------------------------
if "$drv" probe "$so" >"$tmp/probe" 2>&1; then gpu=yes; else gpu=no; fi
if [ $gpu = yes ]; then
    expect 0 "^usable$" "$drv" probe "$so"
    expect 0 "comm +nccl +1\.0\.0" "$tfcore" plugins
else
    expect 1 "^unusable: no CUDA device: ." "$drv" probe "$so"
    expect 0 "comm +nccl +1\.0\.0
cannot run here: no CUDA device: ." "$tfcore" plugins
    expect 0 '"name": "nccl"' "$tfcore" plugins --json
fi

# --- check_config: the plugin's own keys --------------------------------------------
cc() { "$drv" check-config "$so" "$data/$1"; }
expect 0 "^ok$" cc good.cfg
expect 0 "^ok$" cc defaults.cfg
expect 3 "bad_bootstrap\.cfg:5: comm\.bootstrap must be one of auto, launcher, mpi, file; got 'tcp'" cc bad_bootstrap.cfg
expect 3 "file_without_path\.cfg:5: comm\.bootstrap = \"file\" needs comm\.bootstrap_file" cc file_without_path.cfg
expect 3 "path_with_launcher\.cfg:6: comm\.bootstrap_file is only used with bootstrap = \"file\" or \"auto\", not \"launcher\"" cc path_with_launcher.cfg
expect 3 "token_with_launcher\.cfg:6: comm\.bootstrap_token is only used with" cc token_with_launcher.cfg
expect 3 "bad_token\.cfg:6: comm\.bootstrap_token must be 1 to 128 printable characters without spaces" cc bad_token.cfg
expect 3 "empty_path\.cfg:5: comm\.bootstrap_file is empty" cc empty_path.cfg
expect 3 "timeout_zero\.cfg:5: comm\.timeout_s must be in \[0\.1, 604800\], got 0" cc timeout_zero.cfg
expect 3 "boot_timeout_string\.cfg:5: comm\.bootstrap_timeout_s must be a number" cc boot_timeout_string.cfg
expect 3 "reduce_bf16\.cfg:5: comm\.reduce_dtype must be \"f32\", got \"bf16\"" cc reduce_bf16.cfg
expect 3 "typo\.cfg:5: unknown key 'comm\.bootstrp' \(did you mean 'bootstrap'\?\)" cc typo.cfg
# libmpi is never linked (no NEEDED entry): built with Open MPI, the plugin
# opens it when bootstrap "mpi" is chosen, so it loads without Open MPI
if readelf -d "$so" | grep NEEDED | grep -q libmpi; then
    bad "$so links libmpi: $(readelf -d "$so" | grep NEEDED | grep libmpi)"
else ok; fi
if grep -aq 'libmpi\.so\.40' "$so"; then mpi=yes; else mpi=no; fi
printf 'comm = {\n  plugin = "nccl";\n  bootstrap = "mpi";\n};\n' >"$tmp/mpi.cfg"
if [ $mpi = yes ]; then
    expect 0 "^ok$" "$drv" check-config "$so" "$tmp/mpi.cfg"
else
    expect 3 "mpi.cfg:3: comm\.bootstrap = \"mpi\" but this comm-nccl was built without Open MPI" \
        "$drv" check-config "$so" "$tmp/mpi.cfg"
fi
# Where Open MPI is absent (its libmpi hidden in a private mount namespace):
# the plugin still loads and checks its config, and bootstrap "mpi" says in
# one line that it needs Open MPI
libmpi=$(ldconfig -p 2>/dev/null | sed -n 's/^[[:space:]]*libmpi\.so\.40 .* => //p' | head -n 1)
if [ $mpi = yes ] && [ -n "$libmpi" ] && unshare -m true 2>/dev/null; then
    hide="mount --bind /dev/null \"\$(readlink -f '$libmpi')\" &&"
    expect 0 "^ok$" unshare -m sh -c "$hide exec \"\$0\" \"\$@\"" \
        "$drv" check-config "$so" "$tmp/mpi.cfg"
    expect nz "rank 1: bootstrap \"mpi\" needs Open MPI, and libmpi\.so\.40 cannot be loaded \(.*\); install Open MPI or use bootstrap = \"file\"" \
        unshare -m sh -c "$hide exec \"\$0\" \"\$@\"" \
        env OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 \
        "$drv" run "$so" --world 2 --launch external --rank 1 -o comm.bootstrap=mpi
else
    echo "SKIP: comm-nccl without Open MPI: needs Open MPI's libmpi.so.40 to hide and unshare -m (root)"
fi

# --- init up to the GPU, with a fake backend (native streams, no device) -----------
run() { "$drv" run "$so" "$@"; }
# where a rank stops once it has the id: no driver, the fake's missing
# native stream, or a machine with fewer GPUs than ranks
setup_fail='cudaGetDeviceCount failed: |gave no native CUDA stream|local rank [0-9]+ needs CUDA device'

if [ -f "$cpu_so" ]; then
    expect 3 "rank 0: error: comm-nccl needs a CUDA backend \(backend \".*\" has no native streams\)" \
        run --backend "$cpu_so"
fi

# launcher: rank 0 makes the id and publishes it in the shared region; both
# ranks have it before their device setup
expect 1 "rank 1: has the ncclUniqueId \(bootstrap launcher\)
rank 0: has the ncclUniqueId \(bootstrap launcher\)
rank 1: error: .*($setup_fail|rank 0 failed)" run --world 2
# rank 0 never comes: the others time out, naming what they waited for
expect 1 "rank 1: error: comm-nccl: rank 1: timed out after 0\.5 s waiting for rank 0's ncclUniqueId \(bootstrap launcher; comm.bootstrap_timeout_s\)" \
    run --world 2 --ranks 1 -o comm.bootstrap_timeout_s=0.5
# rank 0 cannot make an id: every other rank stops at once with its reason
start=$(date +%s)
expect 1 "rank 2: error: comm-nccl: rank 2: init stopped: rank 0 failed: comm-nccl: rank 0: ncclGetUniqueId: 
rank 1: error: comm-nccl: rank 1: init stopped: rank 0 failed:" \
    env NCCL_SOCKET_IFNAME=no-such-interface0 "$drv" run "$so" --world 3 -o comm.bootstrap_timeout_s=60
if [ $(($(date +%s) - start)) -lt 30 ]; then ok; else bad "a failed rank 0 did not stop the others at once"; fi
# launcher asked for, but no shared region (mpirun/srun)
expect 3 "comm\.bootstrap = \"launcher\" but this process was not started by tfcore's process launcher" \
    run --world 2 --launch external --rank 1 -o comm.bootstrap=launcher
# auto with neither launcher, mpirun nor a file
expect 3 "rank 1: no way to reach the other ranks: not started by tfcore's process launcher nor by Open MPI's mpirun" \
    env -u OMPI_COMM_WORLD_SIZE "$drv" run "$so" --world 2 --launch external --rank 1

# file: rank 0 sets up its GPU before writing the id; when that fails it
# writes its failure, and the others stop at once
boot="$tmp/boot"
expect 1 "rank 0: error: .*($setup_fail)
rank 1: error: comm-nccl: rank 1: init stopped: rank 0 failed: comm-nccl: rank 0: .*($setup_fail)
rank 2: error: comm-nccl: rank 2: init stopped: rank 0 failed: " \
    run --world 3 --launch fork-noshared -o comm.bootstrap=file -o "comm.bootstrap_file=$boot" \
    -o comm.bootstrap_token=t1 -o comm.bootstrap_timeout_s=60
if grep -Eq "^failed comm-nccl: rank 0: .*($setup_fail)" "$boot" 2>/dev/null; then ok; else bad "no failure file from rank 0"; fi
# a reader takes the id from the file with its token (from Slurm here)
zeros=$(printf '%0256d' 0)
printf 'tfcore-nccl-bootstrap 1\ntoken slurm-77.3\nworld_size 2\nid %s\n' "$zeros" >"$boot"
expect 1 "rank 1: read the ncclUniqueId from .*boot \(token slurm-77\.3\)
rank 1: has the ncclUniqueId \(bootstrap file\)
rank 1: error: .*($setup_fail)" \
    env SLURM_JOB_ID=77 SLURM_STEP_ID=3 "$drv" run "$so" --world 2 --launch external --rank 1 \
    -o "comm.bootstrap_file=$boot" -o comm.bootstrap_timeout_s=5
# a file from another run (another token) is never used
expect 1 "timed out after 1 s waiting for rank 0 to write .*boot with token new \(the file there has token slurm-77\.3: left by another run\?\)" \
    run --world 2 --launch external --rank 1 -o "comm.bootstrap_file=$boot" \
    -o comm.bootstrap_token=new -o comm.bootstrap_timeout_s=1
expect 1 "timed out after 0\.5 s waiting for rank 0 to write .*none with token x \(no such file\)" \
    run --world 2 --launch external --rank 1 -o "comm.bootstrap_file=$tmp/none" \
    -o comm.bootstrap_token=x -o comm.bootstrap_timeout_s=0.5
expect 1 "was written for world_size 2, but this rank runs with world_size 3" \
    run --world 3 --launch external --rank 1 -o "comm.bootstrap_file=$boot" \
    -o comm.bootstrap_token=slurm-77.3 -o comm.bootstrap_timeout_s=1
printf 'hello\n' >"$tmp/junk"
expect 5 "junk is not a comm-nccl bootstrap file: line 1 is not \"tfcore-nccl-bootstrap 1\"" \
    run --world 2 --launch external --rank 1 -o "comm.bootstrap_file=$tmp/junk" -o comm.bootstrap_token=x
printf 'tfcore-nccl-bootstrap 1\ntoken x\nworld_size 2\nid 12\n' >"$tmp/junk"
expect 5 "line 4 is not \"id <256 hex digits>\" nor \"failed <message>\"" \
    run --world 2 --launch external --rank 1 -o "comm.bootstrap_file=$tmp/junk" -o comm.bootstrap_token=x
expect 3 "the file bootstrap needs a job token" \
    env -u SLURM_JOB_ID -u PBS_JOBID -u LSB_JOBID -u FLUX_JOB_ID "$drv" run "$so" --world 2 \
    --launch external --rank 1 -o "comm.bootstrap_file=$boot"

# mpi: the plugin is dlopen()ed RTLD_LOCAL as the core does; MPI_Init must
# still load Open MPI's components, then MPI_Bcast hands the id over
if [ $mpi = yes ] && command -v mpirun >/dev/null 2>&1; then
    expect nz "rank 1: has the ncclUniqueId \(bootstrap mpi\)
rank 0: has the ncclUniqueId \(bootstrap mpi\)
rank 1: error: .*($setup_fail|rank 0 failed)" \
        mpirun --oversubscribe -np 2 "$drv" run "$so" --world 2 --launch external
    expect nz "MPI says this is rank [01] of 2, tfcore says rank [01] of 3 \(mpirun -np must equal comm\.world_size\)" \
        mpirun --oversubscribe -np 2 "$drv" run "$so" --world 3 --launch external -o comm.bootstrap=mpi
else
    echo "SKIP: comm-nccl built without MPI or no mpirun (mpi bootstrap)"
fi

# --- with a GPU: the real thing -----------------------------------------------------
if [ $gpu = no ]; then
    # the probe's own line: "unusable: no CUDA device: ..." or why it did not load
    gpu_part_unavailable "GPU part (world size 1 through each bootstrap, all-reduce values): comm-nccl probe: $(tail -n 1 "$tmp/probe")" \
        || bad "the GPU part did not run"
elif [ ! -f "$cuda_so" ]; then
    gpu_part_unavailable "backend-cuda was not built (GPU part)" || bad "the GPU part did not run"
else
    ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    [ "$ngpu" -ge 1 ] || ngpu=1
    [ "$ngpu" -le 8 ] || ngpu=8
    ops_ok="ok: 3 steps x 3 AVG buckets, f64 sum, 5 broadcasts, reduce, 3 barriers"
    expect 0 "rank 0: $ops_ok" run --world 1 --backend "$cuda_so" --ops
    gboot="$tmp/gpu-boot"
    expect 0 "rank 0: $ops_ok" run --world 1 --launch external --backend "$cuda_so" --ops \
        -o comm.bootstrap=file -o "comm.bootstrap_file=$gboot" -o "comm.bootstrap_token=gpu-$$"
    if [ ! -e "$gboot" ]; then ok; else bad "rank 0 left the bootstrap file $gboot"; fi
    if [ $mpi = yes ] && command -v mpirun >/dev/null 2>&1; then
        expect 0 "rank 0: $ops_ok" mpirun -np 1 "$drv" run "$so" --world 1 --launch external \
            --backend "$cuda_so" --ops -o comm.bootstrap=mpi
    fi
    expect 0 "rank 0: ok: barrier after the abort: .*the communicator was aborted: driver injected failure" \
        run --world 1 --backend "$cuda_so" --abort-rank 0
    # through the core's process launcher: `tfcore train` with comm nccl ends
    # with the parameters of a run without comm (same global batch)
    train_cfg() { # NAME PER_DEVICE COMM_SECTION
        cat >"$tmp/$1.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          max_position_embeddings = 64; hidden_dropout_prob = 0.0; attention_probs_dropout_prob = 0.0; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 32;
         num_examples = 96; eval_examples = 0; learnable = true; };
backend = { plugin = "cuda"; };
training = { output_dir = "$tmp/$1"; max_steps = 3; per_device_train_batch_size = $2;
             gradient_accumulation_steps = 1; learning_rate = 5e-5; warmup_steps = 0;
             weight_decay = 0.01; logging_steps = 1; eval_strategy = "no"; save_strategy = "no";
             seed = 11; };
$3
CFG
        "$tfcore" -c "$tmp/$1.cfg" >"$tmp/$1.out" 2>&1
    }
    diff_tool="$top_builddir/tests/params_diff"
    if train_cfg single 8 "" && train_cfg ddp1 8 'comm = { plugin = "nccl"; world_size = 1; };'; then
        ok
        expect 0 "." "$diff_tool" "$tmp/single/model.safetensors" "$tmp/ddp1/model.safetensors" 1e-5
    else
        bad "tfcore train with comm nccl, world size 1:"; tail -n 20 "$tmp/single.out" "$tmp/ddp1.out"
    fi
    if [ "$ngpu" -ge 2 ]; then
        if train_cfg ddp2 4 'comm = { plugin = "nccl"; world_size = 2; bucket_mb = 0.05; };'; then
            ok
            expect 0 "." "$diff_tool" "$tmp/single/model.safetensors" "$tmp/ddp2/model.safetensors" 1e-4
        else
            bad "tfcore train with comm nccl, world size 2:"; tail -n 20 "$tmp/ddp2.out"
        fi
        expect 0 "rank $((ngpu - 1)): $ops_ok" run --world "$ngpu" --backend "$cuda_so" --ops
        expect 0 "rank 1: $ops_ok" run --world 2 --launch fork-noshared --backend "$cuda_so" --ops \
            -o comm.bootstrap=file -o "comm.bootstrap_file=$gboot" -o "comm.bootstrap_token=gpu2-$$"
        expect 0 "rank 0: ok: barrier after the abort: .*rank 1 failed: driver injected failure" \
            run --world 2 --backend "$cuda_so" --abort-rank 1
        if [ $mpi = yes ] && command -v mpirun >/dev/null 2>&1; then
            expect 0 "rank 1: $ops_ok" mpirun --oversubscribe -np 2 "$drv" run "$so" --world 2 \
                --launch external --backend "$cuda_so" --ops -o comm.bootstrap=mpi
        fi
    else
        echo "SKIP: one CUDA device: multi-GPU runs (world size 2+) not run"
    fi
fi

echo "test_comm_nccl: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
