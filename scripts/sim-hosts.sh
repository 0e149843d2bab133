#!/usr/bin/env bash
# scripts/sim-hosts.sh - simulated hosts on one Linux machine, for the multi-node tests (root).
#
#   scripts/sim-hosts.sh up N       N hosts: network namespaces plh1..plhN, each with its own
#                                   address 10.77.0.(10+i) on a veth pair joined by the bridge
#                                   plbr0 (10.77.0.1, the engine's host: this namespace)
#   scripts/sim-hosts.sh agent HOST COMMAND...
#                                   Open MPI's rsh agent (plm_rsh_agent): runs COMMAND on HOST
#                                   as ssh would - in its namespace, under its own host name
#                                   (UTS namespace) and with its own /tmp (mount namespace), so
#                                   nothing but the network joins it to the others
#   scripts/sim-hosts.sh kill HOST  kills every process on HOST (a node that dies)
#   scripts/sim-hosts.sh down       kills what runs on the hosts and removes them
#
# A host is named by its address or by plhI. Across the hosts, Open MPI must use TCP only
# (--mca btl tcp,self) and the bridge's subnet (oob/btl_tcp_if_include 10.77.0.0/24);
# tests/multinode/multinode.sh shows the whole command.
set -euo pipefail
PREFIX=plh
BRIDGE=plbr0
NET=10.77.0

die() { echo "sim-hosts: $*" >&2; exit 2; }

ns_of() { # HOST (address, plhI or hI) -> namespace name
    case "$1" in
        "$NET".*) local i=$(( ${1##*.} - 10 )); echo "$PREFIX$i" ;;
        "$PREFIX"*) echo "$1" ;;
        h[0-9]*) echo "$PREFIX${1#h}" ;;
        *) return 1 ;;
    esac
}

up() {
    local n=$1
    [[ "$n" =~ ^[1-9]$ ]] || die "up: the number of hosts is 1 to 9, not '$n'"
    [ "$(id -u)" = 0 ] || die "up: needs root (network namespaces)"
    command -v ip >/dev/null || die "up: needs ip (Debian: iproute2)"
    down >/dev/null 2>&1 || true
    ip link add "$BRIDGE" type bridge
    ip addr add "$NET.1/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    for i in $(seq 1 "$n"); do
        local ns=$PREFIX$i
        ip netns add "$ns"
        ip link add "v$ns" type veth peer name eth0 netns "$ns"
        ip link set "v$ns" master "$BRIDGE" up
        ip -n "$ns" addr add "$NET.$((10 + i))/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip -n "$ns" link set lo up
    done
    echo "sim-hosts: $n host(s) up: $(for i in $(seq 1 "$n"); do printf '%s ' "$NET.$((10 + i))"; done)(engine's host $NET.1)"
}

agent() {
    local host=$1
    shift
    # Open MPI may pass ssh's options before the host: skip them
    while [ "${host#-}" != "$host" ]; do host=$1; shift; done
    local ns
    ns=$(ns_of "$host") || { echo "sim-hosts: ssh: Could not resolve hostname $host" >&2; exit 255; }
    ip netns list | grep -qw "^$ns" || { echo "sim-hosts: ssh: connect to host $host: No route to host" >&2; exit 255; }
    # like sshd: the command is one string for the host's shell (nsenter, not `ip netns
    # exec`, which would mount a sysfs of its own without the cgroups slurmd needs)
    # The kit stays where it is when it lies under /tmp (a checkout there, as a CI's may be):
    # the old /tmp is parked on /mnt (in this mount namespace only) and the kit bound back.
    local kit
    kit=$(cd "$(dirname "$0")/.." && pwd)
    exec nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation private \
        /bin/sh -c 'case "$2" in
                        /tmp/*) mount --bind /tmp /mnt && mount -t tmpfs -o mode=1777 tmpfs /tmp &&
                                mkdir -p "$2" && mount --bind "/mnt/${2#/tmp/}" "$2" && umount -l /mnt ;;
                        *) mount -t tmpfs -o mode=1777 tmpfs /tmp ;;
                    esac && hostname "$0" && exec /bin/sh -c "$1"' "h${ns#"$PREFIX"}" "$*" "$kit"
}

killhost() {
    local ns
    ns=$(ns_of "$1") || die "kill: no host '$1'"
    local pids
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
}

down() {
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$PREFIX[0-9]" || true); do
        for _ in 1 2 3; do killhost "$ns"; done
        ip netns del "$ns" 2>/dev/null || true
    done
    ip link del "$BRIDGE" 2>/dev/null || true
}

case "${1:-}" in
    up) up "${2:-}" ;;
    agent) shift; [ $# -ge 2 ] || die "agent: HOST COMMAND..."; agent "$@" ;;
    kill) killhost "${2:-}" ;;
    down) down ;;
    *) die "usage: $0 up N | agent HOST COMMAND... | kill HOST | down" ;;
esac
