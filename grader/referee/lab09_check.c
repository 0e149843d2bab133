/* lab09_check.c (referee) - Lab 9's checks: what the player left in the slots against the
 * float64 layer (models/internal/moe_ref.h) run on every rank's inputs, which this referee
 * rebuilds from their seeds (lab09_inputs.c). Nothing the player wrote is used as an index
 * or a size here: those come from the referee's own inputs and reference.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/moe_ref.h" // defines: llm_moe_* (the float64 layer)
#include "lab09_ref.h"

static void *alloc0(size_t n, size_t size) {
    void *p = calloc(n + 1, size);
    PL_CHECK(p != NULL, "out of host memory");
    return p;
}

static llm_moe_shape shape_of(const l9_params *p) {
    return (llm_moe_shape){p->T, p->H, p->F, p->E, p->k, p->cf, p->alpha};
}

/* ======================================================================================= */
/* Checks                                                                                  */
/* ======================================================================================= */

static double *to_double(const float *a, size_t n) {
    double *d = alloc0(n, sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = a[i];
    return d;
}

/* Every assignment's expert and keep against the reference; fails with the first difference. */
static void check_routing(drv_case *c, const l9_params *p, const l9_outputs *got, const llm_moe_routing *want) {
    int A = p->T * p->k, bad_e = 0, bad_k = 0, fe = -1, fk = -1;
    for (int a = 0; a < A; a++) {
        if (got->expert[a] != want->expert[a] && bad_e++ == 0) fe = a;
        if (got->expert[a] == want->expert[a] && got->keep[a] != want->keep[a] && bad_k++ == 0) fk = a;
    }
    if (drv_sum(bad_e) > 0 && bad_e)
        drv_fail(c, "routing: %d of %d choices differ from the reference; token %d choice %d: expected expert %d, got %d "
                    "(top-k by probability, largest first, ties to the lower index)", bad_e, A, fe / p->k, fe % p->k,
                 want->expert[fe], got->expert[fe]);
    if (drv_sum(bad_k) > 0 && bad_k)
        drv_fail(c, "capacity: %d of %d assignments kept/dropped unlike the reference (C = %d per expert); token %d "
                    "choice %d to expert %d (p = %.4f): expected %s, got %s (drop the lowest probabilities)", bad_k, A,
                 llm_moe_capacity(&(llm_moe_shape){p->T, p->H, p->F, p->E, p->k, p->cf, p->alpha}), fk / p->k, fk % p->k,
                 want->expert[fk], want->probs[(size_t)(fk / p->k) * p->E + want->expert[fk]],
                 want->keep[fk] ? "kept" : "dropped", got->keep[fk] == 1 ? "kept" : got->keep[fk] == 0 ? "dropped" : "unwritten");
    drv_check_tensor(c, "gates (renormalised over the k chosen)", got->gate, want->gate, (size_t)A, drv_tolerance());
    double aux_err = fabs((double)got->aux - want->aux) / fmax(fabs(want->aux), 1e-30);
    if (!isfinite(got->aux)) aux_err = INFINITY;
    drv_check_error(c, "aux loss (alpha E sum f_i P_i)", aux_err, drv_tolerance());
}

/* The router's gradient sums terms p (dp - sum_m p_m dp_m) that cancel exactly when the
 * routing is balanced (k = 1 with as many tokens on every expert: the reference gives 0,
 * a float32 layer ~1e-8). Its errors are measured against the size of those terms:
 * scale[t, e] = p (|dp| + sum_m p_m |dp_m|), with dp from the gates' and the aux loss's
 * gradients. */
static void dlogit_scales(const l9_params *p, const llm_moe_routing *r, const double *dgate, double daux, double *scale) {
    int T = p->T, E = p->E, k = p->k;
    double *f = alloc0((size_t)E, sizeof *f), *dp = alloc0((size_t)E, sizeof *dp);
    for (int a = 0; a < T * k; a++) f[r->expert[a]] += 1.0 / ((double)T * k);
    for (int t = 0; t < T; t++) {
        const double *pt = r->probs + (size_t)t * E;
        double S = 0, dot = 0, inner = 0;
        for (int e = 0; e < E; e++) dp[e] = fabs(daux * p->alpha * E * f[e] / T);
        for (int j = 0; j < k; j++) S += pt[r->expert[t * k + j]], dot += dgate[t * k + j] * r->gate[t * k + j];
        for (int j = 0; j < k; j++) dp[r->expert[t * k + j]] += (fabs(dgate[t * k + j]) + fabs(dot)) / S;
        for (int e = 0; e < E; e++) inner += dp[e] * pt[e];
        for (int e = 0; e < E; e++) scale[(size_t)t * E + e] = pt[e] * (dp[e] + inner);
    }
    free(f), free(dp);
}

static double norm2(const double *a, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * a[i];
    return sqrt(s);
}

/* ||got - want|| / max(||want||, scale): a relative error that stays meaningful at 0. */
static double err_scaled(const float *got, const double *want, size_t n, double scale) {
    double num = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        num += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
    }
    double den = fmax(norm2(want, n), scale);
    return den > 0 ? sqrt(num) / den : sqrt(num);
}

/* The router gradient's scale for one group: sum_t scale[t, :] (x) |x_t|, with dgate from
 * the reference experts (dgate[t, j] = <dy_t, FFN_e(x_t)> for kept assignments). */
static double router_scale(const l9_params *p, const llm_moe_routing *r, const double *x, const double *dy,
                           const double *wg, const double *wu, const double *wd, double daux) {
    int T = p->T, E = p->E, H = p->H, F = p->F, k = p->k;
    double *dg = alloc0((size_t)T * k, sizeof *dg), *out = alloc0((size_t)H, sizeof *out);
    double *sc = alloc0((size_t)T * E, sizeof *sc), *acc = alloc0((size_t)E * H, sizeof *acc);
    for (int a = 0; a < T * k; a++) {
        int e = r->expert[a], t = a / k;
        if (!r->keep[a]) continue;
        llm_moe_expert_forward(1, H, F, wg + (size_t)e * F * H, wu + (size_t)e * F * H, wd + (size_t)e * H * F,
                               x + (size_t)t * H, out);
        for (int h = 0; h < H; h++) dg[a] += dy[(size_t)t * H + h] * out[h];
    }
    dlogit_scales(p, r, dg, daux, sc);
    for (int t = 0; t < T; t++)
        for (int e = 0; e < E; e++)
            for (int h = 0; h < H; h++) acc[(size_t)e * H + h] += sc[(size_t)t * E + e] * fabs(x[(size_t)t * H + h]);
    double s = norm2(acc, (size_t)E * H);
    free(dg), free(out), free(sc), free(acc);
    return s;
}

static void check_route(drv_case *c, const l9_params *p, const l9_inputs *in, const l9_outputs *o) {
    llm_moe_shape s = shape_of(p);
    size_t TE = (size_t)p->T * p->E, A = (size_t)p->T * p->k;
    double *l = to_double(in->logits, TE), *dg = to_double(in->dgate, A), *dl = alloc0(TE, sizeof *dl);
    llm_moe_routing r;
    llm_moe_routing_alloc(&r, &s);
    llm_moe_route(&s, l, &r);
    llm_moe_route_backward(&s, &r, dg, in->daux, dl);
    drv_check_tensor(c, "probs (softmax of the logits)", o->probs, r.probs, TE, drv_tolerance());
    check_routing(c, p, o, &r);
    double *sc = alloc0(TE, sizeof *sc);
    dlogit_scales(p, &r, dg, in->daux, sc);
    drv_check_error(c, "dlogits", err_scaled(o->dlogits, dl, TE, norm2(sc, TE)), drv_tolerance());
    free(sc);
    llm_moe_routing_free(&r);
    free(l), free(dg), free(dl);
}

/* What the player counted in phase 0 (the forward(s), or the whole call) or 1 (the
 * backward): bytes to each rank, ops of one kind. */
static const double *pairs_of(const l9_params *p, const l9_outputs *o, int phase) {
    return o->counted + l9_cnt_pairs(p->n, phase);
}
static double ops_of(const l9_params *p, const l9_outputs *o, int phase, int kind) {
    double v = o->counted[l9_cnt_kinds(p->n, phase) + kind];
    return isfinite(v) ? v : 1e30; /* the player's number: a NaN must not pass as none */
}

/* Bytes this rank must have sent to each peer: counts + the rows each way. */
static void check_pairs(drv_case *c, const char *phase, const double *got, const double *want) {
    char what[160];
    snprintf(what, sizeof what, "traffic, %s (README.md: the rows routed there x hidden x 4%s)", phase,
             strcmp(phase, "backward") ? " + the counts" : "");
    drv_check_peers(c, what, got, want);
}

static void check_layer(drv_case *c, const l9_params *p, const l9_outputs *o, const uint64_t *seeds, uint64_t pub) {
    int n = p->n, me = c->rank, T = p->T, H = p->H, F = p->F, E = p->E, Le = E / n, calls = p->calls;
    llm_moe_shape s = shape_of(p);
    size_t TH = (size_t)T * H, FH = (size_t)F * H;
    l9_inputs *all = alloc0((size_t)n, sizeof *all);
    for (int r = 0; r < n; r++) l9_inputs_make(p, r, seeds[r], pub, &all[r]);
    double *x = alloc0((size_t)n * TH, sizeof *x), *y = alloc0((size_t)n * TH, sizeof *y);
    double *wr = to_double(all[0].wr, (size_t)E * H), *dy = alloc0((size_t)n * TH, sizeof *dy);
    double *wg = alloc0((size_t)E * FH, sizeof *wg), *wu = alloc0((size_t)E * FH, sizeof *wu), *wd = alloc0((size_t)E * FH, sizeof *wd);
    for (int r = 0; r < n; r++) {
        for (size_t i = 0; i < (size_t)Le * FH; i++)
            wg[(size_t)r * Le * FH + i] = all[r].wg[i], wu[(size_t)r * Le * FH + i] = all[r].wu[i], wd[(size_t)r * Le * FH + i] = all[r].wd[i];
        for (size_t i = 0; i < TH; i++) dy[(size_t)r * TH + i] = all[r].dy[i];
    }
    llm_moe_routing *rt = alloc0((size_t)n, sizeof *rt);
    for (int r = 0; r < n; r++) llm_moe_routing_alloc(&rt[r], &s);
    double *want_fwd = alloc0((size_t)n, sizeof(double)), *want_bwd = alloc0((size_t)n, sizeof(double));
    double count_bytes = p->disp == L9_ONE_SIDED ? 4.0 * E : 4.0 * Le;
    double y_num = 0, y_den = 0;
    for (int call = 0; call < calls; call++) {
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < TH; i++) x[(size_t)r * TH + i] = all[r].x[(size_t)call * TH + i];
        llm_moe_forward(&s, n, x, wr, wg, wu, wd, y, rt);
        const float *got = o->y + (size_t)call * TH;
        for (size_t i = 0; i < TH; i++) {
            double d = isfinite(got[i]) ? got[i] - y[(size_t)me * TH + i] : INFINITY;
            y_num += d * d, y_den += y[(size_t)me * TH + i] * y[(size_t)me * TH + i];
        }
        /* rows a(s -> r): kept assignments of group s to experts on rank r */
        for (int q = 0; q < n; q++) {
            if (q == me) continue;
            double rows = 0;
            for (int a = 0; a < T * p->k; a++) {
                rows += rt[me].keep[a] && rt[me].expert[a] / Le == q;
                rows += rt[q].keep[a] && rt[q].expert[a] / Le == me;
            }
            want_fwd[q] += count_bytes + 4.0 * H * rows;
            if (call == calls - 1) want_bwd[q] = 4.0 * H * rows;
        }
    }
    /* the last call's routing, then its backward */
    check_routing(c, p, o, &rt[me]);
    drv_check_error(c, calls > 1 ? "y (every call)" : "y", y_den > 0 ? sqrt(y_num / y_den) : sqrt(y_num), drv_tolerance());
    double *dx = alloc0((size_t)n * TH, sizeof *dx), *dwr = alloc0((size_t)n * E * H, sizeof *dwr);
    double *dwg = alloc0((size_t)E * FH, sizeof *dwg), *dwu = alloc0((size_t)E * FH, sizeof *dwu), *dwd = alloc0((size_t)E * FH, sizeof *dwd);
    llm_moe_backward(&s, n, x, wr, wg, wu, wd, rt, dy, all[0].daux, dx, dwr, dwg, dwu, dwd);
    drv_check_tensor(c, "dx", o->dx, dx + (size_t)me * TH, TH, drv_tolerance());
    double scale = router_scale(p, &rt[me], x + (size_t)me * TH, dy + (size_t)me * TH, wg, wu, wd, all[0].daux);
    drv_check_error(c, "router gradient (this rank's tokens)", err_scaled(o->dwr, dwr + (size_t)me * E * H, (size_t)E * H, scale),
                    drv_tolerance());
    size_t mine = (size_t)me * Le * FH, le = (size_t)Le * FH;
    drv_check_tensor(c, "w_gate gradient (this rank's experts, every token routed to them)", o->dwg, dwg + mine, le, drv_tolerance());
    drv_check_tensor(c, "w_up gradient", o->dwu, dwu + mine, le, drv_tolerance());
    drv_check_tensor(c, "w_down gradient", o->dwd, dwd + mine, le, drv_tolerance());
    check_pairs(c, calls > 1 ? "forwards" : "forward", pairs_of(p, o, 0), want_fwd);
    check_pairs(c, "backward", pairs_of(p, o, 1), want_bwd);
    double puts = 0, sends = 0, colls = 0;
    for (int ph = 0; ph < 2; ph++) {
        puts += ops_of(p, o, ph, PL_OP_PUT) + ops_of(p, o, ph, PL_OP_SIGNAL);
        sends += ops_of(p, o, ph, PL_OP_SEND);
        for (int kd = 0; kd < PL_OP_COUNT; kd++)
            if (pl_op_is_collective((pl_op_kind)kd)) colls += ops_of(p, o, ph, kd);
    }
    drv_check_count(c, "library collectives the layer called (counts and rows move by the dispatcher only)", colls, 0);
    if (p->disp == L9_TWO_SIDED)
        drv_check_count(c, "put/signal calls of the two-sided dispatcher (it moves everything with moe_alltoallv)", puts, 0);
    else drv_check_count(c, "two-sided messages of the one-sided dispatcher (it moves everything with puts)", sends, 0);
    for (int r = 0; r < n; r++) llm_moe_routing_free(&rt[r]), l9_inputs_free(&all[r]);
    void *f[] = {all, x, y, wr, dy, wg, wu, wd, rt, want_fwd, want_bwd, dx, dwr, dwg, dwu, dwd};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) free(f[i]);
}

static void check_a2a(drv_case *c, const l9_params *p, const l9_inputs *in, const l9_outputs *o, const uint64_t *seeds,
                      uint64_t pub) {
    int n = p->n, me = c->rank;
    size_t at = 0, nrecv = 0;
    for (int s = 0; s < n; s++) nrecv += (size_t)in->recv_counts[s];
    float *want = alloc0(nrecv + 1, sizeof(float));
    double *want_pairs = alloc0((size_t)n, sizeof(double));
    for (int s = 0; s < n; s++) {
        l9_inputs other;
        l9_inputs_make(p, s, seeds[s], pub, &other);
        size_t off = 0;
        for (int q = 0; q < me; q++) off += (size_t)other.send_counts[q];
        for (int i = 0; i < in->recv_counts[s]; i++) want[at++] = other.a2a_send[off + (size_t)i];
        want_pairs[s] = 4.0 * in->send_counts[s];
        l9_inputs_free(&other);
    }
    drv_num(c, "wrong", drv_check_floats(c, "the received rows (from rank 0 first)", o->a2a_recv, want, at, true));
    check_pairs(c, "all-to-all-v", pairs_of(p, o, 0), want_pairs);
    free(want_pairs), free(want);
}

/* The order the handout fixes: ((in_0 + in_1) + in_2) + ..., in float. */
static void check_ar(drv_case *c, const l9_params *p, const l9_outputs *o, const uint64_t *seeds, uint64_t pub) {
    int n = p->n;
    if (!drv_one_host()) {
        drv_fail(c, "the ranks are on more than one host: the one-shot and two-shot all-reduces read their peers' "
                    "buffers through pl_sym_peer_ptr, which is NULL across hosts (as nvshmem_ptr is); grade these "
                    "groups with every rank on one node");
        return;
    }
    size_t N = (size_t)p->calls * (size_t)p->count;
    float *want = alloc0(N, sizeof(float));
    for (int r = 0; r < n; r++) {
        l9_inputs other;
        l9_inputs_make(p, r, seeds[r], pub, &other);
        for (size_t i = 0; i < N; i++) want[i] = r == 0 ? other.ar_in[i] : want[i] + other.ar_in[i];
        l9_inputs_free(&other);
    }
    double wrong = drv_check_strided(c, "the all-reduces' outputs [call, index] vs the rank-order sum (a later call wrong: "
                                        "a buffer reused before every rank had read it?)",
                                     o->ar_out, (size_t)p->count, want, (size_t)p->calls, (size_t)p->count, true);
    drv_num(c, "wrong", wrong);
    drv_num(c, "count", (double)p->count);
    drv_num(c, "bytes", 4.0 * (double)p->count);
    free(want);
    /* The two-shot's own work: a rank reduces its chunk of every rank's input, about count/n
     * elements from each of the n ranks, never the whole vector (the one-shot's (n-1) count).
     * The elements pl_reduce_local combined are the player's count (docs/grader.md). */
    if (p->disp == 1 && n > 1 && p->count > 0 && c->ran && wrong == 0) {
        double chunk = (double)((p->count + n - 1) / n), bound = (double)p->calls * n * chunk;
        double got = c->m.reduce_elems;
        drv_num(c, "reduce_elems", drv_max(got));
        if (got > bound)
            drv_fail(c, "moe_allreduce_twoshot combined %.0f elements with pl_reduce_local in %d call(s) here; a "
                        "two-shot reduces its own chunk only, at most n * ceil(count / n) = %.0f per call (the whole "
                        "vector from every rank, %.0f, is the one-shot)",
                     got, p->calls, n * chunk, (double)(n - 1) * (double)p->count);
    }
}

void l9_referee_check(drv_case *c, const l9_params *p, const l9_inputs *in, const l9_outputs *o, const uint64_t *seeds,
                      uint64_t pub) {
    switch (p->kind) {
    case K_CONFIG: {
        static const char *names[] = {"MOE_OK", "MOE_ERR_SHAPE", "MOE_ERR_TOPK", "MOE_ERR_CAPACITY", "MOE_ERR_EXPERTS",
                                      "MOE_ERR_MISMATCH"};
        bool bad = o->code != in->expect_code;
        if (drv_sum(bad) > 0 && bad)
            drv_fail(c, "moe_config_check returned %d (%s) here, expected %s", o->code,
                     o->code >= 0 && o->code <= 5 ? names[o->code] : "not a code", names[in->expect_code]);
        break;
    }
    case K_ROUTE: check_route(c, p, in, o); break;
    case K_A2A: check_a2a(c, p, in, o, seeds, pub); break;
    case K_LAYER:
    case K_REUSE: check_layer(c, p, o, seeds, pub); break;
    case K_AR: check_ar(c, p, o, seeds, pub); break;
    }
}
