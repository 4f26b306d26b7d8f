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
. "$top_srcdir/tests/slurm_harness.sh"
mpi_test_need_mpi test_slurm_nodes
# the trees every node must see, wherever they are (a clone in /tmp too)
SLURM_SHARED_PATHS="$(cd "$top_srcdir" && pwd) $(cd "$top_builddir" && pwd)"
slurm_test_cluster test_slurm_nodes 2
# TCP on the test subnet between the nodes (the ranks inherit it through srun)
OMPI_MCA_btl=tcp,self
OMPI_MCA_btl_tcp_if_include=$NETNS_SUBNET.0/24
OMPI_MCA_oob_tcp_if_include=$NETNS_SUBNET.0/24
export OMPI_MCA_btl OMPI_MCA_btl_tcp_if_include OMPI_MCA_oob_tcp_if_include
mpi2='comm = { plugin = "mpi"; world_size = 2; mpirun_start_timeout = 20.0; };'

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

mpi_test_end test_slurm_nodes
