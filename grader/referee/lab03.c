/* lab03.c (referee) - Lab 3's serial master block and its reference, the config case and
 * the block cases (forward, backward, comm). The memory and training cases and the cost
 * model's table: lab03_train.c.
 *
 * Every referee builds the serial master block from the secret seed (the bits mg_fill_master
 * gives), runs the kit's independent host reference of the block (models/gpt_host: plain
 * loops, double accumulation), gives its player this rank's shards and rows, and compares
 * what comes back with the matching slice of the serial results.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_host.h"  // defines: gpt_host_block_forward/backward (the serial reference)
#include "lab03_ref.h" // defines: host_block; brings in lab03.h

static const bool WEIGHT[LAB3_NTENSORS] = {[LAB3_QKV_W] = true, [LAB3_PROJ_W] = true, [LAB3_FC1_W] = true,
                                           [LAB3_FC2_W] = true};

void lab3_init(void) {
    const lab3_flags *f = lab3_opts();
    int tp = pl_world();
    if (f->H % tp != 0) pl_usage_error("--heads %d is not a multiple of the tensor-parallel size %d", f->H, tp);
    if (f->C % f->H != 0) pl_usage_error("--hidden %d is not a multiple of --heads %d", f->C, f->H);
    if (f->F % tp != 0) pl_usage_error("--ffn %d is not a multiple of the tensor-parallel size %d", f->F, tp);
    if ((double)f->T * f->T * f->B * f->H > 64e6 || (double)f->T * f->B * f->F > 64e6)
        pl_usage_error("shape too large for the serial reference (T*T*B*H and T*B*F must stay below 64M)");
}

/* ================================================================================== */
/* The serial master block and its reference                                          */
/* ================================================================================== */

float *lab3_hz(size_t n) {
    float *p = calloc(n + 1, sizeof(float));
    PL_CHECK(p != NULL, "out of host memory");
    return p;
}

void hb_alloc(host_block *h, int C, int F) {
    lab3_piece pc[LAB3_NTENSORS];
    lab3_layout(C, F, 1, 0, pc); /* one rank: every piece is its whole master */
    for (int w = 0; w < LAB3_NTENSORS; w++) h->t[w] = lab3_hz((size_t)(pc[w].R * pc[w].K));
}
void hb_free(host_block *h) {
    for (int w = 0; w < LAB3_NTENSORS; w++) free(h->t[w]);
}

/* mg_fill_master's distribution of tensor w (megatron.h): layer-norm gains near 1, biases
 * near 0, weights uniform in +-2b, b a power of two near 1/sqrt(in). */
static void fill_master(float *dst, const lab3_piece *p, int w, int layer, uint64_t seed, int C) {
    uint64_t id = 1000u + (uint64_t)layer * 32u + (uint64_t)w;
    float lo, hi, wb = 1.0f / (float)(p->R > 1 ? p->R : C);
    if (w == LAB3_LN1_W || w == LAB3_LN2_W) lo = 0.8f, hi = 1.2f;
    else if (w == LAB3_LN1_B || w == LAB3_LN2_B) lo = -0.1f, hi = 0.1f;
    else {
        float b = 1.0f;
        while (b * b > wb) b *= 0.5f;
        lo = -2 * b, hi = 2 * b;
    }
    pl_rng_fill_host(dst, p->rows, p->cols, p->K, p->r0, p->c0, seed, id, PL_RNG_UNIFORM, lo, hi);
}

void hb_master(host_block *h, int C, int F, int layer, uint64_t seed) {
    lab3_piece pc[LAB3_NTENSORS];
    lab3_layout(C, F, 1, 0, pc);
    for (int w = 0; w < LAB3_NTENSORS; w++) fill_master(h->t[w], &pc[w], w, layer, seed, C);
}

void hb_shards(const host_block *h, const lab3_piece *pc, float *base) {
    for (int w = 0; w < LAB3_NTENSORS; w++) {
        const lab3_piece *p = &pc[w];
        for (int64_t i = 0; i < p->rows; i++)
            for (int64_t j = 0; j < p->cols; j++) base[p->off + i * p->cols + j] = h->t[w][(p->r0 + i) * p->K + p->c0 + j];
    }
}

/* Lab 3 [in x out] <-> the reference's [out x in]: weights transposed, vectors copied. */
static void convert(int C, int F, float *const *from, float *const *to, bool to_gpt) {
    lab3_piece pc[LAB3_NTENSORS];
    lab3_layout(C, F, 1, 0, pc);
    for (int w = 0; w < LAB3_NTENSORS; w++) {
        int64_t R = pc[w].R, K = pc[w].K;
        for (int64_t i = 0; i < R; i++)
            for (int64_t j = 0; j < K; j++) {
                size_t lab = (size_t)(i * K + j), gpt = WEIGHT[w] ? (size_t)(j * R + i) : lab;
                if (to_gpt) to[w][gpt] = from[w][lab];
                else to[w][lab] = from[w][gpt];
            }
    }
}

void lab3_reference(const lab3_cfg *k, const host_block *p, host_block *g, float *y, const float *x, float *dx,
                    const float *dy) {
    gpt_config gc = {.seq = k->seq, .batch = k->batch, .hidden = k->hidden, .heads = k->heads, .ffn = k->ffn};
    gpt_block_params gp, gg;
    gpt_host_block_alloc(&gp, &gc);
    gpt_host_block_alloc(&gg, &gc);
    convert(k->hidden, k->ffn, p->t, gp.t, true);
    gpt_host_acts a;
    gpt_host_acts_alloc(&a, &gc);
    gpt_host_block_forward(&gc, &gp, &a, y, x);
    if (dy) {
        gpt_host_block_backward(&gc, &gp, &gg, &a, dx, dy);
        if (g) {
            host_block tmp;
            hb_alloc(&tmp, k->hidden, k->ffn);
            convert(k->hidden, k->ffn, gg.t, tmp.t, false);
            lab3_piece pc[LAB3_NTENSORS];
            lab3_layout(k->hidden, k->ffn, 1, 0, pc);
            for (int w = 0; w < LAB3_NTENSORS; w++)
                for (int64_t i = 0; i < pc[w].R * pc[w].K; i++) g->t[w][i] += tmp.t[w][i];
            hb_free(&tmp);
        }
    }
    gpt_host_acts_free(&a);
    gpt_host_params_free(gp.base);
    gpt_host_params_free(gg.base);
}

double lab3_shard_err(const float *got, const lab3_piece *pc, const host_block *want, int w, const float *old) {
    const lab3_piece *p = &pc[w];
    size_t n = (size_t)(p->rows * p->cols);
    float *g = lab3_hz(n), *e = lab3_hz(n);
    for (int64_t i = 0; i < p->rows; i++)
        for (int64_t j = 0; j < p->cols; j++) {
            size_t at = (size_t)(p->off + i * p->cols + j);
            g[i * p->cols + j] = got[at] - (old ? old[at] : 0.0f);
            e[i * p->cols + j] = want->t[w][(p->r0 + i) * p->K + p->c0 + j];
        }
    double err = drv_rel_err_f(g, e, n);
    free(g), free(e);
    return err;
}

void lab3_check_init(drv_case *c, const char *slot, int layers, const lab3_piece *pc, size_t count) {
    const lab3_flags *f = lab3_opts();
    uint64_t seed = drv_case_seed(c, LAB3_INIT, 0);
    const float *got = drv_slot_host(c, slot);
    float *want = lab3_hz(count);
    for (int l = 0; l < layers; l++) { /* every rank takes every step: the checks reduce over ranks */
        host_block h;
        hb_alloc(&h, f->C, f->F);
        hb_master(&h, f->C, f->F, l, seed);
        hb_shards(&h, pc, want);
        hb_free(&h);
        for (int w = 0; w < LAB3_NTENSORS; w++) {
            char what[96];
            snprintf(what, sizeof what, "mg_params_init: the shard of %s (layer %d)", LAB3_TNAME[w], l);
            const lab3_piece *p = &pc[w];
            drv_check_floats(c, what, got + (size_t)l * count + p->off, want + p->off, (size_t)(p->rows * p->cols), true);
        }
    }
    free(want);
}

/* ================================================================================== */
/* config.errors                                                                      */
/* ================================================================================== */

void lab3_errors_setup(drv_case *c) {
    drv_slot_new(c, "rc", LAB3_MAX_ERROR_CONFIGS * sizeof(int32_t), DRV_OUT | DRV_ZEROED);
}

void lab3_errors_check(drv_case *c) {
    if (!c->ran) return;
    lab3_cfg k[LAB3_MAX_ERROR_CONFIGS];
    int want[LAB3_MAX_ERROR_CONFIGS];
    char what[LAB3_MAX_ERROR_CONFIGS][LAB3_WHAT_MAX];
    int n = lab3_error_configs(c->world, k, want, what);
    int32_t rc[LAB3_MAX_ERROR_CONFIGS];
    memcpy(rc, drv_slot_host(c, "rc"), sizeof rc);
    static const char *const NAME[] = {"MG_OK", "MG_ERR_HEADS", "MG_ERR_SEQ", "MG_ERR_SHAPE"};
    for (int i = 0; i < n; i++) {
        if (rc[i] == want[i]) continue;
        if (rc[i] >= 0 && rc[i] <= 3) drv_fail(c, "%s (it returned %s)", what[i], NAME[rc[i]]);
        else drv_fail(c, "%s (it returned %d, not an MG_* code)", what[i], (int)rc[i]);
        return;
    }
    drv_note(c, "errors reported for bad shapes");
}

/* ================================================================================== */
/* The block cases: forward, backward, comm                                           */
/* ================================================================================== */

enum { FORWARD = 0, BACKWARD = 1, COMM = 2 };
static int what_of(const drv_case *c) { return *(const int *)c->inst->test->data; }

/* A case's state on the referee's side. */
typedef struct {
    lab3_cfg k;
    int N, Nl, C, steps;
    size_t row0, count;
    lab3_piece pc[LAB3_NTENSORS];
    host_block hp, hg;              /* the secret master block; the gradients expected after */
    float *hx[2], *hdy[2], *hy[2], *hdx[2]; /* per step [N x C]: inputs and serial results  */
    double comm_s;                  /* comm perf: seconds in collectives, over timed runs    */
    int runs, wrong_runs;           /* timed runs; those whose y or dx was wrong             */
} lab3_block;

void lab3_teardown(drv_case *c) {
    lab3_block *st = c->state;
    if (!st) return;
    hb_free(&st->hp), hb_free(&st->hg);
    for (int k = 0; k < 2; k++) free(st->hx[k]), free(st->hdy[k]), free(st->hy[k]), free(st->hdx[k]);
}

/* This rank's rows of a [N x C] tensor into a slot. */
static void rows_slot(drv_case *c, const char *name, unsigned flags, const lab3_block *st, const float *full) {
    float *s = drv_slot_new(c, name, (size_t)st->Nl * (size_t)st->C * sizeof(float), flags);
    if (full) memcpy(s, full + st->row0 * (size_t)st->C, (size_t)st->Nl * (size_t)st->C * sizeof(float));
}

/* Step k's inputs of run `run` (0: the case's) and the serial block on them; with grads,
 * its gradients are added into hg. */
static void block_inputs(drv_case *c, lab3_block *st, int k, int run, bool grads) {
    size_t NC = (size_t)st->N * (size_t)st->C;
    uint64_t sec = drv_case_seed(c, LAB3_SECRET, run), more = (uint64_t)k * LAB3_STEP_ID;
    pl_rng_fill_host(st->hx[k], st->N, st->C, st->C, 0, 0, sec, LAB3_X_ID + more, PL_RNG_UNIFORM, -1, 1);
    pl_rng_fill_host(st->hdy[k], st->N, st->C, st->C, 0, 0, sec, LAB3_DY_ID + more, PL_RNG_UNIFORM, -1, 1);
    memset(st->hy[k], 0, NC * sizeof(float));
    memset(st->hdx[k], 0, NC * sizeof(float));
    lab3_reference(&st->k, &st->hp, grads ? &st->hg : NULL, st->hy[k], st->hx[k], st->hdx[k], st->hdy[k]);
}

static const char *step_slot(char *buf, size_t n, const char *name, int k) {
    if (k == 0) snprintf(buf, n, "%s", name);
    else snprintf(buf, n, "%s.%d", name, k + 1);
    return buf;
}

void lab3_block_setup(drv_case *c) {
    int what = what_of(c), tp = c->world;
    bool sp = c->arg[0] != 0;
    lab3_block *st = drv_state(c, sizeof *st);
    const lab3_flags *f = lab3_opts();
    char name[32];
    st->k = lab3_config(sp, lab3_seq_for(sp, tp));
    st->C = f->C, st->N = st->k.seq * st->k.batch, st->Nl = lab3_local_rows(&st->k, tp);
    st->row0 = sp ? (size_t)c->rank * (size_t)st->Nl : 0;
    st->count = lab3_layout(f->C, f->F, tp, c->rank, st->pc);
    st->steps = what == BACKWARD ? 2 : 1;
    size_t NC = (size_t)st->N * (size_t)st->C;
    uint64_t sec = drv_case_seed(c, LAB3_SECRET, 0);
    hb_alloc(&st->hp, f->C, f->F), hb_alloc(&st->hg, f->C, f->F);
    hb_master(&st->hp, f->C, f->F, 0, sec);
    float *g0 = NULL;
    if (what == BACKWARD) { /* gradients accumulate: they start from the referee's */
        lab3_piece whole[LAB3_NTENSORS];
        lab3_layout(f->C, f->F, 1, 0, whole);
        for (int w = 0; w < LAB3_NTENSORS; w++)
            pl_rng_fill_host(st->hg.t[w], whole[w].R, whole[w].K, whole[w].K, 0, 0, sec, LAB3_GRAD0_ID + (uint64_t)w,
                             PL_RNG_NORMAL, 0, 1);
        g0 = lab3_hz(st->count);
        hb_shards(&st->hg, st->pc, g0);
        /* with sp the replicated gradients are partial sums: the initial ones on rank 0 */
        if (sp && c->rank != 0) memset(g0, 0, 6 * (size_t)f->C * sizeof(float)); /* lab3_layout: the first 6 C */
    }
    for (int k = 0; k < st->steps; k++) {
        st->hx[k] = lab3_hz(NC), st->hdy[k] = lab3_hz(NC), st->hy[k] = lab3_hz(NC), st->hdx[k] = lab3_hz(NC);
        block_inputs(c, st, k, 0, what == BACKWARD);
    }

    uint64_t *seed = drv_slot_new(c, "iseed", sizeof(uint64_t), DRV_IN | DRV_CONST);
    *seed = drv_case_seed(c, LAB3_INIT, 0);
    drv_slot_new(c, "status", sizeof(lab3_status), DRV_OUT | DRV_ZEROED);
    drv_slot_new(c, "init", st->count * sizeof(float), DRV_OUT);
    hb_shards(&st->hp, st->pc, drv_slot_new(c, "p", st->count * sizeof(float), DRV_IN | DRV_CONST));
    rows_slot(c, "y", DRV_OUT, st, NULL);
    for (int k = 0; k < st->steps; k++) {
        rows_slot(c, step_slot(name, sizeof name, "x", k), DRV_IN | DRV_CONST, st, st->hx[k]);
        if (what == FORWARD) continue;
        rows_slot(c, step_slot(name, sizeof name, "dy", k), DRV_IN | DRV_CONST, st, st->hdy[k]);
        rows_slot(c, step_slot(name, sizeof name, "dx", k), DRV_OUT, st, NULL);
    }
    if (what == FORWARD) return;
    float *g = drv_slot_new(c, "g", st->count * sizeof(float), DRV_INOUT); /* zeros unless g0 */
    if (g0) memcpy(g, g0, st->count * sizeof(float));
    free(g0);
    if (what != COMM) return;
    drv_counters_slot(c, "cf");
    drv_counters_slot(c, "cb");
    drv_counters_slot(c, "cs");
    drv_slot_new(c, "comm_s", sizeof(double), DRV_OUT | DRV_ZEROED);
}

/* The config was accepted everywhere and the player ran the block; else judged here. */
static bool block_ran(drv_case *c) {
    lab3_status s;
    memcpy(&s, drv_slot_host(c, "status"), sizeof s);
    if (drv_max(s.config_rc != LAB3_OK) > 0) {
        drv_error(c, "mg_config_check rejected a valid config");
        return false;
    }
    return drv_min(s.called != 0) > 0;
}

void lab3_forward_check(drv_case *c) {
    if (!c->ran || !block_ran(c)) return;
    lab3_block *st = c->state;
    lab3_check_init(c, "init", 1, st->pc, st->count);
    drv_check_floats(c, "block output (vs the serial block)", drv_slot_host(c, "y"), st->hy[0] + st->row0 * (size_t)st->C,
                     (size_t)st->Nl * (size_t)st->C, false);
}

/* Two steps from non-zero gradients: dx of each, and every gradient shard accumulated over
 * both onto the initial ones. */
void lab3_backward_check(drv_case *c) {
    if (!c->ran || !block_ran(c)) return;
    lab3_block *st = c->state;
    lab3_check_init(c, "init", 1, st->pc, st->count);
    char worst[32] = "dx", what[96], name[32];
    double eb = 0;
    for (int k = 0; k < st->steps; k++) {
        double e = drv_rel_err_f(drv_slot_host(c, step_slot(name, sizeof name, "dx", k)),
                                st->hdx[k] + st->row0 * (size_t)st->C, (size_t)st->Nl * (size_t)st->C);
        if (!(e <= eb)) {
            eb = e;
            if (k) snprintf(worst, sizeof worst, "dx of step %d", k + 1);
            else snprintf(worst, sizeof worst, "dx");
        }
    }
    const float *g = drv_slot_host(c, "g");
    for (int w = 0; w < LAB3_NTENSORS; w++) {
        double ew = lab3_shard_err(g, st->pc, &st->hg, w, NULL);
        if (!(ew <= eb)) eb = ew, snprintf(worst, sizeof worst, "%s", LAB3_TNAME[w]);
    }
    snprintf(what, sizeof what, "dx and all gradient shards after two steps from non-zero gradients (worst: %s)", worst);
    drv_check_error(c, what, eb, drv_tolerance());
}

/* Counted calls and bytes against the formulas: without sp two all-reduces each way; with
 * sp two all-gathers + two reduce-scatters forward, four all-gathers (two re-gather the
 * layer-norm outputs the weight gradients need) + two reduce-scatters backward. */
static bool counts_ok(const pl_metrics *m, int tp, int ar, int ag, int rs, double bytes, char *why, size_t n) {
    uint64_t AR = m->coll_calls[PL_OP_ALLREDUCE], AG = m->coll_calls[PL_OP_ALLGATHER], RS = m->coll_calls[PL_OP_REDUCE_SCATTER];
    bool exact = AR == (uint64_t)ar && AG == (uint64_t)ag && RS == (uint64_t)rs && m->coll_total == AR + AG + RS &&
                 fabs((double)m->coll_bytes - bytes) < 0.5;
    bool none = tp == 1 && m->coll_total == 0; /* at tp 1 the operators may be skipped */
    snprintf(why, n, "%llu all-reduce, %llu all-gather, %llu reduce-scatter, %llu calls, %.0f bytes (expected %d, %d, %d, %.0f bytes)",
             (unsigned long long)AR, (unsigned long long)AG, (unsigned long long)RS, (unsigned long long)m->coll_total,
             (double)m->coll_bytes, ar, ag, rs, bytes);
    return exact || none;
}

/* Rubric items comm, comm_sp: the player's counters of one forward and one backward. */
void lab3_comm_check(drv_case *c) {
    if (!c->ran || !block_ran(c)) return;
    lab3_block *st = c->state;
    bool sp = st->k.sp;
    drv_counters mf = drv_counters_of(c, "cf"), mb = drv_counters_of(c, "cb"), ms = drv_counters_of(c, "cs");
    double S = (double)st->k.seq * st->k.batch * st->C * sizeof(float);
    char wf[256], wb[256], ws[256];
    bool okf = sp ? counts_ok(&mf.m, c->world, 0, 2, 2, 4 * S, wf, sizeof wf) : counts_ok(&mf.m, c->world, 2, 0, 0, 2 * S, wf, sizeof wf);
    bool okb = sp ? counts_ok(&mb.m, c->world, 0, 4, 2, 6 * S, wb, sizeof wb) : counts_ok(&mb.m, c->world, 2, 0, 0, 2 * S, wb, sizeof wb);
    /* mg_sync_sp_grads: one all-reduce of the 6 C replicated floats with sp at tp > 1, else nothing */
    bool sync = sp && c->world > 1;
    bool oks = counts_ok(&ms.m, sync ? c->world : 2, sync, 0, 0, sync ? 6.0 * st->C * sizeof(float) : 0, ws, sizeof ws);
    drv_num(c, "coll_bytes_fwd", (double)mf.m.coll_bytes);
    drv_num(c, "coll_bytes_bwd", (double)mb.m.coll_bytes);
    drv_num(c, "lib_calls", (double)(mf.m.coll_total + mb.m.coll_total + ms.m.coll_total));
    if (!okf || !okb || !oks) drv_fail(c, "forward: %s; backward: %s; mg_sync_sp_grads: %s", wf, wb, ws);
    else drv_note(c, "forward: %s; backward: %s; mg_sync_sp_grads: %s", wf, wb, ws);
}

/* The three phases together, for the runner's checks: the player's counters against what
 * went on its wire, no point-to-point message (the block talks through collectives only),
 * and its device memory back where it was after the frees. */
void lab3_comm_model(drv_case *c, drv_model *m) {
    m->no_leak = true;
    lab3_status s;
    memcpy(&s, drv_slot_host(c, "status"), sizeof s);
    if (!c->ran || !s.called) return;
    drv_counters k[3] = {drv_counters_of(c, "cf"), drv_counters_of(c, "cb"), drv_counters_of(c, "cs")};
    pl_metrics *t = &c->m;
    pl_wire *w = &c->wire;
    memset(t, 0, sizeof *t), memset(w, 0, sizeof *w);
    for (int i = 0; i < 3; i++) {
        const pl_metrics *a = &k[i].m;
        t->bytes_sent += a->bytes_sent, t->bytes_recv += a->bytes_recv, t->msgs_sent += a->msgs_sent;
        t->msgs_recv += a->msgs_recv, t->coll_bytes += a->coll_bytes, t->coll_total += a->coll_total;
        t->gemm_calls += a->gemm_calls, t->gemm_flops += a->gemm_flops;
        for (int q = 0; q < PL_OP_COUNT; q++) t->coll_calls[q] += a->coll_calls[q];
        w->p2p_bytes_sent += k[i].wire.p2p_bytes_sent, w->p2p_msgs_sent += k[i].wire.p2p_msgs_sent;
        w->p2p_bytes_recv += k[i].wire.p2p_bytes_recv, w->p2p_msgs_recv += k[i].wire.p2p_msgs_recv;
        w->coll_calls += k[i].wire.coll_calls, w->coll_bytes += k[i].wire.coll_bytes;
    }
    m->no_p2p = true;
}

/* What the player allocated in the case it freed again (its own accounting). */
void lab3_leak_model(drv_case *c, drv_model *m) {
    (void)c;
    m->no_leak = true;
}

/* Timed runs of forward + backward, on fresh inputs each, y and dx checked after each. The
 * time is reported, not graded, and the values are forward's and backward's to judge: a
 * wrong timed run withholds the time instead of failing the comm case. */
void lab3_comm_refresh(drv_case *c, int run) {
    lab3_block *st = c->state;
    block_inputs(c, st, 0, run, false);
    size_t NlC = (size_t)st->Nl * (size_t)st->C;
    memcpy(drv_slot_host(c, "x"), st->hx[0] + st->row0 * (size_t)st->C, NlC * sizeof(float));
    memcpy(drv_slot_host(c, "dy"), st->hdy[0] + st->row0 * (size_t)st->C, NlC * sizeof(float));
}

void lab3_comm_verify(drv_case *c, int run) {
    lab3_block *st = c->state;
    size_t NlC = (size_t)st->Nl * (size_t)st->C, at = st->row0 * (size_t)st->C;
    double ey = drv_rel_err_f(drv_slot_host(c, "y"), st->hy[0] + at, NlC);
    double ex = drv_rel_err_f(drv_slot_host(c, "dx"), st->hdx[0] + at, NlC);
    (void)run;
    if (!(ey <= drv_tolerance() && ex <= drv_tolerance())) st->wrong_runs++;
    double s;
    memcpy(&s, drv_slot_host(c, "comm_s"), sizeof s);
    if (isfinite(s) && s > 0) st->comm_s += s;
    st->runs++;
}

/* Not graded: fwd+bwd time per rank (the referee's clock), GEMM flop rate (the player's
 * count), the fraction of the time inside collectives (the player's clock). */
void lab3_comm_perf(drv_case *c) {
    lab3_block *st = c->state;
    const lab3_flags *f = lab3_opts();
    drv_counters mf = drv_counters_of(c, "cf"), mb = drv_counters_of(c, "cb"); /* before the timed runs reset them */
    double flops = mf.m.gemm_flops + mb.m.gemm_flops;
    pl_timing t = drv_time_player(c, 0, 1, f->iters);
    if (drv_failed(c)) return;
    if (drv_max(st->wrong_runs) > 0) {
        drv_print("perf block fwd+bwd tp=%d sp=%d: not reported, the timed runs' y or dx were wrong (see forward.* and "
                  "backward.*)\n", c->world, (int)st->k.sp);
        return;
    }
    double frac = drv_max(st->runs > 0 && t.mean_us > 0 ? st->comm_s / st->runs / (t.mean_us * 1e-6) : 0);
    drv_print("perf block fwd+bwd tp=%d sp=%d T=%d B=%d C=%d H=%d F=%d: %.1f us per rank (median), %.3f GFLOP/s per rank "
              "(GEMMs), comm fraction %.2f (%d runs: %.1f to %.1f us%s)\n",
              c->world, (int)st->k.sp, st->k.seq, f->B, f->C, f->H, f->F, t.median_us,
              t.median_us > 0 ? flops / (t.median_us * 1e-6) / 1e9 : 0.0, frac, t.iters, t.min_us, t.max_us,
              drv_oversubscribed());
}
