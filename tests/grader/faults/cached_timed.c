// lab: 01-collectives
// expect: wrong allreduce_ring.*
// speed: quick
// sandbox: both
/* A perf case used to check the first call only and then time repeats of it. This ring
 * all-reduce computes its first call of every size honestly, keeps a copy of the result,
 * and answers every later call of that size with the copy (a device copy: far faster than
 * any all-reduce). Every timed run now gets fresh inputs and is checked: the first repeat
 * is wrong ("timed run 1: ... a result computed once and repeated?"). */
#define lab_allreduce_ring lab_allreduce_ring_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allreduce_ring

void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream);

static float *cached[64];
static size_t cached_count[64];

void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream) {
    for (int i = 0; i < 64; i++)
        if (cached[i] && cached_count[i] == count) {
            pl_copy(recvbuf, cached[i], count * sizeof(float), stream);
            return;
        }
    lab_allreduce_ring_solution(sendbuf, recvbuf, count, comm, stream);
    for (int i = 0; i < 64; i++)
        if (!cached[i]) {
            cached[i] = pl_malloc_floats(count ? count : 1);
            cached_count[i] = count;
            pl_copy(cached[i], recvbuf, count * sizeof(float), stream);
            break;
        }
}
