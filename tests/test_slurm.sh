#!/bin/sh
# tfcore under a real Slurm (tests/slurm_cluster.sh: munged, slurmctld and
# slurmd on this machine, one node), run the way cluster users do:
#  - `srun --mpi=pmix -n 2 tfcore train -c <comm mpi x2>`: every task runs as
#    its rank (no mpirun started), and the job ends with one worker's
#    parameters (1e-5 relative, dropout off);
#  - `srun --mpi=none -n 2`: one line per rank saying to use --mpi=pmix
#    (without it Open MPI's MPI_Init aborts the tasks);
#  - sbatch of conf/slurm/srun-tasks.sbatch (1 node x 2 tasks): rank-prefixed
#    lines in the job's file, and one file per rank with RANK_OUTPUT=1;
#  - sbatch of conf/slurm/nodes.sbatch (on one node: 1 node x 2 tasks);
#  - sbatch of conf/slurm/train.sbatch (tfcore once, mpirun inside the
#    allocation);
#  - every conf/slurm/*.sbatch passes bash -n and shellcheck (gpu-nccl.sbatch
#    needs GPUs: only checked so);
#  - scancel of a running srun job: every rank gets SIGTERM, rank 0 saves a
#    checkpoint and the ranks exit with 75.
# Skips (77) without the mpi plugin, or where the Slurm daemons are not
# installed or cannot start (the fixture says which and why).
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
. "$top_srcdir/tests/slurm_harness.sh"
OMPI_MCA_btl="self,vader" # one node: no network transports probed
OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_btl OMPI_MCA_btl_vader_single_copy_mechanism

# the job scripts parse (and pass shellcheck where it is installed)
for f in "$top_srcdir"/conf/slurm/*.sbatch; do
    bash -n "$f" || { echo "FAIL: $f: bash -n"; exit 1; }
    if command -v shellcheck >/dev/null 2>&1; then
        shellcheck "$f" || { echo "FAIL: $f: shellcheck"; exit 1; }
    fi
done
mpi_test_need_mpi test_slurm
slurm_test_cluster test_slurm
mpi2='comm = { plugin = "mpi"; world_size = 2; };'

cfg base 16
if timeout 300 "$tfcore" -c "$tmp/base.cfg" >"$tmp/base.out" 2>&1; then ok; else
    bad "one worker: exit $?"; tail -n 20 "$tmp/base.out"; fi

# --- srun --mpi=pmix: the ranks are srun's tasks ------------------------------------
cfg srun2 8 "$mpi2"
if timeout 300 srun --mpi=pmix -n 2 "$tfcore" train -c "$tmp/srun2.cfg" >"$tmp/srun2.out" 2>&1; then
    ok
    same_params base srun2
    if grep -q "under mpirun" "$tmp/srun2.out"; then bad "srun2: tfcore started mpirun inside the srun step"; else ok; fi
    grep -q '^\[rank 1\] ' "$tmp/srun2.out" && ok || bad "srun2: no [rank 1] lines"
else bad "srun --mpi=pmix -n 2: exit $?"; tail -n 20 "$tmp/srun2.out"; fi

# --- srun --mpi=none: no wiring, one line per rank -----------------------------------
cfg none2 8 "$mpi2"
timeout 120 srun --mpi=none -n 2 "$tfcore" train -c "$tmp/none2.cfg" >"$tmp/none2.out" 2>&1
rc=$?
want='started as rank 1 of 2 by `srun --mpi=none`, which gives the ranks no PMIx'
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -qF "$want" "$tmp/none2.out" && ! grep -q MPI_Init "$tmp/none2.out"; then
    ok
    echo "ok: srun --mpi=none: $(grep -m1 -F "$want" "$tmp/none2.out")"
else bad "srun --mpi=none: exit $rc, wanted '$want'"; tail -n 10 "$tmp/none2.out"; fi

# --- sbatch conf/slurm/srun-tasks.sbatch: 1 node x 2 tasks -------------------------
cfg batch2 8 "$mpi2"
cd "$tmp" || exit 1
job=$(CONFIG="$tmp/batch2.cfg" TFCORE="$tfcore" sbatch --parsable "$conf_dir/srun-tasks.sbatch")
end=$(wait_job "$job" 300)
if [ "$end" = COMPLETED ] && [ -f "$tmp/tfcore-$job.out" ] && grep -q '^\[rank 1\] ' "$tmp/tfcore-$job.out"; then
    ok
    same_params base batch2
else bad "sbatch srun-tasks.sbatch: job $job $end"; tail -n 15 "$tmp/tfcore-$job.out"; fi
cfg batch2r 8 "$mpi2"
job=$(RANK_OUTPUT=1 CONFIG="$tmp/batch2r.cfg" TFCORE="$tfcore" sbatch --parsable "$conf_dir/srun-tasks.sbatch")
end=$(wait_job "$job" 300)
if [ "$end" = COMPLETED ] && grep -q "train_loss" "$tmp/tfcore-$job-rank0.out" &&
    grep -q '^\[rank 1\] ' "$tmp/tfcore-$job-rank1.out" && ! grep -q '^\[rank 1\] ' "$tmp/tfcore-$job-rank0.out"; then
    ok
    echo "ok: RANK_OUTPUT=1: tfcore-$job-rank0.out and tfcore-$job-rank1.out"
else bad "sbatch RANK_OUTPUT=1: job $job $end"; tail -n 5 "$tmp"/tfcore-"$job"*; fi

# --- sbatch conf/slurm/nodes.sbatch, its nodes x 1 task squeezed onto this one node ---
cfg nodes2 8 "$mpi2"
job=$(CONFIG="$tmp/nodes2.cfg" TFCORE="$tfcore" sbatch --parsable --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 \
    "$conf_dir/nodes.sbatch")
end=$(wait_job "$job" 300)
if [ "$end" = COMPLETED ] && grep -q '^\[rank 1\] ' "$tmp/tfcore-nodes-$job.out"; then
    ok
    same_params base nodes2
else bad "sbatch nodes.sbatch: job $job $end"; tail -n 15 "$tmp/tfcore-nodes-$job.out"; fi

# --- sbatch conf/slurm/train.sbatch: tfcore once, mpirun inside the allocation -------
cfg trainb 8 "$mpi2"
job=$(CONFIG="$tmp/trainb.cfg" TFCORE="$tfcore" sbatch --parsable "$conf_dir/train.sbatch")
end=$(wait_job "$job" 300)
if [ "$end" = COMPLETED ] && grep -q "running 2 ranks under mpirun" "$tmp/tfcore-train-$job.out"; then
    ok
    same_params base trainb
else bad "sbatch train.sbatch: job $job $end"; tail -n 15 "$tmp/tfcore-train-$job.out"; fi

# --- scancel: a preemption ----------------------------------------------------------
STEPS=100000 SAVE=steps cfg cancel 8 "$mpi2"
sed -i 's/save_steps = 1;/save_steps = 100000;/' "$tmp/cancel.cfg"
job=$(CONFIG="$tmp/cancel.cfg" TFCORE="$tfcore" sbatch --parsable "$conf_dir/srun-tasks.sbatch")
i=0
while [ $i -lt 600 ] && ! grep -q "'loss'" "$tmp/tfcore-$job.out" 2>/dev/null; do sleep 0.2; i=$((i + 1)); done
scancel "$job"
end=$(wait_job "$job" 60)
log="$tmp/tfcore-$job.out"
if grep -q "checkpoint" "$log" && ls -d "$tmp/cancel/checkpoint-"* >/dev/null 2>&1 &&
    grep -Eq "exit code 75|Exited with exit code 75" "$log"; then
    ok
    echo "ok: scancel: job $job $end, rank 0 saved $(ls -d "$tmp/cancel/checkpoint-"* | xargs -n1 basename), ranks exited 75"
else bad "scancel: job $job $end"; tail -n 15 "$log"; fi

mpi_test_end test_slurm
