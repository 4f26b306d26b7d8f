# slurm_harness.sh — what the Slurm tests (tests/test_slurm.sh,
# tests/test_slurm_nodes.sh) share; sourced, POSIX sh, after
# `: "${top_builddir:?}" "${top_srcdir:?}"`:
#
#   . "$top_srcdir/tests/slurm_harness.sh"     # tests/mpi_test_harness.sh (tfcore,
#                                              # diff_tool, the sanitizer and Open MPI
#                                              # settings, mpi_test_need_mpi, cfg, ok /
#                                              # bad / same_params, mpi_test_end); conf_dir
#   slurm_test_cluster NAME [NODES]            # the cluster (tests/slurm_cluster.sh;
#                                              # NODES > 1: tests/netns_hosts.sh's
#                                              # hosts), or exit 77 after taking
#                                              # down what was made; tmp = the work
#                                              # folder every node sees
#   wait_job ID LIMIT_S
#
# The cluster is taken down on exit and on INT/TERM/HUP (slurm_cluster.sh's
# traps), its work folder with it.

. "$top_srcdir/tests/mpi_test_harness.sh"
conf_dir=$(cd "$top_srcdir/conf/slurm" && pwd)

slurm_test_cluster() { # NAME [NODES]
    . "$top_srcdir/tests/slurm_cluster.sh"
    if [ "${2:-1}" -gt 1 ]; then
        mpi_test_hosts "$1" "$2" "no $2-node Slurm cluster could be made here"
        if ! slurm_cluster_up "$2"; then # it said why
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
