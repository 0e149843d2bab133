/* Symmetric memory (pl_sym.h): allocation, puts with and without signals, waits, fence,
 * quiet, barrier, peer pointers, the cpu implementation's late delivery, many back-to-back
 * exchanges with epoch counters, and the instrumentation of every call.
 *
 *   test_sym               the checks, TAP lines
 *   test_sym bad-range     a put past the end of an allocation: must die with exit 3
 *   test_sym bad-size      ranks ask for different sizes: a usage error, exit 2
 *   test_sym lost-signal   rank 0 waits for a signal nobody sends: the watchdog, exit 86
 */
#include <stdlib.h>
#include <string.h>

#include "pl_sym_backend.h" // defines: pl_sym_wire_get (what reached the backend)
#include "tap.h"

static int N, ME;

static float val(int from, int to, size_t i, int round) { return (float)(from * 1000 + to * 100 + (int)(i % 97) + round); }

/* Every rank puts a block into every rank's receive area (its own included) with a signal
 * added per block; each waits for n signals of this round and checks what arrived. */
static int exchange(float *recv, uint64_t *sig, float *src, float *h, size_t cnt, int round, int nbi_fence) {
    for (int pe = 0; pe < N; pe++) {
        for (size_t i = 0; i < cnt; i++) h[i] = val(ME, pe, i, round);
        pl_upload(src + (size_t)pe * cnt, h, cnt * 4);
    }
    for (int k = 0; k < N; k++) {
        int pe = (ME + k) % N; /* spread the targets */
        float *dst = recv + (size_t)ME * cnt, *from = src + (size_t)pe * cnt;
        if (nbi_fence) {
            pl_sym_put_nbi(dst, from, cnt * 4, pe, NULL);
            pl_sym_fence(NULL);
            pl_sym_signal(sig, 1, PL_SIG_ADD, pe, NULL);
        } else {
            pl_sym_put_signal(dst, from, cnt * 4, sig, 1, PL_SIG_ADD, pe, NULL);
        }
    }
    pl_sym_wait_until(sig, PL_CMP_GE, (uint64_t)N * (uint64_t)(round + 1), NULL);
    pl_download(h, recv, (size_t)N * cnt * 4);
    int ok = 1;
    for (int from = 0; from < N; from++)
        for (size_t i = 0; i < cnt; i++)
            if (h[(size_t)from * cnt + i] != val(from, ME, i, round)) ok = 0;
    /* nobody reuses recv for the next round before everyone has read this one */
    pl_sym_barrier(NULL);
    return ok;
}

static int misuse(const char *what) {
    if (!strcmp(what, "bad-range")) {
        float *a = pl_sym_malloc(64);
        float x[32] = {0};
        pl_sym_put(a + 8, x, 64, 0, NULL); /* 8 floats in, 16 floats long: past the end */
    } else if (!strcmp(what, "bad-size")) {
        pl_sym_malloc(ME == 0 ? 64 : 128);
    } else if (!strcmp(what, "lost-signal")) {
        uint64_t *s = pl_sym_malloc(8);
        if (ME == 0) pl_sym_wait_until(s, PL_CMP_GE, 1, NULL);
        pl_sym_barrier(NULL);
    }
    pl_finalize();
    return 0;
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    N = pl_world(), ME = pl_rank();
    if (argc > 1) return misuse(argv[1]);
    tap_check(!strcmp(pl_sym_impl(), "mpi-rma"), "the cpu device's symmetric memory is mpi-rma");

    const size_t cnt = 1000;
    float *recv = pl_sym_malloc((size_t)N * cnt * 4);
    uint64_t *sig = pl_sym_malloc(64);
    float *src = pl_malloc_floats((size_t)N * cnt), *h = malloc((size_t)N * cnt * 4 + 64);
    pl_download(h, recv, (size_t)N * cnt * 4);
    int zero = 1;
    for (size_t i = 0; i < (size_t)N * cnt; i++) zero &= h[i] == 0.0f;
    tap_check(zero, "pl_sym_malloc memory is zeroed");
    tap_check(pl_sym_malloc(0) == NULL, "0 bytes gives NULL on every rank");

    /* instrumentation around one exchange: n puts of cnt*4 bytes, n signals, 1 wait, 1 barrier */
    pl_sym_wire w0, w1;
    pl_sym_wire_get(&w0);
    size_t ev0 = pl_trace_count();
    pl_metrics_reset();
    int ok = exchange(recv, sig, src, h, cnt, 0, 0);
    pl_metrics m;
    pl_metrics_get(&m);
    pl_sym_wire_get(&w1);
    tap_check(ok, "put_signal to every rank, wait for n signals: every block arrived");
    tap_check(m.puts == (uint64_t)N && m.put_bytes == (uint64_t)N * cnt * 4 && m.signals == (uint64_t)N &&
                  m.waits == 1 && m.barriers == 1 && m.msgs_sent == 0 && m.coll_total == 0,
              "counters: n puts of the block's bytes, n signals, one wait, one barrier, no two-sided traffic");
    tap_check(w1.puts - w0.puts == m.puts && w1.put_bytes - w0.put_bytes == m.put_bytes &&
                  w1.signals - w0.signals == m.signals && w1.waits - w0.waits == 1 && w1.barriers - w0.barriers == 1,
              "what reached the backend equals what the counters say");
    int kinds[PL_OP_COUNT] = {0}, peers_ok = 1;
    const pl_trace_event *ev = pl_trace_events();
    for (size_t i = ev0; i < pl_trace_count(); i++) {
        kinds[ev[i].kind]++;
        if (ev[i].kind == PL_OP_PUT && (ev[i].peer < 0 || ev[i].peer >= N || ev[i].bytes != cnt * 4 || ev[i].t_end < ev[i].t_start))
            peers_ok = 0;
    }
    tap_check(kinds[PL_OP_PUT] == N && kinds[PL_OP_SIGNAL] == N && kinds[PL_OP_WAIT] == 1 && kinds[PL_OP_BARRIER] == 1 && peers_ok,
              "trace: a put record per peer (peer, bytes, times), signals, the wait and the barrier");

    /* many rounds back to back: epoch counting, the barrier makes reuse safe */
    ok = 1;
    for (int round = 1; round < 40; round++) ok &= exchange(recv, sig, src, h, cnt, round, round % 2);
    tap_check(ok, "39 more rounds with epoch-counted signals (put_signal, and put_nbi + fence + signal)");

    /* the cpu implementation delivers a plain put as late as allowed: a signal sent without
     * a fence arrives first, and quiet (here, the barrier) brings the data */
    if (N > 1) {
        int right = (ME + 1) % N;
        float *one = pl_sym_malloc(4);
        uint64_t *s2 = pl_sym_malloc(16); /* [0]: data sent, [1]: data read */
        float v = 42.0f + (float)ME, got = -1;
        pl_upload(src, &v, 4);
        pl_sym_put_nbi(one, src, 4, right, NULL);
        pl_sym_signal(&s2[0], 1, PL_SIG_SET, right, NULL); /* no fence: the classic bug */
        pl_sym_wait_until(&s2[0], PL_CMP_EQ, 1, NULL);
        pl_download(&got, one, 4);
        int early = got == 0.0f;
        /* the sender may not reach its barrier (which delivers) before this rank has read */
        pl_sym_signal(&s2[1], 1, PL_SIG_SET, (ME + N - 1) % N, NULL);
        pl_sym_wait_until(&s2[1], PL_CMP_EQ, 1, NULL);
        pl_sym_barrier(NULL);
        pl_download(&got, one, 4);
        tap_check(early && got == 42.0f + (float)((ME + N - 1) % N),
                  "a signal without a fence overtakes the put; the barrier delivers it");
        /* a blocking put stages its source: changing it afterwards changes nothing */
        v = 7.0f;
        pl_upload(src, &v, 4);
        pl_sym_put(one, src, 4, right, NULL);
        v = 8.0f;
        pl_upload(src, &v, 4);
        pl_sym_quiet(NULL);
        pl_sym_barrier(NULL);
        pl_download(&got, one, 4);
        tap_check(got == 7.0f, "pl_sym_put: the source may be reused at once (the put took a copy)");
        pl_sym_free(one);
        pl_sym_free(s2);
    }

    /* peer pointers: load and store straight into a neighbour's copy */
    int all_ptr = 1;
    for (int pe = 0; pe < N; pe++) all_ptr &= pl_sym_peer_ptr(recv, pe) != NULL;
    tap_check(all_ptr && pl_sym_peer_ptr(recv, ME) == recv, "one node: every peer pointer is there, this rank's is the address");
    if (all_ptr) {
        float *right = pl_sym_peer_ptr(recv + 5, (ME + 1) % N);
        float v = 100.0f + (float)ME, got;
        pl_copy(right, &v, 4, NULL); /* a store into the neighbour's copy */
        pl_sym_barrier(NULL);
        pl_download(&got, recv + 5, 4);
        float *left = pl_sym_peer_ptr(recv + 5, (ME + N - 1) % N), back;
        pl_download(&back, left, 4); /* a load from the other neighbour's copy */
        tap_check(got == 100.0f + (float)((ME + N - 1) % N) && back == 100.0f + (float)((ME + N - 2 + N) % N),
                  "stores through a peer pointer are seen after a barrier, loads read the peer's copy");
    }

    pl_sym_free(recv);
    pl_sym_free(sig);
    pl_free(src);
    free(h);
    tap_check(pl_mem_in_use() == 0, "pl_sym_free returns the memory (accounting back to 0)");
    return tap_finish();
}
