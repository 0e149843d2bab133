/* lab09_player.c - Lab 9's calls of the student's code: device buffers made from the
 * referee's host inputs, the student's functions, the outputs copied back into host arrays,
 * and what the calls sent to whom (read from the harness's trace). Nothing here decides a
 * verdict (lab09_referee.c does). */
#include <stdlib.h>
#include <string.h>

#include "lab09.h"
#include "pl_sym_backend.h" // defines: pl_sym_set_jitter (the graders' timing jitter)

struct l9_player {
    moe_config cfg;
    moe_state *st;
    moe_ar *ar;
    moe_weights w, g;
    float *x, *y, *dy, *dx;  /* layer: x and y hold every call's rows                  */
    float *a2a_send, *a2a_recv;
    float *ar_in, *ar_out;
    size_t recv_total;
};

static float *dev_from(const float *h, size_t n) {
    float *d = pl_malloc_floats(n + 1);
    if (n) pl_upload(d, h, n * sizeof(float));
    return d;
}

l9_player *l9_player_setup(const l9_params *p, const l9_inputs *in) {
    l9_player *pl = calloc(1, sizeof *pl);
    PL_CHECK(pl != NULL, "out of host memory");
    pl->cfg = l9_config_of(p);
    int n = L9.n, T = p->T, H = p->H, F = p->F, E = p->E, Le = p->kind == K_LAYER || p->kind == K_REUSE ? E / n : 0;
    switch (p->kind) {
    case K_LAYER:
    case K_REUSE: {
        size_t TH = (size_t)T * H, FH = (size_t)Le * F * H;
        pl->x = dev_from(in->x, (size_t)p->calls * TH);
        pl->y = drv_poisoned((size_t)p->calls * TH);
        pl->dy = dev_from(in->dy, TH);
        pl->dx = drv_poisoned(TH);
        pl->w = (moe_weights){dev_from(in->wr, (size_t)E * H), dev_from(in->wg, FH), dev_from(in->wu, FH), dev_from(in->wd, FH)};
        pl->g = (moe_weights){pl_malloc_floats((size_t)E * H + 1), pl_malloc_floats(FH + 1), pl_malloc_floats(FH + 1),
                              pl_malloc_floats(FH + 1)};
        pl_memset(pl->g.router, 0, (size_t)E * H * 4, NULL);
        pl_memset(pl->g.w_gate, 0, FH * 4, NULL);
        pl_memset(pl->g.w_up, 0, FH * 4, NULL);
        pl_memset(pl->g.w_down, 0, FH * 4, NULL);
        pl->st = moe_state_create(&pl->cfg, (moe_dispatcher)p->disp);
        break;
    }
    case K_A2A: {
        size_t ns = 0;
        for (int q = 0; q < n; q++) ns += (size_t)in->send_counts[q], pl->recv_total += (size_t)in->recv_counts[q];
        pl->a2a_send = dev_from(in->a2a_send, ns);
        pl->a2a_recv = drv_poisoned(pl->recv_total);
        break;
    }
    case K_AR: {
        size_t N = (size_t)p->calls * (size_t)p->count;
        pl->ar_in = dev_from(in->ar_in, N);
        pl->ar_out = p->in_place ? pl->ar_in : drv_poisoned(N);
        pl->ar = moe_ar_create((size_t)p->count, L9.comm);
        break;
    }
    default: break;
    }
    return pl;
}

/* Bytes sent (two-sided) or put (one-sided) to each rank, and the ops of each kind, in the
 * trace events [from, to). */
static void scan(size_t from, size_t to, double *pairs, int *kinds) {
    const pl_trace_event *ev = pl_trace_events();
    for (size_t i = from; i < to; i++) {
        kinds[ev[i].kind]++;
        if ((ev[i].kind == PL_OP_SEND || ev[i].kind == PL_OP_PUT) && ev[i].peer >= 0 && ev[i].peer < L9.n)
            pairs[ev[i].peer] += (double)ev[i].bytes;
    }
}

void l9_player_run(l9_player *pl, const l9_params *p, const l9_inputs *in, l9_outputs *o, uint64_t jitter_seed) {
    size_t t0 = pl_trace_count();
    switch (p->kind) {
    case K_CONFIG: o->code = moe_config_check(&in->cfg); break;
    case K_ROUTE:
        moe_route(&pl->cfg, in->logits, &o->r);
        moe_route_backward(&pl->cfg, &o->r, in->dgate, in->daux, o->dlogits);
        break;
    case K_A2A:
        moe_alltoallv(pl->a2a_send, in->send_counts, pl->a2a_recv, in->recv_counts, L9.comm, NULL);
        scan(t0, pl_trace_count(), o->pair_fwd, o->kinds_fwd);
        break;
    case K_LAYER:
    case K_REUSE: {
        size_t TH = (size_t)p->T * p->H;
        pl_sym_set_jitter(L9.jitter_us, jitter_seed);
        for (int call = 0; call < p->calls; call++)
            moe_forward(&pl->cfg, &pl->w, pl->st, pl->x + call * TH, pl->y + call * TH, &o->r, NULL);
        size_t t1 = pl_trace_count();
        moe_backward(&pl->cfg, &pl->w, &pl->g, pl->st, pl->dy, in->daux, pl->dx, NULL);
        pl_sym_set_jitter(0, 0);
        scan(t0, t1, o->pair_fwd, o->kinds_fwd);
        scan(t1, pl_trace_count(), o->pair_bwd, o->kinds_bwd);
        break;
    }
    case K_AR: {
        size_t N = (size_t)p->count;
        pl_sym_set_jitter(L9.jitter_us, jitter_seed);
        for (int call = 0; call < p->calls; call++) {
            float *src = pl->ar_in + (size_t)call * N, *dst = pl->ar_out + (size_t)call * N;
            if (p->disp == 0) moe_allreduce_oneshot(pl->ar, src, dst, N, NULL);
            else moe_allreduce_twoshot(pl->ar, src, dst, N, NULL);
        }
        pl_sym_set_jitter(0, 0);
        scan(t0, pl_trace_count(), o->pair_fwd, o->kinds_fwd);
        break;
    }
    }
}

void l9_player_collect(l9_player *pl, const l9_params *p, l9_outputs *o) {
    int T = p->T, H = p->H, F = p->F, E = p->E;
    pl_device_sync();
    switch (p->kind) {
    case K_LAYER:
    case K_REUSE: {
        size_t FH = (size_t)(E / L9.n) * F * H;
        pl_download(o->y, pl->y, (size_t)p->calls * T * H * sizeof(float));
        pl_download(o->dx, pl->dx, (size_t)T * H * sizeof(float));
        pl_download(o->dwr, pl->g.router, (size_t)E * H * sizeof(float));
        pl_download(o->dwg, pl->g.w_gate, FH * sizeof(float));
        pl_download(o->dwu, pl->g.w_up, FH * sizeof(float));
        pl_download(o->dwd, pl->g.w_down, FH * sizeof(float));
        break;
    }
    case K_A2A: pl_download(o->a2a_recv, pl->a2a_recv, pl->recv_total * sizeof(float)); break;
    case K_AR: pl_download(o->ar_out, pl->ar_out, (size_t)p->calls * (size_t)p->count * sizeof(float)); break;
    default: break;
    }
}

void l9_player_free(l9_player *pl) {
    if (!pl) return;
    if (pl->st) moe_state_free(pl->st);
    if (pl->ar) moe_ar_free(pl->ar);
    float *d[] = {pl->x, pl->y, pl->dy, pl->dx, pl->w.router, pl->w.w_gate, pl->w.w_up, pl->w.w_down, pl->g.router,
                  pl->g.w_gate, pl->g.w_up, pl->g.w_down, pl->a2a_send, pl->a2a_recv, pl->ar_in,
                  pl->ar_out == pl->ar_in ? NULL : pl->ar_out};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) pl_free(d[i]);
    free(pl);
}
