// expect: crash reduce_scatter.oop.c[18]
// np: 3
/* Broken on purpose: the reduce-scatter keeps its running sums in a host array it never
 * allocated, so the first write (recvcount > 0) dereferences NULL: SIGSEGV. */
#define lab_reduce_scatter lab_reduce_scatter_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_reduce_scatter
void lab_reduce_scatter(const float *sendbuf, float *recvbuf, size_t recvcount, pl_comm *comm,
                        pl_stream *stream);

static float *running_sum; /* the bug: never allocated */

void lab_reduce_scatter(const float *sendbuf, float *recvbuf, size_t recvcount, pl_comm *comm,
                        pl_stream *stream) {
    float *volatile sums = running_sum; /* volatile: a real store, not a trap the compiler folds */
    for (size_t i = 0; i < recvcount; i++) sums[i] = 0.0f;
    lab_reduce_scatter_solution(sendbuf, recvbuf, recvcount, comm, stream);
}
