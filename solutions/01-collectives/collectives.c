/* collectives.c - Lab 1 reference solution: collectives from point-to-point send/recv.
 *
 * Every algorithm here uses only pl_send/pl_recv (grouped where two transfers must progress
 * together), pl_copy/pl_reduce_local for local work, and pl_malloc_floats/pl_free for
 * scratch. n = ranks, S = message bytes (as in the nccl-tests tables of the handout).
 *
 *   broadcast       pipelined chain       n-2+segments steps   S bytes sent per rank (max)
 *   reduce          pipelined chain       n-2+segments steps   S bytes sent per rank (max)
 *   allgather       ring                  n-1 steps            (n-1)/n * S
 *   reduce_scatter  ring                  n-1 steps            (n-1)/n * S
 *   allreduce_ring  reduce-scatter + all-gather, 2(n-1) steps  2(n-1)/n * S
 *   allreduce_rd    recursive doubling    log2(p2) (+2 fold) steps   log2(p2) * S (+S)
 */
#include <stdbool.h>
#include <stddef.h>

#include "collectives.h" // defines: the lab API; brings in pl.h (pl_send, pl_recv, ...)

/* Pipeline segments for the chains: big enough that each message is not all latency,
 * small enough that the chain fills quickly. Aim for about 8 segments per message,
 * each between 4 KiB and 128 KiB. */
#define SEGMENT_MIN_ELEMS ((size_t)1024)
#define SEGMENT_MAX_ELEMS ((size_t)32768)

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

static size_t segment_elems(size_t count) {
    size_t seg = (count + 7) / 8;
    if (seg < SEGMENT_MIN_ELEMS) seg = SEGMENT_MIN_ELEMS;
    if (seg > SEGMENT_MAX_ELEMS) seg = SEGMENT_MAX_ELEMS;
    return min_size(seg, count); /* count > 0 here, so seg >= 1 */
}

/* The rank `delta` places away from `rank` around a ring of n (delta may be negative). */
static int ring_peer(int rank, int delta, int n) { return ((rank + delta) % n + n) % n; }

/* The ring all-reduce splits count elements into n chunks whose sizes differ by at most
 * one: the first count % n chunks get one extra element. Chunks may be empty (count < n);
 * both ends of a transfer compute the same size, so an empty send meets an empty recv. */
static size_t chunk_size(size_t count, int n, int c) {
    return count / (size_t)n + ((size_t)c < count % (size_t)n ? 1 : 0);
}
static size_t chunk_offset(size_t count, int n, int c) {
    return (size_t)c * (count / (size_t)n) + min_size((size_t)c, count % (size_t)n);
}

/* ---- broadcast: pipelined chain ------------------------------------------------------
 * The chain is root, root+1, ..., root+n-1 (mod n). Each rank receives segment i from its
 * predecessor and forwards it to its successor. Receiving segment i+1 is grouped with
 * forwarding segment i, so every link of the chain is busy at once: the time is about
 * (n - 2 + segments) segment transfers instead of (n - 1) whole messages.
 * Steps: n-2+segments. Bytes sent per rank: S (the last rank of the chain sends 0). */
void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    int n = pl_comm_size(comm), rank = pl_comm_rank(comm);
    if (rank == root && sendbuf != recvbuf)
        pl_copy(recvbuf, sendbuf, count * sizeof(float), stream);
    if (n == 1 || count == 0) return;

    int pos = ring_peer(rank, -root, n); /* place in the chain, root at 0 */
    bool has_prev = pos > 0, has_next = pos < n - 1;
    int prev = ring_peer(rank, -1, n), next = ring_peer(rank, +1, n);
    const float *forward = (pos == 0) ? sendbuf : recvbuf; /* the root forwards its input */

    size_t seg = segment_elems(count), nseg = (count + seg - 1) / seg;
    if (has_prev) pl_recv(recvbuf, seg, prev, comm, stream);
    for (size_t i = 0; i < nseg; i++) {
        size_t off = i * seg, next_off = off + seg;
        pl_group_start();
        if (has_next) pl_send(forward + off, min_size(seg, count - off), next, comm, stream);
        if (has_prev && i + 1 < nseg)
            pl_recv(recvbuf + next_off, min_size(seg, count - next_off), prev, comm, stream);
        pl_group_end();
    }
}

/* ---- reduce: pipelined chain toward the root -------------------------------------------
 * The same chain, walked backwards: the last rank (root-1) starts by sending its input;
 * each rank in between adds its own input to the partial sum it received and passes it on;
 * the root adds the final partial sum into recvbuf. Non-root inputs are const, so partial
 * sums live in a scratch buffer. As in the broadcast, receiving segment i+1 overlaps
 * sending segment i.
 * Steps: n-2+segments. Bytes sent per rank: S (the root sends 0). */
void lab_reduce(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                pl_stream *stream) {
    int n = pl_comm_size(comm), rank = pl_comm_rank(comm);
    if (rank == root && sendbuf != recvbuf)
        pl_copy(recvbuf, sendbuf, count * sizeof(float), stream);
    if (n == 1 || count == 0) return;

    int pos = ring_peer(rank, -root, n);
    bool is_root = pos == 0, is_first = pos == n - 1; /* is_first: the chain starts here */
    int from = ring_peer(rank, +1, n), to = ring_peer(rank, -1, n);
    size_t seg = segment_elems(count), nseg = (count + seg - 1) / seg;

    if (is_first) { /* nothing to add yet: send the input as it is */
        for (size_t i = 0; i < nseg; i++) {
            size_t off = i * seg;
            pl_send(sendbuf + off, min_size(seg, count - off), to, comm, stream);
        }
        return;
    }

    /* partial: what the rest of the chain sent us. The root accumulates into recvbuf
     * (already holding its input); the others add their input into partial and forward it. */
    float *partial = pl_malloc_floats(count);
    float *acc = is_root ? recvbuf : partial;
    const float *addend = is_root ? partial : sendbuf;

    pl_recv(partial, seg, from, comm, stream);
    pl_reduce_local(acc, addend, seg, PL_SUM, stream);
    for (size_t i = 0; i < nseg; i++) {
        size_t off = i * seg, next_off = off + seg;
        size_t next_len = i + 1 < nseg ? min_size(seg, count - next_off) : 0;
        pl_group_start();
        if (!is_root) pl_send(acc + off, min_size(seg, count - off), to, comm, stream);
        if (next_len > 0) pl_recv(partial + next_off, next_len, from, comm, stream);
        pl_group_end();
        if (next_len > 0) pl_reduce_local(acc + next_off, addend + next_off, next_len, PL_SUM, stream);
    }
    pl_free(partial); /* waits for queued work first: the last send still reads it */
}

/* ---- all-gather: ring ----------------------------------------------------------------
 * Each rank puts its block in its slot, then for n-1 steps passes on the block it got last
 * (its own at step 0) to rank+1 while receiving a new one from rank-1. The send and the
 * receive of a step must be in one group: everyone sends at once, and with rendezvous sends
 * nobody's send could finish before the neighbour posts its receive.
 * Steps: n-1. Bytes sent per rank: (n-1)/n * S. */
void lab_allgather(const float *sendbuf, float *recvbuf, size_t sendcount, pl_comm *comm,
                   pl_stream *stream) {
    int n = pl_comm_size(comm), rank = pl_comm_rank(comm);
    float *mine = recvbuf + (size_t)rank * sendcount;
    if (sendbuf != mine) pl_copy(mine, sendbuf, sendcount * sizeof(float), stream);
    if (n == 1 || sendcount == 0) return;

    int next = ring_peer(rank, +1, n), prev = ring_peer(rank, -1, n);
    for (int s = 0; s < n - 1; s++) {
        int send_block = ring_peer(rank, -s, n), recv_block = ring_peer(rank, -s - 1, n);
        pl_group_start();
        pl_send(recvbuf + (size_t)send_block * sendcount, sendcount, next, comm, stream);
        pl_recv(recvbuf + (size_t)recv_block * sendcount, sendcount, prev, comm, stream);
        pl_group_end();
    }
}

/* ---- reduce-scatter: ring --------------------------------------------------------------
 * At step s rank r forwards its running sum of block r-1-s to rank+1 and receives the
 * running sum of block r-2-s from rank-1, adding its own contribution. After n-1 steps the
 * last block received is block r, now summed over all ranks. The caller's sendbuf is never
 * written: running sums live in two scratch blocks (one being sent, one being received).
 * Steps: n-1. Bytes sent per rank: (n-1)/n * S. */
void lab_reduce_scatter(const float *sendbuf, float *recvbuf, size_t recvcount, pl_comm *comm,
                        pl_stream *stream) {
    int n = pl_comm_size(comm), rank = pl_comm_rank(comm);
    const float *mine = sendbuf + (size_t)rank * recvcount;
    if (n == 1 || recvcount == 0) {
        if (recvbuf != mine) pl_copy(recvbuf, mine, recvcount * sizeof(float), stream);
        return;
    }

    int next = ring_peer(rank, +1, n), prev = ring_peer(rank, -1, n);
    float *scratch = pl_malloc_floats(2 * recvcount);
    float *sum[2] = {scratch, scratch + recvcount};
    for (int s = 0; s < n - 1; s++) {
        int recv_block = ring_peer(rank, -s - 2, n);
        /* step 0 sends our own input block as it is; later steps the sum received before */
        const float *out = s == 0 ? sendbuf + (size_t)ring_peer(rank, -1, n) * recvcount
                                  : sum[(s - 1) % 2];
        float *in = sum[s % 2];
        pl_group_start();
        pl_send(out, recvcount, next, comm, stream);
        pl_recv(in, recvcount, prev, comm, stream);
        pl_group_end();
        pl_reduce_local(in, sendbuf + (size_t)recv_block * recvcount, recvcount, PL_SUM, stream);
    }
    /* Copy last: in place, recvbuf is our own input block, which the loop still read. */
    pl_copy(recvbuf, sum[(n - 2) % 2], recvcount * sizeof(float), stream);
    pl_free(scratch);
}

/* ---- all-reduce: ring (reduce-scatter, then all-gather) --------------------------------
 * Works in recvbuf (a copy of the input when out of place). Phase 1: at step s rank r sends
 * chunk r-s and receives chunk r-s-1, adding it to its own; after n-1 steps rank r holds
 * the full sum of chunk r+1. Phase 2: the same ring passes the finished chunks around,
 * each received chunk overwriting the partial one. Chunks differ in size by at most one
 * element (chunk_size), so any count works, including count < n.
 * Steps: 2(n-1). Bytes sent per rank: 2(n-1)/n * S. */
void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                        pl_stream *stream) {
    int n = pl_comm_size(comm), rank = pl_comm_rank(comm);
    if (sendbuf != recvbuf) pl_copy(recvbuf, sendbuf, count * sizeof(float), stream);
    if (n == 1 || count == 0) return;

    int next = ring_peer(rank, +1, n), prev = ring_peer(rank, -1, n);
    float *incoming = pl_malloc_floats(chunk_size(count, n, 0)); /* chunk 0 is the largest */

    for (int s = 0; s < n - 1; s++) { /* phase 1: reduce-scatter */
        int sc = ring_peer(rank, -s, n), rc = ring_peer(rank, -s - 1, n);
        size_t rlen = chunk_size(count, n, rc);
        pl_group_start();
        pl_send(recvbuf + chunk_offset(count, n, sc), chunk_size(count, n, sc), next, comm, stream);
        pl_recv(incoming, rlen, prev, comm, stream);
        pl_group_end();
        pl_reduce_local(recvbuf + chunk_offset(count, n, rc), incoming, rlen, PL_SUM, stream);
    }
    for (int s = 0; s < n - 1; s++) { /* phase 2: all-gather of the finished chunks */
        int sc = ring_peer(rank, 1 - s, n), rc = ring_peer(rank, -s, n);
        pl_group_start();
        pl_send(recvbuf + chunk_offset(count, n, sc), chunk_size(count, n, sc), next, comm, stream);
        pl_recv(recvbuf + chunk_offset(count, n, rc), chunk_size(count, n, rc), prev, comm, stream);
        pl_group_end();
    }
    pl_free(incoming);
}

/* ---- all-reduce: recursive doubling -----------------------------------------------------
 * Let p2 be the largest power of two <= n. Fold: each "extra" rank r >= p2 sends its input
 * to r - p2, which adds it. Then the p2 remaining ranks exchange their whole partial sums
 * with partner rank ^ mask for mask = 1, 2, 4, ..., p2/2 and add: after the step with mask
 * m every rank holds the sum over a block of 2m ranks, and after log2(p2) steps the sum of
 * all. Unfold: ranks r < n - p2 send the result back to r + p2. Both partners add the same
 * two values (a + b == b + a exactly), so every rank gets a bit-identical result.
 * Steps: log2(p2), plus 2 when n is not a power of two. Bytes sent per rank: log2(p2) * S
 * (+S for a rank that folds). Few messages: the choice for small S. */
void lab_allreduce_rd(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                      pl_stream *stream) {
    int n = pl_comm_size(comm), rank = pl_comm_rank(comm);
    if (count == 0) return;
    int p2 = 1;
    while (p2 * 2 <= n) p2 *= 2;
    int extras = n - p2;

    if (rank >= p2) { /* an extra rank: hand our input over, get the result back */
        pl_send(sendbuf, count, rank - p2, comm, stream);
        pl_recv(recvbuf, count, rank - p2, comm, stream);
        return;
    }

    if (sendbuf != recvbuf) pl_copy(recvbuf, sendbuf, count * sizeof(float), stream);
    if (n == 1) return;
    float *incoming = pl_malloc_floats(count);
    if (rank < extras) { /* fold */
        pl_recv(incoming, count, rank + p2, comm, stream);
        pl_reduce_local(recvbuf, incoming, count, PL_SUM, stream);
    }
    for (int mask = 1; mask < p2; mask *= 2) {
        int partner = rank ^ mask;
        pl_group_start(); /* both partners send at once: must be grouped */
        pl_send(recvbuf, count, partner, comm, stream);
        pl_recv(incoming, count, partner, comm, stream);
        pl_group_end();
        pl_reduce_local(recvbuf, incoming, count, PL_SUM, stream);
    }
    if (rank < extras) pl_send(recvbuf, count, rank + p2, comm, stream); /* unfold */
    pl_free(incoming);
}

/* ---- all-reduce: pick by size ------------------------------------------------------------
 * Small messages are dominated by per-message latency: recursive doubling needs about
 * log2 n messages against the ring's 2(n-1). Large messages are dominated by bandwidth:
 * the ring sends 2(n-1)/n * S against log2(n) * S. */
void lab_allreduce(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                   pl_stream *stream) {
    if (count * sizeof(float) < LAB_ALLREDUCE_SMALL_BYTES)
        lab_allreduce_rd(sendbuf, recvbuf, count, comm, stream);
    else
        lab_allreduce_ring(sendbuf, recvbuf, count, comm, stream);
}
