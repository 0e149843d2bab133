/* moe_allreduce.c - Lab 9: a small all-reduce on symmetric memory, one-shot and two-shot
 * (moe.h has the API, README.md the protocol and the picture).
 *
 * Every rank's input goes into its copy of a symmetric buffer; peers read it directly
 * through pl_sym_peer_ptr (NVLink loads on a GPU, shared memory here). Two barriers per
 * call: the first says every input is in place; the second that every rank has finished
 * reading, so the next call may overwrite the buffers.
 */
#include <stdlib.h>

#include "moe.h"

struct moe_ar {
    pl_comm *comm;
    size_t max;
    float *in;   /* symmetric [max]: this rank's input                          */
    float *res;  /* symmetric [max]: the reduced chunks the owners write here    */
    float *acc;  /* local [max]: the chunk being reduced                         */
};

moe_ar *moe_ar_create(size_t max_count, pl_comm *comm) {
    moe_ar *a = calloc(1, sizeof *a);
    PL_CHECK(a != NULL, "out of host memory");
    a->comm = comm, a->max = max_count;
    a->in = pl_sym_malloc((max_count + 1) * sizeof(float));
    a->res = pl_sym_malloc((max_count + 1) * sizeof(float));
    a->acc = pl_malloc_floats(max_count + 1);
    return a;
}

void moe_ar_free(moe_ar *a) {
    if (!a) return;
    pl_sym_free(a->in);
    pl_sym_free(a->res);
    pl_free(a->acc);
    free(a);
}

/* dst = in_0 + in_1 + ... over [lo, lo + len), read from every rank's copy, in rank order. */
static void reduce_from_peers(moe_ar *a, float *dst, size_t lo, size_t len, pl_stream *s) {
    int n = pl_comm_size(a->comm);
    const float *first = pl_sym_peer_ptr(a->in, 0);
    PL_CHECK(first != NULL, "moe_allreduce: a peer's buffer is not reachable (ranks on several nodes?)");
    pl_copy(dst, first + lo, len * sizeof(float), s);
    for (int r = 1; r < n; r++) pl_reduce_local(dst, (const float *)pl_sym_peer_ptr(a->in, r) + lo, len, PL_SUM, s);
}

void moe_allreduce_oneshot(moe_ar *a, const float *in, float *out, size_t count, pl_stream *s) {
    PL_CHECK(count <= a->max, "moe_allreduce_oneshot: count above moe_ar_create's max_count");
    pl_copy(a->in, in, count * sizeof(float), s);
    pl_sym_barrier(s); /* every input is in place */
    reduce_from_peers(a, a->acc, 0, count, s);
    pl_sym_barrier(s); /* everyone has read every input: the next call may overwrite them */
    pl_copy(out, a->acc, count * sizeof(float), s);
}

void moe_allreduce_twoshot(moe_ar *a, const float *in, float *out, size_t count, pl_stream *s) {
    PL_CHECK(count <= a->max, "moe_allreduce_twoshot: count above moe_ar_create's max_count");
    int n = pl_comm_size(a->comm), me = pl_comm_rank(a->comm);
    size_t base = count / (size_t)n, extra = count % (size_t)n;
    size_t lo = (size_t)me * base + ((size_t)me < extra ? (size_t)me : extra), len = base + ((size_t)me < extra);
    pl_copy(a->in, in, count * sizeof(float), s);
    pl_sym_barrier(s); /* every input is in place */
    reduce_from_peers(a, a->acc, lo, len, s); /* reduce-scatter by peer reads */
    for (int r = 0; r < n; r++)               /* all-gather by peer writes    */
        pl_copy((float *)pl_sym_peer_ptr(a->res, r) + lo, a->acc, len * sizeof(float), s);
    pl_sym_barrier(s); /* every chunk has arrived everywhere, every input has been read */
    pl_copy(out, a->res, count * sizeof(float), s);
}
