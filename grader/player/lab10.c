/* lab10.c (player) - Lab 10's calls of the student's code on the case's slots, and what
 * its kernels did by this process's own trace, left in the slot "counted" for the referee:
 * the player's claim, labelled so (lab10.h). Nothing here decides a verdict; the referee
 * (grader/referee/lab10.c) does. */
#include <stdlib.h>
#include <string.h>

#include "context.h"       // defines: the lab API
#include "gpt_cp.h"        // defines: gpt_cp_block_forward, gpt_cp_block_backward (the block cases)
#include "gpt_tp.h"        // defines: gpt_tp_block_view (the parameters in a slot, at t = 1)
#include "kern_flash.h"    // defines: kern_flash_pair_flops, kern_flash_backward_pair_flops
#include "lab10.h"
#include "pl_instrument.h" // defines: pl_trace_events, pl_trace_count, pl_trace_clear

_Static_assert((int)CP_OK == (int)L10_OK && (int)CP_ERR_SHAPE == (int)L10_ERR_SHAPE &&
                   (int)CP_ERR_HEADS == (int)L10_ERR_HEADS && (int)CP_ERR_MISMATCH == (int)L10_ERR_MISMATCH,
               "context.h's codes and the driver's differ");
_Static_assert((int)CP_CONTIGUOUS == (int)L10_CONTIGUOUS && (int)CP_ZIGZAG == (int)L10_ZIGZAG,
               "context.h's layouts and the driver's differ");
_Static_assert(sizeof(int) == sizeof(int32_t), "the int arrays of context.h are the int32 slots");

/* A slot as a host array: the slot itself on the cpu device (its red zones watch what the
 * student writes); on cuda, a host copy, written back after the call when `out`. */
typedef struct {
    const char *name;
    void *p;
    bool out;
} host_view_t;

static void *host_view(drv_case *c, host_view_t *v, const char *name, bool out) {
    void *d = drv_slot(c, name);
    v->name = name, v->out = out, v->p = d;
    if (pl_info()->device != PL_DEVICE_CUDA) return d;
    size_t bytes = drv_slot_bytes(c, name);
    v->p = malloc(bytes + 1);
    PL_CHECK(v->p != NULL, "out of host memory");
    if (bytes) pl_download(v->p, d, bytes);
    return v->p;
}

static void host_done(drv_case *c, host_view_t *v) {
    if (pl_info()->device != PL_DEVICE_CUDA) return;
    size_t bytes = drv_slot_bytes(c, v->name);
    if (v->out && bytes) pl_upload(drv_slot(c, v->name), v->p, bytes);
    free(v->p);
}

/* The block kernels' pairs in the trace events [from, to), and how many of them were
 * recorded before the first receive was posted (the order the calls were issued in). */
static void scan(double *counted, int d, size_t from, size_t to) {
    const pl_trace_event *ev = pl_trace_events();
    bool received = false;
    for (size_t i = from; i < to; i++) {
        if (ev[i].kind == PL_OP_RECV) received = true;
        if (ev[i].kind != PL_OP_KERNEL || !ev[i].name) continue;
        bool fwd = !strcmp(ev[i].name, "flash_block"), bwd = !strcmp(ev[i].name, "flash_block_bwd");
        if (fwd) counted[L10_CNT_PAIRS] += ev[i].flops / kern_flash_pair_flops(d);
        if (bwd) counted[L10_CNT_BWD_PAIRS] += ev[i].flops / kern_flash_backward_pair_flops(d);
        if (fwd || bwd) counted[L10_CNT_EARLY] += !received;
    }
}

/* The block cases: the kit's GPT block (models/gpt_cp.h) with the student's attention,
 * kind u: 1 the ring (its log-sum-exps kept for its backward), n Ulysses, else the grid. */
typedef struct {
    const cp_config *cfg;
    int u, n;
} block_attn;

static void block_forward(void *ctx, const float *q, const float *k, const float *v, float *o, float *lse, pl_stream *s) {
    const block_attn *b = ctx;
    if (b->u == 1) cp_ring_forward(b->cfg, q, k, v, o, lse, s);
    else if (b->u == b->n) cp_ulysses_forward(b->cfg, q, k, v, o, s);
    else cp_usp_forward(b->cfg, b->u, q, k, v, o, s);
}

static void block_backward(void *ctx, const float *q, const float *k, const float *v, const float *o, const float *lse,
                           const float *dout, float *dq, float *dk, float *dv, pl_stream *s) {
    const block_attn *b = ctx;
    if (b->u == 1) cp_ring_backward(b->cfg, q, k, v, o, lse, dout, dq, dk, dv, s);
    else if (b->u == b->n) cp_ulysses_backward(b->cfg, q, k, v, dout, dq, dk, dv, s);
    else cp_usp_backward(b->cfg, b->u, q, k, v, dout, dq, dk, dv, s);
}

static void play_block(drv_case *c, const l10_params *p, const cp_config *cfg, pl_stream *st) {
    gpt_config g = l10_block_config(p);
    block_attn b = {cfg, p->u, c->world};
    gpt_cp_attention attn = {block_forward, block_backward, &b};
    gpt_block_params w, gr;
    gpt_tp_block_view(&w, drv_slot_f(c, "w"), &g, 1);
    gpt_tp_block_view(&gr, drv_slot_f(c, "g"), &g, 1);
    int rows = (int)(drv_slot_bytes(c, "x") / (sizeof(float) * (size_t)g.hidden));
    gpt_cp_acts *a = gpt_cp_acts_alloc(&g, rows);
    gpt_cp_block_forward(&w, a, drv_slot_f(c, "y"), drv_slot_f(c, "x"), &attn, st);
    gpt_cp_block_backward(&w, &gr, a, drv_slot_f(c, "dx"), drv_slot_f(c, "dy"), &attn, cfg->comm, st);
    drv_consume(c, st, "y", "dx", "g", NULL);
    gpt_cp_acts_free(a);
}

void lab10_play(drv_case *c) {
    l10_params p;
    l10_params_of(c, &p);
    host_view_t vcfg, vcnt;
    const l10_cfg *cf = host_view(c, &vcfg, "cfg", false);
    double *counted = host_view(c, &vcnt, "counted", true);
    cp_config cfg = {cf->seq, cf->heads, cf->kv_heads, cf->head_dim, cf->causal, (cp_layout)cf->layout,
                     pl_comm_world()};
    pl_trace_clear(); /* the trace holds this case's calls only */
    size_t t0 = pl_trace_count();
    /* the calls run on the caller's stream (drv_stream: comm on some ranks, the default
     * on the others): their outputs are read on it once they return (drv_consume), so work
     * left on the other stream, or on the default one instead of it, has not delivered */
    pl_stream *st = drv_stream(c);
    switch (p.kind) {
    case K_BLOCK: play_block(c, &p, &cfg, st); break;
    case K_MERGE: {
        host_view_t a, b, x, y;
        float *o = host_view(c, &a, "o", true), *lse = host_view(c, &b, "lse", true);
        cp_merge(o, lse, host_view(c, &x, "ob", false), host_view(c, &y, "lb", false), p.rows, p.d);
        host_done(c, &y), host_done(c, &x), host_done(c, &b), host_done(c, &a);
        break;
    }
    case K_POS: {
        host_view_t a, b;
        int32_t *pos = host_view(c, &a, "pos", true), *count = host_view(c, &b, "count", true);
        *count = cp_positions(&cfg, c->rank, pos);
        host_done(c, &b), host_done(c, &a);
        break;
    }
    case K_CONFIG: {
        host_view_t a;
        int32_t *code = host_view(c, &a, "code", true);
        *code = cp_config_check(&cfg, cf->ulysses);
        host_done(c, &a);
        break;
    }
    case K_RING:
        cp_ring_forward(&cfg, drv_slot_f(c, "q"), drv_slot_f(c, "k"), drv_slot_f(c, "v"), drv_slot_f(c, "o"),
                        drv_slot_f(c, "lse"), st);
        drv_consume(c, st, "o", "lse", NULL);
        break;
    case K_RING_BWD:
        cp_ring_backward(&cfg, drv_slot_f(c, "q"), drv_slot_f(c, "k"), drv_slot_f(c, "v"), drv_slot_f(c, "o"),
                         drv_slot_f(c, "lse"), drv_slot_f(c, "dout"), drv_slot_f(c, "dq"), drv_slot_f(c, "dk"),
                         drv_slot_f(c, "dv"), st);
        drv_consume(c, st, "dq", "dk", "dv", NULL);
        break;
    case K_ULY_BWD:
        cp_ulysses_backward(&cfg, drv_slot_f(c, "q"), drv_slot_f(c, "k"), drv_slot_f(c, "v"), drv_slot_f(c, "dout"),
                            drv_slot_f(c, "dq"), drv_slot_f(c, "dk"), drv_slot_f(c, "dv"), st);
        drv_consume(c, st, "dq", "dk", "dv", NULL);
        break;
    case K_USP_BWD:
        cp_usp_backward(&cfg, p.u, drv_slot_f(c, "q"), drv_slot_f(c, "k"), drv_slot_f(c, "v"), drv_slot_f(c, "dout"),
                        drv_slot_f(c, "dq"), drv_slot_f(c, "dk"), drv_slot_f(c, "dv"), st);
        drv_consume(c, st, "dq", "dk", "dv", NULL);
        break;
    case K_USP:
        cp_usp_forward(&cfg, p.u, drv_slot_f(c, "q"), drv_slot_f(c, "k"), drv_slot_f(c, "v"), drv_slot_f(c, "o"), st);
        drv_consume(c, st, "o", NULL);
        break;
    case K_ULY:
        cp_ulysses_forward(&cfg, drv_slot_f(c, "q"), drv_slot_f(c, "k"), drv_slot_f(c, "v"), drv_slot_f(c, "o"), st);
        drv_consume(c, st, "o", NULL);
        break;
    }
    scan(counted, p.d, t0, pl_trace_count());
    host_done(c, &vcnt);
    host_done(c, &vcfg);
}

void lab10_player_init(void) {
    drv_print("# lab10: device %s, comm %s\n", pl_device_name(pl_info()->device), pl_comm_name(pl_info()->comm));
}
