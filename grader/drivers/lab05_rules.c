/* lab05_rules.c - the split rules as the driver states them, written apart from any
 * solution (and in other words: counts where a solution would search), what each rank must
 * hold and send under them, and the rules.* cases that put the student's ls_cuts,
 * ls_layer_owner, ls_row_range and ls_tensor_split against them on fixed examples
 * (SmolLM2's worked examples among them) without running the model.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab05.h"

/* ================================================================================== */
/* The rules                                                                          */
/* ================================================================================== */

bool rl_parse(const char *list, float *p, int *n_props) {
    *n_props = 0;
    if (!list || !*list) return true;
    for (const char *s = list; *s;) {
        char *end = NULL;
        double v = strtod(s, &end);
        if (end == s || *n_props == LS_MAX_RANKS || (*end && *end != ',')) return false;
        p[(*n_props)++] = (float)v;
        s = *end ? end + 1 : end;
    }
    return true;
}

/* The same float operations in the same order as the rule, so the same bits. */
void rl_cuts(const float *p, int n_props, int n, float *cuts) {
    float prefix[LS_MAX_RANKS + 1] = {0};
    bool any = false;
    for (int r = 0; r < n_props; r++) any |= p[r] != 0.0f;
    for (int r = 0; r < n; r++) prefix[r + 1] = prefix[r] + (!any ? 1.0f : r < n_props ? p[r] : 0.0f);
    for (int r = 0; r <= n; r++) cuts[r] = prefix[r] / prefix[n];
}

/* upper_bound over a sorted range = how many of its elements are <= x. */
int rl_owner(const float *cuts, int n, int n_layer, int slot) {
    float x = (float)slot / (float)(n_layer + 1);
    int below = 0;
    for (int r = 1; r <= n; r++) below += cuts[r] <= x;
    return below < n ? below : n - 1;
}

void rl_rows(const float *cuts, int n, int r, int64_t nrows, int64_t *a, int64_t *b) {
    *a = r > 0 ? (int64_t)((float)nrows * cuts[r]) / LS_ROW_ROUNDING * LS_ROW_ROUNDING : 0;
    *b = r < n - 1 ? (int64_t)((float)nrows * cuts[r + 1]) / LS_ROW_ROUNDING * LS_ROW_ROUNDING : nrows;
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

int rl_output_rank(ls_mode mode, const float *cuts) {
    return mode == LS_LAYER ? rl_owner(cuts, g_n, g_cfg.n_layer, g_cfg.n_layer) : 0;
}

/* KV heads that query heads [h0, h0 + nh) read. */
static int kv_heads_of(const llm_config *c, int h0, int nh) {
    int g = c->n_head / c->n_head_kv;
    return (h0 + nh - 1) / g - h0 / g + 1;
}

double rl_kv_bytes_per_pos(ls_mode mode, const float *cuts, int r, int n_seq) {
    const llm_config *c = &g_cfg;
    double heads = 0; /* summed over the layers the rank holds */
    int h0, nh, f0, nf;
    if (mode == LS_LAYER) {
        for (int l = 0; l < c->n_layer; l++) heads += rl_owner(cuts, g_n, c->n_layer, l) == r ? c->n_head_kv : 0;
    } else if (mode == LS_ROW) {
        heads = r == 0 ? (double)c->n_layer * c->n_head_kv : 0;
    } else {
        heads = g_n == 1 ? c->n_head_kv : rl_heads(c, g_n, r, &h0, &nh, &f0, &nf) ? kv_heads_of(c, h0, nh) : 0;
        heads *= c->n_layer;
    }
    return 2.0 * sizeof(float) * n_seq * heads * c->head_dim;
}

double rl_block_bytes(llm_tensor which, int layer, int64_t nrows, int64_t col0, int64_t ncols) {
    int type = kit_type(which, layer);
    if (type != LLM_F32 && (col0 % LLM_QK || ncols % LLM_QK)) type = LLM_F32; /* a cut inside a block */
    return (double)llm_mat_bytes(type, nrows, ncols);
}

/* Every tensor of layer l whole. */
static double whole_layer(int l) {
    double b = 0;
    for (int t = 0; t < LLM_N_LAYER_TENSORS; t++) {
        int64_t rows, cols;
        llm_tensor_shape(&g_cfg, (llm_tensor)t, &rows, &cols);
        b += rl_block_bytes((llm_tensor)t, l, rows, 0, cols);
    }
    return b;
}

double rl_weight_bytes(ls_mode mode, const float *cuts, int r) {
    const llm_config *c = &g_cfg;
    int64_t C = c->n_embd, V = c->n_vocab, hd = c->head_dim;
    int L = c->n_layer;
    double w = 0, norm = 4.0 * (double)C;
    double embd = rl_block_bytes(LLM_TOKEN_EMBD, -1, V, 0, C);
    if (mode == LS_LAYER) {
        int out = rl_owner(cuts, g_n, L, L);
        for (int l = 0; l < L; l++) w += rl_owner(cuts, g_n, L, l) == r ? whole_layer(l) : 0;
        w += r == 0 ? embd : 0;
        w += out == r ? norm + (c->tied_output && r == 0 ? 0 : rl_block_bytes(LLM_OUTPUT, -1, V, 0, C)) : 0;
    } else if (mode == LS_ROW) {
        static const llm_tensor mats[7] = {LLM_WQ, LLM_WK, LLM_WV, LLM_WO, LLM_W_GATE, LLM_W_UP, LLM_W_DOWN};
        for (int l = 0; l < L; l++)
            for (int i = 0; i < 7; i++) {
                int64_t rows, cols, a, b;
                llm_tensor_shape(c, mats[i], &rows, &cols);
                rl_rows(cuts, g_n, r, rows, &a, &b);
                w += rl_block_bytes(mats[i], l, b - a, 0, cols);
            }
        int64_t a, b;
        rl_rows(cuts, g_n, r, V, &a, &b);
        w += c->tied_output && r == 0 ? 0 : rl_block_bytes(LLM_OUTPUT, -1, b - a, 0, C); /* rank 0: its embedding */
        w += r == 0 ? L * 2 * norm + norm + embd : 0;
    } else {
        int h0 = 0, nh = c->n_head, f0 = 0, nf = c->n_ff;
        if (g_n > 1 && !rl_heads(c, g_n, r, &h0, &nh, &f0, &nf)) return 0;
        int64_t nkv = kv_heads_of(c, h0, nh);
        for (int l = 0; l < L; l++)
            w += 2 * norm + rl_block_bytes(LLM_WQ, l, nh * hd, 0, C) + rl_block_bytes(LLM_WK, l, nkv * hd, 0, C) +
                 rl_block_bytes(LLM_WV, l, nkv * hd, 0, C) + rl_block_bytes(LLM_WO, l, C, h0 * hd, nh * hd) +
                 rl_block_bytes(LLM_W_GATE, l, nf, 0, C) + rl_block_bytes(LLM_W_UP, l, nf, 0, C) +
                 rl_block_bytes(LLM_W_DOWN, l, C, f0, nf);
        w += embd + (r == 0 ? norm + (c->tied_output ? 0 : rl_block_bytes(LLM_OUTPUT, -1, V, 0, C)) : 0);
    }
    return w;
}

void rl_expect_traffic(ls_mode mode, const float *cuts, int r, int n_tok, int n_seqs, int n_out, rl_traffic *t) {
    const llm_config *c = &g_cfg;
    int L = c->n_layer;
    double C = c->n_embd, Q = (double)c->n_head * c->head_dim, F = c->n_ff;
    memset(t, 0, sizeof *t);
    if (mode == LS_LAYER) {
        int sends = 0, micro = g_micro < n_seqs ? g_micro : n_seqs;
        for (int s = 0, prev = 0; s <= L; s++) { /* embedding on rank 0, then slots 0 .. L */
            int o = rl_owner(cuts, g_n, L, s);
            sends += o != prev && prev == r;
            prev = o;
        }
        t->p2p_bytes = 4.0 * sends * n_tok * C;
        t->p2p_msgs = (double)sends * micro;
    } else if (mode == LS_ROW) {
        static const llm_tensor mats[7] = {LLM_WQ, LLM_WK, LLM_WV, LLM_WO, LLM_W_GATE, LLM_W_UP, LLM_W_DOWN};
        t->colls[PL_OP_BROADCAST] = 7 * L + 1;
        t->coll_bytes = 4.0 * ((double)L * n_tok * (5 * C + Q + F) + (double)n_out * C);
        for (int i = 0; i < 8 && r > 0; i++) {
            int64_t rows, cols, a, b;
            llm_tensor_shape(c, i < 7 ? mats[i] : LLM_OUTPUT, &rows, &cols);
            rl_rows(cuts, g_n, r, rows, &a, &b);
            double times = i < 7 ? L : 1, tokens = i < 7 ? n_tok : n_out;
            t->p2p_bytes += 4.0 * times * tokens * (double)(b - a);
            t->p2p_msgs += b > a ? times : 0;
        }
    } else {
        t->colls[PL_OP_ALLREDUCE] = 2 * L;
        t->coll_bytes = 4.0 * 2 * L * n_tok * C;
    }
}

void rl_describe_layers(const float *cuts, int n, int n_layer, char *out, size_t cap) {
    int count[LS_MAX_RANKS] = {0}, len = 0;
    for (int l = 0; l < n_layer; l++) count[rl_owner(cuts, n, n_layer, l)]++;
    for (int r = 0; r < n && len < (int)cap; r++)
        len += snprintf(out + len, cap - (size_t)len, "%s%d", r ? "/" : "", count[r]);
    if (len < (int)cap)
        snprintf(out + len, cap - (size_t)len, " layers, output on rank %d", rl_owner(cuts, n, n_layer, n_layer));
}

/* ================================================================================== */
/* The rules.* cases                                                                  */
/* ================================================================================== */

typedef enum { R_CUTS, R_LAYER, R_ROW, R_TENSOR } rule_kind;
typedef struct {
    rule_kind kind;
    const char *name;   /* the case name after "rules."                           */
    int a;              /* layer: n_layer; row: nrows; tensor: heads              */
    const char *split;  /* proportions; "n8": 8 ranks, equal                      */
    int kv, ff;         /* tensor: KV heads, FFN features                          */
} rule_case;

static const rule_case RULES[] = {
    {R_CUTS, "cuts", 0, NULL, 0, 0},
    /* SmolLM2's worked examples (30 layers + the output slot), then the corners */
    {R_LAYER, "layer.L30.ts1,1", 30, "1,1", 0, 0},
    {R_LAYER, "layer.L30.ts3,1", 30, "3,1", 0, 0},
    {R_LAYER, "layer.L30.ts1,1,1", 30, "1,1,1", 0, 0},
    {R_LAYER, "layer.L30.ts30,1", 30, "30,1", 0, 0},  /* the last rank holds only the output */
    {R_LAYER, "layer.L30.ts1,0,1", 30, "1,0,1", 0, 0}, /* a rank with nothing */
    {R_LAYER, "layer.L30.ts6,2", 30, "6,2", 0, 0},    /* 3,1 once normalised */
    {R_LAYER, "layer.L30.ts1,1,0", 30, "1,1,0", 0, 0}, /* the output is not on the last rank */
    {R_LAYER, "layer.L6.n8", 6, "n8", 0, 0},
    {R_ROW, "row.576.ts1,1", 576, "1,1", 0, 0},       /* 256 / 320 */
    {R_ROW, "row.192.ts1,1", 192, "1,1", 0, 0},       /* 0 / 192 */
    {R_ROW, "row.1536.ts1,1,1", 1536, "1,1,1", 0, 0},
    {R_ROW, "row.49152.ts3,1", 49152, "3,1", 0, 0},
    {R_ROW, "row.576.ts1,1,1,1", 576, "1,1,1,1", 0, 0},
    {R_ROW, "row.288.ts2,1,1,0", 288, "2,1,1,0", 0, 0}, /* the last rank keeps what rounding leaves */
    {R_ROW, "row.96.ts2,6", 96, "2,6", 0, 0},
    {R_TENSOR, "tensor.H9K3F1536", 9, NULL, 3, 1536}, /* SmolLM2 */
    {R_TENSOR, "tensor.H8K2F128", 8, NULL, 2, 128},
    {R_TENSOR, "tensor.H6K6F96", 6, NULL, 6, 96},     /* plain multi-head attention */
};
#define NRULES (int)(sizeof RULES / sizeof RULES[0])

void plan_rules(const drv_test *t, drv_plan *p) {
    for (int i = 0; i < NRULES; i++) drv_plan_add(p, t, "rules.%s", RULES[i].name)->arg[0] = i;
}

static int split_of(const rule_case *rc, float *p, int *n_props) {
    if (rc->split && rc->split[0] == 'n') {
        *n_props = 0;
        return atoi(rc->split + 1);
    }
    PL_CHECK(rl_parse(rc->split, p, n_props), "a malformed split in the rules table");
    return *n_props;
}

static void check_cuts(drv_case *c) {
    static const char *good[] = {"3,1", "1,1,1", "2,0,2", "0,0", "1", "0.1,0.2,0.3,0.4", "7"};
    static const int ranks[] = {2, 3, 3, 2, 3, 4, 1};
    for (int i = 0; i < 7 && !drv_failed(c); i++) {
        float p[LS_MAX_RANKS], got[LS_MAX_RANKS + 1], want[LS_MAX_RANKS + 1];
        int np;
        rl_parse(good[i], p, &np);
        rl_cuts(p, np, ranks[i], want);
        int rc = ls_cuts(p, np, ranks[i], got);
        for (int r = 0; rc == LS_OK && r <= ranks[i] && !drv_failed(c); r++)
            if (memcmp(&got[r], &want[r], sizeof(float)))
                drv_fail(c, "ls_cuts(%s over %d ranks): cuts[%d] = %.9g, expected %.9g", good[i], ranks[i], r, got[r], want[r]);
        if (rc != LS_OK) drv_fail(c, "ls_cuts(%s over %d ranks) returned %d, expected LS_OK", good[i], ranks[i], rc);
    }
    float bad[][2] = {{-1, 1}, {NAN, 1}, {INFINITY, 1}, {1, -0.5f}};
    for (int i = 0; i < 4 && !drv_failed(c); i++) {
        float cuts[LS_MAX_RANKS + 1];
        int rc = ls_cuts(bad[i], 2, 2, cuts);
        if (rc != LS_ERR_SPLIT) drv_fail(c, "ls_cuts(%g,%g) returned %d, expected LS_ERR_SPLIT", bad[i][0], bad[i][1], rc);
    }
    float one[3] = {1, 1, 1}, cuts[LS_MAX_RANKS + 2];
    if (!drv_failed(c) && ls_cuts(one, 3, 2, cuts) != LS_ERR_SPLIT)
        drv_fail(c, "ls_cuts: 3 proportions for 2 ranks accepted, expected LS_ERR_SPLIT");
    bool bad_n = ls_cuts(NULL, 0, 0, cuts) != LS_ERR_SPLIT || ls_cuts(NULL, 0, LS_MAX_RANKS + 1, cuts) != LS_ERR_SPLIT;
    if (!drv_failed(c) && bad_n)
        drv_fail(c, "ls_cuts: 0 or %d ranks accepted, expected LS_ERR_SPLIT", LS_MAX_RANKS + 1);
}

/* The case's split cut by the independent rules (cuts) and by the student's ls_cuts (mine);
 * the rank count, or -1 (the case failed) when ls_cuts refuses it. */
static int both_cuts(drv_case *c, const rule_case *rc, float *cuts, float *mine) {
    float p[LS_MAX_RANKS];
    int np, n = split_of(rc, p, &np);
    rl_cuts(p, np, n, cuts);
    if (ls_cuts(p, np, n, mine) == LS_OK) return n;
    drv_fail(c, "ls_cuts(%s) refused a valid split", rc->split);
    return -1;
}

static void check_layer(drv_case *c, const rule_case *rc) {
    float cuts[LS_MAX_RANKS + 1], mine[LS_MAX_RANKS + 1];
    int n = both_cuts(c, rc, cuts, mine);
    if (n < 0) return;
    for (int s = 0; s <= rc->a; s++) {
        int got = ls_layer_owner(mine, n, rc->a, s), want = rl_owner(cuts, n, rc->a, s);
        if (got == want) continue;
        char exp[160];
        rl_describe_layers(cuts, n, rc->a, exp, sizeof exp);
        drv_fail(c, "%d layers at --tensor-split %s: slot %d (%s) on rank %d, expected %d (%s)", rc->a, rc->split, s,
                 s == rc->a ? "the output" : "a layer", got, want, exp);
        return;
    }
}

static void check_rows(drv_case *c, const rule_case *rc) {
    float cuts[LS_MAX_RANKS + 1], mine[LS_MAX_RANKS + 1];
    int n = both_cuts(c, rc, cuts, mine);
    if (n < 0) return;
    for (int r = 0; r < n; r++) {
        int64_t a, b, ga = -1, gb = -1;
        rl_rows(cuts, n, r, rc->a, &a, &b);
        ls_row_range(mine, n, r, rc->a, &ga, &gb);
        if (ga != a || gb != b) {
            drv_fail(c, "%d rows at --tensor-split %s: rank %d owns [%lld, %lld), expected [%lld, %lld) (bounds but the "
                     "last rounded down to multiples of %d)", rc->a, rc->split, r, (long long)ga, (long long)gb,
                     (long long)a, (long long)b, LS_ROW_ROUNDING);
            return;
        }
    }
}

static void check_tensor(drv_case *c, const rule_case *rc) {
    llm_config cfg = {.n_layer = 1, .n_embd = 64, .n_ff = rc->ff, .n_head = rc->a, .n_head_kv = rc->kv,
                      .head_dim = 8, .n_vocab = 32, .n_ctx = 8, .rope_base = 1e4f, .rms_eps = 1e-5f};
    for (int n = 1; n <= rc->a + 1; n++)
        for (int r = 0; r < n; r++) {
            int h0, nh, f0, nf;
            bool ok = rl_heads(&cfg, n, r, &h0, &nh, &f0, &nf);
            llm_split sp;
            memset(&sp, 0xff, sizeof sp);
            int rc2 = ls_tensor_split(&cfg, n, r, &sp);
            if (!ok && rc2 != LS_ERR_SPLIT) {
                drv_fail(c, "%d heads over %d ranks: ls_tensor_split returned %d, expected LS_ERR_SPLIT (a rank would get "
                         "no head)", rc->a, n, rc2);
                return;
            }
            if (ok && (rc2 != LS_OK || sp.head0 != h0 || sp.n_head != nh || sp.ff0 != f0 || sp.n_ff != nf)) {
                drv_fail(c, "%d heads (%d KV), F %d over %d ranks: rank %d got %s heads %d+%d, FFN %d+%d; expected heads "
                         "%d+%d, FFN %d+%d", rc->a, rc->kv, rc->ff, n, r, rc2 == LS_OK ? "" : "an error,", sp.head0,
                         sp.n_head, sp.ff0, sp.n_ff, h0, nh, f0, nf);
                return;
            }
        }
}

void rules_run(drv_case *c) {
    const rule_case *rc = &RULES[c->arg[0]];
    switch (rc->kind) {
    case R_CUTS: check_cuts(c); break;
    case R_LAYER: check_layer(c, rc); break;
    case R_ROW: check_rows(c, rc); break;
    case R_TENSOR: check_tensor(c, rc); break;
    }
}
