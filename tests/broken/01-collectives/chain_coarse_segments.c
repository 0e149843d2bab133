// expect: full broadcast.* reduce.*
// np: 3
/* A correct alternative: the broadcast's and the reduce's chains cut the buffer in fixed
 * segments of 512 KiB (the reference: about count/8 elements, 4 to 128 KiB), and a rank
 * receives a segment, then forwards it, without grouping the two. A 1 MiB buffer goes down
 * each link in 2 segments: coarser and less overlapped than the reference, still
 * pipelined, so the pipelining rules keep their points. */
#define lab_broadcast lab_broadcast_solution
#define lab_reduce lab_reduce_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast
#undef lab_reduce
void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream);
void lab_reduce(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                pl_stream *stream);

#define COARSE ((size_t)131072) /* elements: 512 KiB */

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    int n = pl_comm_size(comm), me = pl_comm_rank(comm);
    int pos = (me - root + n) % n, up = (me + n - 1) % n, down = (me + 1) % n;
    if (pos == 0 && sendbuf != recvbuf) pl_copy(recvbuf, sendbuf, count * sizeof(float), stream);
    if (n < 2) return;
    const float *src = pos == 0 ? sendbuf : recvbuf;
    for (size_t at = 0; at < count; at += COARSE) {
        size_t len = count - at < COARSE ? count - at : COARSE;
        if (pos > 0) pl_recv(recvbuf + at, len, up, comm, stream);
        if (pos < n - 1) pl_send(src + at, len, down, comm, stream);
    }
}

void lab_reduce(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                pl_stream *stream) {
    int n = pl_comm_size(comm), me = pl_comm_rank(comm);
    int pos = (me - root + n) % n, from = (me + 1) % n, to = (me + n - 1) % n;
    if (pos == 0 && sendbuf != recvbuf) pl_copy(recvbuf, sendbuf, count * sizeof(float), stream);
    if (n < 2 || count == 0) return;
    float *sum = pos == 0 ? NULL : pl_malloc_floats(count < COARSE ? count : COARSE);
    float *in = pl_malloc_floats(count < COARSE ? count : COARSE);
    for (size_t at = 0; at < count; at += COARSE) {
        size_t len = count - at < COARSE ? count - at : COARSE;
        const float *out = sendbuf + at; /* the chain's last rank sends its own input */
        if (pos < n - 1) {
            pl_recv(in, len, from, comm, stream);
            if (pos == 0) {
                pl_reduce_local(recvbuf + at, in, len, PL_SUM, stream);
            } else {
                pl_copy(sum, sendbuf + at, len * sizeof(float), stream);
                pl_reduce_local(sum, in, len, PL_SUM, stream);
                out = sum;
            }
        }
        if (pos > 0) pl_send(out, len, to, comm, stream);
    }
    pl_free(in);
    if (sum) pl_free(sum);
}
