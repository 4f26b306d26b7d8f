# mpi_test_harness.sh — what the tests that train bert-tiny with comm mpi
# across ranks and hosts share (tests/test_multihost.sh, and through
# tests/slurm_harness.sh the Slurm tests); sourced, POSIX sh, after
# `: "${top_builddir:?}" "${top_srcdir:?}"`:
#
#   . "$top_srcdir/tests/mpi_test_harness.sh"  # tfcore, diff_tool (absolute: srun
#                                              # and other hosts run them); the
#                                              # sanitizer and Open MPI settings
#   mpi_test_need_mpi NAME                     # exit 77 without comm mpi
#   mpi_test_hosts NAME N [WHAT]               # N hosts (tests/netns_hosts.sh), or
#                                              # "NAME: SKIP: WHAT" and exit 77 after
#                                              # taking down what was made
#   cfg NAME PER_DEVICE [COMM_SECTION]         # $tmp/NAME.cfg (bert-tiny, no dropout;
#                                              # STEPS, SAVE, SAVE_STEPS: max_steps (3),
#                                              # save_strategy ("no"), save_steps (1))
#   ok / bad WHAT / same_params A B
#   mpi_test_end NAME                          # "NAME: N passed, N failed", status
#
# The test sets tmp, the folder the configs and runs go to (every host sees it).

tfcore="$(cd "$top_builddir" && pwd)/core/tfcore"
diff_tool="$(cd "$top_builddir" && pwd)/tests/params_diff"
LSAN_OPTIONS="suppressions=$top_srcdir/tests/data/comm-mpi/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
OMPI_MCA_mca_base_component_disable_dlclose=1
export LSAN_OPTIONS ASAN_OPTIONS OMPI_MCA_mca_base_component_disable_dlclose
pass=0
fail=0

mpi_test_need_mpi() { # NAME
    if ! "$tfcore" plugins 2>/dev/null | grep -Eq "^ *comm +mpi "; then
        echo "$1: SKIP: comm plugin mpi not built (no Open MPI)"
        exit 77
    fi
}

mpi_test_hosts() { # NAME N [WHAT]
    . "$top_srcdir/tests/netns_hosts.sh"
    if ! netns_hosts_up "$2"; then # it said why
        echo "$1: SKIP: ${3:-network namespaces cannot be made here}"
        netns_hosts_down
        exit 77
    fi
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
             save_steps = ${SAVE_STEPS:-1}; seed = 11; };
${3:-}
CFG
}

same_params() { # A B: B ended with A's parameters (1e-5 relative)
    if out=$("$diff_tool" "$tmp/$1/model.safetensors" "$tmp/$2/model.safetensors" 1e-5); then
        ok
        echo "ok: $2 has $1's parameters ($out)"
    else bad "$2 differs from $1: $out"; fi
}

mpi_test_end() { # NAME
    echo "$1: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
