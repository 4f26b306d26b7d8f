# netns_hosts.sh — several "hosts" on one machine, for tests that run tfcore
# across machines (sourced, POSIX sh; needs root and `ip netns`).
#
#   . "$top_srcdir/tests/netns_hosts.sh"
#   netns_hosts_up 2 || exit 77     # prints why when namespaces cannot be made
#   netns_hosts_exec 0 tfcore -c job.cfg   # run on host 0 (mpirun's host)
#   ... NETNS_HOST_IP_0, NETNS_HOST_IP_1, NETNS_HOST_AGENT, NETNS_HOST_IF ...
#   (teardown runs on exit, on INT/TERM/HUP, and from a watcher if the test
#   itself is SIGKILLed)
#
# Layout: one network namespace per host and one for a bridge, all named
# tfmh-<pid>-<random>-*, so runs never share one. Host i has a veth "eth0"
# with NETNS_SUBNET.(i+1)/24 whose peer sits on the bridge "br0" inside the
# bridge namespace; loopback is up in every namespace. The interfaces are
# created inside the namespaces (never in the machine's own network stack),
# and the subnet exists only there, so no traffic leaves them.
#
# Open MPI reaches another host through its remote-launch agent:
# NETNS_HOST_AGENT is a script called like ssh (`agent HOST COMMAND...`) that
# runs COMMAND inside the namespace of the host whose address is HOST. The
# mpirun arguments that use it, with TCP as the only transport between
# ranks, are in NETNS_MPIRUN_ARGS (hosts not included).

NETNS_SUBNET=10.213.77

netns_hosts_down() {
    [ -n "${NETNS_PREFIX:-}" ] || return 0
    for ns in $NETNS_ALL; do
        # processes this test started inside its namespaces (ranks, orted)
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
    done
    for ns in $NETNS_ALL; do ip netns del "$ns" 2>/dev/null; done
    [ -n "${NETNS_WATCHER:-}" ] && kill "$NETNS_WATCHER" 2>/dev/null
    [ -n "${NETNS_DIR:-}" ] && rm -rf "$NETNS_DIR"
    NETNS_PREFIX=
}

# netns_hosts_up N: make N hosts; returns 1 with a message when it cannot.
netns_hosts_up() {
    n=$1
    if [ "$(id -u)" -ne 0 ]; then
        echo "netns_hosts: cannot make network namespaces: not root"
        return 1
    fi
    if ! command -v ip >/dev/null 2>&1; then
        echo "netns_hosts: cannot make network namespaces: no ip command (iproute2)"
        return 1
    fi
    NETNS_PREFIX="tfmh-$$-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')"
    NETNS_DIR=$(mktemp -d "/tmp/$NETNS_PREFIX-XXXXXX") || return 1
    NETNS_ALL=
    trap 'netns_hosts_down' EXIT
    trap 'netns_hosts_down; exit 130' INT
    trap 'netns_hosts_down; exit 143' TERM
    trap 'netns_hosts_down; exit 129' HUP
    br="$NETNS_PREFIX-br"
    if ! out=$(ip netns add "$br" 2>&1); then
        echo "netns_hosts: cannot make network namespaces here: ip netns add: $out"
        NETNS_PREFIX=
        rm -rf "$NETNS_DIR"
        return 1
    fi
    NETNS_ALL=$br
    # a watcher outside the test's process group tears down if the test is
    # killed without running its traps (SIGKILL from a harness)
    owner=$$
    setsid sh -c "while kill -0 $owner 2>/dev/null; do sleep 2; done
        for ns in \$(ip netns list | awk '{print \$1}' | grep '^$NETNS_PREFIX-'); do
            for p in \$(ip netns pids \$ns); do kill -9 \$p; done; ip netns del \$ns; done
        rm -rf '$NETNS_DIR'" >/dev/null 2>&1 </dev/null &
    NETNS_WATCHER=$!
    ip -n "$br" link set lo up &&
        ip -n "$br" link add br0 type bridge &&
        ip -n "$br" link set br0 up || { echo "netns_hosts: cannot make the bridge"; return 1; }
    : >"$NETNS_DIR/hosts"
    i=0
    while [ "$i" -lt "$n" ]; do
        ns="$NETNS_PREFIX-h$i"
        addr="$NETNS_SUBNET.$((i + 1))"
        ip netns add "$ns" || { echo "netns_hosts: cannot make namespace $ns"; return 1; }
        NETNS_ALL="$NETNS_ALL $ns"
        # the pair is made in the bridge namespace, one end moved straight into the host's
        ip -n "$br" link add "p$i" type veth peer name eth0 netns "$ns" &&
            ip -n "$br" link set "p$i" master br0 &&
            ip -n "$br" link set "p$i" up &&
            ip -n "$ns" link set lo up &&
            ip -n "$ns" addr add "$addr/24" dev eth0 &&
            ip -n "$ns" link set eth0 up || { echo "netns_hosts: cannot wire host $i ($ns)"; return 1; }
        eval "NETNS_HOST_NS_$i=\$ns NETNS_HOST_IP_$i=\$addr"
        echo "$addr $ns" >>"$NETNS_DIR/hosts"
        i=$((i + 1))
    done
    NETNS_HOSTS=$n
    NETNS_HOST_IF=eth0
    NETNS_HOST_AGENT="$NETNS_DIR/netns-agent"
    # ssh's calling convention: the host, then a command line the remote shell runs
    cat >"$NETNS_HOST_AGENT" <<AGENT
#!/bin/sh
host=\$1
shift
ns=\$(awk -v h="\$host" '\$1 == h {print \$2}' "$NETNS_DIR/hosts")
if [ -z "\$ns" ]; then
    echo "netns-agent: no test host \$host (known: \$(awk '{printf "%s ", \$1}' "$NETNS_DIR/hosts"))" >&2
    exit 255
fi
exec ip netns exec "\$ns" /bin/sh -c "\$*"
AGENT
    chmod +x "$NETNS_HOST_AGENT"
    # host 0 reaches every other one before anything uses them
    i=1
    while [ "$i" -lt "$n" ]; do
        netns_hosts_reach "$i" || return 1
        i=$((i + 1))
    done
    # TCP only between ranks, on the test subnet only; the out-of-band channel
    # too. Keepalive on that channel (seconds) lets mpirun notice a host whose
    # link is gone instead of waiting for TCP's own minutes-long timeouts.
    NETNS_MPIRUN_ARGS="--mca plm_rsh_agent $NETNS_HOST_AGENT --mca btl tcp,self \
--mca btl_tcp_if_include $NETNS_SUBNET.0/24 --mca oob_tcp_if_include $NETNS_SUBNET.0/24 \
--mca oob_tcp_keepalive_time 2 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3"
    return 0
}

# netns_hosts_exec I COMMAND...: run COMMAND on host I
netns_hosts_exec() {
    eval "ns=\$NETNS_HOST_NS_$1"
    shift
    ip netns exec "$ns" "$@"
}

# netns_hosts_reach I: wait (5 s at most) until host 0 reaches host I: a TCP
# connect to a closed port there is refused (a reset) once the link carries
# packets; 1 with a message when it does not
netns_hosts_reach() {
    eval "to=\$NETNS_HOST_IP_$1"
    if ! ip netns exec "$NETNS_PREFIX-h0" python3 - "$to" <<'PY'
import socket, sys, time
for _ in range(50):
    try:
        socket.create_connection((sys.argv[1], 9), timeout=0.5).close()
        sys.exit(0)
    except ConnectionRefusedError:
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)
PY
    then
        echo "netns_hosts: host 0 cannot reach $to"
        return 1
    fi
}

# netns_hosts_link_down I: cut host I's link to the others
netns_hosts_link_down() {
    eval "ns=\$NETNS_HOST_NS_$1"
    ip -n "$ns" link set eth0 down
}

# netns_hosts_link_up I: mend it, and wait until host 0 reaches host I again
netns_hosts_link_up() {
    eval "ns=\$NETNS_HOST_NS_$1"
    ip -n "$ns" link set eth0 up && netns_hosts_reach "$1"
}
