/* lab08.c (player) - Lab 8's calls: the kit's functions for the student (the 1F1B list,
 * the grid, the stage), the student's functions on the case's slots, and what only the
 * player can count: its traffic, group by group, from the harness's record (the referee
 * labels every verdict that rests on it). Nothing here decides a verdict.
 *
 * The API takes token ids, targets and losses in host memory: those slots are copied to
 * and from host arrays here (a copy of the region itself on the cpu device); every float
 * tensor is the slot's device buffer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab08_player.h"
#include "pl_backend.h"    // defines: struct pl_comm (its id, to name the group of a recorded op)
#include "pl_instrument.h" // defines: pl_trace_events, pl_metrics, pl_wire, pl_host_allreduce

_Static_assert((int)TD_OK == L8_OK && (int)TD_ERR_WORLD == L8_ERR_WORLD && (int)TD_ERR_VOCAB == L8_ERR_VOCAB &&
                   (int)TD_ERR_HEADS == L8_ERR_HEADS && (int)TD_ERR_LAYERS == L8_ERR_LAYERS &&
                   (int)TD_ERR_BATCH == L8_ERR_BATCH && (int)TD_ERR_TODO == L8_ERR_TODO,
               "threed.h's codes and the driver's differ");
_Static_assert((int)TD_SHARDED == L8_SHARDED && (int)TD_REPLICATED == L8_REPLICATED && (int)TD_TIED_COPY == L8_TIED_COPY,
               "threed.h's segment kinds and the driver's differ");
_Static_assert(TD_MAX_STAGES == L8_MAX_STAGES, "threed.h's TD_MAX_STAGES and the driver's differ");
_Static_assert(sizeof(int) == sizeof(int32_t), "token ids travel as int32_t");

static td_config td_of(const l8_cfg *c) {
    return (td_config){.seq = c->seq, .batch = c->batch, .hidden = c->hidden, .heads = c->heads, .ffn = c->ffn,
                       .vocab = c->vocab, .layers = c->layers, .t = c->t, .p = c->p, .micro = c->micro, .lr = c->lr,
                       .beta1 = c->beta1, .beta2 = c->beta2, .eps = c->eps, .weight_decay = c->weight_decay,
                       .max_norm = c->max_norm};
}

void l8_player_init(void) { l8_check_flags(l8_lab()); }

bool l8_anyone(bool mine) { return drv_max(mine ? 1 : 0) > 0; }

/* A slot's bytes as a host array (malloc'd: free it). */
static void *host_copy(drv_case *c, const char *name) {
    size_t n = drv_slot_bytes(c, name);
    void *h = malloc(n + 1);
    PL_CHECK(h != NULL, "out of host memory");
    pl_device_sync();
    if (n) pl_download(h, drv_slot(c, name), n);
    return h;
}

/* A host array into an OUT slot. */
static void put(drv_case *c, const char *name, const void *host, size_t bytes) {
    size_t n = drv_slot_bytes(c, name);
    PL_CHECK(bytes <= n, "a result larger than its slot");
    if (bytes) pl_upload(drv_slot(c, name), host, bytes);
}

/* ==================================================================================== */
/* The kit's functions for the student (declared in threed.h)                            */
/* ==================================================================================== */

int td_schedule_1f1b(int p, int s, int m, td_action *out, int cap) {
    if (p < 1 || s < 0 || s >= p || m < 1 || !out || cap < 2 * m) return -1;
    int w = p - s - 1 < m ? p - s - 1 : m, n = 0;
    for (int i = 0; i < w; i++) out[n++] = (td_action){TD_F, i};
    for (int i = 0; i < m - w; i++) {
        out[n++] = (td_action){TD_F, w + i};
        out[n++] = (td_action){TD_B, i};
    }
    for (int i = m - w; i < m; i++) out[n++] = (td_action){TD_B, i};
    return n;
}

void l8_kit_grid(td_grid *g, int t, int p) {
    int rank = pl_rank(), d = pl_world() / (t * p);
    memset(g, 0, sizeof *g);
    g->t = t, g->p = p, g->d = d;
    l8_coords(rank, t, d, &g->tp, &g->dp, &g->pp);
    pl_comm *w = pl_comm_world();
    g->tensor = pl_comm_split(w, g->dp + d * g->pp, g->tp);
    g->data = pl_comm_split(w, g->tp + t * g->pp, g->dp);
    g->pipeline = pl_comm_split(w, g->tp + t * g->dp, g->pp);
    bool ends = g->pp == 0 || g->pp == p - 1;
    g->embed = pl_comm_split(w, ends ? g->tp + t * g->dp : -1, g->pp);
    /* names for the referees' counts by communicator, where they move the messages */
    drv_name_comm(g->tensor, L8_TENSOR), drv_name_comm(g->data, L8_DATA);
    drv_name_comm(g->pipeline, L8_PIPE), drv_name_comm(g->embed, L8_EMBED);
}

void l8_kit_grid_free(td_grid *g) {
    pl_comm_free(g->tensor), pl_comm_free(g->data), pl_comm_free(g->pipeline), pl_comm_free(g->embed);
    memset(g, 0, sizeof *g);
}

void l8_stage_open(l8_stage_run *x, const l8_cfg *cfg, float *params) {
    memset(x, 0, sizeof *x);
    x->cfg = *cfg;
    x->tdc = td_of(cfg);
    l8_layout_make(&x->lay, cfg, pl_world(), pl_rank());
    const l8_layout *lay = &x->lay;
    x->seg = calloc((size_t)lay->nseg + 1, sizeof *x->seg);
    PL_CHECK(x->seg != NULL, "out of host memory");
    for (int i = 0; i < lay->nseg; i++) x->seg[i] = (td_segment){lay->seg[i].offset, lay->seg[i].count, (td_seg_kind)lay->seg[i].kind};
    l8_kit_grid(&x->grid, cfg->t, cfg->p);
    td_stage *st = &x->st;
    st->cfg = x->tdc;
    st->grid = &x->grid;
    st->block = lay->block;
    st->first_layer = lay->first_layer, st->nlayers = lay->nlayers;
    st->first = lay->first, st->last = lay->last;
    st->count = lay->count;
    st->params = params;
    st->grads = pl_malloc_floats(lay->count + 1);
    pl_fill(st->grads, 0.0f, lay->count, NULL);
    st->blocks = calloc((size_t)lay->nlayers + 1, sizeof *st->blocks);
    st->dblocks = calloc((size_t)lay->nlayers + 1, sizeof *st->dblocks);
    PL_CHECK(st->blocks && st->dblocks, "out of host memory");
    for (int l = 0; l < lay->nlayers; l++) {
        size_t off = lay->off_blocks + (size_t)l * lay->block_count;
        gpt_tp_block_view(&st->blocks[l], st->params + off, &lay->block, cfg->t);
        gpt_tp_block_view(&st->dblocks[l], st->grads + off, &lay->block, cfg->t);
    }
    size_t wte = lay->first ? lay->off_wte : lay->off_wte_copy;
    if (lay->first || (lay->last && cfg->p > 1)) st->wte = st->params + wte, st->dwte = st->grads + wte;
    if (lay->first) st->wpe = st->params + lay->off_wpe, st->dwpe = st->grads + lay->off_wpe;
    if (lay->last) {
        st->lnf_w = st->params + lay->off_lnf, st->lnf_b = st->lnf_w + cfg->hidden;
        st->dlnf_w = st->grads + lay->off_lnf, st->dlnf_b = st->dlnf_w + cfg->hidden;
    }
    st->seg = x->seg, st->nseg = lay->nseg;
    size_t shard = lay->count / (size_t)lay->d;
    st->adam_m = pl_malloc_floats(shard + 1), st->adam_v = pl_malloc_floats(shard + 1);
    pl_fill(st->adam_m, 0.0f, shard, NULL), pl_fill(st->adam_v, 0.0f, shard, NULL);
    st->ws = gpt_tp_workspace_alloc(&lay->block, cfg->t);
    x->open = true;
}

void l8_stage_close(l8_stage_run *x) {
    if (!x->open) return;
    td_stage *st = &x->st;
    pl_device_sync();
    pl_free(st->grads), pl_free(st->adam_m), pl_free(st->adam_v);
    free(st->blocks), free(st->dblocks);
    gpt_tp_workspace_free(st->ws);
    l8_kit_grid_free(&x->grid);
    l8_layout_free(&x->lay);
    free(x->seg);
    memset(x, 0, sizeof *x);
}

/* ==================================================================================== */
/* Counting: the record's ops, group by group                                             */
/* ==================================================================================== */

static int group_of(const td_grid *g, int comm_id) {
    const pl_comm *c[4] = {g->tensor, g->pipeline, g->data, g->embed};
    const int groups[4] = {L8_TENSOR, L8_PIPE, L8_DATA, L8_EMBED};
    for (int i = 0; i < 4; i++)
        if (c[i] && c[i]->id == comm_id) return groups[i];
    return comm_id == pl_comm_world()->id ? L8_WORLD : L8_OTHER;
}

void l8_tally_trace(const td_grid *g, size_t from, l8_tally out[L8_NGROUPS]) {
    memset(out, 0, L8_NGROUPS * sizeof *out);
    const pl_trace_event *ev = pl_trace_events();
    for (size_t i = from; i < pl_trace_count(); i++) {
        const pl_trace_event *e = &ev[i];
        if (e->kind == PL_OP_SEND) {
            l8_tally *x = &out[group_of(g, e->comm_id)];
            x->msgs += 1, x->msg_bytes += (double)e->bytes;
        } else if (pl_op_is_collective(e->kind) || e->kind == PL_OP_BARRIER) {
            l8_tally *x = &out[group_of(g, e->comm_id)];
            x->calls[e->kind] += 1, x->bytes += (double)e->bytes;
        }
    }
}

/* ==================================================================================== */
/* config.errors, grid.*                                                                  */
/* ==================================================================================== */

void l8_config_play(drv_case *c) {
    size_t n = drv_slot_bytes(c, "cases") / sizeof(l8_config_in);
    l8_config_in *in = host_copy(c, "cases");
    int32_t *codes = calloc(n + 1, sizeof *codes);
    PL_CHECK(codes != NULL, "out of host memory");
    for (size_t i = 0; i < n; i++) {
        td_config tc = td_of(&in[i].cfg);
        codes[i] = td_config_check(&tc, in[i].world);
    }
    put(c, "codes", codes, n * sizeof *codes);
    free(in), free(codes);
}

void l8_grid_play(drv_case *c) {
    l8_grid_out *out = calloc(1, sizeof *out);
    PL_CHECK(out != NULL, "out of host memory");
    td_grid g;
    memset(&g, 0, sizeof g);
    out->rc = td_grid_build(&g, (int)c->arg[0], (int)c->arg[1]);
    /* every rank gathers over the same groups, or none does */
    if (!l8_anyone(out->rc != TD_OK)) {
        out->t = g.t, out->p = g.p, out->d = g.d, out->tp = g.tp, out->pp = g.pp, out->dp = g.dp;
        pl_comm *groups[4] = {g.tensor, g.pipeline, g.data, g.embed};
        const int ids[4] = {L8_TENSOR, L8_PIPE, L8_DATA, L8_EMBED};
        uint64_t *token = host_copy(c, "token");
        struct {
            int64_t rank;
            uint64_t token;
        } me = {pl_rank(), *token}, *all;
        for (int i = 0; i < 4; i++) {
            if (!groups[i]) continue;
            int n = pl_comm_size(groups[i]), k = ids[i];
            all = pl_host_allgatherv(&me, sizeof me, NULL, groups[i]);
            out->count[k] = n < L8_MAX_MEMBERS ? n : L8_MAX_MEMBERS;
            for (int r = 0; r < out->count[k]; r++) out->members[k][r] = (int32_t)all[r].rank, out->tokens[k][r] = all[r].token;
            free(all);
        }
        free(token);
    }
    if (out->rc == TD_OK) td_grid_free(&g);
    put(c, "grid", out, sizeof *out);
    free(out);
}

void l8_grid_errors_play(drv_case *c) {
    l8_grid_bad *bad = host_copy(c, "bad");
    l8_grid_rc r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < bad->n && i < L8_BAD_GRIDS; i++) {
        td_grid g;
        memset(&g, 0x5a, sizeof g); /* a pattern the call must leave as it is */
        td_grid keep = g;
        r.rc[i] = td_grid_build(&g, bad->t[i], bad->p[i]);
        r.touched[i] = memcmp(&g, &keep, sizeof g) != 0;
        if (r.rc[i] == TD_OK) {
            td_grid_free(&g);
            break;
        }
    }
    put(c, "rc", &r, sizeof r);
    free(bad);
}

/* ==================================================================================== */
/* embed.*, xent.*                                                                        */
/* ==================================================================================== */

void l8_embed_play(drv_case *c) {
    const l8_state *S = l8_state_of(c);
    int t = (int)c->arg[0];
    td_grid g;
    l8_kit_grid(&g, t, 1);
    int *tokens = host_copy(c, "tokens");
    l8_tally tally[2][L8_NGROUPS];
    pl_device_sync();
    pl_trace_clear();
    drv_mark(L8_MARK_FIRST, false);
    td_embed_forward(drv_slot_f(c, "x"), drv_slot_f(c, "wte"), drv_slot_f(c, "wpe"), tokens, S->T, S->b, S->C, S->V,
                     g.tensor, drv_stream(c));
    drv_consume(c, drv_stream(c), "x", NULL); /* read on the call's stream as it returns */
    pl_device_sync();
    drv_mark(L8_MARK_FIRST, true);
    l8_tally_trace(&g, 0, tally[0]);
    size_t from = pl_trace_count();
    drv_mark(L8_MARK_SECOND, false);
    td_embed_backward(drv_slot_f(c, "dwte"), drv_slot_f(c, "dwpe"), drv_slot_f(c, "dx"), tokens, S->T, S->b, S->C, S->V,
                      g.tensor, drv_stream(c));
    drv_consume(c, drv_stream(c), "dwte", "dwpe", NULL);
    pl_device_sync();
    drv_mark(L8_MARK_SECOND, true);
    l8_tally_trace(&g, from, tally[1]);
    put(c, "tally", tally, sizeof tally);
    free(tokens);
    l8_kit_grid_free(&g);
}

void l8_xent_play(drv_case *c) {
    const l8_state *S = l8_state_of(c);
    int t = (int)c->arg[0], N = S->T * S->b;
    float scale = 0.37f / (float)N; /* the referee's, which it checks the gradients with */
    td_grid g;
    l8_kit_grid(&g, t, 1);
    int *targets = host_copy(c, "targets");
    double *losses = malloc((size_t)N * sizeof *losses);
    PL_CHECK(losses != NULL, "out of host memory");
    for (int i = 0; i < N; i++) losses[i] = NAN;
    l8_tally tally[L8_NGROUPS];
    pl_device_sync();
    pl_trace_clear();
    drv_mark(L8_MARK_FIRST, false);
    td_xent(drv_slot_f(c, "dlogits"), losses, drv_slot_f(c, "logits"), targets, N, S->V, scale, g.tensor, drv_stream(c));
    drv_consume(c, drv_stream(c), "dlogits", NULL);
    pl_device_sync();
    drv_mark(L8_MARK_FIRST, true);
    l8_tally_trace(&g, 0, tally);
    put(c, "losses", losses, (size_t)N * sizeof *losses);
    put(c, "tally", tally, sizeof tally);
    free(targets), free(losses);
    l8_kit_grid_free(&g);
}

/* ==================================================================================== */
/* step.*, traffic.*                                                                      */
/* ==================================================================================== */

typedef struct {
    l8_stage_run run;
    size_t n; /* ids per step: m T b */
} step_play;

static int step_once(step_play *x, drv_case *c, int k, td_result *res) {
    int *tok = x->run.lay.first ? host_copy(c, "tokens") : NULL, *tgt = x->run.lay.last ? host_copy(c, "targets") : NULL;
    td_batch batch = {tok ? tok + (size_t)k * x->n : NULL, tgt ? tgt + (size_t)k * x->n : NULL};
    *res = (td_result){NAN, NAN};
    int rc = td_train_step(&x->run.st, &batch, res);
    pl_device_sync();
    free(tok), free(tgt);
    return rc;
}

void l8_step_play(drv_case *c) {
    if (!drv_slot_bytes(c, "params")) return; /* the traffic case of a run its step case played */
    const l8_state *S = l8_state_of(c);
    step_play *x = drv_state(c, sizeof *x);
    l8_cfg cfg = l8_config(S, (int)c->arg[1], (int)c->arg[2]);
    l8_stage_open(&x->run, &cfg, drv_slot_f(c, "params"));
    x->n = (size_t)cfg.micro * cfg.seq * cfg.batch;
    double losses[L8_MAX_STEPS], norms[L8_MAX_STEPS];
    l8_step_report rep;
    memset(&rep, 0, sizeof rep);
    rep.rc = TD_OK;
    for (int k = 0; k < S->steps; k++) losses[k] = norms[k] = NAN;
    for (int k = 0; k < S->steps; k++) {
        pl_device_sync();
        pl_trace_clear();
        pl_metrics m0, m1;
        pl_wire w0, w1;
        pl_metrics_get(&m0), pl_wire_get(&w0);
        if (k == 0) drv_mark(L8_MARK_FIRST, false);
        td_result res;
        int rc = step_once(x, c, k, &res);
        if (k == 0) drv_mark(L8_MARK_FIRST, true);
        pl_metrics_get(&m1), pl_wire_get(&w1);
        if (k == 0) {
            l8_tally_trace(&x->run.grid, 0, rep.tally);
            rep.counters_differ = m1.bytes_sent - m0.bytes_sent != w1.p2p_bytes_sent - w0.p2p_bytes_sent ||
                                  m1.msgs_sent - m0.msgs_sent != w1.p2p_msgs_sent - w0.p2p_msgs_sent ||
                                  m1.coll_total - m0.coll_total != w1.coll_calls - w0.coll_calls ||
                                  m1.coll_bytes - m0.coll_bytes != w1.coll_bytes - w0.coll_bytes;
        }
        losses[k] = res.loss, norms[k] = res.grad_norm;
        if (rc != TD_OK && rep.rc == TD_OK) rep.rc = rc;
        if (l8_anyone(rc != TD_OK)) break; /* no rank goes on alone */
    }
    put(c, "losses", losses, (size_t)S->steps * sizeof(double));
    put(c, "norms", norms, (size_t)S->steps * sizeof(double));
    put(c, "report", &rep, sizeof rep);
}

/* One more step on the first batch of the slots (the referee's fresh one). */
void l8_step_timed(drv_case *c, int which) {
    (void)which;
    step_play *x = c->state;
    if (!x || !x->run.open) return;
    td_result res;
    l8_step_report rep;
    memset(&rep, 0, sizeof rep);
    rep.rc = step_once(x, c, 0, &res);
    put(c, "losses", &res.loss, sizeof res.loss);
    put(c, "norms", &res.grad_norm, sizeof res.grad_norm);
    put(c, "report", &rep, sizeof rep);
}

void l8_step_release(drv_case *c) {
    step_play *x = c->state;
    if (x) l8_stage_close(&x->run);
}
