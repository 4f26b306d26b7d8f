# slurm_cluster.sh — a one-node Slurm cluster on this machine, for tests that
# run tfcore the way cluster users do (sourced, POSIX sh; needs root and
# Debian's slurmctld, slurmd, slurm-client and munge: scripts/install-deps.sh --slurm).
#
#   . "$top_srcdir/tests/slurm_cluster.sh"
#   slurm_cluster_up || exit 77    # prints why when it cannot
#   srun -n 2 ...                  # SLURM_CONF points at the cluster
#   (teardown runs on exit, on INT/TERM/HUP, and from a watcher if the test
#   itself is SIGKILLed)
#
# Everything lives in a temporary folder (SLURM_DIR): the munge key (a copy
# of nothing: a fresh random one), munged's socket, slurm.conf, the state and
# spool folders and the daemons' logs. One node named after this machine with
# its CPUs and memory; SlurmUser root; the controller, slurmd and srun ports
# are picked free at random from 20000-59999, so a second cluster (another
# test, another user) never clashes. Nothing listens beyond loopback.

slurm_cluster_down() {
    [ -n "${SLURM_DIR:-}" ] || return 0
    if [ -n "${SLURM_CONF:-}" ] && [ -f "$SLURM_CONF" ]; then
        # jobs first, so their steps end before slurmd does
        timeout 10 scancel --full --quiet --user=root 2>/dev/null
    fi
    for f in slurmd slurmctld munged; do
        [ -f "$SLURM_DIR/$f.pid" ] && kill "$(cat "$SLURM_DIR/$f.pid")" 2>/dev/null
    done
    sleep 1
    for f in slurmd slurmctld munged; do
        [ -f "$SLURM_DIR/$f.pid" ] && kill -9 "$(cat "$SLURM_DIR/$f.pid")" 2>/dev/null
    done
    [ -n "${SLURM_WATCHER:-}" ] && kill "$SLURM_WATCHER" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$SLURM_DIR"
    SLURM_DIR=
}

# a free TCP port on loopback in 20000-59999, N consecutive ones free
slurm_free_ports() {
    python3 - "$1" <<'PY'
import random, socket, sys
n = int(sys.argv[1])
for _ in range(200):
    base = random.randrange(20000, 60000 - n)
    socks = []
    try:
        for p in range(base, base + n):
            s = socket.socket()
            s.bind(("0.0.0.0", p))
            socks.append(s)
    except OSError:
        continue
    finally:
        for s in socks: s.close()
    print(base)
    sys.exit(0)
sys.exit(1)
PY
}

# slurm_cluster_up: start munged, slurmctld and slurmd; wait until the node is idle
slurm_cluster_up() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "slurm_cluster: not root (slurmd runs jobs as their users)"
        return 1
    fi
    for b in munged slurmctld slurmd srun sbatch sinfo scancel; do
        p=$(command -v $b 2>/dev/null || ls /usr/sbin/$b 2>/dev/null)
        if [ -z "$p" ]; then
            echo "slurm_cluster: $b not installed (scripts/install-deps.sh --slurm installs munge, slurmctld, slurmd, slurm-client)"
            return 1
        fi
    done
    SLURM_DIR=$(mktemp -d /tmp/tfcore-slurm-XXXXXX) || return 1
    trap 'slurm_cluster_down' EXIT
    trap 'slurm_cluster_down; exit 130' INT
    trap 'slurm_cluster_down; exit 143' TERM
    trap 'slurm_cluster_down; exit 129' HUP
    owner=$$
    setsid sh -c "while kill -0 $owner 2>/dev/null; do sleep 2; done
        for f in slurmd slurmctld munged; do [ -f '$SLURM_DIR'/\$f.pid ] && kill -9 \$(cat '$SLURM_DIR'/\$f.pid); done
        rm -rf '$SLURM_DIR'" >/dev/null 2>&1 </dev/null &
    SLURM_WATCHER=$!
    d=$SLURM_DIR
    mkdir -p "$d/state" "$d/spool" "$d/munge" && chmod 700 "$d/munge"
    # munge: a fresh key, its own socket
    dd if=/dev/urandom of="$d/munge/munge.key" bs=1024 count=1 2>/dev/null && chmod 400 "$d/munge/munge.key"
    /usr/sbin/munged --force --socket="$d/munge/socket" --key-file="$d/munge/munge.key" \
        --pid-file="$d/munged.pid" --log-file="$d/munged.log" --seed-file="$d/munge/seed" 2>"$d/munged.err" ||
        { echo "slurm_cluster: munged did not start: $(tail -n 2 "$d/munged.err" "$d/munged.log" 2>/dev/null | tr '\n' ' ')"; return 1; }
    port=$(slurm_free_ports 2) || { echo "slurm_cluster: no free ports"; return 1; }
    srunport=$(slurm_free_ports 20) || { echo "slurm_cluster: no free ports for srun"; return 1; }
    node=$(hostname -s)
    cpus=$(nproc)
    mem=$(awk '/^MemTotal/ {printf "%d", $2 / 1024 / 2}' /proc/meminfo) # half: the machine is shared
    cat >"$d/slurm.conf" <<CONF
ClusterName=tfcoretest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SrunPortRange=$srunport-$((srunport + 19))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge/socket
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool/%n
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
KillWait=10
InactiveLimit=0
MinJobAge=300
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
    SLURM_CONF="$d/slurm.conf"
    export SLURM_CONF
    /usr/sbin/slurmctld -i >"$d/slurmctld.err" 2>&1 ||
        { echo "slurm_cluster: slurmctld did not start: $(tail -n 3 "$d/slurmctld.log" "$d/slurmctld.err" 2>/dev/null | tr '\n' ' ')"; return 1; }
    /usr/sbin/slurmd -N "$node" >"$d/slurmd.err" 2>&1 ||
        { echo "slurm_cluster: slurmd did not start: $(tail -n 3 "$d/slurmd.log" "$d/slurmd.err" 2>/dev/null | tr '\n' ' ')"; return 1; }
    i=0
    while [ $i -lt 60 ]; do
        state=$(timeout 5 sinfo -h -N -o %t 2>/dev/null)
        [ "$state" = idle ] && break
        sleep 0.5
        i=$((i + 1))
    done
    if [ "$state" != idle ]; then
        echo "slurm_cluster: node $node is '${state:-unknown}', not idle, after 30 s: $(tail -n 3 "$d/slurmd.log" | tr '\n' ' ')"
        return 1
    fi
    SLURM_NODE=$node
    SLURM_CPUS=$cpus
    return 0
}
