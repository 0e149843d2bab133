/* lab03_train.c - Lab 3's memory and training cases, the cost model's prediction of the
 * block at a realistic size on dgx-h100, and the lab's table of cases. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_bias.h"      // defines: kern_bias_cost (the predicted block's kernels)
#include "kern_gelu.h"      // defines: kern_gelu_cost
#include "kern_layernorm.h" // defines: kern_layernorm_cost
#include "kern_residual.h"  // defines: kern_residual_cost
#include "kern_softmax.h"   // defines: kern_softmax_cost
#include "lab03.h"
#include "pl_costmodel.h"   // defines: plc_profile_load, plc_list, plc_replay

/* Activation bytes of one block with and without sp: the layer-norm / residual regions
 * (block input, LN1 out, x1, LN2 out: 4 N C floats, plus 4 N means/rstds) must shrink by
 * the factor tp; everything else may stay. */
static void memory_check(drv_case *c) {
    mg_config c0 = config(false, seq_for(true)), c1 = config(true, seq_for(true));
    size_t before = pl_mem_in_use();
    mg_acts *a0 = mg_acts_alloc(&c0);
    double bytes0 = (double)(pl_mem_in_use() - before);
    mg_acts_free(a0);
    before = pl_mem_in_use();
    mg_acts *a1 = mg_acts_alloc(&c1);
    double bytes1 = (double)(pl_mem_in_use() - before);
    mg_acts_free(a1);
    double N = (double)c0.seq * c0.batch, region = (4 * N * g_C + 4 * N) * sizeof(float), want = region * (1 - 1.0 / g_tp);
    double saved = drv_min(bytes0 - bytes1), b0 = drv_max(bytes0), b1 = drv_max(bytes1);
    drv_num(c, "act_bytes_nosp", b0);
    drv_num(c, "act_bytes_sp", b1);
    drv_num(c, "bytes_saved", saved);
    drv_num(c, "bytes_saved_expected", want);
    drv_print("memory block activations per rank tp=%d: %.0f B without sp, %.0f B with sp (ratio %.3f)\n", g_tp, b0, b1,
              b0 > 0 ? b1 / b0 : 0.0);
    if (!(bytes0 > 0 && saved >= want - 0.5))
        drv_fail(c, "activations per rank %.0f B without sp, %.0f B with sp: saved %.0f B, LN/residual regions need %.0f B saved ((1 - 1/tp) x %.0f B)",
                 b0, b1, saved, want, region);
}

/* A stack of L blocks, the driver's loss 0.5 mean((y - target)^2), one SGD step: the loss
 * and every parameter update against the serial stack. arg[0] = sp. */
static void train_check(drv_case *c) {
    bool sp = c->arg[0];
    mg_config k = config(sp, seq_for(sp));
    int L = g_L, N = k.seq * k.batch, C = g_C, Nl = local_rows(&k);
    size_t NC = (size_t)N * C, NlC = (size_t)Nl * C;
    const float lr = 0.5f;
    host_block *hp = calloc(L, sizeof *hp), *hg = calloc(L, sizeof *hg);
    float **hin = calloc(L + 1, sizeof *hin), *tgt = hz(NC), *dcur = hz(NC), *dnext = hz(NC), *got = hz(NC);
    PL_CHECK(hp && hg && hin, "out of host memory");
    hin[0] = hz(NC);
    pl_rng_fill_host(hin[0], N, C, C, 0, 0, g_seed, 9, PL_RNG_UNIFORM, -1, 1);
    pl_rng_fill_host(tgt, N, C, C, 0, 0, g_seed, 10, PL_RNG_UNIFORM, -1, 1);
    for (int l = 0; l < L; l++) {
        host_block_alloc(&hp[l], &k), host_block_alloc(&hg[l], &k);
        host_block_master(&hp[l], &k, l);
        hin[l + 1] = hz(NC);
        reference(&k, &hp[l], NULL, hin[l + 1], hin[l], NULL, NULL);
    }
    double loss_ref = 0;
    for (size_t i = 0; i < NC; i++) {
        double d = (double)hin[L][i] - tgt[i];
        loss_ref += 0.5 * d * d / (double)NC;
        dcur[i] = (float)(d / (double)NC);
    }
    for (int l = L - 1; l >= 0; l--) {
        reference(&k, &hp[l], &hg[l], got, hin[l], dnext, dcur); /* got: the forward again, unused */
        float *t = dcur;
        dcur = dnext, dnext = t;
    }
    for (int l = 0; l < L; l++) /* the expected update: -lr * gradient */
        for (int w = 0; w < MG_NTENSORS; w++)
            for (size_t i = 0; i < numel(&k, (mg_tensor)w); i++) hg[l].t[w][i] *= -lr;

    /* the student's stack: forward, the driver's loss, backward, one step */
    mg_params *p = calloc(L, sizeof *p), *g = calloc(L, sizeof *g);
    mg_acts **a = calloc(L, sizeof *a);
    for (int l = 0; l < L; l++) {
        mg_params_alloc(&p[l], &k), mg_params_alloc(&g[l], &k);
        mg_params_init(&p[l], &k, l, g_seed);
        pl_fill(g[l].base, 0, g[l].count, NULL);
        a[l] = mg_acts_alloc(&k);
    }
    float *x = pl_malloc_floats(NlC), *y = drv_poisoned(NlC), *dx = pl_malloc_floats(NlC), *dy = pl_malloc_floats(NlC);
    pl_upload(x, hin[0] + row0(&k) * C, NlC * sizeof(float));
    mg_stack_forward(&k, L, p, a, y, x, NULL);
    pl_device_sync();
    pl_download(got, y, NlC * sizeof(float));
    double part = 0;
    const float *t0 = tgt + row0(&k) * C;
    for (size_t i = 0; i < NlC; i++) {
        double d = (double)got[i] - t0[i];
        part += 0.5 * d * d / (double)NC;
        got[i] = (float)(d / (double)NC);
    }
    double loss = sp ? drv_sum(part) : drv_max(part); /* without sp every rank holds every row */
    pl_upload(dy, got, NlC * sizeof(float));
    mg_stack_backward(&k, L, p, g, a, dx, dy, NULL);
    mg_sgd_step(&k, L, p, g, lr, NULL);
    pl_device_sync();
    double eloss = isfinite(loss) ? fabs(loss - loss_ref) / fabs(loss_ref) : INFINITY, eupd = 0;
    for (int l = 0; l < L; l++)
        for (int w = 0; w < MG_NTENSORS; w++) {
            double e = shard_err(&k, &p[l], &hg[l], (mg_tensor)w, &hp[l]);
            if (!(e <= eupd)) eupd = e;
        }
    drv_num(c, "loss", loss);
    drv_num(c, "loss_ref", loss_ref);
    drv_check_error(c, "loss after the stack's forward vs the serial stack", eloss, drv_tolerance());
    /* the update p_new - p_old loses digits to cancellation: 1e-3 */
    drv_check_error(c, "parameter update after one SGD step", eupd, 1e-3);
    drv_note(c, "%d blocks, one SGD step: loss %.6g vs serial %.6g", L, loss, loss_ref);
    for (int l = 0; l < L; l++) {
        mg_acts_free(a[l]);
        mg_params_free(&p[l]), mg_params_free(&g[l]);
        host_block_free(&hp[l]), host_block_free(&hg[l]);
        free(hin[l + 1]);
    }
    pl_free(x), pl_free(y), pl_free(dx), pl_free(dy);
    free(hin[0]), free(hin), free(p), free(g), free(a), free(hp), free(hg), free(tgt), free(dcur), free(dnext), free(got);
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

static void print_prediction(void) {
    if (g_me != 0) return;
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
                drv_print("costmodel dgx-h100 block fwd+bwd (T=%d B=%d C=%d H=%d F=%d: GEMMs, kernels, collectives) tp=%d sp=%d: "
                          "%.1f us, comm fraction %.2f, %.1f TFLOP/s per GPU\n",
                          T, B, C, H, F, tp, sp, pr.step_time * 1e6, pr.comm_fraction, pr.flops / tp / pr.step_time / 1e12);
            else drv_print("costmodel: replay failed at tp=%d: %s\n", tp, err);
            plc_list_free(&l);
        }
}

/* ---- the lab ------------------------------------------------------------------------------------ */

static void plan_sp(const drv_test *t, drv_plan *p) {
    for (int sp = 0; sp < 2; sp++) {
        drv_instance *in = drv_plan_add(p, t, "%s.%s", t->name, sp ? "sp" : "nosp");
        snprintf(in->group, sizeof in->group, "%s%s", t->group, sp ? "_sp" : "");
        in->arg[0] = sp;
    }
}

static const drv_test TESTS[] = {
    {"config.errors", "config", NULL, NULL, NULL, config_check, NULL, NULL, NULL, NULL},
    {"forward", "forward", plan_sp, NULL, block_run_case, forward_check, NULL, NULL, NULL, NULL},
    {"backward", "backward", plan_sp, NULL, block_run_case, backward_check, NULL, NULL, NULL, NULL},
    {"comm", "comm", plan_sp, NULL, block_run_case, comm_check, NULL, comm_perf, NULL, NULL},
    {"memory.sp", "memory_sp", NULL, NULL, NULL, memory_check, NULL, NULL, NULL, NULL},
    {"train", "train", plan_sp, NULL, NULL, train_check, NULL, NULL, NULL, NULL},
    {NULL},
};

static void lab3_init(void) {
    g_me = pl_rank();
    g_tp = pl_world();
    g_seed = pl_info()->seed;
    if (g_H % g_tp != 0) pl_usage_error("--heads %d is not a multiple of the tensor-parallel size %d", g_H, g_tp);
    if (g_C % g_H != 0) pl_usage_error("--hidden %d is not a multiple of --heads %d", g_C, g_H);
    if (g_F % g_tp != 0) pl_usage_error("--ffn %d is not a multiple of the tensor-parallel size %d", g_F, g_tp);
    if ((double)g_T * g_T * g_B * g_H > 64e6 || (double)g_T * g_B * g_F > 64e6)
        pl_usage_error("shape too large for the serial reference (T*T*B*H and T*B*F must stay below 64M)");
}

static const drv_flag FLAGS[] = {
    {"--seq", DRV_INT, &g_T, 1, 1e6, "sequence length T (odd is fine without sp; sp rounds it up to a multiple of tp)"},
    {"--batch", DRV_INT, &g_B, 1, 1e6, "batch B"},
    {"--hidden", DRV_INT, &g_C, 1, 1e6, "hidden size C"},
    {"--heads", DRV_INT, &g_H, 1, 1e6, "attention heads H (a multiple of the world size)"},
    {"--ffn", DRV_INT, &g_F, 1, 1e7, "MLP width F (a multiple of the world size)"},
    {"--layers", DRV_INT, &g_L, 1, 1000, "blocks in the training-step stack"},
    {"--iters", DRV_INT, &g_iters, 1, 1e5, "timed iterations of the performance lines"},
    {NULL},
};
static const drv_lab LAB = {
    .name = "03-megatron",
    .title = "Lab 3: a Megatron tensor-parallel GPT-2 block, sequence parallelism",
    .flags = FLAGS,
    .tests = TESTS,
    .init = lab3_init,
    .finish = print_prediction,
};

int main(int argc, char **argv) { return drv_main(&LAB, argc, argv); }
