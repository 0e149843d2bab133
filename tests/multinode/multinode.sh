#!/usr/bin/env bash
# multinode.sh - graded runs across hosts (make test-multinode; needs root). Not named
# test_*.sh: make test (tests/run.sh) runs those, and this one takes about 14 minutes.
#
# Two hosts are simulated on this machine (scripts/sim-hosts.sh): network namespaces h1
# (10.77.0.11) and h2 (10.77.0.12) on a bridge, each with its own host name and its own /tmp,
# joined to the engine's host (10.77.0.1, this namespace) only by the network. Open MPI starts
# its daemons there through an rsh agent, as it would through ssh, and uses TCP between them
# (btl tcp,self: no shared memory). The engine listens at PL_ENGINE_ADDR=10.77.0.1.
#
#   1. Lab 1's solution at 4 ranks, 2 per host: full marks, and the report says which ranks
#      ran on which host
#   2. Lab 1's starter across the hosts: its usual score (0), no hang
#   3. Lab 0 at 5 ranks spread 3 + 2 (the topology, the sweep's pairs across hosts), Lab 6's
#      training mode across the hosts (the accuracy target met), and Lab 9's solution, whose
#      players run their own MPI and windows: 81 / 100, the two all-reduce groups (peer
#      pointers, one node only) failed with that reason
#   4. hostile files of the fault suite with a rank on the second host: caught as on one host;
#      a rank on the second host, and one on this host, that asks the launcher to start a
#      program (MPI_Comm_spawn): it runs under Landlock (the engine makes pl-landlock Open
#      MPI's launch and fork agents), against a control with the launcher unconfined
#   5. failures, each a clear line in the report, no hang, nothing left running:
#      the engine's address unreachable from the nodes (127.0.0.1), no PL_ENGINE_ADDR (the
#      Unix socket is on another host), a hostfile naming a host that does not exist, and
#      the second host dying in the middle of a run
#   6. a real Slurm started on the hosts (scripts/sim-slurm.sh: slurmctld here, a slurmd on
#      each host, munge): Lab 1's solution graded inside `salloc -N2 -n4`, the ranks started
#      by `srun --mpi=pmix`, Lab 0 at 3 ranks on the 2 nodes, and a class of
#      two (the solution, the starter) through `make grade-class` in one allocation, run by a
#      course account (as root it is refused in one line: Slurm starts steps for the owner only);
#      the hostile files of 4 with their ranks started by srun, each under Landlock
# Prints "ok - ..." / "not ok - ..." and "N passed, M failed"; exit 1 on any failure.
set -u
cd "$(dirname "$0")/../.."
: "${MAKE:=make}" "${B:=build}"
pass=0 fail=0
ok() { echo "ok - $*"; pass=$((pass + 1)); }
notok() { echo "not ok - $*"; fail=$((fail + 1)); }
finish() { echo "$pass passed, $fail failed"; [ "$fail" = 0 ]; exit $?; }

if [ "$(id -u)" != 0 ]; then
    notok "test-multinode needs root (network namespaces): run it as root, as CI does"
    finish
fi
command -v ip >/dev/null || { notok "test-multinode needs ip (Debian: iproute2)"; finish; }
command -v unshare >/dev/null || { notok "test-multinode needs unshare (Debian: util-linux)"; finish; }

TMP=$(mktemp -d /tmp/paralab-multinode.XXXXXX)
cleanup() {
    scripts/sim-slurm.sh down "$PWD/$B/sim-slurm" >/dev/null 2>&1
    scripts/sim-hosts.sh down >/dev/null 2>&1
    rm -rf "$TMP"
}
trap cleanup EXIT
scripts/sim-hosts.sh up 2 || { notok "two simulated hosts start (scripts/sim-hosts.sh up 2)"; finish; }
printf '10.77.0.11 slots=2\n10.77.0.12 slots=2\n' >"$TMP/hosts"
printf '10.77.0.11 slots=2\n10.77.0.19 slots=2\n' >"$TMP/badhosts"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
export OMPI_MCA_plm_rsh_agent="$PWD/scripts/sim-hosts.sh agent" OMPI_MCA_btl=tcp,self
export OMPI_MCA_oob_tcp_if_include=10.77.0.0/24 OMPI_MCA_btl_tcp_if_include=10.77.0.0/24
unset OMPI_MCA_rmaps_base_oversubscribe
MPIRUN_HOSTS="mpirun --hostfile $TMP/hosts"

# nothing of a run may be left on either host or here
no_leftovers() {
    local tag=$1 left
    sleep 1
    left=
    for p in $(ip netns pids plh1 2>/dev/null) $(ip netns pids plh2 2>/dev/null) $(pgrep -f "$B/cpu/.*lab0[169]" 2>/dev/null); do
        [ "$(ps -o comm= -p "$p" 2>/dev/null)" = slurmd ] || left="$left $p"  # the nodes' own daemon stays
    done
    left=$(echo $left)
    [ -z "$left" ] && ok "$tag: nothing left running on the hosts or here" ||
        notok "$tag: nothing left running on the hosts or here (pids $left: $(ps -o comm= -p ${left// /,} | tr '\n' ' '))"
}

# grade TAG BOUND LOG [make arguments...]: make lab-N with the hosts' launcher (WRAP=
# "salloc ...": inside an allocation)
grade() {
    local tag=$1 bound=$2 log=$3 start=$SECONDS
    shift 3
    timeout "$bound" ${WRAP:-} "$MAKE" --no-print-directory "$@" >"$log" 2>&1
    local rc=$?
    if [ $rc = 124 ] || [ $rc = 137 ]; then notok "$tag: ends within $bound s (killed: a hang)"; return 1; fi
    echo "# $tag: exit $rc in $((SECONDS - start)) s: $(grep '^score:' "$log" | tail -n 1)"
    return 0
}

# 1. the solution, across two hosts
if grade "solution" 600 "$TMP/sol.log" lab-1 SOLUTION=1 NP=4 MPIRUN="$MPIRUN_HOSTS" PL_ENGINE_ADDR=10.77.0.1; then
    grep -qx 'score: 100 / 100' "$TMP/sol.log" && ok "Lab 1's solution across 2 hosts x 2 ranks: full marks" ||
        notok "Lab 1's solution across 2 hosts x 2 ranks: full marks ($(tail -n 1 "$TMP/sol.log"))"
    grep -q 'the ranks ran on h1 (ranks 0,1; referee uid 0), h2 (ranks 2,3; referee uid 0) (channel 10.77.0.1:' "$B/reports/lab-1.txt" &&
        ok "the report names the host of every rank and how its referee runs" ||
        notok "the report names the host of every rank ($(grep 'ranks ran on' "$B/reports/lab-1.txt"))"
fi
no_leftovers "solution"

# 2. the starter
# (the rubric's small test arguments, RUBRIC_SCALE=1: every case, fast; the solution above ran
# the full sizes)
if grade "starter" 600 "$TMP/start.log" lab-1 NP=4 RUBRIC_SCALE=1 MPIRUN="$MPIRUN_HOSTS" PL_ENGINE_ADDR=10.77.0.1; then
    grep -qx 'score: 0 / 100' "$TMP/start.log" && ok "Lab 1's starter across the hosts: its usual score (0 / 100)" ||
        notok "Lab 1's starter across the hosts: its usual score ($(tail -n 1 "$TMP/start.log"))"
fi
no_leftovers "starter"

# make doctor: which ranks share a host, and what graded runs across hosts need
timeout 300 "$MAKE" --no-print-directory doctor MPIRUN="$MPIRUN_HOSTS" >"$TMP/doctor.log" 2>&1
if grep -q 'on h1: ranks 0 1$' "$TMP/doctor.log" && grep -q 'on h2: ranks 2 3$' "$TMP/doctor.log" &&
    grep -q 'graded runs across hosts need PL_ENGINE_ADDR=' "$TMP/doctor.log"; then
    ok "make doctor names each host's ranks and asks for PL_ENGINE_ADDR"
else
    notok "make doctor names each host's ranks and asks for PL_ENGINE_ADDR ($(grep -A3 'launch' "$TMP/doctor.log" | tr '\n' ' '))"
fi

# Lab 0 with the ranks spread unevenly (3 on h1, 2 on h2): the topology it reports is the
# launcher's, and its sweep marks the pairs that cross the network
printf '10.77.0.11 slots=3\n10.77.0.12 slots=2\n' >"$TMP/hosts32"
if grade "lab 0" 300 "$TMP/lab0.log" lab-0 SOLUTION=1 NP=5 MPIRUN="mpirun --hostfile $TMP/hosts32" PL_ENGINE_ADDR=10.77.0.1; then
    grep -qx 'score: 10 / 10' "$TMP/lab0.log" && ok "Lab 0 at 5 ranks on 3 + 2 hosts: full marks (2 hosts, 2 nodes)" ||
        notok "Lab 0 at 5 ranks on 3 + 2 hosts: full marks ($(grep -A1 'wrong\|error' "$B/reports/lab-0.txt" | head -n 2 | tr '\n' ' '))"
fi
if grade "lab 0 cases" 300 "$TMP/lab0-cases.log" lab-0 SOLUTION=1 RUN=cases NP=5 MPIRUN="mpirun --hostfile $TMP/hosts32"; then
    if grep -q '^  h1  *ranks 0 1 2$' "$TMP/lab0-cases.log" && grep -q '^  h2  *ranks 3 4$' "$TMP/lab0-cases.log" &&
        grep -Eq '^ +0 +\. +[0-9.]+ +[0-9.]+ +[0-9.]+\* +[0-9.]+\*$' "$TMP/lab0-cases.log"; then
        ok "Lab 0's sweep names each host's ranks and marks the pairs across hosts"
    else
        notok "Lab 0's sweep names each host's ranks and marks the pairs across hosts ($(grep -A3 '== hosts' "$TMP/lab0-cases.log" | tr '\n' ' '))"
    fi
fi
no_leftovers "lab 0"

# 3. a mode: Lab 6's training across the hosts
if grade "train" 600 "$TMP/train.log" lab-6 SOLUTION=1 RUN=train NP=4 MPIRUN="$MPIRUN_HOSTS"; then
    grep -q 'final test accuracy .*: ok)' "$TMP/train.log" && ok "Lab 6's training mode across 2 hosts: $(grep -o 'final test accuracy [0-9.]*' "$TMP/train.log")" ||
        notok "Lab 6's training mode across 2 hosts ($(tail -n 2 "$TMP/train.log" | head -n 1))"
fi
no_leftovers "train"

# Lab 9 across the hosts: the players' own MPI, its windows over TCP (osc pt2pt, connections
# opened in MPI_Init before the play filter); the all-reduces that load from peers' buffers
# fail with the reason, the rest scores in full (100 - 9 - 10)
if grade "lab 9" 600 "$TMP/lab9.log" lab-9 SOLUTION=1 NP=4 MPIRUN="$MPIRUN_HOSTS" PL_ENGINE_ADDR=10.77.0.1; then
    grep -qx 'score: 81 / 100' "$TMP/lab9.log" && ok "Lab 9's solution across 2 hosts: every group but the two all-reduces (81 / 100)" ||
        notok "Lab 9's solution across 2 hosts: 81 / 100 ($(grep -E '^ +(error|wrong|tampered|crash) ' "$TMP/lab9.log" | head -n 2 | cut -c1-160 | tr '\n' ' '))"
    n=$(grep -c 'the ranks are on more than one host: the one-shot and two-shot' "$B/reports/lab-9.txt")
    [ "$n" = 16 ] && ok "Lab 9 across hosts: each of the 16 all-reduce cases says it needs one node" ||
        notok "Lab 9 across hosts: each of the 16 all-reduce cases says it needs one node ($n say so)"
fi
no_leftovers "lab 9"

# 4. hostile players with a rank on the second host (np 3: ranks 0,1 on h1, 2 on h2)
FAULTS_LIST=${MULTINODE_FAULTS:-"forge_every_fd forge_transport forge_pending_pass libc_gadget read_solutions broadcast_deadlock"}
MPIRUN="$MPIRUN_HOSTS" PL_ENGINE_ADDR=10.77.0.1 FAULTS=all FAULTS_ONLY="$FAULTS_LIST" FAULTS_NP=3 \
    FAULTS_SANDBOX=off B="$B" MAKE="$MAKE" tests/grader/test_faults.sh >"$TMP/faults.log" 2>&1
while IFS= read -r line; do
    case $line in
        "ok - "*) ok "across hosts: ${line#ok - }" ;;
        "not ok - "*) notok "across hosts: ${line#not ok - }" ;;
    esac
done <"$TMP/faults.log"
grep -q "^ok - " "$TMP/faults.log" || notok "the fault suite ran across hosts ($(tail -n 3 "$TMP/faults.log" | tr '\n' ' '))"
no_leftovers "faults"

# 4b. a rank asks the launcher to start a program (MPI_Comm_spawn, which is PMIx_Spawn
#     underneath: what a player that runs MPI itself can reach in memory), once from the
#     second host (its daemon starts the shell there) and once from this host (mpirun's own
#     child, the engine's host in the hostfile). With the launcher unconfined (the control:
#     an instructor's OMPI_MCA_orte_launch_agent=orted) the shell copies a secret of the tree
#     into the tree; under the engine's default (pl-landlock as Open MPI's launch and fork
#     agents) it runs (its mark) but can neither read the secret nor write the tree.
probe_dir=$PWD/$B/multinode-probe
rm -rf "$probe_dir" && mkdir -p "$probe_dir/bin" "$probe_dir/secret"
if ${MPICC:-mpicc} -O1 tests/grader/spawn_probe.c -o "$probe_dir/bin/probe" 2>"$TMP/probe-cc.log"; then
    echo "the hidden rubric's seed" >"$probe_dir/secret/seed"
    printf '10.77.0.11 slots=1\n10.77.0.12 slots=2\n' >"$TMP/probe-h2"  # rank 0 on h1, rank 1 and the spawn on h2
    printf '10.77.0.1 slots=2\n' >"$TMP/probe-here"                     # rank 0 and the spawn here
    mark=/dev/shm/paralab-mn-spawn.$$
    spawn() { # spawn NAME HOSTFILE NP [VAR=VALUE...]: the probe graded with the hosts' launcher
        local name=$1 hosts=$2 np=$3
        shift 3
        printf 'lab probe\ntimeout 6\nwatchdog 6\nrun-timeout 20\nnp %s\ngroup escape 10 escape.*\n' "$np" >"$TMP/probe.rubric"
        rm -f "$mark" "$mark.host" "$probe_dir/secret/leak"
        env "$@" PROBE_SCRIPT="touch $mark; hostname >$mark.host; cat $probe_dir/secret/seed >$probe_dir/secret/leak" \
            OMPI_MCA_mca_base_env_list=PROBE_SCRIPT \
            timeout 120 "$B/tools/pl-grade" --lab probe --rubric "$TMP/probe.rubric" --driver "$probe_dir/bin/probe" \
            --mpirun "mpirun --hostfile $hosts" --engine-addr 10.77.0.1 --sandbox auto >"$TMP/spawn-$name.log" 2>&1
    }
    for where in h2 here; do
        host=$where
        [ "$where" = here ] && host=$(hostname)
        spawn "control-$where" "$TMP/probe-$where" $([ "$where" = here ] && echo 1 || echo 2) OMPI_MCA_orte_launch_agent=orted
        if [ -s "$probe_dir/secret/leak" ] && grep -qx "$host" "$mark.host" 2>/dev/null; then
            ok "control: a spawn asked of the unconfined launcher runs on $where and copies a secret of the tree into it"
        else
            notok "control: the spawned shell did not run unconfined on $where (mark $(cat "$mark.host" 2>/dev/null || echo none)); the next check proves nothing ($(grep -m1 'not run' "$TMP/spawn-control-$where.log" | cut -c1-200))"
        fi
        spawn "confined-$where" "$TMP/probe-$where" $([ "$where" = here ] && echo 1 || echo 2)
        if ! grep -q 'anything a rank asks the launcher to spawn run under Landlock' "$TMP/spawn-confined-$where.log"; then
            notok "across hosts the engine runs the launcher's daemons and ranks under Landlock ($(grep -m1 '^note: across' "$TMP/spawn-confined-$where.log" | cut -c1-240))"
        elif ! grep -qx "$host" "$mark.host" 2>/dev/null; then
            notok "the spawn asked of the confined launcher on $where ran (no mark: the next check would prove nothing)"
        elif [ -e "$probe_dir/secret/leak" ]; then
            notok "a spawn on $where under the confined launcher wrote $probe_dir/secret/leak"
        else
            ok "across hosts: a spawn asked of the launcher on $where runs under Landlock: it can neither read the tree's secret nor write the tree"
        fi
    done
    rm -f "$mark" "$mark.host"
else
    notok "the spawn probe builds: $(head -n 2 "$TMP/probe-cc.log" | tr '\n' ' ')"
fi
rm -rf "$probe_dir"
no_leftovers "spawn"

# 5. failures
expect_line() { # TAG LOG PATTERN
    if grep -q -- "$3" "$B/reports/lab-1.txt"; then ok "$1: $(grep -o -- "$3.*" "$B/reports/lab-1.txt" | head -n 1 | cut -c1-150)"
    else notok "$1: the report says '$3' ($(grep -m1 -A1 -E '^ +(error|timeout|deadlock|crash|wrong|missing|tampered|forbidden) ' "$B/reports/lab-1.txt" | tr -s ' \n' ' ' | cut -c1-400))"; fi
}
if grade "unreachable" 120 "$TMP/unreach.log" lab-1 SOLUTION=1 NP=4 T='allreduce.oop.c1' MPIRUN="$MPIRUN_HOSTS" PL_ENGINE_ADDR=127.0.0.1; then
    expect_line "an engine address the nodes cannot reach" "$TMP/unreach.log" "cannot reach the grading engine at 127.0.0.1:[0-9]*: Connection refused"
fi
no_leftovers "unreachable"
if grade "no address" 120 "$TMP/noaddr.log" lab-1 SOLUTION=1 NP=4 T='allreduce.oop.c1' SANDBOX=off MPIRUN="$MPIRUN_HOSTS"; then
    expect_line "no PL_ENGINE_ADDR across hosts" "$TMP/noaddr.log" "on h[12]\] referee: cannot reach the grading engine at unix:.*set PL_ENGINE_ADDR="
fi
no_leftovers "no address"
if grade "bad hostfile" 120 "$TMP/badhosts.log" lab-1 SOLUTION=1 NP=4 T='allreduce.oop.c1' MPIRUN="mpirun --hostfile $TMP/badhosts" PL_ENGINE_ADDR=10.77.0.1; then
    expect_line "a hostfile naming a host that does not exist" "$TMP/badhosts.log" "no rank's referee reached the engine; the launcher said first: .*10.77.0.19"
fi
no_leftovers "bad hostfile"
# the second host dies once the run is under way (its first records are in)
( for _ in $(seq 1 600); do
      grep -q 'pass' "$TMP/die.log" 2>/dev/null && break
      sleep 0.2
  done
  sleep 2
  scripts/sim-hosts.sh kill h2 ) &
killer=$!
if grade "host dies" 300 "$TMP/die.log" lab-1 SOLUTION=1 NP=4 T='broadcast.*' MPIRUN="$MPIRUN_HOSTS" PL_ENGINE_ADDR=10.77.0.1; then
    wait $killer
    if grep -qE '^  (error|crash|deadlock|timeout) +np4/' "$B/reports/lab-1.txt" && grep -q '^score:' "$TMP/die.log"; then
        ok "the second host dies mid-run: $(grep -E '^  (error|crash|deadlock|timeout) +np4/' "$B/reports/lab-1.txt" | head -n 1 | sed 's/  */ /g'), a score printed"
    else
        notok "the second host dies mid-run: a case ends in error and the engine scores the rest ($(tail -n 1 "$TMP/die.log"))"
    fi
fi
wait 2>/dev/null
no_leftovers "host dies"

# 6. a real Slurm on the two hosts: slurmctld here, a slurmd on each (scripts/sim-slurm.sh);
#    the grading inside an allocation, its ranks started by srun through Slurm's PMIx plugin
SLURM_DIR=$PWD/$B/sim-slurm
if conf=$(scripts/sim-slurm.sh up "$SLURM_DIR" 2 2>"$TMP/slurm-up.log"); then
    export "$conf"
    ok "Slurm up: $(sinfo -h -o '%P %D nodes %t %N' | head -n 1)"
    # every case at the rubric's small test arguments (RUBRIC_SCALE=1); the starter under srun
    # is graded in the class below
    if WRAP="salloc -N2 -n4" grade "slurm solution" 600 "$TMP/slurm-sol.log" lab-1 SOLUTION=1 NP=4 RUBRIC_SCALE=1 \
        MPIRUN="srun --mpi=pmix -n {np}" PL_ENGINE_ADDR=10.77.0.1; then
        grep -qx 'score: 100 / 100' "$TMP/slurm-sol.log" && ok "Slurm: Lab 1's solution in an allocation of 2 nodes, srun --mpi=pmix: full marks" ||
            notok "Slurm: Lab 1's solution: full marks ($(tail -n 2 "$TMP/slurm-sol.log" | tr '\n' ' '))"
        grep -q 'the ranks ran on h1 (ranks 0,1; referee uid 0), h2 (ranks 2,3; referee uid 0)' "$B/reports/lab-1.txt" && ok "Slurm: the ranks ran on both nodes" ||
            notok "Slurm: the ranks ran on both nodes ($(grep 'ranks ran on' "$B/reports/lab-1.txt"))"
    fi
    no_leftovers "slurm solution"
    if WRAP="salloc -N2 -n3" grade "slurm lab 0" 300 "$TMP/slurm-lab0.log" lab-0 SOLUTION=1 NP=3 \
        MPIRUN="srun --mpi=pmix -n {np}" PL_ENGINE_ADDR=10.77.0.1; then
        grep -qx 'score: 10 / 10' "$TMP/slurm-lab0.log" && ok "Slurm: Lab 0 at 3 ranks on 2 nodes: full marks (srun's topology)" ||
            notok "Slurm: Lab 0 at 3 ranks on 2 nodes: full marks ($(grep -A1 'wrong\|error' "$B/reports/lab-0.txt" | head -n 2 | tr '\n' ' '))"
    fi
    no_leftovers "slurm lab 0"
    # a rank srun starts runs under Landlock (pl-landlock around the driver, Slurm's PMIx
    # directories of the step writable): rank 0 of the probe runs a shell that copies a secret
    # of the tree into the tree; the control (--sandbox off: ranks unconfined) shows it would
    rm -rf "$probe_dir" && mkdir -p "$probe_dir/bin" "$probe_dir/secret"
    echo "the hidden rubric's seed" >"$probe_dir/secret/seed"
    if ! ${MPICC:-mpicc} -O1 tests/grader/spawn_probe.c -o "$probe_dir/bin/probe" 2>"$TMP/probe-cc.log"; then
        notok "the probe builds for the srun check ($(head -n 2 "$TMP/probe-cc.log" | tr '\n' ' '))"
    else
        printf 'lab probe\ntimeout 6\nwatchdog 6\nrun-timeout 20\nnp 2\ngroup escape 10 escape.*\n' >"$TMP/probe-srun.rubric"
        smark=/dev/shm/paralab-mn-srun.$$
        for mode in off auto; do
            rm -f "$smark" "$smark.host" "$probe_dir/secret/leak"
            PROBE_SELF=1 PROBE_SCRIPT="touch $smark; hostname >$smark.host; cat $probe_dir/secret/seed >$probe_dir/secret/leak" \
                timeout 120 salloc -N2 -n2 "$B/tools/pl-grade" --lab probe --rubric "$TMP/probe-srun.rubric" \
                --driver "$probe_dir/bin/probe" --mpirun "srun --mpi=pmix -n {np}" --engine-addr 10.77.0.1 \
                --sandbox $mode >"$TMP/srun-probe-$mode.log" 2>&1
            if [ "$mode" = off ]; then
                [ -s "$probe_dir/secret/leak" ] && [ -s "$smark.host" ] &&
                    ok "control: under srun with the ranks unconfined, a rank's shell on $(cat "$smark.host") copies a secret of the tree into it" ||
                    notok "control: an unconfined rank under srun did not copy the secret (mark $(cat "$smark.host" 2>/dev/null || echo none)); the next check proves nothing"
            elif ! grep -q 'srun starts every rank under Landlock' "$TMP/srun-probe-$mode.log"; then
                notok "under srun the engine starts every rank under Landlock ($(grep -m1 '^note: across' "$TMP/srun-probe-$mode.log" | cut -c1-240))"
            elif [ ! -s "$smark.host" ]; then
                notok "the confined rank's shell under srun ran (no mark: the next check would prove nothing)"
            elif [ -e "$probe_dir/secret/leak" ]; then
                notok "a rank under srun, confined, wrote $probe_dir/secret/leak"
            else
                ok "Slurm: a rank srun starts runs under Landlock: its shell on $(cat "$smark.host") can neither read the tree's secret nor write the tree"
            fi
        done
        rm -f "$smark" "$smark.host"
    fi
    rm -rf "$probe_dir"
    no_leftovers "slurm probe"
    # the same hostile files as in 4, their ranks started by srun on both nodes (rank 2 on h2),
    # each under Landlock as srun starts it (--sandbox auto): caught as with mpirun. One grading
    # at a time: two would ask the allocation of 3 tasks for 6.
    timeout 900 salloc -N2 -n3 env MPIRUN="srun --mpi=pmix -n {np}" PL_ENGINE_ADDR=10.77.0.1 FAULTS=all \
        FAULTS_ONLY="$FAULTS_LIST" FAULTS_NP=3 FAULTS_SANDBOX=auto FAULTS_JOBS=1 B="$B" MAKE="$MAKE" \
        tests/grader/test_faults.sh >"$TMP/slurm-faults.log" 2>&1
    while IFS= read -r line; do
        case $line in
            "ok - "*) ok "under srun: ${line#ok - }" ;;
            "not ok - "*) notok "under srun: ${line#not ok - }" ;;
        esac
    done <"$TMP/slurm-faults.log"
    grep -q "^ok - [0-9]* fault(s) graded" "$TMP/slurm-faults.log" ||
        notok "the fault suite ran under srun ($(tail -n 3 "$TMP/slurm-faults.log" | tr '\n' ' '))"
    no_leftovers "slurm faults"
    # a class inside one allocation (docs/setup.md, "Several nodes"): each submission's runs are
    # job steps of it (srun), the gradebook is written here, one submission at a time. As root,
    # pl-class gives every job a user of its own, whose steps Slurm refuses: one line, no job run.
    mkdir -p "$TMP/class/alice" "$TMP/class/bob"
    cp solutions/01-collectives/collectives.c "$TMP/class/alice/"
    cp labs/01-collectives/collectives.c "$TMP/class/bob/"
    chmod 755 "$TMP"
    class_args=(LAB=1 SUBMISSIONS="$TMP/class" JOBS=1 NP=4 RUBRIC_SCALE=1 SANDBOX=auto
        MPIRUN="srun --mpi=pmix -n {np}" PL_ENGINE_ADDR=10.77.0.1)
    if WRAP="salloc -N2 -n4" grade "slurm class as root" 120 "$TMP/slurm-class-root.log" grade-class \
        "${class_args[@]}" OUT="$PWD/$B/class-slurm-root"; then
        grep -q "Slurm starts job steps for the allocation's owner only" "$TMP/slurm-class-root.log" &&
            ok "Slurm: make grade-class as root in an allocation is refused in one line (its jobs' users may not start steps)" ||
            notok "Slurm: make grade-class as root: refused in one line ($(tail -n 2 "$TMP/slurm-class-root.log" | tr '\n' ' '))"
    fi
    # ... and as the course's own account: the solution 100, the starter its usual 0. OUT is on
    # a file system every node sees (the kit's), as the drivers it builds run there.
    made_user=
    id paralab-ta >/dev/null 2>&1 || { useradd -M -d /nonexistent -s /usr/sbin/nologin paralab-ta && made_user=1; }
    out=$PWD/$B/class-slurm
    rm -rf "$out" && mkdir -p "$out" && chown paralab-ta "$out"
    start=$SECONDS
    (cd /tmp && timeout 900 runuser -u paralab-ta -- env PATH="$PATH" SLURM_CONF="$SLURM_CONF" OPENBLAS_NUM_THREADS=1 \
        OMPI_MCA_btl=tcp,self OMPI_MCA_oob_tcp_if_include=10.77.0.0/24 OMPI_MCA_btl_tcp_if_include=10.77.0.0/24 \
        salloc -N2 -n4 "$MAKE" -C "$OLDPWD" --no-print-directory grade-class "${class_args[@]}" OUT="$out/class") \
        >"$TMP/slurm-class.log" 2>&1
    echo "# slurm class as paralab-ta: exit $? in $((SECONDS - start)) s"
    book=$out/class/gradebook.csv
    row() { awk -F, -v s="$1" '$1 == s {print $3 "," $4}' "$book" 2>/dev/null; }
    [ "$(row alice)" = "graded,100" ] && [ "$(row bob)" = "graded,0" ] &&
        ok "Slurm: make grade-class as the course's account in an allocation of 2 nodes: the solution 100, the starter 0" ||
        notok "Slurm: make grade-class in an allocation: alice '$(row alice)', bob '$(row bob)' ($(tail -n 2 "$TMP/slurm-class.log" | tr '\n' ' '))"
    grep -q 'h2 (ranks 2,3' "$out/class/students/alice/report.txt" 2>/dev/null &&
        ok "Slurm: the class's runs used both nodes" ||
        notok "Slurm: the class's runs used both nodes ($(grep -h 'ranks ran on' "$out/class/students/alice/report.txt" 2>/dev/null))"
    rm -rf "$out" "$PWD/$B/class-slurm-root"
    [ -n "$made_user" ] && userdel paralab-ta 2>/dev/null
    no_leftovers "slurm class"
    [ -z "$(squeue -h 2>/dev/null)" ] && ok "Slurm: no job left in the queue" || notok "Slurm: no job left in the queue ($(squeue -h | head -n 3))"
else
    notok "Slurm up on the simulated hosts ($(tail -n 3 "$TMP/slurm-up.log" | tr '\n' ' '))"
fi
scripts/sim-slurm.sh down "$SLURM_DIR"
finish
