# slurm_cluster.sh — a one-node Slurm cluster on this machine, for tests that
# run tfcore the way cluster users do (sourced, POSIX sh; needs root and
# Debian's slurmctld, slurmd, slurm-client and munge: scripts/install-deps.sh --slurm).
#
#   . "$top_srcdir/tests/slurm_cluster.sh"
#   slurm_cluster_up || exit 77    # prints why when it cannot
#   srun -n 2 ...                  # SLURM_CONF points at the cluster
#
#   . "$top_srcdir/tests/netns_hosts.sh"   # several nodes: one per host
#   netns_hosts_up 2 && slurm_cluster_up 2 || exit 77
#   slurm_on_node0 srun -N 2 -n 2 ...       # the controller is on host 0
#   (teardown runs on exit, on INT/TERM/HUP, and from a watcher if the test
#   itself is SIGKILLed)
#
# Everything lives in a temporary folder (SLURM_DIR): the munge key (a copy
# of nothing: a fresh random one), munged's socket, slurm.conf, the state and
# spool folders and the daemons' logs. One node named after this machine with
# its CPUs and memory; SlurmUser root; the controller, slurmd and srun ports
# are picked free at random from 20000-59999, so a second cluster (another
# test, another user) never clashes. Nothing listens beyond loopback.
#
# With N > 1 nodes (after netns_hosts_up N): node i's slurmd runs in host i's
# network namespace (slurmctld with node 0), so srun's and MPI's traffic
# between nodes crosses separate IP stacks. Nodes 1.. also get what separate
# machines have: their own PID namespace (a pid means nothing on another
# node), their own /tmp, and their own munged (munge refuses a credential
# decoded twice by one munged, and every node decodes each job's). The
# shared folder (SLURM_DIR, outside /tmp) stands in for a cluster's network
# filesystem, and so do the folders listed in SLURM_SHARED_PATHS (the source
# and build trees), which stay visible on every node even when they lie under
# /tmp. Every node claims the machine's CPUs.

slurm_cluster_down() {
    [ -n "${SLURM_DIR:-}" ] || return 0
    if [ -n "${SLURM_CONF:-}" ] && [ -f "$SLURM_CONF" ]; then
        # jobs first, so their steps end before slurmd does
        timeout 10 scancel --full --quiet --user=root 2>/dev/null
    fi
    # the daemons of this machine's PID namespace (the slurmd of nodes 1.. write
    # their own namespace's pids: never read those here)
    for sig in TERM KILL; do
        for f in "$SLURM_DIR"/slurmctld.pid "$SLURM_DIR/slurmd-${SLURM_NODE0:-}.pid" "$SLURM_DIR"/munged-*.pid; do
            [ -f "$f" ] || continue
            p=$(cat "$f")
            [ "${p:-0}" -gt 1 ] 2>/dev/null && kill -$sig "$p" 2>/dev/null
        done
        [ $sig = TERM ] && sleep 1
    done
    [ -n "${SLURM_WATCHER:-}" ] && kill "$SLURM_WATCHER" 2>/dev/null
    # slurmd of nodes 1.. live in the hosts' namespaces: netns_hosts_down ends them
    command -v netns_hosts_down >/dev/null 2>&1 && netns_hosts_down
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

# slurm_on_node0 COMMAND...: run a client command where the controller is
# (SLURM_ON_NODE0 is the same prefix, for `timeout 60 $SLURM_ON_NODE0 srun ...`)
slurm_on_node0() {
    $SLURM_ON_NODE0 "$@"
}

# slurm_cluster_up [N]: start munged, slurmctld and N slurmd (default 1);
# wait until every node is idle
slurm_cluster_up() {
    nodes=${1:-1}
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
    if [ "$nodes" -gt 1 ] && [ "${NETNS_HOSTS:-0}" -lt "$nodes" ]; then
        echo "slurm_cluster: $nodes nodes need netns_hosts_up $nodes first"
        return 1
    fi
    # outside /tmp: nodes 1.. get a /tmp of their own
    SLURM_DIR=$(mktemp -d /var/tmp/tfcore-slurm-XXXXXX) || return 1
    SLURM_NODES=$nodes
    SLURM_ON_NODE0=
    node0=$(hostname -s)
    if [ "$nodes" -gt 1 ]; then
        SLURM_ON_NODE0="nsenter --net=/run/netns/$NETNS_HOST_NS_0"
        node0=n0
    fi
    SLURM_NODE0=$node0
    trap 'slurm_cluster_down' EXIT
    trap 'slurm_cluster_down; exit 130' INT
    trap 'slurm_cluster_down; exit 143' TERM
    trap 'slurm_cluster_down; exit 129' HUP
    owner=$$
    setsid sh -c "while kill -0 $owner 2>/dev/null; do sleep 2; done
        for f in '$SLURM_DIR'/slurmctld.pid '$SLURM_DIR'/slurmd-\$0.pid '$SLURM_DIR'/munged-*.pid; do
            [ -f \$f ] && p=\$(cat \$f) && [ \$p -gt 1 ] && kill -9 \$p; done
        rm -rf '$SLURM_DIR'" "$node0" >/dev/null 2>&1 </dev/null &
    SLURM_WATCHER=$!
    d=$SLURM_DIR
    # node i's private folder: its munged socket and PMIx's client folders;
    # node 0 uses d/node itself, node i's d/node-i is mounted over it there
    mkdir -p "$d/state" "$d/spool" "$d/keys" "$d/node/pmix" && chmod 700 "$d/keys" "$d/node"
    dd if=/dev/urandom of="$d/keys/munge.key" bs=1024 count=1 2>/dev/null && chmod 400 "$d/keys/munge.key"
    i=0
    while [ $i -lt "$nodes" ]; do
        own="$d/node"
        [ $i -gt 0 ] && own="$d/node-$i" && mkdir -p "$own/pmix" "$own/tmp" && chmod 700 "$own" && chmod 1777 "$own/tmp"
        /usr/sbin/munged --force --socket="$own/munge.socket" --key-file="$d/keys/munge.key" \
            --pid-file="$d/munged-$i.pid" --log-file="$d/munged-$i.log" --seed-file="$own/munge.seed" 2>"$d/munged-$i.err" ||
            { echo "slurm_cluster: munged did not start: $(tail -n 2 "$d/munged-$i.err" "$d/munged-$i.log" 2>/dev/null | tr '\n' ' ')"; return 1; }
        i=$((i + 1))
    done
    port=$(slurm_free_ports 2) || { echo "slurm_cluster: no free ports"; return 1; }
    srunport=$(slurm_free_ports 20) || { echo "slurm_cluster: no free ports for srun"; return 1; }
    host=$(hostname -s)
    cpus=$(nproc)
    mem=$(awk -v n="$nodes" '/^MemTotal/ {printf "%d", $2 / 1024 / 2 / n}' /proc/meminfo) # half: the machine is shared
    if [ "$nodes" -gt 1 ]; then
        ctl_addr=$NETNS_HOST_IP_0
        node_lines=
        names=
        i=0
        while [ $i -lt "$nodes" ]; do
            eval "addr=\$NETNS_HOST_IP_$i"
            node_lines="${node_lines}NodeName=n$i NodeAddr=$addr CPUs=$cpus RealMemory=$mem State=UNKNOWN
"
            names="$names${names:+,}n$i"
            i=$((i + 1))
        done
    else
        ctl_addr=127.0.0.1
        node_lines="NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
"
        names=$host
    fi
    cat >"$d/slurm.conf" <<CONF
ClusterName=tfcoretest
SlurmctldHost=$host($ctl_addr)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SrunPortRange=$srunport-$((srunport + 19))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/node/munge.socket
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool/%n
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd-%n.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd-%n.log
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
${node_lines}PartitionName=test Nodes=$names Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
    # PMIx's client folders in the node's own folder (two nodes' steps would clash in one /tmp)
    echo "PMIxCliTmpDirBase=$d/node/pmix" >"$d/mpi.conf"
    SLURM_CONF="$d/slurm.conf"
    export SLURM_CONF
    slurm_on_node0 /usr/sbin/slurmctld -i >"$d/slurmctld.err" 2>&1 ||
        { echo "slurm_cluster: slurmctld did not start: $(tail -n 3 "$d/slurmctld.log" "$d/slurmctld.err" 2>/dev/null | tr '\n' ' ')"; return 1; }
    if [ "$nodes" -gt 1 ]; then
        mkdir -p "$d/spool/n0"
        slurm_on_node0 /usr/sbin/slurmd -N n0 >"$d/slurmd-n0.err" 2>&1 ||
            { echo "slurm_cluster: slurmd n0 did not start: $(tail -n 3 "$d/slurmd-n0.log" 2>/dev/null | tr '\n' ' ')"; return 1; }
        i=1
        while [ $i -lt "$nodes" ]; do
            mkdir -p "$d/spool/n$i"
            eval "ns=\$NETNS_HOST_NS_$i"
            # nsenter, not ip netns exec: that remounts /sys, without the cgroup
            # folder slurmd's init reads; slurmd in the foreground is the new PID
            # namespace's first process, ended with the namespace
            # folders under /tmp the nodes must share (SLURM_SHARED_PATHS: the
            # source and build trees, as a cluster's network filesystem would
            # hold them) are bound into the node's own /tmp at the same path
            keep=
            for p in ${SLURM_SHARED_PATHS:-}; do
                case $p in /tmp/?*) ;; *) continue ;; esac
                mkdir -p "$d/node-$i/tmp/${p#/tmp/}" || return 1
                keep="$keep mount --bind '$p' '$d/node-$i/tmp/${p#/tmp/}' &&"
            done
            nsenter --net="/run/netns/$ns" unshare --mount --propagation private --pid --fork --mount-proc \
                sh -c "mount --bind '$d/node-$i' '$d/node' && $keep mount --rbind '$d/node-$i/tmp' /tmp &&
                       exec /usr/sbin/slurmd -D -N n$i" >"$d/slurmd-n$i.err" 2>&1 </dev/null &
            i=$((i + 1))
        done
    else
        /usr/sbin/slurmd -N "$host" >"$d/slurmd.err" 2>&1 ||
            { echo "slurm_cluster: slurmd did not start: $(tail -n 3 "$d/slurmd-$host.log" "$d/slurmd.err" 2>/dev/null | tr '\n' ' ')"; return 1; }
    fi
    i=0
    while [ $i -lt 60 ]; do
        state=$(timeout 5 $SLURM_ON_NODE0 sinfo -h -N -o %t 2>/dev/null | sort -u | tr '\n' ' ')
        [ "$state" = "idle " ] && break
        sleep 0.5
        i=$((i + 1))
    done
    if [ "$state" != "idle " ]; then
        echo "slurm_cluster: nodes are '${state:-unknown}', not idle, after 30 s: $(tail -q -n 2 "$d"/slurmd*.log "$d"/slurmd*.err 2>/dev/null | tr '\n' ' ')"
        return 1
    fi
    SLURM_NODE=$host
    SLURM_CPUS=$cpus
    return 0
}
