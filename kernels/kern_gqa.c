/* kern_gqa.c - KV-cache store and grouped-query causal attention: CPU reference and
 * dispatchers. */
#include "kern_gqa.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kern_dispatch.h" // defines: KERN_DISPATCH (run on the backend, record for the trace)

/* ================================================================================== */
/* CPU reference                                                                       */
/* ================================================================================== */

static int kv_slot_valid(int seq, int p, int n_seq_max, int n_ctx) {
    return seq >= 0 && seq < n_seq_max && p >= 0 && p < n_ctx;
}

void kern_kv_store_ref(float *k_cache, float *v_cache, const float *k, const float *v,
                       const int *seq_id, const int *pos, int n_tokens, int n_kv_heads,
                       int head_dim, int n_seq_max, int n_ctx) {
    size_t row = (size_t)n_kv_heads * head_dim;
    for (int t = 0; t < n_tokens; t++) {
        if (!kv_slot_valid(seq_id[t], pos[t], n_seq_max, n_ctx)) continue;
        size_t dst = ((size_t)seq_id[t] * n_ctx + pos[t]) * row;
        memcpy(k_cache + dst, k + (size_t)t * row, row * sizeof(float));
        memcpy(v_cache + dst, v + (size_t)t * row, row * sizeof(float));
    }
}

void kern_gqa_attention_forward_ref(float *out, const float *q, const float *k_cache,
                                    const float *v_cache, const int *seq_id, const int *pos,
                                    int n_tokens, int n_heads, int n_kv_heads, int head_dim,
                                    int n_seq_max, int n_ctx, float scale) {
    int group = n_heads / n_kv_heads;
    size_t row = (size_t)n_kv_heads * head_dim;
    float *w = malloc(((size_t)n_ctx + 1) * sizeof(float));
    PL_CHECK(w != NULL, "out of host memory for the attention scores");
    for (int t = 0; t < n_tokens; t++)
        for (int h = 0; h < n_heads; h++) {
            float *o = out + ((size_t)t * n_heads + h) * head_dim;
            for (int d = 0; d < head_dim; d++) o[d] = 0.0f;
            if (!kv_slot_valid(seq_id[t], pos[t], n_seq_max, n_ctx)) continue;
            const float *qh = q + ((size_t)t * n_heads + h) * head_dim;
            size_t base = (size_t)seq_id[t] * n_ctx * row + (size_t)(h / group) * head_dim;
            int L = pos[t] + 1;
            float mx = -INFINITY;
            for (int p = 0; p < L; p++) {
                const float *kp = k_cache + base + (size_t)p * row;
                float dot = 0.0f;
                for (int d = 0; d < head_dim; d++) dot += qh[d] * kp[d];
                w[p] = scale * dot;
                mx = fmaxf(mx, w[p]);
            }
            float sum = 0.0f;
            for (int p = 0; p < L; p++) sum += (w[p] = expf(w[p] - mx));
            for (int p = 0; p < L; p++) {
                const float *vp = v_cache + base + (size_t)p * row;
                float a = w[p] / sum;
                for (int d = 0; d < head_dim; d++) o[d] += a * vp[d];
            }
        }
    free(w);
}

/* ================================================================================== */
/* Dispatchers                                                                         */
/* ================================================================================== */

void kern_kv_store_cost(int n_tokens, int n_kv_heads, int head_dim, double *bytes, double *flops) {
    /* k and v read, the same amount written into the cache, seq_id and pos read */
    *bytes = 16.0 * n_tokens * n_kv_heads * head_dim + 8.0 * n_tokens;
    *flops = 0.0;
}

/* K and V rows are counted once per token and KV head: the heads of a group read the
 * same rows, which a GPU serves from its cache; q read and out written once per head.
 * Per (token, head, position): a dot product and an axpy (2 head_dim each), an exp and
 * three more operations for the softmax. */
void kern_gqa_attention_cost(int n_tokens, int n_heads, int n_kv_heads, int head_dim,
                             int64_t n_attended, double *bytes, double *flops) {
    double a = (double)n_attended;
    *bytes = 8.0 * n_kv_heads * head_dim * a + 8.0 * n_tokens * n_heads * head_dim + 8.0 * n_tokens;
    *flops = (4.0 * head_dim + 3.0 + KERN_TRANSCENDENTAL) * n_heads * a;
}

KERN_THUNK(kv_store, kern_kv_store_ref,
            float *, float *, const float *, const float *, const int *, const int *, int, int, int,
            int, int)
KERN_THUNK(gqa_attention_forward, kern_gqa_attention_forward_ref,
            float *, const float *, const float *, const float *, const int *, const int *, int,
            int, int, int, int, int, float)

void kern_kv_store(float *k_cache, float *v_cache, const float *k, const float *v,
                   const int *seq_id, const int *pos, int n_tokens, int n_kv_heads, int head_dim,
                   int n_seq_max, int n_ctx, pl_stream *s) {
    double bytes, flops;
    kern_kv_store_cost(n_tokens, n_kv_heads, head_dim, &bytes, &flops);
    KERN_DISPATCH("kv_store", bytes, flops,
                  kern_kv_store_cuda(k_cache, v_cache, k, v, seq_id, pos, n_tokens, n_kv_heads, head_dim,
                                     n_seq_max, n_ctx, s),
                  kv_store, k_cache, v_cache, k, v, seq_id, pos, n_tokens, n_kv_heads, head_dim,
                  n_seq_max, n_ctx);
}

void kern_gqa_attention_forward(float *out, const float *q, const float *k_cache,
                                const float *v_cache, const int *seq_id, const int *pos,
                                int n_tokens, int n_heads, int n_kv_heads, int head_dim,
                                int n_seq_max, int n_ctx, float scale, int64_t n_attended,
                                pl_stream *s) {
    PL_CHECK(n_kv_heads > 0 && n_heads % n_kv_heads == 0,
             "grouped-query attention: n_heads must be a multiple of n_kv_heads");
    double bytes, flops;
    kern_gqa_attention_cost(n_tokens, n_heads, n_kv_heads, head_dim, n_attended, &bytes, &flops);
    KERN_DISPATCH("gqa_attention_fwd", bytes, flops,
                  kern_gqa_attention_forward_cuda(out, q, k_cache, v_cache, seq_id, pos, n_tokens, n_heads,
                                                  n_kv_heads, head_dim, n_seq_max, n_ctx, scale, s),
                  gqa_attention_forward, out, q, k_cache, v_cache, seq_id, pos, n_tokens, n_heads,
                  n_kv_heads, head_dim, n_seq_max, n_ctx, scale);
}
