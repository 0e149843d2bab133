/* lab07_replay.c (referee) - a ZeRO-3 step replayed on the cost-model profile from the ops
 * every rank's player recorded (its trace of the last step: the player's own account, see
 * docs/grader.md), once as recorded and once without prefetch: each all-gather moved, in its
 * rank's list, to right after the last compute op issued before its unit's hook was called,
 * and made to wait for it. The replay itself is the referee's: rank 0's referee replays
 * every rank's ops, and every rank learns the result. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab07_ref.h"

/* The recorded ops are the player's: only a list the replay can take safely is replayed
 * (kinds, streams and communicators in range, dependencies among the rank's own ops). */
static bool ops_ok(const l7_ops *o, int world) {
    for (int i = 0; i < o->nops; i++) {
        const plc_op *p = &o->op[i];
        if ((int)p->kind < 0 || (int)p->kind >= PL_OP_COUNT || (p->stream != 0 && p->stream != 1) ||
            p->comm_size < 1 || p->comm_size > world || world % p->comm_size || p->peer < -1 ||
            p->peer >= p->comm_size || p->after < 0 || p->after > o->nops || !isfinite(p->bytes) || p->bytes < 0 ||
            !isfinite(p->flops) || p->flops < 0 || !isfinite(p->t_start) || !isfinite(p->t_end))
            return false;
    }
    for (int i = 0; i < o->ntrace; i++)
        if (o->op_of[i] < -1 || o->op_of[i] >= o->nops) return false;
    return true;
}

static int trace_at(const l7_ops *o, int i) { return i >= 0 && i < o->ntrace ? i : -1; }

/* The list without prefetch (every `after` renumbered). */
static void without_prefetch(const l7_step *r, const l7_model *m, const l7_ops *o, plc_op *out) {
    int U = m->nunits, nf = 0, nops = o->nops;
    const plc_op *ops = o->op;
    int *move_after = malloc(((size_t)nops + 1) * sizeof *move_after), *newidx = malloc(((size_t)nops + 1) * sizeof *newidx);
    PL_CHECK(move_after && newidx, "out of host memory");
    for (int i = 0; i < nops; i++) move_after[i] = -1;
    while (nf < r->nag && r->ag_at[nf] < r->fwd_end) nf++;
    for (int k = 1; k < r->nag; k++) {
        if (k == nf) continue; /* the first gather of the backward is never a prefetch */
        int unit = k < nf ? k : U - 1 - (k - nf);
        if (unit < 0 || unit >= U) continue;
        int at = trace_at(o, r->ag_at[k]), call = k < nf ? r->fwd_call[unit] : r->bwd_call[unit], last = -1;
        if (at < 0 || call < 0 || call > o->ntrace) continue;
        int me = o->op_of[at];
        for (int i = call - 1; i >= 0 && last < 0; i--)
            if (o->op_of[i] >= 0 && ops[o->op_of[i]].stream == 0) last = o->op_of[i];
        if (me >= 0 && last > me) move_after[me] = last;
    }
    int w = 0;
    for (int i = 0; i < nops; i++) {
        if (move_after[i] < 0) newidx[i] = w, out[w++] = ops[i];
        for (int j = 0; j < nops; j++)
            if (move_after[j] == i) newidx[j] = w, out[w] = ops[j], out[w++].after = i + 1;
    }
    for (int i = 0; i < w; i++)
        if (out[i].after > 0) {
            int to = newidx[out[i].after - 1];
            out[i].after = to < i ? to + 1 : 0;
        }
    free(move_after), free(newidx);
}

void l7_replay(const l7_lab *L, const l7_out *o, double *pred_us, double *pred_noprefetch_us) {
    *pred_us = *pred_noprefetch_us = 0;
    /* every referee takes the same branches: decided on values reduced over the ranks */
    bool have = L->have_prof && !o->idle && o->ops && o->rec.nsteps > 0;
    if (drv_min(have) == 0) return;
    const l7_ops *ops = o->ops;
    bool ok = ops_ok(ops, L->np);
    if (drv_min(ok) == 0) {
        *pred_us = -1; /* a record no trace gives */
        return;
    }
    int world = L->np, nmax = (int)drv_max(ops->nops);
    /* mine: [count][as recorded, nmax][without prefetch, nmax] */
    size_t one = sizeof(plc_op) * (size_t)nmax, bytes = sizeof(int64_t) + 2 * one;
    char *mine = calloc(1, bytes), *all = malloc(bytes * (size_t)world);
    PL_CHECK(mine && all, "out of host memory");
    int64_t n = ops->nops;
    memcpy(mine, &n, sizeof n);
    memcpy(mine + sizeof n, ops->op, sizeof(plc_op) * (size_t)n);
    without_prefetch(&o->rec.step[o->rec.nsteps - 1], &L->model, ops, (plc_op *)(mine + sizeof n + one));
    drv_allgather(mine, bytes, all);
    double pred[2] = {0, 0};
    if (L->rank == 0) {
        plc_op *list = malloc((one + sizeof(plc_op)) * (size_t)world);
        PL_CHECK(list != NULL, "out of host memory");
        for (int pass = 0; pass < 2; pass++) {
            size_t total = 0;
            for (int r = 0; r < world; r++) {
                const char *b = all + (size_t)r * bytes;
                int64_t nr;
                memcpy(&nr, b, sizeof nr);
                if (nr < 0 || nr > nmax) nr = 0;
                memcpy(list + total, b + sizeof nr + (size_t)pass * one, sizeof(plc_op) * (size_t)nr);
                for (int64_t i = 0; i < nr; i++) list[total + (size_t)i].rank = r;
                total += (size_t)nr;
            }
            plc_prediction pp;
            char err[200];
            if (plc_replay(&L->prof, list, total, world, &pp, err, sizeof err) != 0) {
                pred[0] = pred[1] = 0;
                break;
            }
            pred[pass] = pp.step_time * 1e6;
        }
        free(list);
    }
    free(mine), free(all);
    *pred_us = drv_max(pred[0]);
    *pred_noprefetch_us = drv_max(pred[1]);
}
