// expect: wrong layer.one.*
/* Broken on purpose: the one-sided dispatcher computes where its rows go in each receiver's
 * buffer with an inclusive prefix sum (its own rows counted too) instead of an exclusive
 * one: every sender writes one block too far, over the next sender's rows (and the last past
 * the rows the receiver reads). The forward below is the solution's with that one change. */
#include "moe.h"
#define moe_forward moe_forward_solution
#include "../../../solutions/09-moe/moe_layer.c"
#undef moe_forward
#include "../../../solutions/09-moe/moe_router.c"
#include "../../../solutions/09-moe/moe_allreduce.c"

static void dispatch_inclusive(moe_state *st, int phase, pl_stream *s) {
    if (st->d == MOE_TWO_SIDED) {
        dispatch(st, phase, s);
        return;
    }
    int n = st->n, H = st->c.hidden, E = st->c.experts, Le = st->Le;
    for (int p = 0; p < n; p++) {
        int off = 0;
        for (int q = 0; q <= st->me; q++) /* the bug: <= */
            for (int l = 0; l < Le; l++) off += st->cnt[q * E + p * Le + l];
        if (off + st->send_rows[p] > st->max_rows) off = st->max_rows - st->send_rows[p]; /* stay inside the buffer */
        pl_sym_put_signal(st->recv + (size_t)off * H, st->d_send + (size_t)st->send_off[p] * H,
                          (size_t)st->send_rows[p] * H * sizeof(float), &st->sig[phase], 1, PL_SIG_ADD, p, s);
    }
    wait_phase(st, phase, s);
}

void moe_forward(const moe_config *c, const moe_weights *w, moe_state *st, const float *x, float *y, moe_routing *r,
                 pl_stream *s) {
    int T = c->tokens, H = c->hidden, F = c->ffn, E = c->experts, k = c->top_k;
    size_t A = (size_t)T * k;
    /* route on the host: the logits come down, the plan goes up (a host sync, as in Megatron) */
    pl_gemm(false, true, T, E, H, 1.0f, x, H, w->router, H, 0.0f, st->d_logits, E, s);
    pl_stream_sync(s);
    pl_download(st->h_logits, st->d_logits, (size_t)T * E * sizeof(float));
    moe_route(c, st->h_logits, r);
    memcpy(st->r.probs, r->probs, (size_t)T * E * sizeof(float));
    memcpy(st->r.expert, r->expert, A * sizeof(int));
    memcpy(st->r.gate, r->gate, A * sizeof(float));
    memcpy(st->r.keep, r->keep, A * sizeof(int));
    st->r.aux = r->aux;
    pl_copy(st->d_x, x, (size_t)T * H * sizeof(float), s);

    int *mine = host((size_t)E, sizeof(int));
    plan_send(st, mine);
    pl_upload(st->d_slot, st->slot, A * sizeof(int));
    pl_upload(st->d_gate, st->r.gate, A * sizeof(float));
    exchange_counts(st, mine, s);
    free(mine);
    plan_receive(st);
    pl_upload(st->d_perm, st->perm, (size_t)st->rows_in * sizeof(int));

    kern_moe_scatter(st->d_send, x, st->d_slot, NULL, T, k, H, s);
    dispatch_inclusive(st, SIG_DISPATCH, s);
    kern_gather_rows(st->d_xe, st->recv, st->d_perm, st->rows_in, H, s);
    for (int l = 0, o = 0; l < st->Le; o += st->expert_rows[l++]) {
        int m = st->expert_rows[l];
        const float *wg = w->w_gate + (size_t)l * F * H, *wu = w->w_up + (size_t)l * F * H, *wd = w->w_down + (size_t)l * H * F;
        pl_gemm(false, true, m, F, H, 1.0f, st->d_xe + (size_t)o * H, H, wg, H, 0.0f, st->d_ga + (size_t)o * F, F, s);
        pl_gemm(false, true, m, F, H, 1.0f, st->d_xe + (size_t)o * H, H, wu, H, 0.0f, st->d_up + (size_t)o * F, F, s);
        kern_swiglu_forward(st->d_hs + (size_t)o * F, st->d_ga + (size_t)o * F, st->d_up + (size_t)o * F, (size_t)m * F, s);
        pl_gemm(false, true, m, H, F, 1.0f, st->d_hs + (size_t)o * F, F, wd, F, 0.0f, st->d_ye + (size_t)o * H, H, s);
    }
    kern_moe_scatter(st->d_back, st->d_ye, st->d_perm, NULL, st->rows_in, 1, H, s); /* back to source-major */
    combine(st, SIG_COMBINE, s);
    kern_moe_gather(y, st->comb, st->d_slot, st->d_gate, T, k, H, s);
}

