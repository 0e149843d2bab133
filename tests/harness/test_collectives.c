/* The library collectives against a naive host reference, out of place and in place,
 * every root, sum/max/avg, on the world and on split communicators; and the instrumentation
 * that counts them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

static int N, ME;

static float val(int r, size_t i) { return (float)((int)((i * 7 + (size_t)r * 5) % 11) - 5); }

static int same(const float *a, const float *b, size_t n) { return n == 0 || memcmp(a, b, n * 4) == 0; }

static float ref_reduce(pl_op op, size_t i, int n) {
    float acc = val(0, i);
    for (int r = 1; r < n; r++) acc = op == PL_MAX ? fmaxf(acc, val(r, i)) : acc + val(r, i);
    return op == PL_AVG ? acc / (float)n : acc;
}

static void test_comm(pl_comm *c, const char *label) {
    int n = pl_comm_size(c), me = pl_comm_rank(c);
    /* Values depend on the rank in c, so a split communicator is checked like the world. */
    size_t counts[] = {0, 1, 3, 1000, 4099};
    pl_op ops[] = {PL_SUM, PL_MAX, PL_AVG};
    const char *opn[] = {"sum", "max", "avg"};
    char msg[128];
    for (int ip = 0; ip < 2; ip++) {
        int ok_ar = 1, ok_ag = 1, ok_rs = 1, ok_bc = 1, ok_rd = 1, ok_a2a = 1;
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
            size_t cnt = counts[ci], tot = cnt * (size_t)n;
            float *h = malloc((tot + 1) * 4), *e = malloc((tot + 1) * 4), *g = malloc((tot + 1) * 4);
            float *d = pl_malloc_floats(tot + 1), *d2 = pl_malloc_floats(tot + 1);
            for (int o = 0; o < 3; o++) {
                for (size_t i = 0; i < cnt; i++) h[i] = val(me, i);
                pl_upload(d, h, cnt * 4);
                pl_poison(d2, cnt, NULL);
                pl_allreduce(d, ip ? d : d2, cnt, ops[o], c, NULL);
                pl_download(g, ip ? d : d2, cnt * 4);
                for (size_t i = 0; i < cnt; i++) e[i] = ref_reduce(ops[o], i, n);
                if (!same(g, e, cnt)) ok_ar = 0;
                /* reduce-scatter: block me of the sum of everyone's tot-element input */
                for (size_t i = 0; i < tot; i++) h[i] = val(me, i);
                pl_upload(d, h, tot * 4);
                pl_poison(d2, cnt, NULL);
                float *rs_out = ip ? d + (size_t)me * cnt : d2;
                pl_reduce_scatter(d, rs_out, cnt, ops[o], c, NULL);
                pl_download(g, rs_out, cnt * 4);
                for (size_t i = 0; i < cnt; i++) e[i] = ref_reduce(ops[o], (size_t)me * cnt + i, n);
                if (!same(g, e, cnt)) ok_rs = 0;
                for (int root = 0; root < n; root++) {
                    for (size_t i = 0; i < cnt; i++) h[i] = val(me, i);
                    pl_upload(d, h, cnt * 4);
                    pl_poison(d2, cnt, NULL);
                    pl_reduce(d, ip ? d : d2, cnt, ops[o], root, c, NULL);
                    if (me == root) {
                        pl_download(g, ip ? d : d2, cnt * 4);
                        for (size_t i = 0; i < cnt; i++) e[i] = ref_reduce(ops[o], i, n);
                        if (!same(g, e, cnt)) ok_rd = 0;
                    }
                }
            }
            for (int root = 0; root < n; root++) {
                for (size_t i = 0; i < cnt; i++) h[i] = val(me, i);
                pl_upload(d, h, cnt * 4);
                pl_poison(d2, cnt, NULL);
                pl_broadcast(d, ip ? d : d2, cnt, root, c, NULL);
                pl_download(g, ip ? d : d2, cnt * 4);
                for (size_t i = 0; i < cnt; i++) e[i] = val(root, i);
                if (!same(g, e, cnt)) ok_bc = 0;
            }
            /* all-gather: in place sends from its own block of the output */
            for (size_t i = 0; i < cnt; i++) h[i] = val(me, i);
            pl_poison(d2, tot, NULL);
            float *ag_in = ip ? d2 + (size_t)me * cnt : d;
            pl_upload(ag_in, h, cnt * 4);
            pl_allgather(ag_in, d2, cnt, c, NULL);
            pl_download(g, d2, tot * 4);
            for (int r = 0; r < n; r++)
                for (size_t i = 0; i < cnt; i++) e[(size_t)r * cnt + i] = val(r, i);
            if (!same(g, e, tot)) ok_ag = 0;
            /* all-to-all: block j of my input goes to rank j */
            for (int j = 0; j < n; j++)
                for (size_t i = 0; i < cnt; i++) h[(size_t)j * cnt + i] = val(me * 100 + j, i);
            pl_upload(d, h, tot * 4);
            pl_poison(d2, tot, NULL);
            pl_alltoall(d, ip ? d : d2, cnt, c, NULL);
            pl_download(g, ip ? d : d2, tot * 4);
            for (int r = 0; r < n; r++)
                for (size_t i = 0; i < cnt; i++) e[(size_t)r * cnt + i] = val(r * 100 + me, i);
            if (!same(g, e, tot)) ok_a2a = 0;
            pl_free(d);
            pl_free(d2);
            free(h); free(e); free(g);
        }
        const char *mode = ip ? "in place" : "out of place";
        (void)opn;
        snprintf(msg, sizeof msg, "%s: allreduce sum/max/avg %s", label, mode); tap_check(ok_ar, msg);
        snprintf(msg, sizeof msg, "%s: reduce_scatter sum/max/avg %s", label, mode); tap_check(ok_rs, msg);
        snprintf(msg, sizeof msg, "%s: reduce every root %s", label, mode); tap_check(ok_rd, msg);
        snprintf(msg, sizeof msg, "%s: broadcast every root %s", label, mode); tap_check(ok_bc, msg);
        snprintf(msg, sizeof msg, "%s: allgather %s", label, mode); tap_check(ok_ag, msg);
        snprintf(msg, sizeof msg, "%s: alltoall %s", label, mode); tap_check(ok_a2a, msg);
    }
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    N = pl_world();
    ME = pl_rank();
    test_comm(pl_comm_world(), "world");

    /* Split into even and odd ranks, ordered by descending key. */
    pl_comm *half = pl_comm_split(pl_comm_world(), ME % 2, -ME);
    int expect_size = (N + 1 - ME % 2) / 2;
    int expect_rank = (expect_size - 1) - ME / 2;
    tap_check(pl_comm_size(half) == expect_size && pl_comm_rank(half) == expect_rank,
              "comm split: sizes and key order");
    /* The sum of world ranks within each half tells the halves did not mix. */
    float mine = (float)ME, sum = -1;
    float *d = pl_malloc_floats(1);
    pl_upload(d, &mine, 4);
    pl_allreduce(d, d, 1, PL_SUM, half, NULL);
    pl_download(&sum, d, 4);
    float want = 0;
    for (int r = ME % 2; r < N; r += 2) want += (float)r;
    tap_check(sum == want, "comm split: allreduce stays inside the sub-communicator");
    test_comm(half, "split");
    pl_comm *none = pl_comm_split(pl_comm_world(), ME == 0 ? 0 : -1, 0);
    tap_check((ME == 0) == (none != NULL), "comm split: a negative colour gets no communicator");
    pl_comm_free(none);
    pl_comm_free(half);

    /* Instrumentation: one allreduce of 1000 floats is one call of 4000 bytes, no p2p. */
    pl_free(d);
    d = pl_malloc_floats(1000);
    pl_fill(d, 1, 1000, NULL);
    pl_metrics_reset();
    pl_allreduce(d, d, 1000, PL_SUM, pl_comm_world(), NULL);
    pl_metrics m;
    pl_metrics_get(&m);
    tap_check(m.coll_calls[PL_OP_ALLREDUCE] == 1 && m.coll_total == 1 && m.coll_bytes == 4000 && m.bytes_sent == 0,
              "metrics: a collective call is counted with its bytes");
    if (N > 1) {
        pl_metrics_reset();
        int right = (ME + 1) % N, left = (ME + N - 1) % N;
        pl_group_start();
        pl_send(d, 10, right, pl_comm_world(), NULL);
        pl_recv(d + 500, 10, left, pl_comm_world(), NULL);
        pl_group_end();
        pl_metrics_get(&m);
        tap_check(m.bytes_sent == 40 && m.msgs_sent == 1 && m.bytes_recv == 40 && m.coll_total == 0,
                  "metrics: point-to-point bytes and messages are counted");
    }
    pl_free(d);
    return tap_finish();
}
