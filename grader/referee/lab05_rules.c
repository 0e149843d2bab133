/* lab05_rules.c (referee) - the split rules as the referee states them, written apart from
 * any solution (and in other words: counts where a solution would search), what each rank
 * must hold and send under them, and the rules.* cases that put the student's ls_cuts,
 * ls_layer_owner, ls_row_range and ls_tensor_split (called by the player on the examples of
 * grader/cases/lab05.c) against them, without running the model.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab05_referee.h"

/* ================================================================================== */
/* The rules                                                                          */
/* ================================================================================== */

void rl_rows(const float *cuts, int n, int r, int64_t nrows, int64_t *a, int64_t *b) {
    *a = r > 0 ? (int64_t)((float)nrows * cuts[r]) / LAB5_ROW_ROUNDING * LAB5_ROW_ROUNDING : 0;
    *b = r < n - 1 ? (int64_t)((float)nrows * cuts[r + 1]) / LAB5_ROW_ROUNDING * LAB5_ROW_ROUNDING : nrows;
}

bool rl_heads(const llm_config *c, int n, int r, int *h0, int *nh, int *f0, int *nf) {
    int K = c->n_head_kv, g = c->n_head / K;
    if (n > c->n_head || n > c->n_ff) return false;
    if (n <= K) {
        *h0 = r * K / n * g;
        *nh = (r + 1) * K / n * g - *h0;
    } else { /* count the ranks of each group, and r's place among them */
        int group = r * K / n, members = 0, before = 0;
        for (int q = 0; q < n; q++)
            if (q * K / n == group) members++, before += q < r;
        *h0 = group * g + before * g / members;
        *nh = group * g + (before + 1) * g / members - *h0;
    }
    *f0 = r * c->n_ff / n;
    *nf = (r + 1) * c->n_ff / n - *f0;
    return true;
}

/* KV heads that query heads [h0, h0 + nh) read. */
static int kv_heads_of(const llm_config *c, int h0, int nh) {
    int g = c->n_head / c->n_head_kv;
    return (h0 + nh - 1) / g - h0 / g + 1;
}

double rl_kv_bytes_per_pos(const lab5_referee *R, int mode, const float *cuts, int r, int n_seq) {
    const llm_config *c = &R->model.cfg;
    double heads = 0; /* summed over the layers the rank holds */
    int h0, nh, f0, nf;
    if (mode == LAB5_LAYER) {
        for (int l = 0; l < c->n_layer; l++) heads += lab5_owner(cuts, R->n, c->n_layer, l) == r ? c->n_head_kv : 0;
    } else if (mode == LAB5_ROW) {
        heads = r == 0 ? (double)c->n_layer * c->n_head_kv : 0;
    } else {
        heads = R->n == 1 ? c->n_head_kv : rl_heads(c, R->n, r, &h0, &nh, &f0, &nf) ? kv_heads_of(c, h0, nh) : 0;
        heads *= c->n_layer;
    }
    return 2.0 * sizeof(float) * n_seq * heads * c->head_dim;
}

/* A block of a tensor at its stored size, or 4 bytes a weight where a column cut falls
 * inside a quantised block (the handout's fallback). */
static double block_bytes(const lab5_referee *R, llm_tensor which, int layer, int64_t nrows, int64_t col0, int64_t ncols) {
    int type = lab5_tensor_type(&R->model, which, layer);
    if (type != LLM_F32 && (col0 % LLM_QK || ncols % LLM_QK)) type = LLM_F32;
    return (double)llm_mat_bytes(type, nrows, ncols);
}

/* Every tensor of layer l whole. */
static double whole_layer(const lab5_referee *R, int l) {
    double b = 0;
    for (int t = 0; t < LLM_N_LAYER_TENSORS; t++) {
        int64_t rows, cols;
        llm_tensor_shape(&R->model.cfg, (llm_tensor)t, &rows, &cols);
        b += block_bytes(R, (llm_tensor)t, l, rows, 0, cols);
    }
    return b;
}

static const llm_tensor MATS[7] = {LLM_WQ, LLM_WK, LLM_WV, LLM_WO, LLM_W_GATE, LLM_W_UP, LLM_W_DOWN};

double rl_weight_bytes(const lab5_referee *R, int mode, const float *cuts, int r) {
    const llm_config *c = &R->model.cfg;
    int64_t C = c->n_embd, V = c->n_vocab, hd = c->head_dim;
    int L = c->n_layer, n = R->n;
    double w = 0, norm = 4.0 * (double)C;
    double embd = block_bytes(R, LLM_TOKEN_EMBD, -1, V, 0, C);
    if (mode == LAB5_LAYER) {
        int out = lab5_owner(cuts, n, L, L);
        for (int l = 0; l < L; l++) w += lab5_owner(cuts, n, L, l) == r ? whole_layer(R, l) : 0;
        w += r == 0 ? embd : 0;
        w += out == r ? norm + (c->tied_output && r == 0 ? 0 : block_bytes(R, LLM_OUTPUT, -1, V, 0, C)) : 0;
    } else if (mode == LAB5_ROW) {
        for (int l = 0; l < L; l++)
            for (int i = 0; i < 7; i++) {
                int64_t rows, cols, a, b;
                llm_tensor_shape(c, MATS[i], &rows, &cols);
                rl_rows(cuts, n, r, rows, &a, &b);
                w += block_bytes(R, MATS[i], l, b - a, 0, cols);
            }
        int64_t a, b;
        rl_rows(cuts, n, r, V, &a, &b);
        w += c->tied_output && r == 0 ? 0 : block_bytes(R, LLM_OUTPUT, -1, b - a, 0, C); /* rank 0: its embedding */
        w += r == 0 ? L * 2 * norm + norm + embd : 0;
    } else {
        int h0 = 0, nh = c->n_head, f0 = 0, nf = c->n_ff;
        if (n > 1 && !rl_heads(c, n, r, &h0, &nh, &f0, &nf)) return 0;
        int64_t nkv = kv_heads_of(c, h0, nh);
        for (int l = 0; l < L; l++)
            w += 2 * norm + block_bytes(R, LLM_WQ, l, nh * hd, 0, C) + block_bytes(R, LLM_WK, l, nkv * hd, 0, C) +
                 block_bytes(R, LLM_WV, l, nkv * hd, 0, C) + block_bytes(R, LLM_WO, l, C, h0 * hd, nh * hd) +
                 block_bytes(R, LLM_W_GATE, l, nf, 0, C) + block_bytes(R, LLM_W_UP, l, nf, 0, C) +
                 block_bytes(R, LLM_W_DOWN, l, C, f0, nf);
        w += embd + (r == 0 ? norm + (c->tied_output ? 0 : block_bytes(R, LLM_OUTPUT, -1, V, 0, C)) : 0);
    }
    return w;
}

void rl_expect_traffic(const lab5_referee *R, int mode, const float *cuts, int r, int n_tok, int n_seqs, int n_out,
                       drv_traffic *t) {
    const llm_config *c = &R->model.cfg;
    int L = c->n_layer, n = R->n, micro_max = lab5_opts()->micro;
    double C = c->n_embd, Q = (double)c->n_head * c->head_dim, F = c->n_ff;
    memset(t, 0, sizeof *t);
    if (mode == LAB5_LAYER) {
        int sends = 0, micro = micro_max < n_seqs ? micro_max : n_seqs;
        for (int s = 0, prev = 0; s <= L; s++) { /* embedding on rank 0, then slots 0 .. L */
            int o = lab5_owner(cuts, n, L, s);
            sends += o != prev && prev == r;
            prev = o;
        }
        t->msg_bytes = 4.0 * sends * n_tok * C;
        t->msgs = (double)sends * micro;
    } else if (mode == LAB5_ROW) {
        t->calls[PL_OP_BROADCAST] = 7 * L + 1;
        t->bytes = 4.0 * ((double)L * n_tok * (5 * C + Q + F) + (double)n_out * C);
        for (int i = 0; i < 8 && r > 0; i++) {
            int64_t rows, cols, a, b;
            llm_tensor_shape(c, i < 7 ? MATS[i] : LLM_OUTPUT, &rows, &cols);
            rl_rows(cuts, n, r, rows, &a, &b);
            double times = i < 7 ? L : 1, tokens = i < 7 ? n_tok : n_out;
            t->msg_bytes += 4.0 * times * tokens * (double)(b - a);
            t->msgs += b > a ? times : 0;
        }
    } else {
        t->calls[PL_OP_ALLREDUCE] = 2 * L;
        t->bytes = 4.0 * 2 * L * n_tok * C;
    }
}

void rl_describe_layers(const float *cuts, int n, int n_layer, char *out, size_t cap) {
    int count[LAB5_MAX_RANKS] = {0}, len = 0;
    for (int l = 0; l < n_layer; l++) count[lab5_owner(cuts, n, n_layer, l)]++;
    for (int r = 0; r < n && len < (int)cap; r++)
        len += snprintf(out + len, cap - (size_t)len, "%s%d", r ? "/" : "", count[r]);
    if (len < (int)cap)
        snprintf(out + len, cap - (size_t)len, " layers, output on rank %d", lab5_owner(cuts, n, n_layer, n_layer));
}

/* ================================================================================== */
/* The rules.* cases                                                                  */
/* ================================================================================== */

void lab5_rules_setup(drv_case *c) {
    lab5_forget_file(lab5_ref());
    drv_slot_new(c, "rout", lab5_rule_out_bytes(&LAB5_RULES[c->arg[0]]), DRV_OUT);
}

static void check_cuts(drv_case *c, const lab5_cuts_out *out) {
    bool bad_n = false;
    for (int i = 0; i < LAB5_NCUTS_CALLS && !drv_failed(c); i++) {
        const lab5_cuts_call *k = &LAB5_CUTS_CALLS[i];
        const lab5_cuts_out *o = &out[i];
        if (k->valid) {
            float p[LAB5_MAX_RANKS], want[LAB5_MAX_RANKS + 1];
            int np;
            lab5_parse_split(k->props, p, &np);
            lab5_cuts(p, np, k->n, want);
            for (int r = 0; o->rc == LAB5_OK && r <= k->n && !drv_failed(c); r++)
                if (memcmp(&o->cuts[r], &want[r], sizeof(float)))
                    drv_fail(c, "ls_cuts(%s over %d ranks): cuts[%d] = %.9g, expected %.9g", k->props, k->n, r,
                             o->cuts[r], want[r]);
            if (o->rc != LAB5_OK)
                drv_fail(c, "ls_cuts(%s over %d ranks) returned %d, expected LS_OK", k->props, k->n, o->rc);
        } else if (!k->props && k->n_props == 2) {
            if (o->rc != LAB5_ERR_SPLIT)
                drv_fail(c, "ls_cuts(%g,%g) returned %d, expected LS_ERR_SPLIT", k->bad[0], k->bad[1], o->rc);
        } else if (k->props) {
            if (o->rc != LAB5_ERR_SPLIT)
                drv_fail(c, "ls_cuts: %s proportions for %d ranks accepted, expected LS_ERR_SPLIT", "3", k->n);
        } else {
            bad_n |= o->rc != LAB5_ERR_SPLIT;
        }
    }
    if (!drv_failed(c) && bad_n) drv_fail(c, "ls_cuts: 0 or %d ranks accepted, expected LS_ERR_SPLIT", LAB5_MAX_RANKS + 1);
}

/* The example's split cut by the referee's rules (cuts); the rank count, or -1 (the case
 * failed) when the student's ls_cuts refused it. */
static int both_cuts(drv_case *c, const lab5_rule *rc, const lab5_cuts_out *o, float *cuts) {
    float p[LAB5_MAX_RANKS];
    int np, n = lab5_rule_split(rc, p, &np);
    lab5_cuts(p, np, n, cuts);
    if (o->rc == LAB5_OK) return n;
    drv_fail(c, "ls_cuts(%s) refused a valid split", rc->split);
    return -1;
}

static void check_layer(drv_case *c, const lab5_rule *rc, const lab5_cuts_out *o) {
    float cuts[LAB5_MAX_RANKS + 1];
    int n = both_cuts(c, rc, o, cuts);
    if (n < 0) return;
    const int32_t *owner = (const int32_t *)(o + 1);
    for (int s = 0; s <= rc->a; s++) {
        int got = owner[s], want = lab5_owner(cuts, n, rc->a, s);
        if (got == want) continue;
        char exp[160];
        rl_describe_layers(cuts, n, rc->a, exp, sizeof exp);
        drv_fail(c, "%d layers at --tensor-split %s: slot %d (%s) on rank %d, expected %d (%s)", rc->a, rc->split, s,
                 s == rc->a ? "the output" : "a layer", got, want, exp);
        return;
    }
}

static void check_rows(drv_case *c, const lab5_rule *rc, const lab5_cuts_out *o) {
    float cuts[LAB5_MAX_RANKS + 1];
    int n = both_cuts(c, rc, o, cuts);
    if (n < 0) return;
    const int64_t *range = (const int64_t *)(o + 1);
    for (int r = 0; r < n; r++) {
        int64_t a, b, ga = range[2 * r], gb = range[2 * r + 1];
        rl_rows(cuts, n, r, rc->a, &a, &b);
        if (ga != a || gb != b) {
            drv_fail(c, "%d rows at --tensor-split %s: rank %d owns [%lld, %lld), expected [%lld, %lld) (bounds but the "
                     "last rounded down to multiples of %d)", rc->a, rc->split, r, (long long)ga, (long long)gb,
                     (long long)a, (long long)b, LAB5_ROW_ROUNDING);
            return;
        }
    }
}

static void check_tensor(drv_case *c, const lab5_rule *rc, const lab5_tensor_out *out) {
    llm_config cfg = lab5_rule_config(rc);
    for (int n = 1, i = 0; n <= rc->a + 1; n++)
        for (int r = 0; r < n; r++, i++) {
            int h0, nh, f0, nf;
            bool ok = rl_heads(&cfg, n, r, &h0, &nh, &f0, &nf);
            const lab5_tensor_out *sp = &out[i];
            if (!ok && sp->rc != LAB5_ERR_SPLIT) {
                drv_fail(c, "%d heads over %d ranks: ls_tensor_split returned %d, expected LS_ERR_SPLIT (a rank would get "
                         "no head)", rc->a, n, sp->rc);
                return;
            }
            if (ok && (sp->rc != LAB5_OK || sp->head0 != h0 || sp->n_head != nh || sp->ff0 != f0 || sp->n_ff != nf)) {
                drv_fail(c, "%d heads (%d KV), F %d over %d ranks: rank %d got %s heads %d+%d, FFN %d+%d; expected heads "
                         "%d+%d, FFN %d+%d", rc->a, rc->kv, rc->ff, n, r, sp->rc == LAB5_OK ? "" : "an error,", sp->head0,
                         sp->n_head, sp->ff0, sp->n_ff, h0, nh, f0, nf);
                return;
            }
        }
}

/* Every rank's player answered alike (the calls are local); each referee judges its own. */
void lab5_rules_check(drv_case *c) {
    const lab5_rule *rc = &LAB5_RULES[c->arg[0]];
    const void *out = drv_slot_host(c, "rout");
    switch (rc->kind) {
    case LAB5_R_CUTS: check_cuts(c, out); break;
    case LAB5_R_LAYER: check_layer(c, rc, out); break;
    case LAB5_R_ROW: check_rows(c, rc, out); break;
    case LAB5_R_TENSOR: check_tensor(c, rc, out); break;
    }
}
