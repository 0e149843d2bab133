/* lab09.c (player) - Lab 9's calls of the student's code on the case's slots, and what
 * those calls did by this process's own count (its trace and its symmetric backend), left
 * in the slot "counted" for the referee: the player's claim, labelled so (lab09.h). Nothing
 * here decides a verdict; the referee (grader/referee/lab09*.c) does.
 *
 * The state a case's calls need (moe_state_create, moe_ar_create: collective, symmetric
 * memory) is made in play() and freed in release(), on every rank.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lab09.h"
#include "moe.h"            // defines: the lab API
#include "pl_instrument.h"  // defines: pl_trace_events, pl_trace_count, pl_trace_clear
#include "pl_sym_backend.h" // defines: pl_sym_set_jitter, pl_sym_wire_get

_Static_assert((int)MOE_OK == (int)L9_OK && (int)MOE_ERR_SHAPE == (int)L9_ERR_SHAPE &&
                   (int)MOE_ERR_TOPK == (int)L9_ERR_TOPK && (int)MOE_ERR_CAPACITY == (int)L9_ERR_CAPACITY &&
                   (int)MOE_ERR_EXPERTS == (int)L9_ERR_EXPERTS && (int)MOE_ERR_MISMATCH == (int)L9_ERR_MISMATCH,
               "moe.h's codes and the driver's differ");
_Static_assert((int)MOE_TWO_SIDED == (int)L9_TWO_SIDED && (int)MOE_ONE_SIDED == (int)L9_ONE_SIDED,
               "moe.h's dispatchers and the driver's differ");
_Static_assert(sizeof(int) == sizeof(int32_t), "the int arrays of moe.h are the int32 slots");

#define HOST_MAX 8

typedef struct {
    moe_config cfg;
    moe_state *st;
    moe_ar *ar;
    struct {
        const char *name;
        void *p;
        bool out;
    } host[HOST_MAX]; /* cuda: host copies of slots the student's host code reads or writes */
    int nhost;
} lab9_play_state;

/* ---- slots as host arrays (the router and the counts are host code in moe.h) -------------- */

/* The slot itself on the cpu device (its red zones watch what the student writes); on cuda,
 * a host copy, written back to the slot after the calls when `out`. */
static void *host_view(drv_case *c, const char *name, bool out) {
    void *d = drv_slot(c, name);
    if (pl_info()->device != PL_DEVICE_CUDA) return d;
    lab9_play_state *s = c->state;
    PL_CHECK(s->nhost < HOST_MAX, "lab09: too many host views");
    size_t bytes = drv_slot_bytes(c, name);
    void *h = malloc(bytes + 1);
    PL_CHECK(h != NULL, "out of host memory");
    if (bytes) pl_download(h, d, bytes);
    s->host[s->nhost].name = name, s->host[s->nhost].p = h, s->host[s->nhost].out = out;
    s->nhost++;
    return h;
}

static void host_flush(drv_case *c) {
    lab9_play_state *s = c->state;
    for (int i = 0; i < s->nhost; i++) {
        size_t bytes = drv_slot_bytes(c, s->host[i].name);
        if (s->host[i].out && bytes) pl_upload(drv_slot(c, s->host[i].name), s->host[i].p, bytes);
        free(s->host[i].p);
    }
    s->nhost = 0;
}

static moe_routing routing_view(drv_case *c) {
    return (moe_routing){host_view(c, "probs", true), host_view(c, "expert", true), host_view(c, "gate", true),
                         host_view(c, "keep", true), NAN};
}

/* ---- what the calls did, by this process's count -------------------------------------------- */

/* Bytes sent (two-sided) or put (one-sided) to each rank, and the ops of each kind, in the
 * trace events [from, to), into phase `phase` of "counted". */
static void scan(double *counted, int n, int phase, size_t from, size_t to) {
    const pl_trace_event *ev = pl_trace_events();
    double *pairs = counted + l9_cnt_pairs(n, phase), *kinds = counted + l9_cnt_kinds(n, phase);
    for (size_t i = from; i < to; i++) {
        if ((int)ev[i].kind >= 0 && ev[i].kind < PL_OP_COUNT) kinds[ev[i].kind]++;
        if ((ev[i].kind == PL_OP_SEND || ev[i].kind == PL_OP_PUT) && ev[i].peer >= 0 && ev[i].peer < n)
            pairs[ev[i].peer] += (double)ev[i].bytes;
    }
}

/* ---- play ------------------------------------------------------------------------------------ */

void lab9_play(drv_case *c) {
    lab9_play_state *s = drv_state(c, sizeof *s);
    l9_params p;
    l9_params_of(c, &p);
    int n = c->world;
    pl_sym_wire w0, w1;
    pl_sym_wire_get(&w0);
    pl_trace_clear(); /* the trace holds this case's calls only (a long run must not reach its cap) */
    const l9_cfg *cf = host_view(c, "cfg", false);
    const l9_scalars *sc = host_view(c, "scalars", false);
    double *counted = host_view(c, "counted", true);
    s->cfg = (moe_config){cf->tokens, cf->hidden, cf->ffn, cf->experts, cf->top_k, cf->capacity_factor, cf->aux_alpha,
                          pl_comm_world()};
    size_t t0 = pl_trace_count(), t1 = t0;
    /* the calls run on the caller's stream (drv_stream: comm on some ranks, the default
     * on the others): their outputs are read on it once they return (drv_consume), so work
     * left on the other stream, or on the default one instead of it, has not delivered */
    pl_stream *st = drv_stream(c);
    switch (p.kind) {
    case K_CONFIG: {
        int32_t *code = host_view(c, "code", true);
        *code = moe_config_check(&s->cfg);
        break;
    }
    case K_ROUTE: {
        moe_routing r = routing_view(c);
        moe_route(&s->cfg, host_view(c, "logits", false), &r);
        moe_route_backward(&s->cfg, &r, host_view(c, "dgate", false), sc->daux, host_view(c, "dlogits", true));
        *(float *)host_view(c, "aux", true) = r.aux;
        break;
    }
    case K_A2A: {
        const int32_t *counts = host_view(c, "counts", false);
        moe_alltoallv(drv_slot_f(c, "send"), counts, drv_slot_f(c, "recv"), counts + n, s->cfg.comm, st);
        break;
    }
    case K_LAYER:
    case K_REUSE: {
        size_t TH = (size_t)p.T * p.H;
        moe_weights w = {drv_slot_f(c, "wr"), drv_slot_f(c, "wg"), drv_slot_f(c, "wu"), drv_slot_f(c, "wd")};
        moe_weights g = {drv_slot_f(c, "dwr"), drv_slot_f(c, "dwg"), drv_slot_f(c, "dwu"), drv_slot_f(c, "dwd")};
        float *x = drv_slot_f(c, "x"), *y = drv_slot_f(c, "y");
        moe_routing r = routing_view(c);
        s->st = moe_state_create(&s->cfg, (moe_dispatcher)p.disp);
        pl_sym_set_jitter(L9.jitter_us, sc->jitter_seed);
        t0 = pl_trace_count();
        for (int call = 0; call < p.calls; call++)
            moe_forward(&s->cfg, &w, s->st, x + call * TH, y + call * TH, &r, st);
        t1 = pl_trace_count();
        moe_backward(&s->cfg, &w, &g, s->st, drv_slot_f(c, "dy"), sc->daux, drv_slot_f(c, "dx"), st);
        pl_sym_set_jitter(0, 0);
        *(float *)host_view(c, "aux", true) = r.aux;
        break;
    }
    case K_AR: {
        /* across hosts there are no peer pointers: the referee fails these cases, saying why */
        if (pl_info()->nodes > 1) break;
        size_t N = (size_t)p.count;
        float *in = drv_slot_f(c, p.in_place ? "buf" : "in"), *out = p.in_place ? in : drv_slot_f(c, "out");
        s->ar = moe_ar_create(N, s->cfg.comm);
        pl_sym_set_jitter(L9.jitter_us, sc->jitter_seed);
        t0 = pl_trace_count();
        for (int call = 0; call < p.calls; call++) {
            float *src = in + (size_t)call * N, *dst = out + (size_t)call * N;
            if (p.disp == 0) moe_allreduce_oneshot(s->ar, src, dst, N, st);
            else moe_allreduce_twoshot(s->ar, src, dst, N, st);
        }
        pl_sym_set_jitter(0, 0);
        break;
    }
    }
    size_t t2 = pl_trace_count();
    if (p.kind == K_LAYER || p.kind == K_REUSE) {
        scan(counted, n, 0, t0, t1);
        scan(counted, n, 1, t1, t2);
    } else {
        scan(counted, n, 0, t0, t2);
    }
    pl_sym_wire_get(&w1);
    double *sym = counted + l9_cnt_sym(n);
    sym[L9_SYM_PUTS] = (double)(w1.puts - w0.puts);
    sym[L9_SYM_PUT_BYTES] = (double)(w1.put_bytes - w0.put_bytes);
    sym[L9_SYM_SIGNALS] = (double)(w1.signals - w0.signals);
    if (p.kind == K_A2A) drv_consume(c, st, "recv", NULL);
    if (p.kind == K_LAYER || p.kind == K_REUSE) drv_consume(c, st, "y", "dx", "dwr", "dwg", "dwu", "dwd", NULL);
    if (p.kind == K_AR) drv_consume(c, st, p.in_place ? "buf" : "out", NULL);
    host_flush(c);
}

/* A timed all-reduce (allreduce.*.timed.*): which 0 the student's algorithm of the case,
 * 1 the library's all-reduce, on the set of this call, with the handle play() created. */
void lab9_timed(drv_case *c, int which) {
    lab9_play_state *s = c->state;
    l9_params p;
    l9_params_of(c, &p);
    size_t N = (size_t)p.count, k = (size_t)c->batch_index;
    float *in = drv_slot_f(c, "in") + k * N, *out = drv_slot_f(c, "out") + k * N;
    if (which == 1) pl_allreduce(in, out, N, PL_SUM, pl_comm_world(), NULL);
    else if (p.disp == 0) moe_allreduce_oneshot(s->ar, in, out, N, NULL);
    else moe_allreduce_twoshot(s->ar, in, out, N, NULL);
}

void lab9_release(drv_case *c) {
    lab9_play_state *s = c->state;
    if (!s) return;
    if (s->st) moe_state_free(s->st);
    if (s->ar) moe_ar_free(s->ar);
    s->st = NULL, s->ar = NULL;
}

void lab9_player_init(void) {
    drv_print("# lab09: device %s, comm %s, symmetric memory %s (%s)\n", pl_device_name(pl_info()->device),
              pl_comm_name(pl_info()->comm), pl_sym_impl(), pl_sym_why());
}
