/* lab08_player.c - Lab 8's player side: the kit's functions for the student (the 1F1B
 * list, the stage), device buffers made from the referee's host inputs, the student's
 * calls, their results copied back to host arrays, and what only the player can count:
 * its traffic, group by group, from the harness's record. Nothing here decides a verdict. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab08.h"
#include "pl_backend.h"    // defines: struct pl_comm (its id, to name the group of a recorded op)
#include "pl_instrument.h" // defines: pl_trace_events, pl_metrics, pl_wire

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

/* ==================================================================================== */
/* The kit's grid                                                                         */
/* ==================================================================================== */

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
}

void l8_kit_grid_free(td_grid *g) {
    pl_comm_free(g->tensor), pl_comm_free(g->data), pl_comm_free(g->pipeline), pl_comm_free(g->embed);
    memset(g, 0, sizeof *g);
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

void l8_play_config(const l8_config_case *cases, int n, int *codes) {
    for (int i = 0; i < n; i++) codes[i] = td_config_check(&cases[i].cfg, cases[i].world);
}

void l8_play_grid(int t, int p, l8_grid_out *out) {
    td_grid g;
    memset(out, 0, sizeof *out);
    memset(&g, 0, sizeof g);
    out->rc = td_grid_build(&g, t, p);
    /* every rank gathers over the same groups, or none does */
    if (drv_max(out->rc != TD_OK) > 0) {
        if (out->rc == TD_OK) td_grid_free(&g);
        return;
    }
    out->t = g.t, out->p = g.p, out->d = g.d, out->tp = g.tp, out->pp = g.pp, out->dp = g.dp;
    pl_comm *groups[4] = {g.tensor, g.pipeline, g.data, g.embed};
    const int ids[4] = {L8_TENSOR, L8_PIPE, L8_DATA, L8_EMBED};
    int me = pl_rank();
    for (int i = 0; i < 4; i++) {
        if (!groups[i]) continue;
        int n = pl_comm_size(groups[i]);
        int *all = pl_host_allgatherv(&me, sizeof me, NULL, groups[i]);
        out->count[ids[i]] = n < TD_MAX_STAGES * 8 ? n : TD_MAX_STAGES * 8;
        memcpy(out->members[ids[i]], all, (size_t)out->count[ids[i]] * sizeof(int));
        free(all);
    }
    td_grid_free(&g);
}

/* ==================================================================================== */
/* embed.*, xent.*                                                                        */
/* ==================================================================================== */

static float *dev_from(const float *host, size_t n) {
    float *d = pl_malloc_floats(n + 1);
    if (n) pl_upload(d, host, n * sizeof *d);
    return d;
}
static void host_from(float *host, const float *dev, size_t n) {
    pl_device_sync();
    if (n) pl_download(host, dev, n * sizeof *host);
}

void l8_play_embed(const td_grid *g, const l8_embed_in *in, int T, int b, int C, int V, l8_embed_out *out) {
    size_t NC = (size_t)T * b * C, VtC = (size_t)V / (size_t)g->t * C, TC = (size_t)T * C;
    float *wte = dev_from(in->wte, VtC), *wpe = dev_from(in->wpe, TC), *dx = dev_from(in->dx, NC);
    float *dwte = dev_from(in->dwte0, VtC), *dwpe = dev_from(in->dwpe0, TC), *x = drv_poisoned(NC);
    pl_device_sync();
    pl_trace_clear();
    size_t from = 0;
    td_embed_forward(x, wte, wpe, in->tokens, T, b, C, V, g->tensor, NULL);
    pl_device_sync();
    l8_tally_trace(g, from, out->tally[0]);
    from = pl_trace_count();
    td_embed_backward(dwte, dwpe, dx, in->tokens, T, b, C, V, g->tensor, NULL);
    pl_device_sync();
    l8_tally_trace(g, from, out->tally[1]);
    host_from(out->x, x, NC);
    host_from(out->dwte, dwte, VtC);
    host_from(out->dwpe, dwpe, TC);
    pl_free(wte), pl_free(wpe), pl_free(dx), pl_free(dwte), pl_free(dwpe), pl_free(x);
}

void l8_play_xent(const td_grid *g, const float *logits, const int *targets, int N, int V, float scale, l8_xent_out *out) {
    size_t NV = (size_t)N * ((size_t)V / (size_t)g->t);
    float *lg = dev_from(logits, NV), *dl = drv_poisoned(NV);
    for (int i = 0; i < N; i++) out->losses[i] = NAN;
    pl_device_sync();
    pl_trace_clear();
    size_t from = 0;
    td_xent(dl, out->losses, lg, targets, N, V, scale, g->tensor, NULL);
    pl_device_sync();
    l8_tally_trace(g, from, out->tally);
    host_from(out->dlogits, dl, NV);
    pl_free(lg), pl_free(dl);
}

/* ==================================================================================== */
/* step.*                                                                                 */
/* ==================================================================================== */

static void stage_make(td_stage *st, const td_grid *g, const td_config *c, const l8_layout *lay, const float *params0) {
    memset(st, 0, sizeof *st);
    st->cfg = *c;
    st->grid = g;
    st->block = lay->block;
    st->first_layer = lay->first_layer, st->nlayers = lay->nlayers;
    st->first = lay->first, st->last = lay->last;
    st->count = lay->count;
    st->params = dev_from(params0, lay->count);
    st->grads = pl_malloc_floats(lay->count + 1);
    pl_fill(st->grads, 0.0f, lay->count, NULL);
    st->blocks = calloc((size_t)lay->nlayers + 1, sizeof *st->blocks);
    st->dblocks = calloc((size_t)lay->nlayers + 1, sizeof *st->dblocks);
    PL_CHECK(st->blocks && st->dblocks, "out of host memory");
    for (int l = 0; l < lay->nlayers; l++) {
        size_t off = lay->off_blocks + (size_t)l * lay->block_count;
        gpt_tp_block_view(&st->blocks[l], st->params + off, &lay->block, c->t);
        gpt_tp_block_view(&st->dblocks[l], st->grads + off, &lay->block, c->t);
    }
    size_t wte = lay->first ? lay->off_wte : lay->off_wte_copy;
    if (lay->first || (lay->last && c->p > 1)) st->wte = st->params + wte, st->dwte = st->grads + wte;
    if (lay->first) st->wpe = st->params + lay->off_wpe, st->dwpe = st->grads + lay->off_wpe;
    if (lay->last) {
        st->lnf_w = st->params + lay->off_lnf, st->lnf_b = st->lnf_w + c->hidden;
        st->dlnf_w = st->grads + lay->off_lnf, st->dlnf_b = st->dlnf_w + c->hidden;
    }
    st->seg = lay->seg, st->nseg = lay->nseg;
    size_t shard = lay->count / (size_t)lay->d;
    st->adam_m = pl_malloc_floats(shard + 1), st->adam_v = pl_malloc_floats(shard + 1);
    pl_fill(st->adam_m, 0.0f, shard, NULL), pl_fill(st->adam_v, 0.0f, shard, NULL);
    st->ws = gpt_tp_workspace_alloc(&lay->block, c->t);
}

static void stage_free(td_stage *st) {
    pl_free(st->params), pl_free(st->grads), pl_free(st->adam_m), pl_free(st->adam_v);
    free(st->blocks), free(st->dblocks);
    gpt_tp_workspace_free(st->ws);
    memset(st, 0, sizeof *st);
}

void l8_play_steps(const td_grid *g, const td_config *c, const l8_layout *lay, const float *params0,
                   const int *const *tokens, const int *const *targets, int steps, l8_step_out *out) {
    td_stage st;
    stage_make(&st, g, c, lay, params0);
    out->rc = TD_OK;
    for (int k = 0; k < steps; k++) {
        td_batch batch = {tokens ? tokens[k] : NULL, targets ? targets[k] : NULL};
        td_result res = {0, 0};
        pl_device_sync();
        drv_max(0); /* every rank starts the step together */
        pl_trace_clear();
        pl_wire w0, w1;
        pl_metrics m;
        pl_wire_get(&w0);
        pl_metrics_reset();
        double t0 = pl_now();
        int rc = td_train_step(&st, &batch, &res);
        pl_device_sync();
        out->seconds[k] = drv_max(pl_now() - t0);
        pl_metrics_get(&m);
        pl_wire_get(&w1);
        if (k == 0) {
            l8_tally_trace(g, 0, out->tally);
            out->counters_differ = m.bytes_sent != w1.p2p_bytes_sent - w0.p2p_bytes_sent ||
                                   m.msgs_sent != w1.p2p_msgs_sent - w0.p2p_msgs_sent ||
                                   m.coll_total != w1.coll_calls - w0.coll_calls || m.coll_bytes != w1.coll_bytes - w0.coll_bytes;
        }
        out->loss[k] = res.loss, out->norm[k] = res.grad_norm;
        if (rc != TD_OK && out->rc == TD_OK) out->rc = rc;
        if (drv_max(rc != TD_OK) > 0) break; /* no rank goes on alone */
    }
    host_from(out->params, st.params, lay->count);
    stage_free(&st);
}

/* ==================================================================================== */
/* The run callbacks: the referee's slots in, the player's results out                   */
/* ==================================================================================== */

void l8_config_run(drv_case *c) {
    l8_config_slots *x = c->state;
    l8_play_config(x->cases, x->n, x->codes);
}

void l8_grid_run(drv_case *c) {
    l8_grid_out *x = drv_state(c, sizeof *x);
    l8_play_grid((int)c->arg[0], (int)c->arg[1], x);
}

void l8_grid_errors_run(drv_case *c) {
    l8_grid_err_slots *x = c->state;
    for (int i = 0; i < x->n; i++) {
        td_grid g;
        memset(&g, 0x5a, sizeof g); /* a pattern the call must leave as it is */
        td_grid keep = g;
        x->rc[i] = td_grid_build(&g, x->t[i], x->p[i]);
        x->touched[i] = memcmp(&g, &keep, sizeof g) != 0;
        if (x->rc[i] == TD_OK) {
            td_grid_free(&g);
            break;
        }
    }
}

void l8_embed_run(drv_case *c) {
    l8_embed_slots *x = c->state;
    td_grid g;
    l8_kit_grid(&g, x->t, 1);
    l8_play_embed(&g, &x->in, x->T, x->b, x->C, x->V, &x->out);
    l8_kit_grid_free(&g);
}

void l8_xent_run(drv_case *c) {
    l8_xent_slots *x = c->state;
    td_grid g;
    l8_kit_grid(&g, x->t, 1);
    l8_play_xent(&g, x->logits, x->targets, x->N, x->V, x->scale, &x->out);
    l8_kit_grid_free(&g);
}

void l8_step_run(drv_case *c) {
    l8_state *S = l8_state_of(c);
    l8_run *R = S->runs[c->arg[0]];
    if (R->played) return;
    R->played = true;
    size_t n = (size_t)R->cfg.micro * R->cfg.seq * R->cfg.batch;
    const int *tok[L8_MAX_STEPS], *tgt[L8_MAX_STEPS];
    for (int s = 0; s < S->steps; s++) tok[s] = R->ids + (size_t)s * n, tgt[s] = R->ids + (size_t)(S->steps + s) * n;
    td_grid g;
    l8_kit_grid(&g, R->cfg.t, R->cfg.p);
    l8_play_steps(&g, &R->cfg, &R->lay, R->params0, R->lay.first ? tok : NULL, R->lay.last ? tgt : NULL, S->steps, &R->out);
    l8_kit_grid_free(&g);
}
