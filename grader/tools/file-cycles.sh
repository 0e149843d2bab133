#!/usr/bin/env bash
# file-cycles.sh OBJ... - the cycles among the source files behind these objects.
#
# File A uses file B when an undefined symbol of A's object is a global symbol that B's
# object defines. A cycle is a set of two or more files each of which reaches the others
# (a strongly connected component of that graph). Prints one line per cycle,
#   cycle: a.c -> b.c -> a.c   (a.c uses b_fn; b.c uses a_fn)
# naming one symbol per edge, and exits 1 when there is any; exits 0 and prints nothing
# when the files form a layering. Used by tests/grader/test_layout.sh on grader/ and common/.
# An object's name stands for its file: build/cpu/obj/common/pl_defer.o -> pl_defer.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: file-cycles.sh OBJ..." >&2; exit 2; }
for o in "$@"; do
    [ -f "$o" ] || { echo "file-cycles.sh: no object $o" >&2; exit 2; }
    n=$(basename "$o"); n=${n%.o}
    # defined globals (T D B R C W V, weak or not) and undefined symbols, one per line
    nm -P "$o" | awk -v f="$n" '$2 ~ /^[TDBRCWVGS]$/ {print "D", f, $1} $2 == "U" || $2 == "w" {print "U", f, $1}'
done | awk '
$1 == "D" { if (!($3 in def)) def[$3] = $2; files[$2] = 1; next }
$1 == "U" { use[++nu] = $2 SUBSEP $3; files[$2] = 1 }
END {
    for (i = 1; i <= nu; i++) {
        split(use[i], p, SUBSEP); a = p[1]; s = p[2]
        if (!(s in def)) continue
        b = def[s]; if (a == b) continue
        if (!((a, b) in edge)) { edge[a, b] = s; adj[a] = adj[a] " " b }
    }
    # reachability from each file (depth-first, iterative), then the components
    for (f in files) {
        delete seen; top = 0; stack[++top] = f
        while (top > 0) {
            x = stack[top--]; m = split(adj[x], nb, " ")
            for (k = 1; k <= m; k++) if (!(nb[k] in seen)) { seen[nb[k]] = 1; reach[f, nb[k]] = 1; stack[++top] = nb[k] }
        }
    }
    ncyc = 0
    for (f in files) {
        if (f in done) continue
        comp = ""; cnt = 0
        for (g in files) if (g == f || ((f, g) in reach && (g, f) in reach)) { members[++cnt] = g; done[g] = 1 }
        if (cnt < 2) continue
        # sort the members for a stable report
        for (i = 1; i <= cnt; i++) for (j = i + 1; j <= cnt; j++) if (members[j] < members[i]) { t = members[i]; members[i] = members[j]; members[j] = t }
        line = "cycle:"; why = ""
        for (i = 1; i <= cnt; i++) {
            line = line " " members[i]
            for (j = 1; j <= cnt; j++) if ((members[i], members[j]) in edge)
                why = why (why == "" ? "" : "; ") members[i] " uses " edge[members[i], members[j]] " of " members[j]
        }
        print line "   (" why ")"; ncyc++
    }
    exit ncyc > 0
}'
