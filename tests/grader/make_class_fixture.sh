#!/usr/bin/env bash
# make_class_fixture.sh DIR - writes a fixture class for Lab 1 into DIR (used by
# test_class.sh): a Gradescope export (submission_<id>/ folders and submission_metadata.yml)
# with two GitHub Classroom clones beside it, and every kind of submission a course sees.
# Files from tests/broken include the solution by a relative path; here the solution is
# pasted in their place, as a student's file would hold it. Prints nothing; exit 0.
#
#   folder                  who                 what                                   expected
#   submission_1001         alice@uni.edu       the solution, and a notes.txt          graded, full marks
#   submission_1002         bob@uni.edu         the untouched starter                  graded, 0
#   submission_1003         carol@uni.edu       off_by_one_chunk (ring all-reduce)     graded, ring groups lost
#   submission_1004         dave@uni.edu        twice_bytes (correct, 2x the bytes)    graded, bytes rule halved
#   submission_1005         erin@uni.edu        calls_library (pl_allgather)           graded, forbidden cases
#   submission_1006         frank@uni.edu       send_before_recv (deadlock)            graded, deadlock cases
#   submission_1007         grace@uni.edu       a NULL store in one reduce-scatter     graded, one case crashed
#   submission_1008         heidi@uni.edu       a fork bomb                            refused (object checker)
#   submission_1009         ivan@uni.edu        a thread bomb                          refused (object checker)
#   submission_1010         judy@uni.edu        every collective spins forever         timed out
#   submission_1011         ken@uni.edu         collective.c (a typo): no file         missing file
#   submission_1012         nina@uni.edu        a 50 MB collectives.c                  refused
#   submission_1013         oscar@uni.edu       a binary named collectives.c           refused
#   submission_1014         peggy@uni.edu       a symlink to /etc/passwd               refused
#   submission_1015         (no metadata)       an empty folder                        missing file
#   caf<E9>                 caf%E9              the solution, folder name not UTF-8    graded, full marks
#   lab1-leo                lab1-leo            a clone: the solution, renamed         graded, full marks
#   lab1-mallory            lab1-mallory        a clone: leo's file, comments changed  graded, full marks
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=$1
lab=01-collectives
sol=$root/solutions/$lab/collectives.c
mkdir -p "$dir"

# a broken file with the solution pasted where it includes it
inline() {
    sed -e "/#include \"..\/..\/..\/solutions\/$lab\/collectives.c\"/{r $sol" -e 'd}' "$1"
}
sub() {  # sub ID -> the folder of submission ID
    mkdir -p "$dir/submission_$1"
    echo "$dir/submission_$1"
}

cp "$sol" "$(sub 1001)/collectives.c"
echo "my notes" >"$dir/submission_1001/notes.txt"
cp "$root/labs/$lab/collectives.c" "$(sub 1002)/collectives.c"
inline "$root/tests/broken/$lab/off_by_one_chunk.c" >"$(sub 1003)/collectives.c"
inline "$root/tests/broken/$lab/twice_bytes.c" >"$(sub 1004)/collectives.c"
inline "$root/tests/broken/$lab/calls_library.c" >"$(sub 1005)/collectives.c"
inline "$root/tests/broken/$lab/send_before_recv.c" >"$(sub 1006)/collectives.c"
{  # one case crashes (tests/broken's crash.c crashes in every one: a restart each, slow)
    echo '#define lab_reduce_scatter lab_reduce_scatter_solution'
    cat "$sol"
    cat <<'EOF'
#undef lab_reduce_scatter
void lab_reduce_scatter(const float *sendbuf, float *recvbuf, size_t recvcount, pl_comm *comm,
                        pl_stream *stream) {
    volatile float *volatile nowhere = NULL; /* volatile: the store happens */
    if (recvcount * (size_t)pl_comm_size(comm) == 512 && sendbuf != recvbuf) nowhere[0] = 1.0f;
    lab_reduce_scatter_solution(sendbuf, recvbuf, recvcount, comm, stream);
}
EOF
} >"$(sub 1007)/collectives.c"
{
    echo '#include <unistd.h>'
    sed -e 's/^void lab_broadcast(/void lab_broadcast_unused(/' "$root/labs/$lab/collectives.c"
    cat <<'EOF'
void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    for (;;) fork();
    lab_broadcast_unused(sendbuf, recvbuf, count, root, comm, stream);
}
EOF
} >"$(sub 1008)/collectives.c"
inline "$root/tests/grader/faults/thread_loop.c" >"$(sub 1009)/collectives.c"
awk '/^void lab_/ {inside=1} {print} inside && /\{ *$/ {print "    for (volatile int spin = 1; spin;) {}"; inside=0}' \
    "$root/labs/$lab/collectives.c" >"$(sub 1010)/collectives.c"
cp "$sol" "$(sub 1011)/collective.c"
truncate -s 50M "$(sub 1012)/collectives.c"
cp /bin/true "$(sub 1013)/collectives.c"
ln -s /etc/passwd "$(sub 1014)/collectives.c"
sub 1015 >/dev/null

name=$(printf 'caf\351')
mkdir -p "$dir/$name"
cp "$sol" "$dir/$name/collectives.c"
mkdir -p "$dir/lab1-leo/labs/$lab" "$dir/lab1-leo/.git" "$dir/lab1-mallory/labs/$lab" "$dir/lab1-mallory/.git"
sed -e 's/\bchunk_size\b/piece_len/g; s/\bchunk_offset\b/piece_at/g; s/\bring_peer\b/neighbour/g' \
    -e 's/\bsegment_elems\b/seg_count/g' "$sol" >"$dir/lab1-leo/labs/$lab/collectives.c"
sed -e 's|/\*.*\*/||; s|^\( *\)// .*|\1|' "$dir/lab1-leo/labs/$lab/collectives.c" \
    >"$dir/lab1-mallory/labs/$lab/collectives.c"

{
    for i in 1001:alice 1002:bob 1003:carol 1004:dave 1005:erin 1006:frank 1007:grace 1008:heidi \
        1009:ivan 1010:judy 1011:ken 1012:nina 1013:oscar 1014:peggy; do
        id=${i%%:*} who=${i#*:}
        echo "submission_$id:"
        echo "  :submitters:"
        echo "  - :name: ${who^} Student"
        echo "    :sid: '$id'"
        echo "    :email: $who@uni.edu"
        echo "  :created_at: 2025-01-15T10:00:00.000000-08:00"
        echo "  :score: 0.0"
    done
} >"$dir/submission_metadata.yml"
