// expect: pass reduce_scatter.* broadcast.*
// expect-perf: freed
/* Broken on purpose: the reduce-scatter never frees its two scratch blocks. Every result
 * is right and the traffic is the ring's; each call leaves 2 * recvcount floats of device
 * memory behind, which the per-case leak check reports with the line that allocated them. */
#include <stdbool.h>
#include "pl.h" /* declared before the macro below */
static bool g_in_reduce_scatter;
#define pl_free(p) (g_in_reduce_scatter ? (void)(p) : pl_free(p))
#define lab_reduce_scatter lab_reduce_scatter_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_reduce_scatter
void lab_reduce_scatter(const float *sendbuf, float *recvbuf, size_t recvcount, pl_comm *comm, pl_stream *stream);

void lab_reduce_scatter(const float *sendbuf, float *recvbuf, size_t recvcount, pl_comm *comm, pl_stream *stream) {
    g_in_reduce_scatter = true;
    lab_reduce_scatter_solution(sendbuf, recvbuf, recvcount, comm, stream);
    g_in_reduce_scatter = false;
}
