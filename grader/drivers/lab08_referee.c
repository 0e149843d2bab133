/* lab08_referee.c - Lab 8's referee: it makes every input (host arrays), knows the group
 * membership rule and the traffic formulas, computes the references of the vocabulary-
 * parallel embedding and of the parallel loss, and compares. Host arrays only: nothing
 * here touches the device, communicates or calls the student's code (the single-rank
 * reference training is in lab08_referee_train.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab08.h"

/* ==================================================================================== */
/* Inputs                                                                                 */
/* ==================================================================================== */

td_config l8_config(const l8_state *S, int t, int p) {
    return (td_config){.seq = S->T, .batch = S->b, .hidden = S->C, .heads = S->H, .ffn = S->F, .vocab = S->V,
                       .layers = S->L, .t = t, .p = p, .micro = p + 1, .lr = (float)S->lr, .beta1 = 0.9f,
                       .beta2 = 0.95f, .eps = 1e-6f, .weight_decay = 0.01f, .max_norm = (float)S->clip};
}

void l8_ids(int *out, size_t n, int V, uint64_t seed, uint64_t id) {
    for (size_t i = 0; i < n; i++) out[i] = (int)(pl_rng_bits(seed, id, i) % (uint64_t)V);
}

/* The serial model's config: the tables' shapes (positions = T rows). */
static gpt_config model_of(const td_config *c) {
    return (gpt_config){.seq = c->seq, .batch = c->batch, .hidden = c->hidden, .heads = c->heads, .ffn = c->ffn,
                        .vocab = c->vocab, .max_pos = c->seq};
}

/* rows [row0, row0 + rows) of master tensor ti into dst */
static void fill_rows(float *dst, gpt_tensor_info ti, int64_t row0, int64_t rows, uint64_t seed) {
    pl_rng_fill_host(dst, rows, ti.cols, ti.cols, row0, 0, seed, ti.rng_id, ti.dist, ti.lo, ti.hi);
}

void l8_initial_params(float *flat, const l8_layout *lay, const td_config *c, uint64_t seed) {
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

void l8_step_tokens(int *out, const td_config *c, uint64_t replica_seed, int step) {
    l8_ids(out, (size_t)c->micro * c->seq * c->batch, c->vocab, replica_seed, 100 + (uint64_t)step);
}

void l8_step_targets(int *out, const td_config *c, uint64_t seed, int dp, int step) {
    l8_ids(out, (size_t)c->micro * c->seq * c->batch, c->vocab, seed, 4096 + 4096 * (uint64_t)step + (uint64_t)dp);
}

/* ==================================================================================== */
/* The group rule                                                                         */
/* ==================================================================================== */

int l8_members(int rank, int t, int p, int d, int group, int *out) {
    int tp, dp, pp, n = 0;
    l8_coords(rank, t, d, &tp, &dp, &pp);
    switch (group) {
    case L8_TENSOR:
        for (int i = 0; i < t; i++) out[n++] = l8_rank_of(i, dp, pp, t, d);
        break;
    case L8_DATA:
        for (int i = 0; i < d; i++) out[n++] = l8_rank_of(tp, i, pp, t, d);
        break;
    case L8_PIPE:
        for (int i = 0; i < p; i++) out[n++] = l8_rank_of(tp, dp, i, t, d);
        break;
    case L8_EMBED:
        if (pp != 0 && pp != p - 1) break;
        out[n++] = l8_rank_of(tp, dp, 0, t, d);
        if (p > 1) out[n++] = l8_rank_of(tp, dp, p - 1, t, d);
        break;
    default: break;
    }
    return n;
}

/* ==================================================================================== */
/* Traffic                                                                                */
/* ==================================================================================== */

void l8_expected_traffic(const td_config *c, const l8_layout *lay, int world, l8_tally want[L8_NGROUPS]) {
    memset(want, 0, L8_NGROUPS * sizeof *want);
    double m = c->micro, N = (double)c->seq * c->batch, C = c->hidden, NC = N * C, L = lay->nlayers;
    if (c->t > 1) {
        /* per micro-batch: 2 + 2 per block; the embedding's sum; the head's input
         * gradient and the loss's maxima, target logits and sums of exponentials */
        want[L8_TENSOR].calls[PL_OP_ALLREDUCE] = m * (4 * L + lay->first + 4 * lay->last);
        want[L8_TENSOR].bytes = 4 * m * (4 * L * NC + lay->first * NC + lay->last * (NC + 3 * N));
    }
    if (c->p > 1) {
        want[L8_PIPE].msgs = m * ((lay->pp < c->p - 1) + (lay->pp > 0));
        want[L8_PIPE].msg_bytes = want[L8_PIPE].msgs * NC * 4;
        if (lay->first || lay->last) {
            want[L8_EMBED].calls[PL_OP_ALLREDUCE] = 1;
            want[L8_EMBED].bytes = 4.0 * c->vocab / c->t * C;
        }
    }
    if (lay->d > 1) {
        want[L8_DATA].calls[PL_OP_REDUCE_SCATTER] = 1;
        want[L8_DATA].calls[PL_OP_ALLGATHER] = 1;
        want[L8_DATA].bytes = 2.0 * 4 * (double)lay->count;
    }
    if (world > 1) {
        want[L8_WORLD].calls[PL_OP_ALLREDUCE] = 1;
        want[L8_WORLD].bytes = 4;
    }
}

/* "3 all-reduce, 1 all-gather, S = 1024 bytes, 2 messages of 512 bytes" */
static void describe(const l8_tally *x, char *out, size_t len) {
    int w = 0;
    out[0] = '\0';
    for (int k = 0; k < PL_OP_COUNT; k++)
        if (x->calls[k] > 0)
            w += snprintf(out + w, len - (size_t)w, "%s%.0f %s", w ? ", " : "", x->calls[k], pl_op_kind_name((pl_op_kind)k));
    if (w) w += snprintf(out + w, len - (size_t)w, " (S = %.0f bytes)", x->bytes);
    if (x->msgs > 0) w += snprintf(out + w, len - (size_t)w, "%s%.0f message(s), %.0f bytes", w ? ", " : "", x->msgs, x->msg_bytes);
    if (!w) snprintf(out, len, "nothing");
}

int l8_traffic_diff(const l8_tally got[L8_NGROUPS], const l8_tally want[L8_NGROUPS], char *why, size_t len) {
    for (int g = 0; g < L8_NGROUPS; g++) {
        bool same = fabs(got[g].bytes - want[g].bytes) < 0.5 && fabs(got[g].msgs - want[g].msgs) < 0.5 &&
                    fabs(got[g].msg_bytes - want[g].msg_bytes) < 0.5;
        for (int k = 0; k < PL_OP_COUNT; k++) same &= fabs(got[g].calls[k] - want[g].calls[k]) < 0.5;
        if (same) continue;
        char a[200], b[200];
        describe(&got[g], a, sizeof a);
        describe(&want[g], b, sizeof b);
        snprintf(why, len, "%s group: %s, expected %s", l8_group_name(g), a, b);
        return g;
    }
    return -1;
}

/* ==================================================================================== */
/* td_config_check's table                                                                */
/* ==================================================================================== */

int l8_config_cases(const l8_state *S, l8_config_case *out, int cap) {
    td_config base = l8_config(S, 1, 1);
    int n = 0;
#define CASE(world_, want_, what_, ...)                                          \
    do {                                                                         \
        td_config c_ = base;                                                     \
        __VA_ARGS__;                                                             \
        if (n < cap) out[n++] = (l8_config_case){c_, world_, want_, what_};      \
    } while (0)
    CASE(1, TD_OK, "t 1, p 1 on 1 rank", (void)0);
    CASE(8, TD_OK, "t 2, p 2 on 8 ranks (d 2)", c_.t = 2, c_.p = 2);
    CASE(8, TD_OK, "t 8, p 1 on 8 ranks", c_.t = 8);
    CASE(8, TD_ERR_WORLD, "t 3 on 8 ranks", c_.t = 3);
    CASE(8, TD_ERR_WORLD, "t 2, p 3 on 8 ranks (6 does not divide 8)", c_.t = 2, c_.p = 3);
    CASE(4, TD_ERR_WORLD, "t 0", c_.t = 0);
    CASE(4, TD_ERR_WORLD, "p 0", c_.p = 0);
    CASE(8, TD_ERR_WORLD, "t 16 on 8 ranks", c_.t = 16);
    CASE(2, TD_ERR_BATCH, "m 0", c_.micro = 0);
    CASE(2, TD_ERR_BATCH, "hidden 30 with 8 heads", c_.hidden = 30);
    CASE(2, TD_ERR_BATCH, "seq 0", c_.seq = 0);
    CASE(4, TD_ERR_HEADS, "t 4 with 6 heads (hidden 48)", c_.t = 4, c_.heads = 6, c_.hidden = 48);
    CASE(4, TD_ERR_HEADS, "t 4 with MLP width 66", c_.t = 4, c_.ffn = 66);
    CASE(4, TD_ERR_VOCAB, "t 4 with vocabulary 66", c_.t = 4, c_.vocab = 66);
    CASE(8, TD_ERR_VOCAB, "t 4, p 2 with vocabulary 66 and 1 layer (the vocabulary first)", c_.t = 4, c_.p = 2,
         c_.vocab = 66, c_.layers = 1);
    CASE(8, TD_ERR_LAYERS, "p 8 with 4 layers", c_.p = 8, c_.layers = 4);
    CASE(2, TD_ERR_LAYERS, "p 2 with 1 layer", c_.p = 2, c_.layers = 1);
#undef CASE
    return n;
}

/* ==================================================================================== */
/* References: the embedding and the loss over the whole vocabulary, in double           */
/* ==================================================================================== */

void l8_embed_reference(double *x, double *dwte, double *dwpe, const float *wte_full, const float *wpe, const int *tokens,
                        const float *dx, int T, int b, int C, int V) {
    memset(dwte, 0, (size_t)V * C * sizeof *dwte);
    memset(dwpe, 0, (size_t)T * C * sizeof *dwpe);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < b; j++) {
            size_t row = (size_t)t * b + j;
            int id = tokens[row];
            for (int k = 0; k < C; k++) {
                x[row * C + k] = (double)wte_full[(size_t)id * C + k] + wpe[(size_t)t * C + k];
                dwte[(size_t)id * C + k] += dx[row * C + k];
                dwpe[(size_t)t * C + k] += dx[row * C + k];
            }
        }
}

void l8_xent_reference(double *losses, double *dlogits, const float *logits_full, const int *targets, int N, int V,
                       float scale) {
    for (int i = 0; i < N; i++) {
        const float *row = logits_full + (size_t)i * V;
        double mx = row[0], sum = 0;
        for (int j = 1; j < V; j++) mx = row[j] > mx ? row[j] : mx;
        for (int j = 0; j < V; j++) sum += exp((double)row[j] - mx);
        losses[i] = log(sum) + mx - row[targets[i]];
        for (int j = 0; j < V; j++)
            dlogits[(size_t)i * V + j] = scale * (exp((double)row[j] - mx) / sum - (j == targets[i] ? 1.0 : 0.0));
    }
}

double l8_rel_err(const float *got, const double *want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        double e = got[i] - want[i];
        num += e * e, den += want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}
