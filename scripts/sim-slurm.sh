#!/usr/bin/env bash
# scripts/sim-slurm.sh - a real Slurm on the simulated hosts of scripts/sim-hosts.sh (root).
#
#   scripts/sim-slurm.sh up DIR N   munged, slurmctld on this host (10.77.0.1) and one slurmd
#                                   in each of the N hosts h1..hN (their namespaces, their host
#                                   names, their own /tmp); the configuration, state and logs
#                                   go in DIR (on a file system every host sees, as a
#                                   cluster's shared /etc/slurm and home are). Prints the line
#                                   to export: SLURM_CONF=DIR/slurm.conf
#   scripts/sim-slurm.sh down DIR   stops them all (munged too, when up started it)
#
# The configuration is what a course admin needs for the labs on CPU nodes, nothing more:
# munge authentication, one partition of all nodes, cores as the consumable resource, no
# cgroups (proctrack/linuxproc, task/none: the simulated hosts share one kernel's cgroups)
# and Slurm's PMIx plugin available to srun (--mpi=pmix), which Debian's Open MPI speaks.
# GPU nodes add GresTypes=gpu and "Gres=gpu:8" to their NodeName lines (docs/setup.md).
set -euo pipefail
cd "$(dirname "$0")/.."
KIT=$(pwd)
die() { echo "sim-slurm: $*" >&2; exit 2; }

up() {
    local dir=$1 n=$2
    [ "$(id -u)" = 0 ] || die "up: needs root"
    for t in munged slurmctld slurmd srun; do
        command -v $t >/dev/null || die "up: needs $t (Debian: slurmctld slurmd slurm-client munge)"
    done
    mkdir -p "$dir/state" "$dir/log"
    dir=$(cd "$dir" && pwd)
    # munge: one key for the whole cluster, its socket where every host finds it
    if ! pgrep -x munged >/dev/null; then
        [ -s /etc/munge/munge.key ] || { dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=128 2>/dev/null; chown munge: /etc/munge/munge.key 2>/dev/null || true; chmod 400 /etc/munge/munge.key; }
        mkdir -p /run/munge /var/lib/munge /var/log/munge
        chown munge: /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
        if id munge >/dev/null 2>&1; then
            runuser -u munge -- munged || die "up: munged did not start"
        else
            munged --force || die "up: munged did not start"
        fi
        touch "$dir/munged.ours" # down stops it again
    fi
    local ctl
    ctl=$(hostname -s)
    {
        echo "ClusterName=paralab"
        echo "SlurmctldHost=$ctl(10.77.0.1)"
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "AuthType=auth/munge"
        echo "CredType=cred/munge"
        echo "StateSaveLocation=$dir/state"
        echo "SlurmdSpoolDir=/tmp/slurmd"
        echo "SlurmctldPidFile=$dir/slurmctld.pid"
        echo "SlurmdPidFile=/tmp/slurmd.pid"
        echo "SlurmctldLogFile=$dir/log/slurmctld.log"
        echo "SlurmdLogFile=$dir/log/slurmd-%n.log"
        echo "ProctrackType=proctrack/linuxproc"
        echo "TaskPlugin=task/none"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "AccountingStorageType=accounting_storage/none"
        echo "SchedulerType=sched/builtin"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_Core"
        echo "MpiDefault=none"
        echo "ReturnToService=2"
        echo "SlurmdTimeout=30"
        echo "InactiveLimit=0"
        echo "KillWait=5"
        local cpus
        cpus=$(nproc)
        for i in $(seq 1 "$n"); do
            echo "NodeName=h$i NodeAddr=10.77.0.$((10 + i)) CPUs=$cpus State=UNKNOWN"
        done
        echo "PartitionName=lab Nodes=$(seq -s, -f 'h%g' 1 "$n") Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4"
    } >"$dir/slurm.conf"
    slurmctld -f "$dir/slurm.conf" || die "up: slurmctld did not start (log: $dir/log/slurmctld.log)"
    for i in $(seq 1 "$n"); do
        "$KIT/scripts/sim-hosts.sh" agent "10.77.0.$((10 + i))" "slurmd -f $dir/slurm.conf -N h$i" ||
            die "up: slurmd on h$i did not start (log: $dir/log/slurmd-h$i.log)"
    done
    # the nodes register within seconds
    for _ in $(seq 1 60); do
        if [ "$(SLURM_CONF=$dir/slurm.conf sinfo -h -t idle -o '%D' 2>/dev/null | paste -sd+ | bc 2>/dev/null || echo 0)" = "$n" ]; then
            echo "SLURM_CONF=$dir/slurm.conf"
            return 0
        fi
        sleep 0.5
    done
    SLURM_CONF=$dir/slurm.conf sinfo >&2 || true
    die "up: the $n node(s) did not come up idle within 30 s (logs: $dir/log/)"
}

down() {
    local dir=$1
    [ -f "$dir/slurm.conf" ] || return 0
    pkill -f "slurmctld -f $dir/slurm.conf" 2>/dev/null || true
    pkill -f "slurmd -f $dir/slurm.conf" 2>/dev/null || true
    sleep 0.5
    pkill -9 -f "slurm(ctl)?d -f $dir/slurm.conf" 2>/dev/null || true
    if [ -f "$dir/munged.ours" ]; then
        pkill -x munged 2>/dev/null || true
        rm -f "$dir/munged.ours"
    fi
}

case "${1:-}" in
    up) [ $# = 3 ] || die "usage: $0 up DIR N"; up "$2" "$3" ;;
    down) [ $# = 2 ] || die "usage: $0 down DIR"; down "$2" ;;
    *) die "usage: $0 up DIR N | down DIR" ;;
esac
