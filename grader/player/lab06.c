/* lab06.c (player) - Lab 6's calls: the student's DDP on the MLP built from the referee's
 * weights, trained on this rank's rows only. What the referee judges comes back in the
 * slots: the final parameters, and per (micro-)step what the player counted (collectives,
 * messages, the all-reduces in the recorded order) and the layout the student held. */
#include <stdlib.h>
#include <string.h>

#include "lab06_mlp.h"

/* The MLP of a case: weights from the slot, room for this rank's rows. */
static void build(drv_case *c, mlp *m, int rows) {
    mlp_alloc(m, LAB6_IN, lab6_opts()->hidden, LAB6_CLASSES, rows);
    mlp_load(m, drv_slot(c, "weights"));
}

static void done(mlp *m, ddp_state *d) {
    ddp_free(d);
    mlp_reset_grads(m);
    mlp_free(m);
}

/* buckets.*: the layout ddp_init builds under the case's caps. */
void lab6_play_buckets(drv_case *c) {
    mlp m;
    build(c, &m, 1);
    lab6_caps k = lab6_caps_of((int)c->arg[2], m.hidden);
    ddp_state d;
    ddp_init(&d, m.p, LAB6_NPARAMS, (ddp_mode)c->arg[0], k.cap, k.first, pl_comm_world());
    lab6_read_layout(&d, &m, drv_slot(c, "layout"));
    done(&m, &d);
}

/* The counters so far, once the device is done (differences of them are what a phase did:
 * nothing is reset, so the runner's count of play() stays whole). */
static void counters(pl_metrics *m) {
    pl_device_sync();
    pl_metrics_get(m);
}

/* Do the ranks hold the same buckets (members, order, sizes)? Through the host
 * communicator, which no counter of the lab's sees. */
static bool layouts_agree(const lab6_layout *L) {
    lab6_layout mine;
    memset(&mine, 0, sizeof mine);
    mine.nbuckets = L->nbuckets;
    memcpy(mine.nparams, L->nparams, sizeof mine.nparams);
    memcpy(mine.params, L->params, sizeof mine.params);
    memcpy(mine.numel, L->numel, sizeof mine.numel);
    size_t *counts = calloc((size_t)pl_world(), sizeof *counts);
    PL_CHECK(counts != NULL, "out of host memory");
    const char *all = pl_host_allgatherv(&mine, sizeof mine, counts, NULL);
    bool same = true;
    for (int r = 0; r < pl_world(); r++) same &= counts[r] == sizeof mine && !memcmp(all + r * sizeof mine, &mine, sizeof mine);
    free((void *)all), free(counts);
    return same;
}

/* One (micro-)step's backward: ddp_backward_begin, then the backward and ddp_backward_end
 * counted and traced on their own (the begin's collectives apart, in begin_colls). Once
 * the ranks' layouts disagree (*apart), the run goes on without communicating: their
 * all-reduces would not match (a crash or a hang in MPI or NCCL); the referee judges the
 * layouts recorded, and the results. */
static void backward(mlp *m, ddp_state *d, int rows, bool accumulate, int step, bool optimize, lab6_step *rec, bool *apart) {
    pl_metrics m0, m1, m2;
    bool mark = LAB6_MARK_END(step) < DRV_PHASES; /* the referees count both parts where they move the messages */
    counters(&m0);
    if (mark) drv_mark(LAB6_MARK_BEGIN(step), false);
    ddp_backward_begin(d);
    counters(&m1);
    if (mark) drv_mark(LAB6_MARK_BEGIN(step), true), drv_mark(LAB6_MARK_END(step), false);
    rec->begin_colls = (int64_t)(m1.coll_total - m0.coll_total + m1.msgs_sent - m0.msgs_sent);
    lab6_read_layout(d, m, &rec->layout);
    if (d->sync && !*apart) *apart = !layouts_agree(&rec->layout);
    if (*apart) ddp_set_sync(d, false);
    pl_trace_clear();
    mlp_backward(m, d, rows, accumulate);
    ddp_backward_end(d);
    /* the optimizer follows on the compute stream before anything syncs the device, as in a
     * training loop: ddp_backward_end must have made that stream wait for the averages */
    if (optimize) mlp_step(m);
    counters(&m2);
    if (mark) drv_mark(LAB6_MARK_END(step), true);
    rec->allreduce = (int64_t)(m2.coll_calls[PL_OP_ALLREDUCE] - m1.coll_calls[PL_OP_ALLREDUCE]);
    rec->other_colls = (int64_t)(m2.coll_total - m1.coll_total) - rec->allreduce;
    rec->msgs = (int64_t)(m2.msgs_sent - m1.msgs_sent);
    lab6_scan_trace(m, rec);
}

/* equal, calls, order, overlap, nosync, rebuild, accumulate: the case's (micro-)steps on
 * this rank's rows ("x" [steps][local][784], "y" [steps][local]). */
void lab6_play_train(drv_case *c) {
    int kind = (int)c->arg[1], n = lab6_nsteps(kind), local = lab6_opts()->batch / c->world;
    mlp m;
    build(c, &m, local);
    lab6_caps k = lab6_caps_of((int)c->arg[2], m.hidden);
    if (kind == RUN_ACCUM) { /* what a previous step left in the gradients */
        const float *g0 = drv_slot(c, "grad0");
        for (int i = 0; i < LAB6_NPARAMS; i++)
            pl_upload(m.grad_own[i], g0 + lab6_offset(m.hidden, i), m.p[i].numel * sizeof(float));
    }
    ddp_state d;
    ddp_init(&d, m.p, LAB6_NPARAMS, (ddp_mode)c->arg[0], k.cap, k.first, pl_comm_world());
    const float *x = drv_slot(c, "x");
    const int *y = drv_slot(c, "y");
    lab6_step *rec = drv_slot(c, "steps");
    bool apart = false;
    for (int s = 0; s < n; s++) {
        const float *xs = x + (size_t)s * local * LAB6_IN;
        const int *ys = y + (size_t)s * local;
        m.bias_first = lab6_bias_first(kind, s, c->rank);
        memset(&rec[s], 0, sizeof rec[s]);
        if (kind == RUN_NOSYNC || kind == RUN_WHEN || kind == RUN_LATE) ddp_set_sync(&d, lab6_step_syncs(kind, s));
        mlp_forward(&m, xs, ys, local);
        if (kind == RUN_REBUILD && s == 1) {
            /* iteration 1: the rebuild happens in ddp_backward_begin; the layout is what
             * is judged, and the iteration ends without communicating, so that ranks
             * whose layouts disagree cannot hang each other */
            pl_device_sync();
            ddp_backward_begin(&d);
            pl_device_sync();
            lab6_read_layout(&d, &m, drv_slot(c, "layout"));
            ddp_set_sync(&d, false);
            mlp_backward(&m, &d, local, false);
            ddp_backward_end(&d);
            break;
        }
        backward(&m, &d, local, lab6_step_accumulates(kind, s), s, lab6_step_optimizes(kind, s), &rec[s], &apart);
        if (kind == RUN_TRAIN && s == n - 1) { /* the steady step on the cost model */
            plc_prediction pp;
            rec[s].pred_ok = lab6_predict(&pp);
            if (rec[s].pred_ok) rec[s].pred_overlap = pp.comm_overlap, rec[s].pred_bwd_us = pp.step_time * 1e6;
        }
    }
    if (drv_slot_bytes(c, "params")) mlp_download(&m, drv_slot(c, "params"));
    done(&m, &d);
}
