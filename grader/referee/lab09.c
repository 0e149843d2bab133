/* lab09.c (referee) - Lab 9's cases on the referee's side: the slots of a case filled with
 * this rank's inputs (lab09_inputs.c), then, after the player's call, the checks against the
 * float64 layer (lab09_check.c) and the traffic the calls should have counted.
 *
 * Seeds: rank r's inputs come from drv_case_seed(c, r, 0), which only referees can compute;
 * what every rank shares (the router, the all-to-all-v's counts) from the public seed
 * drv_case_seed(c, -1, 0), and the player's timing jitter from a seed of its own. Each
 * referee computes every rank's inputs when it checks, so no seed ever crosses.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab09_ref.h"

#define PUBLIC_RANK (-1)    /* drv_case_seed's rank of the shared inputs                     */
#define JITTER_RUN (-0x6A177E) /* drv_case_seed's run of the jitter seed: timed runs are >= 0  */

typedef struct {
    l9_params p;
    uint64_t *seeds; /* every rank's */
    uint64_t pub;
    l9_inputs in;    /* this rank's */
    int sets;        /* a timed all-reduce: its slots' sets (drv_batch_sets)          */
    uint64_t *run_seeds; /* [set][rank]: the current timed run's input seeds         */
} lab9_case;

#define AR_SETS 1024 /* a timed all-reduce's sets: 1 MiB of inputs at 1 KiB per call */

/* ---- setup: the slots and this rank's inputs ------------------------------------------ */

static void *slot_in(drv_case *c, const char *name, const void *src, size_t bytes) {
    void *p = drv_slot_new(c, name, bytes, DRV_IN | DRV_CONST);
    if (bytes) memcpy(p, src, bytes);
    return p;
}

/* What the gradients hold before moe_backward, which accumulates into them (+=): small
 * values from this rank's seed (|g0| <= 2^-10, well under the gradients' scale, so that
 * float rounding of the sum stays far below the tolerance), taken off again in check. */
#define G0_MAX (1.0 / 1024)
static void g0_values(drv_case *c, float *g, size_t n, uint64_t id) {
    uint64_t seed = drv_case_seed(c, c->rank, 0);
    for (size_t i = 0; i < n; i++)
        g[i] = (float)(G0_MAX * (2.0 * (double)(pl_rng_bits(seed, 0x9000 + id, i) >> 11) / 9007199254740992.0 - 1.0));
}

static const char *const G_SLOTS[4] = {"dwr", "dwg", "dwu", "dwd"};

static void g0_slot(drv_case *c, int which, size_t n) {
    g0_values(c, drv_slot_new(c, G_SLOTS[which], n * sizeof(float), DRV_INOUT), n, (uint64_t)which);
}

/* The gradient moe_backward added: the slot less what it held before. */
static float *g0_taken_off(drv_case *c, int which) {
    float *g = drv_slot_host(c, G_SLOTS[which]);
    size_t n = drv_slot_bytes(c, G_SLOTS[which]) / sizeof(float);
    float *g0 = malloc((n + 1) * sizeof *g0);
    PL_CHECK(g0 != NULL, "out of host memory");
    g0_values(c, g0, n, (uint64_t)which);
    for (size_t i = 0; i < n; i++) g[i] = (float)((double)g[i] - (double)g0[i]);
    free(g0);
    return g;
}

/* The routing a route case or a layer's last forward leaves. */
static void routing_slots(drv_case *c, const l9_params *p) {
    size_t TE = (size_t)p->T * p->E, A = (size_t)p->T * p->k;
    drv_slot_new(c, "probs", TE * sizeof(float), DRV_OUT);
    drv_slot_new(c, "expert", A * sizeof(int32_t), DRV_OUT);
    drv_slot_new(c, "gate", A * sizeof(float), DRV_OUT);
    drv_slot_new(c, "keep", A * sizeof(int32_t), DRV_OUT);
    drv_slot_new(c, "aux", sizeof(float), DRV_OUT);
}

void lab9_setup(drv_case *c) {
    lab9_case *k = drv_state(c, sizeof *k);
    l9_params *p = &k->p;
    l9_params_of(c, p);
    k->seeds = calloc((size_t)c->world, sizeof *k->seeds);
    PL_CHECK(k->seeds != NULL, "out of host memory");
    for (int r = 0; r < c->world; r++) k->seeds[r] = drv_case_seed(c, r, 0);
    k->pub = drv_case_seed(c, PUBLIC_RANK, 0);
    l9_inputs *in = &k->in;
    l9_inputs_make(p, c->rank, k->seeds[c->rank], k->pub, in);

    slot_in(c, "cfg", &in->cfg, sizeof in->cfg);
    l9_scalars sc = {drv_case_seed(c, c->rank, JITTER_RUN), in->daux, 0};
    slot_in(c, "scalars", &sc, sizeof sc);
    drv_slot_new(c, "counted", (size_t)l9_cnt_len(p->n) * sizeof(double), DRV_OUT | DRV_ZEROED);
    size_t T = (size_t)p->T, H = (size_t)p->H, F = (size_t)p->F, E = (size_t)p->E, K = (size_t)p->k;
    switch (p->kind) {
    case K_CONFIG: drv_slot_new(c, "code", sizeof(int32_t), DRV_OUT); break;
    case K_ROUTE:
        slot_in(c, "logits", in->logits, T * E * sizeof(float));
        slot_in(c, "dgate", in->dgate, T * K * sizeof(float));
        routing_slots(c, p);
        drv_slot_new(c, "dlogits", T * E * sizeof(float), DRV_OUT);
        break;
    case K_A2A: {
        int32_t *counts = drv_slot_new(c, "counts", 2 * (size_t)p->n * sizeof(int32_t), DRV_IN | DRV_CONST);
        for (int q = 0; q < p->n; q++) counts[q] = in->send_counts[q], counts[p->n + q] = in->recv_counts[q];
        slot_in(c, "send", in->a2a_send, in->send_total * sizeof(float));
        drv_slot_new(c, "recv", in->recv_total * sizeof(float), DRV_OUT);
        break;
    }
    case K_LAYER:
    case K_REUSE: {
        size_t Le = E / (size_t)p->n, calls = (size_t)p->calls;
        slot_in(c, "x", in->x, calls * T * H * sizeof(float));
        slot_in(c, "wr", in->wr, E * H * sizeof(float));
        slot_in(c, "wg", in->wg, Le * F * H * sizeof(float));
        slot_in(c, "wu", in->wu, Le * F * H * sizeof(float));
        slot_in(c, "wd", in->wd, Le * H * F * sizeof(float));
        slot_in(c, "dy", in->dy, T * H * sizeof(float));
        drv_slot_new(c, "y", calls * T * H * sizeof(float), DRV_OUT);
        drv_slot_new(c, "dx", T * H * sizeof(float), DRV_OUT);
        routing_slots(c, p);
        g0_slot(c, 0, E * H); /* moe_backward accumulates into them */
        g0_slot(c, 1, Le * F * H);
        g0_slot(c, 2, Le * F * H);
        g0_slot(c, 3, Le * H * F);
        break;
    }
    case K_AR: {
        size_t bytes = (size_t)p->calls * (size_t)p->count * sizeof(float);
        if (p->variant == AR_TIMED) { /* out of place, one call: room for a timed run's sets */
            k->sets = AR_SETS;
            drv_batch_sets(c, k->sets);
            k->run_seeds = calloc((size_t)k->sets * (size_t)c->world, sizeof *k->run_seeds);
            PL_CHECK(k->run_seeds != NULL, "out of host memory");
            memcpy(drv_slot_new(c, "in", bytes * AR_SETS, DRV_IN | DRV_CONST), in->ar_in, bytes);
            drv_slot_new(c, "out", bytes * AR_SETS, DRV_OUT);
        } else if (p->in_place) {
            memcpy(drv_slot_new(c, "buf", bytes, DRV_INOUT), in->ar_in, bytes);
        } else {
            slot_in(c, "in", in->ar_in, bytes);
            drv_slot_new(c, "out", bytes, DRV_OUT);
        }
        break;
    }
    }
}

static void check_other_sets(drv_case *c, const lab9_case *k);

/* ---- check -------------------------------------------------------------------------------- */

static l9_outputs outputs_of(drv_case *c, const l9_params *p) {
    l9_outputs o = {.counted = drv_slot_host(c, "counted")};
    switch (p->kind) {
    case K_CONFIG: memcpy(&o.code, drv_slot_host(c, "code"), sizeof o.code); break;
    case K_A2A: o.a2a_recv = drv_slot_host(c, "recv"); break;
    case K_AR: o.ar_out = drv_slot_host(c, p->in_place ? "buf" : "out"); break;
    case K_LAYER:
    case K_REUSE:
        o.y = drv_slot_host(c, "y"), o.dx = drv_slot_host(c, "dx");
        o.dwr = g0_taken_off(c, 0), o.dwg = g0_taken_off(c, 1);
        o.dwu = g0_taken_off(c, 2), o.dwd = g0_taken_off(c, 3);
        break;
    case K_ROUTE: o.dlogits = drv_slot_host(c, "dlogits"); break;
    }
    if (p->kind == K_ROUTE || p->kind == K_LAYER || p->kind == K_REUSE) { /* a route's, or the last forward's */
        o.probs = drv_slot_host(c, "probs"), o.gate = drv_slot_host(c, "gate");
        o.expert = drv_slot_host(c, "expert"), o.keep = drv_slot_host(c, "keep");
        memcpy(&o.aux, drv_slot_host(c, "aux"), sizeof o.aux);
    }
    return o;
}

void lab9_check(drv_case *c) {
    lab9_case *k = c->state;
    if (!c->ran) return;
    l9_outputs o = outputs_of(c, &k->p);
    /* the player's own two counts of its one-sided calls: the harness's counters and what
     * reached its symmetric backend (both in its memory: they must at least agree) */
    const double *sym = o.counted + l9_cnt_sym(k->p.n);
    drv_check_counted(c, !((double)c->m.puts == sym[L9_SYM_PUTS] && (double)c->m.put_bytes == sym[L9_SYM_PUT_BYTES] &&
                           (double)c->m.signals == sym[L9_SYM_SIGNALS]), "the symmetric-memory backend");
    l9_referee_check(c, &k->p, &k->in, &o, k->seeds, k->pub);
    if (k->sets > 1) check_other_sets(c, k);
    if (k->p.kind == K_ROUTE && drv_max((double)(c->m.puts + c->m.msgs_sent + c->m.coll_total)) > 0)
        drv_fail(c, "the router communicated: it is host code on this rank's tokens only");
}

/* What the calls should have counted (the player's counters over play(): the all-reduces'
 * include moe_ar_create's, which needs no library collective either). Every case frees what
 * it allocated: moe_state_free and moe_ar_free (in release()) give back all the device and
 * symmetric memory their create calls took. */
void lab9_model(drv_case *c, drv_model *m) {
    lab9_case *k = c->state;
    m->no_leak = true;
    if (k->p.kind == K_ROUTE) {
        m->no_collectives = m->no_p2p = true;
        m->instead = "the router is host code on this rank's tokens: it sends nothing";
    }
    if (k->p.kind == K_AR) {
        m->no_collectives = m->no_p2p = true;
        m->instead = "these all-reduces move data through symmetric memory only (pl_sym_* puts, signals, peer pointers)";
    }
    if (k->p.kind != K_A2A) return;
    m->no_collectives = true;
    m->instead = "moe_alltoallv is built from point-to-point messages (pl_send/pl_recv) only";
    double bytes = 0, msgs = 0;
    for (int q = 0; q < c->world; q++)
        if (q != c->rank && k->in.send_counts[q] > 0) bytes += 4.0 * k->in.send_counts[q], msgs++;
    m->exact_p2p = true, m->p2p_bytes = bytes, m->p2p_msgs = msgs;
    m->bytes_optimal = bytes, m->bytes_agg = DRV_BYTES_AVG;
}

void lab9_teardown(drv_case *c) {
    lab9_case *k = c->state;
    l9_inputs_free(&k->in);
    free(k->seeds);
    free(k->run_seeds);
}

/* ---- the timed all-reduce: the student's algorithm against the library's ------------------ */

/* play() made one call, on set 0 of the slots: the other sets of "out" are not its output,
 * and what it wrote there is out of bounds (the red zones guard the last set only). */
static void check_other_sets(drv_case *c, const lab9_case *k) {
    size_t per = (size_t)k->p.count * sizeof(float);
    int64_t past = drv_slot_unpoisoned(c, "out", per);
    if (past >= 0)
        drv_fail(c, "the all-reduce wrote %lld byte(s) past the end of its output (%zu bytes): out of bounds",
                 (long long)past + 1, per);
}

void lab9_refresh(drv_case *c, int run) {
    lab9_case *k = c->state;
    size_t N = (size_t)k->p.count;
    float *in = drv_slot_host(c, "in");
    for (int set = 0; set < c->batch; set++) {
        uint64_t *seeds = k->run_seeds + (size_t)set * (size_t)c->world;
        for (int r = 0; r < c->world; r++) seeds[r] = drv_case_seed(c, r, drv_batch_run(c, run, set));
        for (size_t i = 0; i < N; i++) in[(size_t)set * N + i] = l9_ar_input(seeds[c->rank], i);
    }
}

/* Every call of the run at spot elements chosen after it: the student's bit for bit against
 * the rank-order sum (as the graded call), the library's (MPI's order of summation) within
 * n rounding steps of it. */
void lab9_verify(drv_case *c, int run) {
    lab9_case *k = c->state;
    size_t N = (size_t)k->p.count, sets = (size_t)c->batch, all = sets * N;
    const float *out = drv_slot_host(c, "out");
    size_t checks = all < 4096 ? all : 4096;
    for (size_t j = 0; j < checks && N > 0; j++) {
        size_t set = j % sets, i = all <= 4096 ? j / sets : (size_t)(drv_unpredictable() % N);
        const uint64_t *seeds = k->run_seeds + set * (size_t)c->world;
        float want = 0;
        for (int r = 0; r < c->world; r++) want = r == 0 ? l9_ar_input(seeds[0], i) : want + l9_ar_input(seeds[r], i);
        float got = out[set * N + i];
        bool ok = c->timing == 0 ? memcmp(&got, &want, sizeof got) == 0 : fabsf(got - want) <= c->world * 0x1p-22f;
        if (!ok) {
            drv_fail(c, "timed run %d, call %zu of %zu (%s): index %zu: expected %.9g, got %.9g (a result computed once "
                        "and repeated, or a call skipped?)",
                     run, set + 1, sets, c->timing == 0 ? "yours" : "the library's", i, want, got);
            return;
        }
    }
}

void lab9_perf(drv_case *c) {
    lab9_case *k = c->state;
    if (k->p.kind != K_AR || k->p.variant != AR_TIMED || !drv_one_host()) return;
    static const int both[2] = {0, 1};
    pl_timing tm[2];
    drv_time_players(c, both, 2, 1, 15, tm);
    if (drv_failed(c)) return;
    const char *name = k->p.disp == 0 ? "one-shot" : "two-shot";
    drv_num(c, "time_us", tm[0].median_us);
    drv_num(c, "lib_time_us", tm[1].median_us);
    drv_num(c, "min_time_us", tm[0].min_us), drv_num(c, "max_time_us", tm[0].max_us);
    drv_num(c, "calls_per_run", c->batch);
    drv_note(c, "%d runs each of %d call%s, interleaved: your %s %.2f us per call median (%.2f to %.2f), the library's "
                "all-reduce %.2f us (%.2f to %.2f)%s",
             tm[0].iters, c->batch, c->batch > 1 ? "s" : "", name, tm[0].median_us, tm[0].min_us, tm[0].max_us,
             tm[1].median_us, tm[1].min_us, tm[1].max_us, drv_oversubscribed());
}

void lab9_init(void) {
    drv_print("# lab09: %d rank(s); tokens %d, hidden %d, ffn %d per rank; jitter after symmetric waits and barriers "
              "up to %g us\n", pl_world(), L9.tokens, L9.hidden, L9.ffn, L9.jitter_us);
}
