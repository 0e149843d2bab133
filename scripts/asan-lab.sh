#!/usr/bin/env bash
# asan-lab.sh N [NP] - grade lab N's reference solution in the AddressSanitizer flavour of the
# cpu build (make SANITIZE=address: build/asan/), at the world sizes NP (default "2") with
# the rubric's small arguments. Exit 0 only at full marks with no sanitizer report.
#
#   scripts/asan-lab.sh 4            # make asan LAB=4 does the same
#   scripts/asan-lab.sh 1 "1 3"
#   ASAN_LEAKS=1 scripts/asan-lab.sh 6   # also LeakSanitizer, minus Open MPI's own leaks
#
# Sanitizer options that work beside Open MPI (docs/harness.md, "AddressSanitizer"):
#   detect_leaks=0      Open MPI keeps memory to the end and unloads its plugins before the
#                       leak check, so their leaks cannot even be told apart (ASAN_LEAKS=1
#                       keeps the plugins loaded and suppresses Open MPI's own)
#   abort_on_error=1    a finding kills the rank with SIGABRT: the case is a crash
#   log_path            each report in a file of its own, so none is lost in the output
set -u
cd "$(dirname "$0")/.."
lab=${1:?usage: scripts/asan-lab.sh N [NP]}
np=${2:-2}
: "${MAKE:=make}"
out=build/asan/grade
logs=$out/asan-logs-lab$lab
rm -rf "$logs" && mkdir -p "$logs" || exit 2
opts="abort_on_error=1:log_path=$PWD/$logs/asan:detect_odr_violation=0"
if [ -n "${ASAN_LEAKS:-}" ]; then
    mkdir -p build/asan/tools
    printf 'int dlclose(void *handle) { (void)handle; return 0; }\n' |
        cc -shared -fPIC -x c - -o build/asan/tools/nodlclose.so || exit 2
    printf 'leak:libmpi.so\nleak:libopen-pal.so\nleak:libopen-rte.so\nleak:libpmix.so\nleak:mca_\nleak:libhwloc.so\nleak:libevent\nleak:libucp\nleak:libucs\n' >"$logs/lsan.supp"
    export LSAN_OPTIONS="suppressions=$PWD/$logs/lsan.supp:print_suppressions=0"
    export PL_ASAN_PRELOAD="$PWD/build/asan/tools/nodlclose.so"
    opts="$opts:detect_leaks=1:fast_unwind_on_malloc=0:verify_asan_link_order=0"
else
    opts="$opts:detect_leaks=0"
fi
export ASAN_OPTIONS="$opts${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
start=$SECONDS
"$MAKE" --no-print-directory lab-"$lab" SOLUTION=1 SANITIZE=address RUBRIC_SCALE=1 NP="$np" OUT="$out" \
    ${PL_ASAN_PRELOAD:+MPIRUN="mpirun -x LD_PRELOAD=$PL_ASAN_PRELOAD"}
rc=$?
reports=$(find "$logs" -name 'asan.*' | wc -l)
for f in $(find "$logs" -name 'asan.*' | head -3); do echo "--- $f"; head -30 "$f"; done
echo "asan-lab: lab $lab, np $np: grader exit $rc, $reports sanitizer report(s), $((SECONDS - start)) s"
[ "$rc" = 0 ] && [ "$reports" = 0 ]
