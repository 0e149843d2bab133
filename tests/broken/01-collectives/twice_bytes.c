// expect: pass allreduce_ring.*
// expect-perf: allreduce_ring.bytes
/* Broken on purpose (performance only): every ring step is done twice, the second time
 * into a throw-away buffer. The result is right, but each rank sends 2x the optimal
 * 2(n-1)/n * S bytes, so the bytes rule scores optimum/actual = 0.5. */
#define lab_allreduce_ring lab_allreduce_ring_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allreduce_ring
void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                        pl_stream *stream);

/* One grouped ring step, repeated: the copy lands in `wasted`. */
static void step_twice(const float *out, size_t out_len, float *in, size_t in_len, float *wasted,
                       int next, int prev, pl_comm *comm, pl_stream *stream) {
    pl_group_start();
    pl_send(out, out_len, next, comm, stream);
    pl_recv(in, in_len, prev, comm, stream);
    pl_group_end();
    pl_group_start(); /* the bug: a redundant copy of the same chunk */
    pl_send(out, out_len, next, comm, stream);
    pl_recv(wasted, in_len, prev, comm, stream);
    pl_group_end();
}

void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                        pl_stream *stream) {
    int n = pl_comm_size(comm), rank = pl_comm_rank(comm);
    if (sendbuf != recvbuf) pl_copy(recvbuf, sendbuf, count * sizeof(float), stream);
    if (n == 1 || count == 0) return;
    int next = ring_peer(rank, +1, n), prev = ring_peer(rank, -1, n);
    size_t max_chunk = chunk_size(count, n, 0);
    float *incoming = pl_malloc_floats(max_chunk), *wasted = pl_malloc_floats(max_chunk);
    for (int s = 0; s < n - 1; s++) {
        int sc = ring_peer(rank, -s, n), rc = ring_peer(rank, -s - 1, n);
        size_t rlen = chunk_size(count, n, rc);
        step_twice(recvbuf + chunk_offset(count, n, sc), chunk_size(count, n, sc), incoming, rlen,
                   wasted, next, prev, comm, stream);
        pl_reduce_local(recvbuf + chunk_offset(count, n, rc), incoming, rlen, PL_SUM, stream);
    }
    for (int s = 0; s < n - 1; s++) {
        int sc = ring_peer(rank, 1 - s, n), rc = ring_peer(rank, -s, n);
        step_twice(recvbuf + chunk_offset(count, n, sc), chunk_size(count, n, sc),
                   recvbuf + chunk_offset(count, n, rc), chunk_size(count, n, rc), wasted, next,
                   prev, comm, stream);
    }
    pl_free(wasted);
    pl_free(incoming);
}
