/* test_kernels_llama_cuda.c - the CUDA versions of the llama kernels (through their
 * dispatchers on the cuda device) against the CPU references, on fresh random inputs with
 * poisoned outputs, at SmolLM2 / llama sizes: rmsnorm, rope (positions to 8191), swiglu,
 * KV-cache store + grouped-query attention (n_ctx 2048, head_dim 64 and 128, prompt and
 * decode tokens of several sequences in one batch), argmax (ties, NaN), row gather, and the
 * quantised products and lookup (Q4_0, Q4_1, Q8_0 blocks: kern_qmatmul.h).
 * Built in the cuda flavour; run only where a GPU is present (tests/kernels/test_kernels.sh).
 * On a rank without a cuda device it prints one skip line and exits 0.
 *
 *   mpirun -np 1 build/cuda/tests/test_kernels_llama_cuda --device cuda
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/tap.h" // defines: tap_check, tap_finish (and includes pl.h)
#include "../harness/check.h" // defines: rel_err, rel_err_ff, check_rel, download, dev_poisoned, check_dev, check_record
#include "kern_argmax.h"
#include "kern_gather.h"
#include "kern_gqa.h"
#include "kern_qmatmul.h"
#include "kern_rmsnorm.h"
#include "kern_rope.h"
#include "kern_swiglu.h"

#define ELEM_TOL 1e-5 /* fp32 on both sides, other summation orders or math library */

static uint64_t g_id = 1900;

static float *host_rand(size_t n, float lo, float hi) {
    float *p = malloc(n * sizeof(float) + 4);
    pl_rng_fill_host(p, 1, (int64_t)n, (int64_t)n, 0, 0, pl_info()->seed + 11, g_id++, PL_RNG_UNIFORM, lo, hi);
    return p;
}
static void *dev_from(const void *h, size_t bytes) {
    void *d = pl_malloc(bytes);
    pl_upload(d, h, bytes);
    return d;
}
static void test_rmsnorm(int N, int C) {
    size_t n = (size_t)N * C;
    float *x = host_rand(n, -3, 2), *w = host_rand(C, 0.5f, 1.5f), *out = malloc(n * 4);
    kern_rmsnorm_forward_ref(out, x, w, N, C, 1e-5f);
    float *d_x = dev_from(x, n * 4), *d_w = dev_from(w, C * 4), *d_out = dev_poisoned(n);
    kern_rmsnorm_forward(d_out, d_x, d_w, N, C, 1e-5f, NULL);
    char what[80];
    snprintf(what, sizeof what, "rmsnorm forward [%d, %d]", N, C);
    check_dev(what, d_out, out, n, ELEM_TOL);
    kern_rmsnorm_forward(d_x, d_x, d_w, N, C, 1e-5f, NULL);
    snprintf(what, sizeof what, "rmsnorm forward in place [%d, %d]", N, C);
    check_dev(what, d_x, out, n, ELEM_TOL);
    pl_free(d_x), pl_free(d_w), pl_free(d_out);
    free(x), free(w), free(out);
}

static void test_rope(int T, int H, int D, float theta) {
    size_t n = (size_t)T * H * D;
    float *x = host_rand(n, -1, 1);
    int *pos = malloc(sizeof(int) * T);
    for (int t = 0; t < T; t++) pos[t] = t < T / 2 ? t : (int)(pl_rng_bits(9, 1, (uint64_t)t) % 8192u);
    float *d_x = dev_from(x, n * 4);
    int *d_pos = dev_from(pos, sizeof(int) * T);
    kern_rope_forward_ref(x, pos, T, H, D, theta);
    kern_rope_forward(d_x, d_pos, T, H, D, theta, NULL);
    char what[120];
    snprintf(what, sizeof what, "rope [%d tokens, %d heads, %d] positions to 8191, theta %g", T, H, D, theta);
    check_dev(what, d_x, x, n, ELEM_TOL);
    pl_free(d_x), pl_free(d_pos);
    free(x), free(pos);
}

static void test_swiglu(size_t n) {
    float *g = host_rand(n, -10, 10), *u = host_rand(n, -2, 2), *out = malloc(n * 4);
    kern_swiglu_forward_ref(out, g, u, n);
    float *d_g = dev_from(g, n * 4), *d_u = dev_from(u, n * 4), *d_out = dev_poisoned(n);
    kern_swiglu_forward(d_out, d_g, d_u, n, NULL);
    char what[80];
    snprintf(what, sizeof what, "swiglu forward (n = %zu)", n);
    check_dev(what, d_out, out, n, ELEM_TOL);
    kern_swiglu_forward(d_g, d_g, d_u, n, NULL);
    check_dev("swiglu forward in place", d_g, out, n, ELEM_TOL);
    pl_free(d_g), pl_free(d_u), pl_free(d_out);
    free(g), free(u), free(out);
}

/* A batch over a cache already holding random earlier tokens: sequence 0 a prompt of
 * n_prompt tokens from position 0, sequence 1 one decode token at n_ctx - 1, sequence 2 a
 * decode token at n_ctx / 2, and one token with an invalid sequence id (zeros). */
static void test_gqa(int n_seq, int n_ctx, int H, int G, int D, int n_prompt) {
    int T = n_prompt + 3;
    size_t nc = (size_t)n_seq * n_ctx * G * D, nq = (size_t)T * H * D, nk = (size_t)T * G * D;
    int *seq = malloc(sizeof(int) * T), *pos = malloc(sizeof(int) * T);
    for (int t = 0; t < n_prompt; t++) seq[t] = 0, pos[t] = t;
    seq[n_prompt] = 1, pos[n_prompt] = n_ctx - 1;
    seq[n_prompt + 1] = n_seq, pos[n_prompt + 1] = 0; /* invalid */
    seq[n_prompt + 2] = 2 % n_seq, pos[n_prompt + 2] = n_ctx / 2;
    int64_t attended = 0;
    for (int t = 0; t < T; t++) attended += pos[t] + 1;
    float *K = host_rand(nc, -1, 1), *V = host_rand(nc, -1, 1), *k = host_rand(nk, -1, 1), *v = host_rand(nk, -1, 1);
    float *q = host_rand(nq, -3, 3), *out = malloc(nq * 4);
    float *d_K = dev_from(K, nc * 4), *d_V = dev_from(V, nc * 4), *d_k = dev_from(k, nk * 4), *d_v = dev_from(v, nk * 4);
    float *d_q = dev_from(q, nq * 4), *d_out = dev_poisoned(nq);
    int *d_seq = dev_from(seq, sizeof(int) * T), *d_pos = dev_from(pos, sizeof(int) * T);
    kern_kv_store_ref(K, V, k, v, seq, pos, T, G, D, n_seq, n_ctx);
    kern_gqa_attention_forward_ref(out, q, K, V, seq, pos, T, H, G, D, n_seq, n_ctx, 1.0f / sqrtf((float)D));
    kern_kv_store(d_K, d_V, d_k, d_v, d_seq, d_pos, T, G, D, n_seq, n_ctx, NULL);
    kern_gqa_attention_forward(d_out, d_q, d_K, d_V, d_seq, d_pos, T, H, G, D, n_seq, n_ctx, 1.0f / sqrtf((float)D),
                               attended, NULL);
    char what[200];
    snprintf(what, sizeof what, "kv_store (%d seqs x n_ctx %d x %d KV heads x %d)", n_seq, n_ctx, G, D);
    check_dev(what, d_K, K, nc, 0.0);
    snprintf(what, sizeof what, "gqa attention (%d heads / %d KV, hd %d, n_ctx %d, %d-token prompt + decode tokens)", H,
             G, D, n_ctx, n_prompt);
    check_dev(what, d_out, out, nq, ELEM_TOL);
    pl_free(d_K), pl_free(d_V), pl_free(d_k), pl_free(d_v), pl_free(d_q), pl_free(d_out), pl_free(d_seq), pl_free(d_pos);
    free(seq), free(pos), free(K), free(V), free(k), free(v), free(q), free(out);
}

static void test_argmax(int N, int V) {
    float *x = host_rand((size_t)N * V, -20, 20);
    x[(size_t)0 * V + V - 1] = x[(size_t)0 * V + 5] = 50.0f; /* tie: 5 */
    if (N > 1) x[(size_t)1 * V + 0] = NAN;
    if (N > 2)
        for (int j = 0; j < V; j++) x[(size_t)2 * V + j] = NAN;
    int *want = malloc(sizeof(int) * N), *got = malloc(sizeof(int) * N);
    kern_argmax_ref(want, x, N, V);
    float *d_x = dev_from(x, (size_t)N * V * 4);
    int *d_idx = pl_malloc(sizeof(int) * N);
    pl_memset(d_idx, 0xff, sizeof(int) * N, NULL);
    kern_argmax(d_idx, d_x, N, V, NULL);
    pl_device_sync();
    pl_download(got, d_idx, sizeof(int) * N);
    char what[120];
    snprintf(what, sizeof what, "cuda argmax [%d, %d] (a tie, a NaN, a row of NaN) == cpu reference", N, V);
    tap_check(!memcmp(got, want, sizeof(int) * N), what);
    pl_free(d_x), pl_free(d_idx);
    free(x), free(want), free(got);
}

static void test_gather(int rows, int n, int C) {
    float *src = host_rand((size_t)rows * C, -1, 1), *out = malloc((size_t)n * C * 4);
    int *idx = malloc(sizeof(int) * n);
    for (int i = 0; i < n; i++) idx[i] = (int)(pl_rng_bits(3, 5, (uint64_t)i) % (uint64_t)rows);
    kern_gather_rows_ref(out, src, idx, n, C);
    float *d_src = dev_from(src, (size_t)rows * C * 4), *d_out = dev_poisoned((size_t)n * C);
    int *d_idx = dev_from(idx, sizeof(int) * n);
    kern_gather_rows(d_out, d_src, d_idx, n, C, NULL);
    check_dev("gather_rows (embedding lookup)", d_out, out, (size_t)n * C, 0.0);
    pl_free(d_src), pl_free(d_out), pl_free(d_idx);
    free(src), free(out), free(idx);
}

/* Random blocks: fp16 scales in [2^-9, 2^-8) (m negative for Q4_1), random integers. */
static uint8_t *rand_blocks(int type, int rows, int cols) {
    size_t bb = kern_q_block_bytes(type), nblk = (size_t)rows * (cols / KERN_QK), n = nblk * bb;
    uint8_t *w = malloc(n);
    for (size_t i = 0; i < n; i++) w[i] = (uint8_t)pl_rng_bits(7, 9, i);
    for (size_t b = 0; b < nblk; b++) {
        uint8_t *blk = w + b * bb;
        blk[1] = (uint8_t)(0x18 + (blk[1] & 3)); /* d in [2^-9, 2^-8) */
        if (type == KERN_Q4_1) blk[3] = (uint8_t)(0x98 + (blk[3] & 3)); /* m < 0 */
    }
    return w;
}

static void test_qmatmul(int type, int n, int rows, int cols) {
    uint8_t *w = rand_blocks(type, rows, cols);
    float *x = host_rand((size_t)n * cols, -2, 2), *want = malloc((size_t)n * rows * 4);
    kern_qmatmul_forward_ref(want, rows, x, cols, w, type, n, rows, cols);
    void *d_w = dev_from(w, (size_t)rows * kern_q_row_bytes(type, cols));
    float *d_x = dev_from(x, (size_t)n * cols * 4), *d_y = dev_poisoned((size_t)n * rows);
    kern_qmatmul_forward(d_y, rows, d_x, cols, d_w, type, n, rows, cols, NULL);
    char what[120];
    snprintf(what, sizeof what, "qmatmul type %d, %d token(s), %d x %d", type, n, rows, cols);
    check_dev(what, d_y, want, (size_t)n * rows, ELEM_TOL);
    int idx[5] = {0, rows - 1, 3 % rows, 7 % rows, 0};
    float *rows_want = malloc((size_t)5 * cols * 4);
    kern_qget_rows_ref(rows_want, w, type, idx, 5, cols);
    int *d_idx = dev_from(idx, sizeof idx);
    float *d_rows = dev_poisoned((size_t)5 * cols);
    kern_qget_rows(d_rows, d_w, type, d_idx, 5, cols, NULL);
    snprintf(what, sizeof what, "qget_rows type %d, rows of %d", type, cols);
    check_dev(what, d_rows, rows_want, (size_t)5 * cols, 0.0);
    pl_free(d_w), pl_free(d_x), pl_free(d_y), pl_free(d_idx), pl_free(d_rows);
    free(w), free(x), free(want), free(rows_want);
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    if (pl_info()->device != PL_DEVICE_CUDA) {
        if (pl_rank() == 0)
            printf("# test_kernels_llama_cuda: device is %s, not cuda: nothing to compare (skipped)\n",
                   pl_device_name(pl_info()->device));
        pl_finalize();
        return 0;
    }
    test_rmsnorm(37, 771);   /* odd width */
    test_rmsnorm(4096, 576); /* SmolLM2 */
    test_rmsnorm(5, 8192);
    test_rope(300, 9, 64, 100000.0f);
    test_rope(33, 32, 128, 500000.0f);
    test_swiglu(1000003);
    test_swiglu((size_t)1 << 22);
    test_gqa(3, 2048, 9, 3, 64, 100);  /* SmolLM2 heads */
    test_gqa(2, 2048, 32, 8, 128, 37); /* llama 3 8B heads */
    test_gqa(2, 16000, 4, 1, 64, 5);   /* scores past 48 KiB of shared memory */
    test_gqa(1, 64, 2, 2, 256, 20);    /* head_dim past the block width */
    test_argmax(7, 49152);
    test_argmax(3, 37);
    test_gather(49152, 300, 576);
    for (int t = 0; t < 3; t++) {
        static const int types[3] = {KERN_Q4_0, KERN_Q4_1, KERN_Q8_0};
        test_qmatmul(types[t], 1, 1536, 576);  /* decode, SmolLM2's gate */
        test_qmatmul(types[t], 7, 576, 1536);  /* a prefill, SmolLM2's down projection */
        test_qmatmul(types[t], 3, 37, 32);     /* one block a row, odd rows */
    }
    return tap_finish();
}
