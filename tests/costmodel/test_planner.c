/* test_planner.c - the 3D-parallelism planner (common/pl_planner.c) against values worked
 * out here: the paper's FLOPs formula, the bubble, memory per GPU, the kernels priced with
 * the kit's own cost functions (kernels/kern_*_cost), alpha-beta collectives on the link
 * their group crosses, and the search. Run under mpirun at 1 rank. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../harness/tap.h" // defines: tap_check, tap_finish
#include "kern_bias.h"      // defines: kern_bias_cost
#include "kern_embedding.h" // defines: kern_embedding_cost
#include "kern_gelu.h"      // defines: kern_gelu_cost
#include "kern_layernorm.h" // defines: kern_layernorm_cost
#include "kern_residual.h"  // defines: kern_residual_cost
#include "kern_softmax.h"   // defines: kern_softmax_cost
#include "kern_xent.h"      // defines: kern_xent_cost
#include "pl_planner.h"     // defines: the planner under test

static int close_to(double got, double want, double rel) { return fabs(got - want) <= rel * fabs(want) + 1e-300; }

/* Memory at 1 GB/s and an enormous arithmetic rate, no launch cost: every kernel and GEMM
 * costs its bytes in nanoseconds. Links: intra 1 us / 10 GB/s, inter 5 us / 1 GB/s. */
static const char *BYTES_PROFILE =
    "name bytes\ngpus_per_node 4\nnodes 4\npeak_tflops 1e9\ngemm_efficiency 1\nvector_tflops 1e9\nmem_bw_GBps 1\n"
    "launch_us 0\nintra_latency_us 1\nintra_bw_GBps 10\ninter_latency_us 5\ninter_bw_GBps 1\n";

/* The kit's kernels of one layer (the block of models/gpt.h: forward and fused backward),
 * one micro-batch of N rows, in bytes, from kern_*_cost. */
static double kit_layer_kernel_bytes(int N, int C, int F, int R, int T) {
    double sum = 0, b, f;
#define K(call) (call, sum += b)
    K(kern_layernorm_cost(N, C, 0, &b, &f)); K(kern_layernorm_cost(N, C, 0, &b, &f));
    K(kern_bias_cost(N, 3 * C, 0, &b, &f)); K(kern_bias_cost(N, C, 0, &b, &f));
    K(kern_bias_cost(N, F, 0, &b, &f)); K(kern_bias_cost(N, C, 0, &b, &f));
    K(kern_softmax_cost(R, T, 0, &b, &f)); K(kern_gelu_cost((size_t)N * F, 0, &b, &f));
    K(kern_residual_cost((size_t)N * C, 0, &b, &f)); K(kern_residual_cost((size_t)N * C, 0, &b, &f));
    K(kern_gelu_cost((size_t)N * F, 1, &b, &f));
    for (int i = 0; i < 4; i++) K(kern_layernorm_cost(N, C, 1, &b, &f));
    K(kern_residual_cost((size_t)N * C, 0, &b, &f)); K(kern_residual_cost((size_t)N * C, 0, &b, &f));
    K(kern_softmax_cost(R, T, 1, &b, &f));
    K(kern_bias_cost(N, 3 * C, 1, &b, &f)); K(kern_bias_cost(N, C, 1, &b, &f));
    K(kern_bias_cost(N, F, 1, &b, &f)); K(kern_bias_cost(N, C, 1, &b, &f));
#undef K
    (void)f;
    return sum;
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    char err[300] = "";

    /* ---- the paper's FLOPs: 1T row of Table 1 (l 128, h 25600, s 2048, V 51200, B 3072) */
    plp_model T1 = {128, 25600, 160, 51200, 2048, 0, false};
    double s = 2048, l = 128, h = 25600, V = 51200, B = 3072;
    double F96 = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    tap_check(close_to(plp_paper_flops(&T1, B, true), F96, 1e-12), "flops: 96 B s l h^2 (1 + s/6h + V/16lh) with recomputation");
    double F72 = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
    tap_check(close_to(plp_paper_flops(&T1, B, false), F72, 1e-12), "flops: 72 B s l h^2 (1 + s/6h + V/12lh) without");
    /* the paper: 1T at 163 TFLOP/s on each of 3072 GPUs is 502 PFLOP/s (to the rounding of 163) */
    tap_check(fabs(163e12 * 3072 / 502e15 - 1) < 0.005, "flops: 163 TFLOP/s x 3072 GPUs = 502 PFLOP/s, the paper's aggregate");
    tap_check(close_to(F96 - F72, 24 * B * s * l * h * h * (1 + s / (6 * h)), 1e-9),
              "flops: recomputation adds one forward of the layers (24 B s l h^2 (1 + s/6h)), not of the head");

    /* ---- the bubble */
    tap_check(close_to(plp_bubble(4, 1, 8), 3.0 / 8, 1e-15), "bubble: (p-1)/m = 3/8 at p 4, m 8");
    tap_check(close_to(plp_bubble(8, 2, 16), 7.0 / 32, 1e-15), "bubble: (p-1)/(v m) = 7/32 at p 8, v 2, m 16");
    tap_check(plp_bubble(1, 1, 5) == 0, "bubble: none at p 1");

    /* ---- memory per GPU */
    plc_profile a100, bytes;
    tap_check(plc_profile_load(&a100, "dgx-a100", err, sizeof err) == 0 && a100.elem_bytes == 2 &&
                  close_to(a100.mem_capacity, 80e9, 1e-12) && a100.gpus_per_node == 8 && a100.nodes == 384,
              "profile: dgx-a100 loads (bf16 elements, 80 GB, 8 x 384 GPUs)");
    tap_check(plc_profile_parse(&bytes, BYTES_PROFILE, err, sizeof err) == 0 && bytes.elem_bytes == 4 && bytes.mem_capacity == 0,
              "profile: memory_GB and element_bytes are optional (defaults: unknown, 4)");
    plc_profile q;
    tap_check(plc_profile_parse(&q, "name x\nelement_bytes 3\ngpus_per_node 1\nnodes 1\npeak_tflops 1\ngemm_efficiency 1\n"
                                    "vector_tflops 1\nmem_bw_GBps 1\nlaunch_us 1\nintra_latency_us 1\nintra_bw_GBps 1\n"
                                    "inter_latency_us 1\ninter_bw_GBps 1\n", err, sizeof err) != 0 && strstr(err, "element_bytes"),
              "profile: element_bytes other than 2 or 4 is an error naming it");
    plp_config c1 = {1, 1, 4, 1, 1, false, false}, z1 = {1, 1, 4, 1, 1, false, true};
    tap_check(plp_state_bytes_per_param(&a100, &c1) == 18 && plp_state_bytes_per_param(&a100, &z1) == 6 + 12.0 / 4,
              "memory: bf16 params + fp32 grads + Adam = 18 bytes/param, 6 + 12/d with ZeRO-1 (d 4)");
    tap_check(plp_state_bytes_per_param(&bytes, &c1) == 16 && plp_state_bytes_per_param(&bytes, &z1) == 8 + 8.0 / 4,
              "memory: fp32 = 16 bytes/param, 8 + 8/d with ZeRO-1 (d 4)");
    plp_config k8 = {8, 64, 6, 1, 1, true, false};
    double act = (s * 1 * h * (10 + 24.0 / 8) + 5 * 160 * s * s * 1 / 8); /* bytes, bf16 */
    tap_check(close_to(plp_layer_activation_bytes(&a100, &T1, &k8), act, 1e-12),
              "memory: one layer's activations s b h (10 + 24/t) + 5 a s^2 b / t (Korthikanti, 16-bit)");
    /* 1T at t 8, p 64: 2 layers of (12 h^2 + 13 h... ) per stage, hand-counted */
    double layer = (3 * h * h + 3 * h + h * h + 4 * h * h + 4 * h + 4 * h * h) / 8 + 6 * h;
    tap_check(close_to(plp_stage_params(&T1, &k8, 1), 2 * layer, 1e-12) &&
                  close_to(plp_stage_params(&T1, &k8, 0), 2 * layer + V * h / 8 + s * h, 1e-12) &&
                  close_to(plp_stage_params(&T1, &k8, 63), 2 * layer + V * h / 8 + 2 * h, 1e-12),
              "memory: parameters per GPU: middle stage 2 layers / 8; first + V h/8 + positions; last + tied copy + lnf");
    plp_estimate e;
    tap_check(plp_check(&T1, &k8, 3072, err, sizeof err) == 0, "check: Table 1's 1T configuration is valid");
    plp_estimate_config(&a100, &T1, &k8, 3072, &e);
    /* stage 0 holds min(p, m) = 64 micro-batches of 2 layer inputs, plus one layer's activations */
    double want_mem = plp_stage_params(&T1, &k8, 0) * 18 + 64 * 2 * (s * h * 2) + act;
    tap_check(close_to(e.mem, want_mem, 1e-12) && e.fits,
              "memory: 1T, first stage: 18 bytes/param + 64 in-flight x 2 layer inputs + one layer's activations (fits 80 GB)");
    tap_check(e.m == 512, "estimate: m = B / (d b) = 3072 / 6 = 512 micro-batches");
    /* dgx-a100 prices GEMMs in whole waves of 256 x 128 tiles on 108 SMs: 1T's QKV GEMM (2048
     * rows, 3h/t = 9600 columns, k = h) is 8 x 75 = 600 tiles (or 16 x 38 = 608), 6 waves */
    double wave = 108 * 2.0 * 256 * 128 * h / (312e12 * 0.86);
    tap_check(a100.sm_count == 108 && close_to(plc_gemm_shape_time(&a100, 1, 2048, 9600, h, 2), 6 * wave + 4e-6, 1e-12),
              "gemm: 1T's QKV GEMM on dgx-a100 takes 6 whole waves of 108 tiles (5.6 waves of work)");
    plc_profile flat = a100;
    flat.sm_count = 0;
    plp_estimate ef;
    plp_estimate_config(&flat, &T1, &k8, 3072, &ef);
    tap_check(e.term[PLP_GEMM] > ef.term[PLP_GEMM] && e.term[PLP_GEMM] < 1.2 * ef.term[PLP_GEMM] &&
                  e.term[PLP_KERNEL] == ef.term[PLP_KERNEL] && e.term[PLP_TENSOR] == ef.term[PLP_TENSOR],
              "gemm: wave quantisation adds to the GEMM term only (1T: within 20% of the plain roofline)");

    /* ---- links: which nodes a group spans (8 GPUs per node) */
    plp_config g1 = {8, 2, 2, 1, 1, false, false}, g2 = {2, 1, 4, 1, 1, false, false}, g3 = {2, 1, 8, 1, 1, false, false};
    tap_check(plp_group_nodes(&a100, &g1, PLP_GROUP_TENSOR) == 1 && plp_group_nodes(&a100, &g1, PLP_GROUP_DATA) == 2 &&
                  plp_group_nodes(&a100, &g1, PLP_GROUP_PIPE_NEXT) == 2 && plp_group_nodes(&a100, &g1, PLP_GROUP_WORLD) == 4,
              "links: t 8, p 2, d 2: tensor group in a node; data group (ranks 0, 8) and the next stage (rank 16) across nodes");
    tap_check(plp_group_nodes(&a100, &g2, PLP_GROUP_DATA) == 1 && plp_group_nodes(&a100, &g3, PLP_GROUP_DATA) == 2,
              "links: t 2: a data group of 4 (ranks 0, 2, 4, 6) stays in a node, of 8 (0 .. 14) spans two");

    /* ---- one iteration on the bytes profile, term by term (fp32: no accumulation term) */
    plp_model tiny = {2, 16, 4, 32, 8, 64, false}; /* l 2, h 16, a 4, V 32, s 8, F 64 */
    plp_config one = {1, 1, 1, 1, 2, false, false};
    tap_check(plp_check(&tiny, &one, 4, err, sizeof err) == 0, "check: the tiny model at t 1, p 1, d 1, b 2, B 4");
    plp_estimate_config(&bytes, &tiny, &one, 4, &e);
    int N = 16, C = 16, Ff = 64, R = 2 * 4, Tq = 8;
    double kb = 2 * kit_layer_kernel_bytes(N, C, Ff, R, Tq), b_, f_;
    kern_embedding_cost(8, 2, C, 0, &b_, &f_), kb += b_;
    kern_embedding_cost(8, 2, C, 1, &b_, &f_), kb += b_;
    kern_layernorm_cost(N, C, 0, &b_, &f_), kb += b_;
    kern_layernorm_cost(N, C, 1, &b_, &f_), kb += b_;
    kern_xent_cost(N, 32, 0, &b_, &f_), kb += b_;
    kern_xent_cost(N, 32, 1, &b_, &f_), kb += b_;
    tap_check(e.m == 2 && close_to(e.term[PLP_KERNEL], 2 * kb / 1e9, 1e-9),
              "kernels: the kit's kern_*_cost bytes of two layers, the embedding and the head, per micro-batch, at 1 GB/s");
    /* with dropout: three per pass and layer (probabilities R s^2, two outputs N C), each
     * 2E + 1 bytes per element, forward and backward */
    plp_model tiny_do = tiny;
    tiny_do.dropout = true;
    plp_estimate ed;
    plp_estimate_config(&bytes, &tiny_do, &one, 4, &ed);
    double drop = 2.0 * 2 * (R * Tq * Tq + 2.0 * N * C) * (2 * 4 + 1);
    tap_check(close_to(ed.term[PLP_KERNEL] - e.term[PLP_KERNEL], 2 * drop / 1e9, 1e-9) && ed.term[PLP_GEMM] == e.term[PLP_GEMM],
              "kernels: dropout adds the probabilities' and two outputs' 9 bytes per element, forward and backward, per layer");
    /* GEMM bytes, fp32: 4 linear layers forward (N x out x in), their two backward GEMMs,
     * attention's 2 batched forward and 4 batched backward GEMMs, the tied LM head's 3 */
    double lin[4][2] = {{3 * C, C}, {C, C}, {Ff, C}, {C, Ff}}, gb = 0, hs = 4;
#define G(m, n, k) (4.0 * ((m) * (k) + (k) * (n) + (m) * (n)))
    for (int i = 0; i < 4; i++) gb += G(N, lin[i][0], lin[i][1]) + G(N, lin[i][1], lin[i][0]) + G(lin[i][0], lin[i][1], N);
    gb += R * (2 * G(Tq, Tq, hs) + 4 * G(Tq, hs, Tq));
    gb = 2 * gb + G(N, 32, C) + G(32, C, N) + G(N, C, 32);
#undef G
    tap_check(close_to(e.term[PLP_GEMM], 2 * gb / 1e9, 1e-9), "gemms: every GEMM of the step by the roofline (memory-bound here), per micro-batch");
    tap_check(e.term[PLP_TENSOR] == 0 && e.term[PLP_P2P] == 0 && e.term[PLP_BUBBLE] == 0 && e.term[PLP_DATA] == 0 &&
                  e.term[PLP_EMBED] == 0 && e.term[PLP_ACCUM] == 0,
              "terms: one GPU has no collective, message, bubble or fp32 accumulation");

    /* t 2 (one node of 4): the tensor term is alpha-beta all-reduces in the node */
    plp_config two = {2, 1, 1, 1, 2, false, false};
    plp_estimate_config(&bytes, &tiny, &two, 4, &e);
    double ar_nc = 2 * 1e-6 + (double)N * C * 4 / 10e9, ar_n = 2 * 1e-6 + (double)N * 4 / 10e9; /* 2(n-1) a + 2(n-1)/n S/b */
    double want = 2 * (2 * 4 * ar_nc + ar_nc + 3 * ar_n + ar_nc);
    tap_check(close_to(e.term[PLP_TENSOR], want, 1e-9),
              "tensor: per micro-batch 4 all-reduces per layer + the embedding's + the head's input gradient + 3 of the loss, intra-node");
    /* d 8 at t 2: the data group spans 2 nodes of 4: its all-reduce runs on the inter-node link */
    plp_config dp = {2, 1, 8, 1, 1, false, false};
    tap_check(plp_check(&tiny, &dp, 16, err, sizeof err) == 0, "check: t 2, d 8, b 1 on 16 sequences");
    plp_estimate_config(&bytes, &tiny, &dp, 16, &e);
    double P = plp_stage_params(&tiny, &dp, 0);
    tap_check(close_to(e.term[PLP_DATA], 2 * 7 * 5e-6 + 2 * 7.0 / 8 * 4 * P / 1e9, 1e-9),
              "data: the fp32 gradient all-reduce over d 8 crosses nodes: 2(n-1) alpha + 2(n-1)/n S/beta at 5 us, 1 GB/s");
    plp_config dpz = dp;
    dpz.zero1 = true;
    plp_estimate_config(&bytes, &tiny, &dpz, 16, &e);
    tap_check(close_to(e.term[PLP_DATA], 2 * (7 * 5e-6 + 7.0 / 8 * 4 * P / 1e9), 1e-9),
              "data: ZeRO-1 = a reduce-scatter of the fp32 gradients + an all-gather of the parameters, same bytes");
    /* p 2 (ranks 0 and 2 in a node of 4): sends intra-node; bubble (p-1)/v micro-batch times */
    plp_config pp = {1, 2, 2, 1, 1, false, false};
    tap_check(plp_check(&tiny, &pp, 8, err, sizeof err) == 0, "check: p 2, d 2, b 1 on 8 sequences");
    plp_estimate_config(&bytes, &tiny, &pp, 8, &e);
    double msg = 1e-6 + 8.0 * C * 4 / 10e9;
    tap_check(e.m == 4 && close_to(e.term[PLP_P2P], 4 * 2 * msg, 1e-9) && close_to(e.term[PLP_BUBBLE], e.t_micro, 1e-12),
              "pipeline: 2 messages per micro-batch (activation, gradient) on NVLink; bubble = (p-1)/v = 1 micro-batch time");
    tap_check(close_to(e.term[PLP_EMBED], 2 * 1e-6 + 32.0 * C * 4 / 10e9, 1e-9),
              "embedding: one all-reduce of the fp32 V h gradient between the first and last stage");
    double total = 0;
    for (int i = 0; i < PLP_NTERMS; i++) total += e.term[i];
    tap_check(close_to(e.time, total, 1e-12), "estimate: the terms add up to the iteration time");

    /* ---- errors */
    plp_config bad = {3, 1, 1, 1, 1, false, false};
    tap_check(plp_check(&tiny, &bad, 4, err, sizeof err) != 0 && strstr(err, "t 3"), "check: t not dividing the heads is refused, naming t");
    plp_config deep = {1, 4, 1, 1, 1, false, false};
    tap_check(plp_check(&tiny, &deep, 4, err, sizeof err) != 0 && strstr(err, "layers"), "check: a pipeline deeper than the layers is refused");
    plp_config il = {1, 2, 1, 2, 1, false, false};
    tap_check(plp_check(&tiny, &il, 3, err, sizeof err) != 0, "check: interleaving with m not a multiple of p is refused");

    /* ---- the search: the best is valid, sorted, and no slower than Table 1's configuration */
    static plp_estimate best[64];
    size_t n = plp_search(&a100, &T1, 3072, 3072, best, 64);
    plp_estimate pub;
    plp_estimate_config(&a100, &T1, &k8, 3072, &pub);
    int sorted = 1;
    for (size_t i = 1; i < (n < 64 ? n : 64); i++) sorted &= best[i].time >= best[i - 1].time;
    tap_check(n > 1 && sorted && best[0].fits && plp_check(&T1, &best[0].cfg, 3072, NULL, 0) == 0 && best[0].time <= pub.time,
              "search: 1T on 3072 GPUs: configurations that fit, fastest first, the best no slower than the published one");
    size_t none = plp_search(&a100, &T1, 8, 3072, best, 64);
    tap_check(none == 0, "search: 1T does not fit on 8 GPUs of 80 GB");
    return tap_finish();
}
