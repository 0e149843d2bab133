/* lab03_train.c (referee) - Lab 3's memory and training cases, and the cost model's
 * prediction of the block at a realistic size on dgx-h100. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_bias.h"      // defines: kern_bias_cost (the predicted block's kernels)
#include "kern_gelu.h"      // defines: kern_gelu_cost
#include "kern_layernorm.h" // defines: kern_layernorm_cost
#include "kern_residual.h"  // defines: kern_residual_cost
#include "kern_softmax.h"   // defines: kern_softmax_cost
#include "lab03_ref.h"
#include "pl_costmodel.h"   // defines: plc_profile_load, plc_list, plc_replay

/* ---- memory.sp ------------------------------------------------------------------------------ */

void lab3_memory_setup(drv_case *c) {
    drv_counters_slot(c, "m0");
    drv_counters_slot(c, "m1");
}

/* Activation bytes of one block with and without sp: the layer-norm / residual regions
 * (block input, LN1 out, x1, LN2 out: 4 N C floats, plus 4 N means/rstds) must shrink by
 * the factor tp; everything else may stay. Rubric item memory_sp: the bytes are the
 * player's own accounting of its device memory (pl_mem_in_use around mg_acts_alloc). */
void lab3_memory_check(drv_case *c) {
    if (!c->ran) return;
    const lab3_flags *f = lab3_opts();
    int tp = c->world;
    drv_counters k0 = drv_counters_of(c, "m0"), k1 = drv_counters_of(c, "m1");
    double bytes0 = (double)(k0.mem_after - k0.mem_before), bytes1 = (double)(k1.mem_after - k1.mem_before);
    lab3_cfg c0 = lab3_config(false, lab3_seq_for(true, tp));
    double N = (double)c0.seq * c0.batch, region = (4 * N * f->C + 4 * N) * sizeof(float), want = region * (1 - 1.0 / tp);
    double saved = drv_min(bytes0 - bytes1), b0 = drv_max(bytes0), b1 = drv_max(bytes1);
    drv_num(c, "act_bytes_nosp", b0);
    drv_num(c, "act_bytes_sp", b1);
    drv_num(c, "bytes_saved", saved);
    drv_num(c, "bytes_saved_expected", want);
    drv_print("memory block activations per rank tp=%d: %.0f B without sp, %.0f B with sp (ratio %.3f)\n", tp, b0, b1,
              b0 > 0 ? b1 / b0 : 0.0);
    if (!(bytes0 > 0 && saved >= want - 0.5))
        drv_fail(c, "activations per rank %.0f B without sp, %.0f B with sp: saved %.0f B, LN/residual regions need %.0f "
                    "B saved ((1 - 1/tp) x %.0f B)",
                 b0, b1, saved, want, region);
}

/* ---- train.nosp / train.sp ---------------------------------------------------------------- */

/* A stack of L blocks, the driver's loss 0.5 mean((y - target)^2), one SGD step: the loss
 * and every parameter update against the serial stack. arg[0] = sp. */
typedef struct {
    lab3_cfg k;
    int L, N, Nl, C;
    size_t row0, count;
    lab3_piece pc[LAB3_NTENSORS];
    host_block *hp, *upd;   /* per layer: the secret master; the expected update -lr g */
    float *p0;              /* this rank's shards of every layer before the step       */
    float *tgt;             /* the target [N x C]                                      */
    double loss_ref;
} lab3_train;

void lab3_train_setup(drv_case *c) {
    const lab3_flags *f = lab3_opts();
    bool sp = c->arg[0] != 0;
    int tp = c->world;
    lab3_train *st = drv_state(c, sizeof *st);
    st->k = lab3_config(sp, lab3_seq_for(sp, tp));
    st->L = f->L, st->C = f->C, st->N = st->k.seq * st->k.batch, st->Nl = lab3_local_rows(&st->k, tp);
    st->row0 = sp ? (size_t)c->rank * (size_t)st->Nl : 0;
    st->count = lab3_layout(f->C, f->F, tp, c->rank, st->pc);
    int L = st->L;
    size_t NC = (size_t)st->N * (size_t)st->C, NlC = (size_t)st->Nl * (size_t)st->C;
    uint64_t sec = drv_case_seed(c, LAB3_SECRET, 0);
    st->hp = calloc((size_t)L, sizeof *st->hp), st->upd = calloc((size_t)L, sizeof *st->upd);
    float **hin = calloc((size_t)L + 1, sizeof *hin), *dcur = lab3_hz(NC), *dnext = lab3_hz(NC), *scratch = lab3_hz(NC);
    PL_CHECK(st->hp && st->upd && hin, "out of host memory");
    st->tgt = lab3_hz(NC);
    hin[0] = lab3_hz(NC);
    pl_rng_fill_host(hin[0], st->N, st->C, st->C, 0, 0, sec, LAB3_STACK_X_ID, PL_RNG_UNIFORM, -1, 1);
    pl_rng_fill_host(st->tgt, st->N, st->C, st->C, 0, 0, sec, LAB3_TARGET_ID, PL_RNG_UNIFORM, -1, 1);
    for (int l = 0; l < L; l++) {
        hb_alloc(&st->hp[l], f->C, f->F), hb_alloc(&st->upd[l], f->C, f->F);
        hb_master(&st->hp[l], f->C, f->F, l, sec);
        hin[l + 1] = lab3_hz(NC);
        lab3_reference(&st->k, &st->hp[l], NULL, hin[l + 1], hin[l], NULL, NULL);
    }
    double loss = 0;
    for (size_t i = 0; i < NC; i++) {
        double d = (double)hin[L][i] - st->tgt[i];
        loss += 0.5 * d * d / (double)NC;
        dcur[i] = (float)(d / (double)NC);
    }
    st->loss_ref = loss;
    for (int l = L - 1; l >= 0; l--) {
        lab3_reference(&st->k, &st->hp[l], &st->upd[l], scratch, hin[l], dnext, dcur);
        float *t = dcur;
        dcur = dnext, dnext = t;
    }
    lab3_piece whole[LAB3_NTENSORS];
    lab3_layout(f->C, f->F, 1, 0, whole);
    for (int l = 0; l < L; l++) /* the expected update: -lr * gradient */
        for (int w = 0; w < LAB3_NTENSORS; w++)
            for (int64_t i = 0; i < whole[w].R * whole[w].K; i++) st->upd[l].t[w][i] *= -LAB3_LR;

    uint64_t *seed = drv_slot_new(c, "iseed", sizeof(uint64_t), DRV_IN | DRV_CONST);
    *seed = drv_case_seed(c, LAB3_INIT, 0);
    drv_slot_new(c, "status", sizeof(lab3_status), DRV_OUT | DRV_ZEROED);
    drv_slot_new(c, "init", (size_t)L * st->count * sizeof(float), DRV_OUT);
    float *p = drv_slot_new(c, "p", (size_t)L * st->count * sizeof(float), DRV_IN | DRV_CONST);
    for (int l = 0; l < L; l++) hb_shards(&st->hp[l], st->pc, p + (size_t)l * st->count);
    st->p0 = lab3_hz((size_t)L * st->count);
    memcpy(st->p0, p, (size_t)L * st->count * sizeof(float));
    float *x = drv_slot_new(c, "x", NlC * sizeof(float), DRV_IN | DRV_CONST);
    memcpy(x, hin[0] + st->row0 * (size_t)st->C, NlC * sizeof(float));
    float *t = drv_slot_new(c, "target", NlC * sizeof(float), DRV_IN | DRV_CONST);
    memcpy(t, st->tgt + st->row0 * (size_t)st->C, NlC * sizeof(float));
    drv_slot_new(c, "y", NlC * sizeof(float), DRV_OUT);
    drv_slot_new(c, "p_new", (size_t)L * st->count * sizeof(float), DRV_OUT);
    for (int l = 0; l <= L; l++) free(hin[l]);
    free(hin), free(dcur), free(dnext), free(scratch);
}

void lab3_train_check(drv_case *c) {
    if (!c->ran) return;
    lab3_train *st = c->state;
    lab3_status s;
    memcpy(&s, drv_slot_host(c, "status"), sizeof s);
    lab3_check_init(c, "init", st->L, st->pc, st->count);
    if (drv_min(s.called != 0) == 0) return;
    size_t NlC = (size_t)st->Nl * (size_t)st->C, NC = (size_t)st->N * (size_t)st->C;
    const float *y = drv_slot_host(c, "y"), *t0 = st->tgt + st->row0 * (size_t)st->C;
    double part = 0;
    for (size_t i = 0; i < NlC; i++) {
        double d = (double)y[i] - t0[i];
        part += 0.5 * d * d / (double)NC;
    }
    double loss = st->k.sp ? drv_sum(part) : drv_max(part); /* without sp every rank holds every row */
    double eupd = 0;
    const float *pn = drv_slot_host(c, "p_new");
    for (int l = 0; l < st->L; l++)
        for (int w = 0; w < LAB3_NTENSORS; w++) {
            size_t at = (size_t)l * st->count;
            double e = lab3_shard_err(pn + at, st->pc, &st->upd[l], w, st->p0 + at);
            if (!(e <= eupd)) eupd = e;
        }
    drv_num(c, "loss", loss);
    drv_num(c, "loss_ref", st->loss_ref);
    drv_check_steps(c, "loss after the stack's forward vs the serial stack", &loss, &st->loss_ref, 1, 1, drv_tolerance(),
                    drv_tolerance());
    /* the update p_new - p_old loses digits to cancellation: 1e-3 */
    drv_check_error(c, "parameter update after one SGD step", eupd, 1e-3);
    drv_note(c, "%d blocks, one SGD step: loss %.6g vs serial %.6g", st->L, loss, st->loss_ref);
}

void lab3_train_teardown(drv_case *c) {
    lab3_train *st = c->state;
    if (!st) return;
    for (int l = 0; l < st->L; l++) {
        if (st->hp) hb_free(&st->hp[l]);
        if (st->upd) hb_free(&st->upd[l]);
    }
    free(st->hp), free(st->upd), free(st->p0), free(st->tgt);
}

/* ---- the cost model's view of the block at a realistic size ----------------------------------- */

/* One rank's ops of the block, forward then backward, as kernels/ and pl_gemm record them:
 * layernorm, QKV GEMM + bias, attention (2 batched GEMMs around a causal softmax), output
 * projection, reduction (all-reduce, or reduce-scatter with sp), bias, residual; then the
 * MLP the same way with GELU. Backward mirrors it with two GEMMs per weight and, with sp,
 * gathers twice (the gradient, and the input again for dW) and reduce-scatters once. */
static void block_ops(plc_list *l, int tp, int T, int B, int C, int H, int F, int sp) {
    int N = T * B, Nl = sp ? N / tp : N, Cl = C / tp, Fl = F / tp, Hl = H / tp, hs = C / H;
    double S = 4.0 * N * C, by, fl; /* S: the activation the block reduces or gathers */
    pl_op_kind reduce = sp ? PL_OP_REDUCE_SCATTER : PL_OP_ALLREDUCE;
    for (int bwd = 0; bwd < 2; bwd++)
        for (int half = 0; half < 2; half++) { /* attention, then MLP */
            kern_layernorm_cost(Nl, C, bwd, &by, &fl), plc_list_op(l, PL_OP_KERNEL, fl, by);
            if (tp > 1 && sp) plc_list_op(l, PL_OP_ALLGATHER, 0, S);
            if (tp > 1 && sp && bwd) plc_list_op(l, PL_OP_ALLGATHER, 0, S); /* the input again, for dW */
            int width = half == 0 ? 3 * Cl : Fl;
            for (int g = 0; g <= bwd; g++) plc_list_gemm(l, N, width, C); /* in-projection (+ its dW) */
            kern_bias_cost(N, width, bwd, &by, &fl), plc_list_op(l, PL_OP_KERNEL, fl, by);
            if (half == 0) {
                for (int g = 0; g < (bwd ? 4 : 2); g++) plc_list_op(l, PL_OP_GEMM, 2.0 * B * Hl * T * (double)T * hs, 0);
                kern_softmax_cost(B * Hl, T, bwd, &by, &fl), plc_list_op(l, PL_OP_KERNEL, fl, by);
            } else {
                kern_gelu_cost((size_t)N * Fl, bwd, &by, &fl), plc_list_op(l, PL_OP_KERNEL, fl, by);
            }
            for (int g = 0; g <= bwd; g++) plc_list_gemm(l, N, C, half == 0 ? Cl : Fl); /* out-projection */
            if (tp > 1) plc_list_op(l, bwd && !sp ? PL_OP_ALLREDUCE : reduce, 0, S);
            kern_bias_cost(Nl, C, bwd, &by, &fl), plc_list_op(l, PL_OP_KERNEL, fl, by);
            kern_residual_cost((size_t)Nl * C, 0, &by, &fl), plc_list_op(l, PL_OP_KERNEL, fl, by);
        }
}

void lab3_finish(void) {
    if (pl_rank() != 0) return;
    plc_profile prof;
    char err[200];
    if (plc_profile_load(&prof, "dgx-h100", err, sizeof err) != 0) {
        drv_print("costmodel: dgx-h100 profile not available (%s)\n", err);
        return;
    }
    const int T = 1024, B = 8, C = 1024, H = 16, F = 4096;
    for (int tp = 1; tp <= 8; tp *= 2)
        for (int sp = 0; sp <= 1; sp++) {
            plc_list l = {0};
            for (int r = 0; r < tp; r++) plc_list_rank(&l, r, tp > 1 ? 1 : 0, tp), block_ops(&l, tp, T, B, C, H, F, sp);
            plc_prediction pr;
            if (plc_replay(&prof, l.ops, l.n, tp, &pr, err, sizeof err) == 0)
                drv_print("costmodel dgx-h100 block fwd+bwd (T=%d B=%d C=%d H=%d F=%d: GEMMs, kernels, collectives) tp=%d "
                          "sp=%d: %.1f us, comm fraction %.2f, %.1f TFLOP/s per GPU\n",
                          T, B, C, H, F, tp, sp, pr.step_time * 1e6, pr.comm_fraction, pr.flops / tp / pr.step_time / 1e12);
            else drv_print("costmodel: replay failed at tp=%d: %s\n", tp, err);
            plc_list_free(&l);
        }
}
