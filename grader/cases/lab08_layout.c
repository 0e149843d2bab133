/* lab08_layout.c - where each parameter of a rank sits: its coordinates in the grid, its
 * stage's layers, the offsets and kinds of its flat buffer (threed.h, td_stage), and the
 * seeded model and ids laid out that way. Pure functions of the configuration (and of a
 * seed): the referee makes a case's inputs with them from seeds only referees know, the
 * player points a stage's views with them, and its bench mode makes a model of its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_tp.h" // defines: gpt_tp_block_* (a tensor rank's shard of a block)
#include "lab08.h"

const char *l8_group_name(int group) {
    static const char *const names[L8_NGROUPS] = {"tensor", "pipeline", "data", "embedding", "world", "other"};
    return group >= 0 && group < L8_NGROUPS ? names[group] : "?";
}

const char *l8_code_name(int rc) {
    switch (rc) {
    case L8_OK: return "TD_OK";
    case L8_ERR_WORLD: return "TD_ERR_WORLD";
    case L8_ERR_VOCAB: return "TD_ERR_VOCAB";
    case L8_ERR_HEADS: return "TD_ERR_HEADS";
    case L8_ERR_LAYERS: return "TD_ERR_LAYERS";
    case L8_ERR_BATCH: return "TD_ERR_BATCH";
    case L8_ERR_TODO: return "TD_ERR_TODO: not implemented yet";
    default: return "not a TD_ code";
    }
}

l8_cfg l8_config(const l8_state *S, int t, int p) {
    return (l8_cfg){.seq = S->T, .batch = S->b, .hidden = S->C, .heads = S->H, .ffn = S->F, .vocab = S->V,
                    .layers = S->L, .t = t, .p = p, .micro = p + 1, .lr = (float)S->lr, .beta1 = 0.9f,
                    .beta2 = 0.95f, .eps = 1e-6f, .weight_decay = 0.01f,
                    /* p = 1: a limit above every norm the steps reach, so that the rule's
                     * other branch (no clipping) is graded too */
                    .max_norm = (float)(p == 1 ? S->clip * L8_NO_CLIP : S->clip)};
}

void l8_step_configs(l8_state *S, int N) {
    static const l8_tpd LIST[] = {{1, 1, 1}, {2, 1, 1}, {1, 2, 1}, {1, 1, 2}, {2, 2, 1}, {2, 1, 2}, {1, 2, 2},
                                  {2, 2, 2}, {4, 2, 1}, {1, 4, 2}, {8, 1, 1}, {1, 8, 1}, {1, 1, 8}};
    S->ncfgs = 0;
    for (size_t i = 0; i < sizeof LIST / sizeof LIST[0]; i++)
        if (LIST[i].t * LIST[i].p * LIST[i].d == N && S->ncfgs < L8_MAX_CONFIGS) S->cfgs[S->ncfgs++] = LIST[i];
    if (S->ncfgs) return;
    /* a world the list does not cover: each axis alone, where the model allows it */
    l8_tpd more[3] = {{N, 1, 1}, {1, N, 1}, {1, 1, N}};
    for (int i = 0; i < 3; i++) {
        l8_cfg c = l8_config(S, more[i].t, more[i].p);
        if (c.heads % c.t == 0 && c.ffn % c.t == 0 && c.vocab % c.t == 0 && c.p <= c.layers) S->cfgs[S->ncfgs++] = more[i];
    }
}

int l8_tensor_size(const l8_state *S, int N) {
    int t = N;
    while (t > 1 && (N % t || S->V % t)) t--;
    return t;
}

/* ==================================================================================== */
/* The grid and the stage                                                                 */
/* ==================================================================================== */

void l8_coords(int rank, int t, int d, int *tp, int *dp, int *pp) {
    *tp = rank % t;
    *dp = (rank / t) % d;
    *pp = rank / (t * d);
}

int l8_rank_of(int tp, int dp, int pp, int t, int d) { return tp + t * (dp + d * pp); }

int l8_stage_layers(int L, int p, int s, int *first) {
    int base = L / p, extra = L % p;
    *first = s * base + (s < extra ? s : extra);
    return base + (s < extra ? 1 : 0);
}

static void add_seg(l8_layout *lay, size_t offset, size_t count, int kind) {
    if (lay->nseg > 0) { /* neighbours of one kind merge into one segment */
        l8_segment *last = &lay->seg[lay->nseg - 1];
        if (last->kind == kind && last->offset + last->count == offset) {
            last->count += count;
            return;
        }
    }
    lay->seg[lay->nseg++] = (l8_segment){offset, count, kind};
}

void l8_layout_make(l8_layout *lay, const l8_cfg *c, int world, int rank) {
    memset(lay, 0, sizeof *lay);
    lay->t = c->t, lay->p = c->p, lay->d = world / (c->t * c->p);
    l8_coords(rank, lay->t, lay->d, &lay->tp, &lay->dp, &lay->pp);
    lay->nlayers = l8_stage_layers(c->layers, c->p, lay->pp, &lay->first_layer);
    lay->first = lay->pp == 0;
    lay->last = lay->pp == c->p - 1;
    lay->block = (gpt_config){.seq = c->seq, .batch = c->batch, .hidden = c->hidden, .heads = c->heads, .ffn = c->ffn};
    size_t C = (size_t)c->hidden, Vt = (size_t)c->vocab / (size_t)c->t, off = 0;
    lay->block_count = gpt_tp_block_count(&lay->block, c->t);
    lay->seg = calloc((size_t)lay->nlayers * GPT_BLOCK_NTENSORS + 8, sizeof *lay->seg);
    PL_CHECK(lay->seg != NULL, "out of host memory");
    if (lay->first) {
        lay->off_wte = off, add_seg(lay, off, Vt * C, L8_SHARDED), off += Vt * C;
        lay->off_wpe = off, add_seg(lay, off, (size_t)c->seq * C, L8_REPLICATED), off += (size_t)c->seq * C;
    }
    lay->off_blocks = off;
    for (int l = 0; l < lay->nlayers; l++)
        for (int i = 0; i < GPT_BLOCK_NTENSORS; i++) {
            gpt_tp_shard sh = gpt_tp_block_shard(&lay->block, i, c->t, lay->tp);
            add_seg(lay, off + sh.offset, (size_t)(sh.rows * sh.cols), sh.replicated ? L8_REPLICATED : L8_SHARDED);
            if (i == GPT_BLOCK_NTENSORS - 1) off += lay->block_count;
        }
    if (lay->last) {
        lay->off_lnf = off, add_seg(lay, off, 2 * C, L8_REPLICATED), off += 2 * C;
        if (c->p > 1) lay->off_wte_copy = off, add_seg(lay, off, Vt * C, L8_TIED_COPY), off += Vt * C;
    }
    lay->used = off;
    lay->count = (off + (size_t)lay->d - 1) / (size_t)lay->d * (size_t)lay->d;
}

void l8_layout_free(l8_layout *lay) {
    free(lay->seg);
    lay->seg = NULL;
    lay->nseg = 0;
}

/* ==================================================================================== */
/* The seeded model and ids                                                               */
/* ==================================================================================== */

void l8_ids(int *out, size_t n, int V, uint64_t seed, uint64_t id) {
    for (size_t i = 0; i < n; i++) out[i] = (int)(pl_rng_bits(seed, id, i) % (uint64_t)V);
}

void l8_step_ids(int *out, const l8_cfg *c, uint64_t seed, int step, bool targets) {
    l8_ids(out, (size_t)c->micro * c->seq * c->batch, c->vocab, seed, (targets ? 4096 : 100) + (uint64_t)step);
}

/* The serial model's config: the tables' shapes (positions = T rows). */
static gpt_config model_of(const l8_cfg *c) {
    return (gpt_config){.seq = c->seq, .batch = c->batch, .hidden = c->hidden, .heads = c->heads, .ffn = c->ffn,
                        .vocab = c->vocab, .max_pos = c->seq};
}

/* rows [row0, row0 + rows) of master tensor ti into dst */
static void fill_rows(float *dst, gpt_tensor_info ti, int64_t row0, int64_t rows, uint64_t seed) {
    pl_rng_fill_host(dst, rows, ti.cols, ti.cols, row0, 0, seed, ti.rng_id, ti.dist, ti.lo, ti.hi);
}

void l8_initial_params(float *flat, const l8_layout *lay, const l8_cfg *c, uint64_t seed) {
    gpt_config mc = model_of(c);
    int64_t Vt = c->vocab / c->t;
    memset(flat, 0, lay->count * sizeof *flat);
    if (lay->first) {
        fill_rows(flat + lay->off_wte, gpt_tensor(&mc, GPT_PART_EMBED, GPT_WTE, 0), lay->tp * Vt, Vt, seed);
        fill_rows(flat + lay->off_wpe, gpt_tensor(&mc, GPT_PART_EMBED, GPT_WPE, 0), 0, c->seq, seed);
    }
    for (int l = 0; l < lay->nlayers; l++)
        gpt_tp_block_init_host(flat + lay->off_blocks + (size_t)l * lay->block_count, &lay->block, lay->first_layer + l,
                               c->t, lay->tp, seed);
    if (lay->last) {
        fill_rows(flat + lay->off_lnf, gpt_tensor(&mc, GPT_PART_HEAD, GPT_LNF_W, 0), 0, 1, seed);
        fill_rows(flat + lay->off_lnf + c->hidden, gpt_tensor(&mc, GPT_PART_HEAD, GPT_LNF_B, 0), 0, 1, seed);
        if (c->p > 1) fill_rows(flat + lay->off_wte_copy, gpt_tensor(&mc, GPT_PART_EMBED, GPT_WTE, 0), lay->tp * Vt, Vt, seed);
    }
}
