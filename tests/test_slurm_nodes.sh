#!/bin/sh
# tfcore on a two-node Slurm cluster made on this machine: two network
# namespaces as hosts (tests/netns_hosts.sh), a slurmd in each, the second
# with its own PID namespace, /tmp and munged (tests/slurm_cluster.sh);
# srun's and Open MPI's traffic crosses the two IP stacks over TCP.
#  - `srun --mpi=pmix -N 2 -n 2 tfcore train`: one rank per node, one
#    worker's parameters (1e-5 relative, dropout off);
#  - `sbatch -N 2 conf/slurm/train.sbatch`: tfcore once, on the first node,
#    starting mpirun over the allocation: the rank on the other node neither
#    sees the launcher's pid nor its /tmp, and must not need them.
# Skips (77) without the mpi plugin, or where namespaces or the Slurm
# daemons cannot be made (the fixtures say why).
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$(cd "$top_builddir" && pwd)/core/tfcore"
diff_tool="$(cd "$top_builddir" && pwd)/tests/params_diff"
conf_dir=$(cd "$top_srcdir/conf/slurm" && pwd)
LSAN_OPTIONS="suppressions=$top_srcdir/tests/data/comm-mpi/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
OMPI_MCA_mca_base_component_disable_dlclose=1
export LSAN_OPTIONS ASAN_OPTIONS OMPI_MCA_mca_base_component_disable_dlclose

if ! "$tfcore" plugins 2>/dev/null | grep -Eq "^ *comm +mpi "; then
    echo "test_slurm_nodes: SKIP: comm plugin mpi not built (no Open MPI)"
    exit 77
fi
# the trees every node must see, wherever they are (a clone in /tmp too)
SLURM_SHARED_PATHS="$(cd "$top_srcdir" && pwd) $(cd "$top_builddir" && pwd)"
. "$top_srcdir/tests/netns_hosts.sh"
. "$top_srcdir/tests/slurm_cluster.sh"
if ! netns_hosts_up 2 || ! slurm_cluster_up 2; then # they said why
    echo "test_slurm_nodes: SKIP: no two-node Slurm cluster could be made here"
    slurm_cluster_down
    netns_hosts_down
    exit 77
fi
# TCP on the test subnet between the nodes (the ranks inherit it through srun)
OMPI_MCA_btl=tcp,self
OMPI_MCA_btl_tcp_if_include=$NETNS_SUBNET.0/24
OMPI_MCA_oob_tcp_if_include=$NETNS_SUBNET.0/24
export OMPI_MCA_btl OMPI_MCA_btl_tcp_if_include OMPI_MCA_oob_tcp_if_include
tmp=$SLURM_DIR/work # the "network filesystem" both nodes see
mkdir -p "$tmp"
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

cfg() { # NAME PER_DEVICE [COMM_SECTION]
    cat >"$tmp/$1.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          max_position_embeddings = 64; hidden_dropout_prob = 0.0; attention_probs_dropout_prob = 0.0; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 32;
         num_examples = 96; eval_examples = 0; learnable = true; };
backend = { plugin = "cpu"; threads = 1; };
training = { output_dir = "$tmp/$1"; max_steps = 3; per_device_train_batch_size = $2;
             gradient_accumulation_steps = 1; learning_rate = 5e-5; warmup_steps = 0;
             weight_decay = 0.01; logging_steps = 1; eval_strategy = "no"; save_strategy = "no"; seed = 11; };
${3:-}
CFG
}
mpi2='comm = { plugin = "mpi"; world_size = 2; mpirun_start_timeout = 20.0; };'
same_params() { # A B
    if out=$("$diff_tool" "$tmp/$1/model.safetensors" "$tmp/$2/model.safetensors" 1e-5); then
        ok
        echo "ok: $2 has $1's parameters ($out)"
    else bad "$2 differs from $1: $out"; fi
}
wait_job() { # ID LIMIT
    i=0
    while [ $i -lt $(($2 * 2)) ]; do
        st=$($SLURM_ON_NODE0 scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
        case "$st" in PENDING | RUNNING | CONFIGURING | COMPLETING | "") ;; *) echo "$st"; return 0 ;; esac
        sleep 0.5
        i=$((i + 1))
    done
    echo "TIMEOUT($st)"
    return 1
}

cfg base 16
if timeout 300 "$tfcore" -c "$tmp/base.cfg" >"$tmp/base.out" 2>&1; then ok; else
    bad "one worker: exit $?"; tail -n 20 "$tmp/base.out"; fi

# --- srun: one rank per node ---------------------------------------------------------
cfg srun2 8 "$mpi2"
if timeout 300 $SLURM_ON_NODE0 srun --mpi=pmix -N 2 -n 2 --label "$tfcore" train -c "$tmp/srun2.cfg" \
    >"$tmp/srun2.out" 2>&1; then
    ok
    same_params base srun2
else bad "srun --mpi=pmix -N 2 -n 2: exit $?"; tail -n 20 "$tmp/srun2.out"; fi

# --- sbatch train.sbatch over two nodes: mpirun inside the allocation -----------------
cfg trainb 8 "$mpi2"
cd "$tmp" || exit 1
job=$(CONFIG="$tmp/trainb.cfg" TFCORE="$tfcore" $SLURM_ON_NODE0 sbatch --parsable --nodes=2 --ntasks-per-node=1 \
    "$conf_dir/train.sbatch")
end=$(wait_job "$job" 300)
if [ "$end" = COMPLETED ] && grep -q "running 2 ranks under mpirun" "$tmp/tfcore-train-$job.out"; then
    ok
    same_params base trainb
else bad "sbatch -N 2 train.sbatch: job $job $end"; tail -n 15 "$tmp/tfcore-train-$job.out"; fi

echo "test_slurm_nodes: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
