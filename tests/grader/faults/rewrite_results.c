// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
/* Issue item 3: a rank rewrites the report (OUT/results.json) to 100/100, hoping to outlive
 * the engine. The object checker refuses fopen(); the engine kills every descendant before
 * writing its reports and writes them by rename, never through a planted link. */
#include <stdio.h>

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    FILE *f = fopen("build/grade/01-collectives/results.json", "w");
    if (f) {
        fputs("{\"score\": 100, \"max_score\": 100, \"tests\": []}\n", f);
        fclose(f);
    }
    lab_broadcast_solution(sendbuf, recvbuf, count, root, comm, stream);
}
