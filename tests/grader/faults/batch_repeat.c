// lab: 01-collectives
// expect: wrong allreduce_ring.*
// speed: quick
// sandbox: both
/* A timed run makes many calls back to back, each on its own buffers right after the last
 * call's. This ring all-reduce computes a call honestly unless its input sits just past the
 * previous call's, and then answers with the previous result (a device copy: no message at
 * all), so only the first call of a timed run communicates. Every call of a timed run has
 * inputs of its own and is checked: the second call is wrong ("timed run 1, call 2 of ...:
 * ... or a call skipped?"). */
#define lab_allreduce_ring lab_allreduce_ring_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allreduce_ring

void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream);

static const float *last_send;
static float *last_recv;
static size_t last_count;

void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream) {
    if (count > 0 && last_send && count == last_count && sendbuf == last_send + count) {
        pl_copy(recvbuf, last_recv, count * sizeof(float), stream);
    } else {
        lab_allreduce_ring_solution(sendbuf, recvbuf, count, comm, stream);
    }
    last_send = sendbuf, last_recv = recvbuf, last_count = count;
}
