#!/usr/bin/env bash
# tests/grader/test_layout.sh - the grader's folders and the layering of grader/ and common/.
#   - grader/'s top level holds folders and a README that names each of them;
#   - no two source files of one program depend on each other, even through others
#     (grader/tools/file-cycles.sh over each program's objects: the engine, the class
#     grader, every lab's referee and player, the harness library in both flavours);
#   - the checker itself finds a planted cycle (two files calling each other, and three in a
#     ring through a global variable).
# Prints "ok - ..." / "not ok - ..." lines; run by tests/run.sh.
set -u
cd "$(dirname "$0")/../.."
: "${MPICC:=mpicc}" "${B:=build}"
TMP=$(mktemp -d /tmp/paralab-layout.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
ok() { echo "ok - layout: $*"; }
FAILED=0
notok() { echo "not ok - layout: $*"; FAILED=1; }

# -- grader/'s top level ---------------------------------------------------------------------
loose=$(find grader -mindepth 1 -maxdepth 1 -type f ! -name README.md -printf '%f ' | sed 's/ $//')
if [ -z "$loose" ]; then ok "grader/'s top level holds only folders and README.md"
else notok "files loose at grader/'s top: $loose"; fi
missing=""
for d in grader/*/; do
    d=${d%/}; d=${d#grader/}
    grep -q "^| \`$d/\`" grader/README.md 2>/dev/null || missing="$missing $d"
done
if [ -f grader/README.md ] && [ -z "$missing" ]; then ok "grader/README.md names every folder of grader/"
else notok "grader/README.md does not name:${missing:- (no README)}"; fi

# -- the checker on planted cycles -----------------------------------------------------------
mkdir -p "$TMP/plant"
printf 'int b(int);\nint a(int x) { return x ? b(x - 1) : 0; }\n' >"$TMP/plant/a.c"
printf 'int a(int);\nint b(int x) { return x ? a(x - 1) : 1; }\n' >"$TMP/plant/b.c"
printf 'extern int z_state;\nint y(void) { return z_state; }\n' >"$TMP/plant/x.c"
printf 'int y(void);\nint w(void) { return y(); }\n' >"$TMP/plant/v.c"
printf 'int w(void);\nint z_state;\nint z(void) { return w(); }\n' >"$TMP/plant/z.c"
printf 'int a(int);\nint top(void) { return a(3); }\n' >"$TMP/plant/top.c"
for f in "$TMP"/plant/*.c; do cc -c "$f" -o "${f%.c}.o" || notok "the planted files compile"; done
out=$(grader/tools/file-cycles.sh "$TMP"/plant/a.o "$TMP"/plant/b.o "$TMP"/plant/top.o); rc=$?
if [ $rc = 1 ] && grep -q '^cycle: a b ' <<<"$out" && ! grep -q top <<<"$out"; then
    ok "the checker finds two files that call each other, and not the file above them"
else notok "the checker missed a planted pair (rc $rc): $out"; fi
out=$(grader/tools/file-cycles.sh "$TMP"/plant/x.o "$TMP"/plant/v.o "$TMP"/plant/z.o); rc=$?
if [ $rc = 1 ] && grep -q '^cycle: v x z ' <<<"$out" && grep -q 'uses z_state of z' <<<"$out"; then
    ok "the checker finds a ring of three closed by a global variable"
else notok "the checker missed a ring through a variable (rc $rc): $out"; fi
out=$(grader/tools/file-cycles.sh "$TMP"/plant/a.o "$TMP"/plant/top.o); rc=$?
if [ $rc = 0 ] && [ -z "$out" ]; then ok "the checker passes a layering"
else notok "the checker flags a layering (rc $rc): $out"; fi

# -- each program's files ----------------------------------------------------------------------
check() { # check NAME OBJ...
    local name=$1; shift
    local out
    if out=$(grader/tools/file-cycles.sh "$@" 2>&1); then ok "no cycle among the files of $name ($# files)"
    else notok "$name: $(head -c 600 <<<"$out" | tr '\n' ' ')"; fi
}
compile_all() { # compile_all DIR CC-AND-FLAGS... -- SRC...
    local dir=$1; shift
    local cc=()
    while [ "$1" != -- ]; do cc+=("$1"); shift; done; shift
    mkdir -p "$dir"
    for s in "$@"; do
        "${cc[@]}" -c "$s" -o "$dir/$(basename "${s%.c}").o" 2>"$dir/err" || { notok "compiling $s: $(head -3 "$dir/err" | tr '\n' ' ')"; return 1; }
    done
}
ECC=(cc -std=c11 -O0 -Wall -D_GNU_SOURCE -Igrader/engine -Igrader/runner)
compile_all "$TMP/engine" "${ECC[@]}" -- grader/engine/*.c && check "the engine (grader/engine/)" "$TMP"/engine/*.o
compile_all "$TMP/class" "${ECC[@]}" -Igrader/class -- grader/class/*.c && check "the class grader (grader/class/)" "$TMP"/class/*.o

INC=(-Icommon -Ikernels -Idatasets -Imodels -Icommon/internal -Ikernels/internal -Igrader -Igrader/runner -Igrader/cases)
for lab in labs/[0-9][0-9]-*/; do
    lab=$(basename "$lab"); n=${lab%%-*}
    [ -f "grader/rubrics/$lab.rubric" ] || continue
    cases=$(ls grader/cases/lab$n.c grader/cases/lab${n}_*.c 2>/dev/null)
    ref=$(ls grader/referee/lab$n.c grader/referee/lab${n}_*.c 2>/dev/null)
    ply=$(ls grader/player/lab$n.c grader/player/lab${n}_*.c 2>/dev/null)
    runner=(grader/runner/*.c)
    refrun=$(ls grader/referee/*.c | grep -v '/lab[0-9]')
    plyrun=$(ls grader/player/*.c | grep -v '/lab[0-9]')
    # shellcheck disable=SC2086
    compile_all "$TMP/ref$n" $MPICC -std=c11 -O0 -D_GNU_SOURCE "${INC[@]}" -Igrader/referee -DDRV_REFEREE -- \
        "${runner[@]}" $cases $refrun $ref && check "lab $n's referee" "$TMP/ref$n"/*.o
    # shellcheck disable=SC2086
    compile_all "$TMP/ply$n" $MPICC -std=c11 -O0 -D_GNU_SOURCE "${INC[@]}" -Igrader/player -Ilabs/$lab -DDRV_PLAYER -- \
        "${runner[@]}" $cases $plyrun $ply && check "lab $n's player" "$TMP/ply$n"/*.o
done

# The library's objects as make builds them (X.c -> X.o, X.cu -> X.cu.o), one per source
# of today's tree: an object left behind by a file since removed is not looked at.
for f in cpu cuda; do
    objs=()
    for s in common/*.c common/*.cu; do
        case $s in *.cu) o="$B/$f/obj/$s.o"; [ $f = cuda ] || continue ;; *) o="$B/$f/obj/${s%.c}.o" ;; esac
        [ -f "$o" ] && objs+=("$o")
    done
    if [ ${#objs[@]} -lt "$(ls common/*.c | wc -l)" ]; then
        [ $f = cpu ] && notok "the cpu flavour's objects of common/ are not all built (make libs first)"
        continue
    fi
    check "the harness (common/, $f flavour)" "${objs[@]}"
done
exit $FAILED
