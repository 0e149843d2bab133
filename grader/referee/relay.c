/* relay.c - what referees tell each other, and how a referee times its player.
 *
 * Referees have no network of their own: a value every rank's referee needs (a sum of
 * wrong elements, the slowest rank's time, a verdict) travels through the players, over
 * their private host communicator (never the student's traffic). Each contribution carries
 * the referee's signature - SipHash-2-4 under the run's key of the relay's number, the rank
 * and the bytes - so a player can delay or drop it (a timeout) but not alter, swap or replay
 * it: a contribution that does not check out ends the run as tampered. By hand (no engine)
 * the key is zero: nothing is graded, the signatures only catch accidents. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "referee.h"

typedef struct {
    uint64_t seq;
    uint32_t rank;
    uint32_t bytes;
} relay_head;

static uint64_t sign(const relay_head *h, const void *data) {
    size_t n = sizeof *h + h->bytes;
    char *buf = malloc(n);
    PL_CHECK(buf != NULL, "out of host memory");
    memcpy(buf, h, sizeof *h);
    memcpy(buf + sizeof *h, data, h->bytes);
    uint64_t s = siphash_record(g_ref.key, 0x5E1A7ull ^ h->seq, buf, n);
    free(buf);
    return s;
}

void drv_allgather(const void *mine, size_t bytes, void *out) {
    PL_CHECK(bytes <= WIRE_RELAY_MAX, "a relay contribution over 1 MiB");
    size_t one = sizeof(relay_head) + bytes + sizeof(uint64_t);
    relay_head h = {.seq = g_ref.relay_seq++, .rank = (uint32_t)g_ref.rank, .bytes = (uint32_t)bytes};
    char *blob = malloc(one);
    PL_CHECK(blob != NULL, "out of host memory");
    memcpy(blob, &h, sizeof h);
    memcpy(blob + sizeof h, mine, bytes);
    uint64_t s = sign(&h, mine);
    memcpy(blob + sizeof h + bytes, &s, sizeof s);
    if (!wire_send(g_ref.ctl_fd, CMD_RELAY, 0, blob, one)) referee_tampered("the player stopped answering");
    free(blob);

    wire_msg m;
    void *all = NULL;
    if (wire_recv(g_ref.ctl_fd, &m, &all, (uint64_t)one * (uint64_t)g_ref.world) != 1 || m.cmd != REP_RELAY ||
        m.len != (uint64_t)one * (uint64_t)g_ref.world)
        referee_tampered("the player did not relay the referees' values");
    for (int r = 0; r < g_ref.world; r++) {
        const char *b = (const char *)all + (size_t)r * one;
        relay_head got;
        uint64_t sig;
        memcpy(&got, b, sizeof got);
        memcpy(&sig, b + sizeof got + bytes, sizeof sig);
        if (got.seq != h.seq || got.rank != (uint32_t)r || got.bytes != h.bytes || sig != sign(&got, b + sizeof got))
            referee_tampered("rank %d's referee value arrived altered through the players (relay %llu)", r,
                             (unsigned long long)h.seq);
        memcpy((char *)out + (size_t)r * bytes, b + sizeof got, bytes);
    }
    free(all);
}

/* ================================================================================== */
/* Timing the player                                                                  */
/* ================================================================================== */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

pl_timing drv_time_player(drv_case *c, int which, int warmup, int iters) {
    const drv_test *t = c->inst->test;
    PL_CHECK(t->refresh != NULL, "a timed test needs refresh(): every timed run gets fresh inputs");
    if (g_opt.warmup >= 0) warmup = g_opt.warmup;
    if (g_opt.iters > 0) iters = g_opt.iters;
    if (iters < 1) iters = 1;
    double *us = calloc((size_t)iters, sizeof *us);
    PL_CHECK(us != NULL, "out of host memory");
    for (int k = 0; k < warmup + iters; k++) { /* all of them on every rank: the players go together */
        drv_slots_repoison(c);
        t->refresh(c, k + 1);
        slots_publish(c, -1);
        player_command(CMD_STAGE, (uint32_t)which);
        double t0 = now_s();
        player_command(CMD_GO, (uint32_t)which);
        double dt = now_s() - t0;
        player_command(CMD_COLLECT, (uint32_t)which);
        slots_verify(c, "a timed run");
        if (t->verify) t->verify(c, k + 1);
        if (k >= warmup) us[k - warmup] = dt * 1e6;
    }
    /* every rank's referee took the same number of runs unless a check failed somewhere */
    bool bad = drv_max(drv_failed(c)) > 0;
    double *all = malloc((size_t)iters * (size_t)c->world * sizeof *all);
    PL_CHECK(all != NULL, "out of host memory");
    drv_allgather(us, (size_t)iters * sizeof *us, all);
    for (int k = 0; k < iters; k++) /* the slowest rank defines a run */
        for (int r = 0; r < c->world; r++)
            if (all[(size_t)r * iters + k] > us[k]) us[k] = all[(size_t)r * iters + k];
    free(all);
    pl_timing tm = bad ? (pl_timing){0} : timing_of(us, iters);
    free(us);
    if (bad && !drv_failed(c)) drv_fail(c, "a timed run gave a wrong result on another rank");
    return tm;
}
