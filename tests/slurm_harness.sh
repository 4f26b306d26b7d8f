# slurm_harness.sh — what the Slurm tests (tests/test_slurm.sh,
# tests/test_slurm_nodes.sh) share; sourced, POSIX sh, after
# `: "${top_builddir:?}" "${top_srcdir:?}"`:
#
#   . "$top_srcdir/tests/slurm_harness.sh"     # tfcore, diff_tool, conf_dir; the
#                                              # sanitizer and Open MPI settings
#   slurm_test_need_mpi NAME                   # exit 77 without comm mpi
#   slurm_test_cluster NAME [NODES]            # the cluster (tests/slurm_cluster.sh;
#                                              # NODES > 1: tests/netns_hosts.sh's
#                                              # hosts), or exit 77 after taking
#                                              # down what was made; tmp = the work
#                                              # folder every node sees
#   cfg NAME PER_DEVICE [COMM_SECTION]         # $tmp/NAME.cfg (bert-tiny, no dropout;
#                                              # STEPS, SAVE: max_steps, save_strategy)
#   ok / bad WHAT / same_params A B / wait_job ID LIMIT_S
#   slurm_test_end NAME                        # "NAME: N passed, N failed", status
#
# The cluster is taken down on exit and on INT/TERM/HUP (slurm_cluster.sh's
# traps), its work folder with it.

# srun's and tfcore's paths must not depend on where the test runs
tfcore="$(cd "$top_builddir" && pwd)/core/tfcore"
diff_tool="$(cd "$top_builddir" && pwd)/tests/params_diff"
conf_dir=$(cd "$top_srcdir/conf/slurm" && pwd)
LSAN_OPTIONS="suppressions=$top_srcdir/tests/data/comm-mpi/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
OMPI_MCA_mca_base_component_disable_dlclose=1
export LSAN_OPTIONS ASAN_OPTIONS OMPI_MCA_mca_base_component_disable_dlclose
pass=0
fail=0

slurm_test_need_mpi() { # NAME
    if ! "$tfcore" plugins 2>/dev/null | grep -Eq "^ *comm +mpi "; then
        echo "$1: SKIP: comm plugin mpi not built (no Open MPI)"
        exit 77
    fi
}

slurm_test_cluster() { # NAME [NODES]
    . "$top_srcdir/tests/slurm_cluster.sh"
    if [ "${2:-1}" -gt 1 ]; then
        . "$top_srcdir/tests/netns_hosts.sh"
        if ! netns_hosts_up "$2" || ! slurm_cluster_up "$2"; then # they said why
            echo "$1: SKIP: no $2-node Slurm cluster could be made here"
            slurm_cluster_down
            netns_hosts_down
            exit 77
        fi
    elif ! slurm_cluster_up; then # it said why
        echo "$1: SKIP: no Slurm cluster could be started here"
        slurm_cluster_down
        exit 77
    fi
    tmp=$SLURM_DIR/work # removed with the cluster; every node sees it
    mkdir -p "$tmp"
}

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# cfg NAME PER_DEVICE [COMM_SECTION]: bert-tiny without dropout
cfg() {
    cat >"$tmp/$1.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          max_position_embeddings = 64; hidden_dropout_prob = 0.0; attention_probs_dropout_prob = 0.0; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 32;
         num_examples = 96; eval_examples = 0; learnable = true; };
backend = { plugin = "cpu"; threads = 1; };
training = { output_dir = "$tmp/$1"; max_steps = ${STEPS:-3}; per_device_train_batch_size = $2;
             gradient_accumulation_steps = 1; learning_rate = 5e-5; warmup_steps = 0;
             weight_decay = 0.01; logging_steps = 1; eval_strategy = "no"; save_strategy = "${SAVE:-no}";
             save_steps = 1; seed = 11; };
${3:-}
CFG
}

same_params() { # A B: B ended with A's parameters (1e-5 relative)
    if out=$("$diff_tool" "$tmp/$1/model.safetensors" "$tmp/$2/model.safetensors" 1e-5); then
        ok
        echo "ok: $2 has $1's parameters ($out)"
    else bad "$2 differs from $1: $out"; fi
}

# wait_job ID LIMIT: until Slurm no longer lists the job as pending or
# running; prints its end state (TIMEOUT(state) after LIMIT seconds)
wait_job() {
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

slurm_test_end() { # NAME
    echo "$1: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
