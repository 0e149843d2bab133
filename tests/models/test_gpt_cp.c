/* test_gpt_cp.c - the context-parallel GPT-2 block of models/gpt_cp.h at n = the world size
 * against the serial host block of models/gpt_host.h (plain loops, double accumulation)
 * over the whole sequence: y and dx of this rank's rows, and every parameter gradient (the
 * whole sequence's, on every rank). The attention here is the simplest context-parallel
 * one, written for this test alone: every rank gathers the sequence's keys and values
 * (pl_allgather, padded to the longest rank) and runs kern_flash_block against all of
 * them; its backward sums the keys' gradients over the ranks. Contiguous and zig-zag row
 * layouts, S not a multiple of 2n. Also the record's bytes and config errors.
 * Run at np 1, 2 and 4 (tests/models/test_gpt_tp.sh runs it).
 *
 *   mpirun -np 2 build/cpu/tests/test_gpt_cp
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/check.h" // defines: check_rel_ff, host_uniform, download
#include "../harness/tap.h"   // defines: tap_check, tap_finish
#include "gpt_cp.h"
#include "gpt_host.h"
#include "gpt_tp.h"     // defines: gpt_tp_block_view
#include "kern_flash.h" // defines: kern_flash_block, kern_flash_block_backward

/* ---- the layout: chunk c of C has S / C tokens, one more for the first S % C ------------ */
static int chunk_len(int S, int C, int i) { return S / C + (i < S % C); }
static int chunk_start(int S, int C, int i) { return i * (S / C) + (i < S % C ? i : S % C); }
static int positions(int S, int n, int zigzag, int r, int *pos) {
    int C = zigzag ? 2 * n : n, ch[2] = {r, 2 * n - 1 - r}, k = 0;
    for (int i = 0; i < (zigzag ? 2 : 1); i++)
        for (int t = 0; t < chunk_len(S, C, ch[i]); t++) {
            if (pos) pos[k] = chunk_start(S, C, ch[i]) + t;
            k++;
        }
    return k;
}

/* ---- the gather-everything attention ---------------------------------------------------- */
typedef struct {
    int R, maxR, n, me, H, hs;
    int *q_pos, *k_pos; /* device: this rank's positions [R]; every rank's, padded [n maxR] */
    float *kv, *all;    /* [2, maxR, H, hs]; [2, n maxR, H, hs] (k then v), and their gradients */
    pl_comm *comm;
} gather_attn;

static void gather_kv(gather_attn *g, const float *k, const float *v, pl_stream *s) {
    size_t blk = (size_t)g->maxR * g->H * g->hs, mine = (size_t)g->R * g->H * g->hs;
    pl_fill(g->kv, 0.0f, 2 * blk, s);
    pl_copy(g->kv, k, mine * sizeof(float), s);
    pl_copy(g->kv + blk, v, mine * sizeof(float), s);
    /* rank r's block lands at r * 2 blk: keys then values; gather into [n maxR] keys and values */
    float *both = pl_malloc_floats(2 * blk * g->n);
    pl_allgather(g->kv, both, 2 * blk, g->comm, s);
    for (int r = 0; r < g->n; r++) {
        pl_copy(g->all + r * blk, both + 2 * r * blk, blk * sizeof(float), s);
        pl_copy(g->all + (g->n + r) * blk, both + (2 * r + 1) * blk, blk * sizeof(float), s);
    }
    pl_stream_sync(s);
    pl_free(both);
}

static void attn_forward(void *ctx, const float *q, const float *k, const float *v, float *o, float *lse, pl_stream *s) {
    gather_attn *g = ctx;
    gather_kv(g, k, v, s);
    size_t nk = (size_t)g->n * g->maxR;
    kern_flash_block(o, lse, q, g->all, g->all + nk * g->H * g->hs, g->q_pos, g->k_pos, g->R, (int)nk, g->H, g->H, g->hs,
                     1, 1.0f / sqrtf((float)g->hs), s);
}

static void attn_backward(void *ctx, const float *q, const float *k, const float *v, const float *o, const float *lse,
                          const float *dout, float *dq, float *dk, float *dv, pl_stream *s) {
    gather_attn *g = ctx;
    gather_kv(g, k, v, s);
    size_t nk = (size_t)g->n * g->maxR, row = (size_t)g->H * g->hs, blk = (size_t)g->maxR * row;
    float *dall = pl_malloc_floats(2 * nk * row);
    pl_fill(dall, 0.0f, 2 * nk * row, s);
    pl_fill(dq, 0.0f, (size_t)g->R * row, s);
    kern_flash_block_backward(dq, dall, dall + nk * row, q, g->all, g->all + nk * row, o, lse, dout, g->q_pos, g->k_pos,
                              g->R, (int)nk, g->H, g->H, g->hs, 1, 1.0f / sqrtf((float)g->hs), s);
    pl_allreduce(dall, dall, 2 * nk * row, PL_SUM, g->comm, s);
    pl_copy(dk, dall + g->me * blk, (size_t)g->R * row * sizeof(float), s);
    pl_copy(dv, dall + nk * row + g->me * blk, (size_t)g->R * row * sizeof(float), s);
    pl_stream_sync(s);
    pl_free(dall);
}

static void run(int zigzag, uint64_t seed, double tol) {
    int n = pl_world(), me = pl_rank(), S = 4 * n + 3, layer = 2;
    gpt_config c = {.seq = S, .batch = 1, .hidden = 16, .heads = 4, .ffn = 32, .vocab = 0, .max_pos = 0};
    size_t C = (size_t)c.hidden, SC = (size_t)S * C;
    const char *lay = zigzag ? "zig-zag" : "contiguous";

    /* the serial block over the whole sequence */
    gpt_block_params whole, gwhole;
    gpt_host_block_alloc(&whole, &c), gpt_host_block_init(&whole, &c, layer, seed);
    gpt_host_block_alloc(&gwhole, &c);
    float *x = host_uniform(SC, seed, 9101), *dy = host_uniform(SC, seed, 9102);
    float *y_ref = calloc(SC, sizeof(float)), *dx_ref = calloc(SC, sizeof(float));
    gpt_host_acts ha;
    gpt_host_acts_alloc(&ha, &c);
    gpt_host_block_forward(&c, &whole, &ha, y_ref, x);
    gpt_host_block_backward(&c, &whole, &gwhole, &ha, dx_ref, dy);

    /* this rank's rows, and the attention's positions */
    int *pos = malloc(((size_t)S + 1) * sizeof *pos), maxR = 0, R = positions(S, n, zigzag, me, pos);
    for (int r = 0; r < n; r++) maxR = positions(S, n, zigzag, r, NULL) > maxR ? positions(S, n, zigzag, r, NULL) : maxR;
    int *kpos = malloc((size_t)n * maxR * sizeof *kpos);
    for (int r = 0; r < n; r++) {
        int cnt = positions(S, n, zigzag, r, kpos + (size_t)r * maxR);
        for (int i = cnt; i < maxR; i++) kpos[(size_t)r * maxR + i] = S + 1000; /* padding: after every query */
    }
    gather_attn g = {.R = R, .maxR = maxR, .n = n, .me = me, .H = c.heads, .hs = c.hidden / c.heads, .comm = pl_comm_world()};
    g.q_pos = pl_malloc((size_t)R * sizeof(int)), g.k_pos = pl_malloc((size_t)n * maxR * sizeof(int));
    pl_upload(g.q_pos, pos, (size_t)R * sizeof(int)), pl_upload(g.k_pos, kpos, (size_t)n * maxR * sizeof(int));
    g.kv = pl_malloc_floats(2 * (size_t)maxR * C), g.all = pl_malloc_floats(2 * (size_t)n * maxR * C);
    gpt_cp_attention attn = {attn_forward, attn_backward, &g};

    float *xl = malloc((size_t)R * C * sizeof(float)), *dyl = malloc((size_t)R * C * sizeof(float));
    float *yl_ref = malloc((size_t)R * C * sizeof(float)), *dxl_ref = malloc((size_t)R * C * sizeof(float));
    for (int i = 0; i < R; i++) {
        memcpy(xl + (size_t)i * C, x + (size_t)pos[i] * C, C * sizeof(float));
        memcpy(dyl + (size_t)i * C, dy + (size_t)pos[i] * C, C * sizeof(float));
        memcpy(yl_ref + (size_t)i * C, y_ref + (size_t)pos[i] * C, C * sizeof(float));
        memcpy(dxl_ref + (size_t)i * C, dx_ref + (size_t)pos[i] * C, C * sizeof(float));
    }
    size_t count = gpt_part_count(&c, GPT_PART_BLOCK);
    gpt_block_params p, gd;
    float *pbase = pl_malloc_floats(count), *gbase = pl_malloc_floats(count);
    pl_upload(pbase, whole.base, count * sizeof(float));
    pl_fill(gbase, 0.0f, count, NULL);
    gpt_tp_block_view(&p, pbase, &c, 1), gpt_tp_block_view(&gd, gbase, &c, 1);
    float *y_d = pl_malloc_floats((size_t)R * C), *dy_d = pl_malloc_floats((size_t)R * C), *dx_d = pl_malloc_floats((size_t)R * C);
    pl_upload(y_d, xl, (size_t)R * C * sizeof(float));
    pl_upload(dy_d, dyl, (size_t)R * C * sizeof(float));
    size_t before = pl_mem_in_use();
    gpt_cp_acts *a = gpt_cp_acts_alloc(&c, R);
    size_t rec = pl_mem_in_use() - before, want = 4 * (size_t)R * (12 * C + 2 * (size_t)c.ffn + (size_t)c.heads + 4);
    tap_check(gpt_cp_acts_bytes(&c, R) == want && rec == want + 6 * (size_t)R * c.heads * sizeof(int),
              "record: 4 R (12C + 2F + H + 4) bytes and the split/join indices, no S x S scores");
    pl_stream *s = pl_stream_comm();
    gpt_cp_block_forward(&p, a, y_d, y_d, &attn, s); /* y aliases x */
    gpt_cp_block_backward(&p, &gd, a, dx_d, dy_d, &attn, pl_comm_world(), s);
    pl_device_sync();
    float *y = download(y_d, (size_t)R * C), *dxh = download(dx_d, (size_t)R * C), *gh = download(gbase, count);
    char name[200];
    snprintf(name, sizeof name, "forward at n = %d, %s rows, S = %d: y of this rank's rows equals the serial block's", n, lay, S);
    check_rel_ff(name, y, yl_ref, (size_t)R * C, tol);
    snprintf(name, sizeof name, "backward at n = %d, %s rows: dx of this rank's rows equals the serial block's", n, lay);
    check_rel_ff(name, dxh, dxl_ref, (size_t)R * C, tol);
    snprintf(name, sizeof name, "backward at n = %d, %s rows: every parameter gradient equals the whole sequence's", n, lay);
    check_rel_ff(name, gh, gwhole.base, count, tol);
    /* a second step accumulates: run the pair again and expect twice the gradients */
    pl_upload(y_d, xl, (size_t)R * C * sizeof(float));
    gpt_cp_block_forward(&p, a, y_d, y_d, &attn, s);
    gpt_cp_block_backward(&p, &gd, a, dx_d, dy_d, &attn, pl_comm_world(), s);
    pl_device_sync();
    float *g2 = download(gbase, count);
    for (size_t i = 0; i < count; i++) gwhole.base[i] *= 2;
    snprintf(name, sizeof name, "backward at n = %d, %s rows: a second step accumulates (+=) into the gradients", n, lay);
    check_rel_ff(name, g2, gwhole.base, count, tol);

    gpt_cp_acts_free(a);
    pl_free(pbase), pl_free(gbase), pl_free(y_d), pl_free(dy_d), pl_free(dx_d);
    pl_free(g.q_pos), pl_free(g.k_pos), pl_free(g.kv), pl_free(g.all);
    gpt_host_acts_free(&ha);
    gpt_host_params_free(whole.base), gpt_host_params_free(gwhole.base);
    free(x), free(dy), free(y_ref), free(dx_ref), free(pos), free(kpos), free(xl), free(dyl), free(yl_ref), free(dxl_ref);
    free(y), free(dxh), free(gh), free(g2);
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    uint64_t seed = pl_info()->seed;
    double tol = pl_tolerance();
    run(0, seed, tol);
    run(1, seed, tol);
    char why[200];
    gpt_config bad = {.seq = 8, .batch = 2, .hidden = 16, .heads = 4, .ffn = 32};
    tap_check(!gpt_cp_config_valid(&bad, 4, why, sizeof why) && strstr(why, "batch"), "config: batch 2 is refused, naming the batch");
    bad.batch = 1;
    tap_check(!gpt_cp_config_valid(&bad, 9, why, sizeof why) && strstr(why, "rows"), "config: more rows than the sequence is refused");
    tap_check(gpt_cp_config_valid(&bad, 8, why, sizeof why), "config: one sequence, every row on one rank, is valid");
    return tap_finish();
}
