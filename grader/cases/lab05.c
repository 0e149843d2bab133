/* lab05.c - the case table of Lab 5 (llama.cpp-style multi-rank inference of a GGUF llama).
 *
 * The referee (grader/referee/lab05*.c) reads the model file itself, makes the scenario's
 * tokens, computes the single-device reference on float32-dequantised weights, and judges
 * every case; the player (grader/player/lab05*.c) defines the kit the student calls
 * (ls_load, ls_type: its share of the weights, counted) and runs the student's split on the
 * tokens it is given. Cases (never trusting what student code prints or returns beyond its
 * answers and its logits):
 *   rules.*            ls_cuts, ls_layer_owner, ls_row_range, ls_tensor_split against the
 *                      referee's statement of llama.cpp's rules (SmolLM2's worked examples)
 *   M.prefill          the prompt's logits at every position vs the single-device forward
 *   M.generate         greedy decoding: the same tokens, the same logits; then tokens/s of a
 *                      prefill and of a decode step, timed by the referee on fresh tokens
 *   M.batch            sequences of different lengths in one batch, then decode steps
 *   M.traffic          counted bytes, messages and collectives of the prompt and of a decode
 *                      step, on every rank, against the mode's formula [the referees' count on the cpu device]
 *   M.kvcache          KV-cache bytes per rank: the layers / KV heads it owns [the player's
 *                      device-memory accounting]
 *   M.weights          weight bytes per rank: its share, in the stored types [the bytes the
 *                      player's ls_load delivered]
 *   M.errors           an invalid batch and invalid proportions refused by every rank
 *   M.split            an uneven --tensor-split (layer and row): logits, traffic, weights
 * with M = layer, row, tensor. One run per mode serves its cases (the uneven split and the
 * invalid inputs have runs of their own).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab05.h"

const char *const LAB5_MODE_NAME[3] = {"layer", "row", "tensor"};
const char *const LAB5_PHASE[LAB5_PH_DONE + 1] = {"ls_init", "the prompt", "decoding", "the batch",
                                                  "the batch's decode steps", "-"};

static lab5_flags g_flags5 = {.model = "smollm2", .prompt = LAB5_DEFAULT_PROMPT, .split = "", .gen = 6, .batch = 4,
                              .decode = 2, .micro = 4, .tokens = 32, .prompt_len = 8};
const lab5_flags *lab5_opts(void) { return &g_flags5; }

/* ================================================================================== */
/* The split, as both sides state it                                                  */
/* ================================================================================== */

bool lab5_parse_split(const char *list, float *p, int *n_props) {
    *n_props = 0;
    if (!list || !*list) return true;
    for (const char *s = list; *s;) {
        char *end = NULL;
        double v = strtod(s, &end);
        if (end == s || *n_props == LAB5_MAX_RANKS || (*end && *end != ',')) return false;
        p[(*n_props)++] = (float)v;
        s = *end ? end + 1 : end;
    }
    return true;
}

void lab5_cuts(const float *p, int n_props, int n, float *cuts) {
    float prefix[LAB5_MAX_RANKS + 1] = {0};
    bool any = false;
    for (int r = 0; r < n_props; r++) any |= p[r] != 0.0f;
    for (int r = 0; r < n; r++) prefix[r + 1] = prefix[r] + (!any ? 1.0f : r < n_props ? p[r] : 0.0f);
    for (int r = 0; r <= n; r++) cuts[r] = prefix[r] / prefix[n];
}

/* upper_bound over a sorted range = how many of its elements are <= x. */
int lab5_owner(const float *cuts, int n, int n_layer, int slot) {
    float x = (float)slot / (float)(n_layer + 1);
    int below = 0;
    for (int r = 1; r <= n; r++) below += cuts[r] <= x;
    return below < n ? below : n - 1;
}

int lab5_output_rank(int mode, const float *cuts, int n, int n_layer) {
    return mode == LAB5_LAYER ? lab5_owner(cuts, n, n_layer, n_layer) : 0;
}

const char *lab5_uneven_split(int n) {
    static const char *fixed[] = {"", "1", "3,1", "1,0,2", "2,1,1,0"};
    static char more[4 * LAB5_MAX_RANKS];
    if (n <= 4) return fixed[n];
    int len = 0;
    for (int r = 0; r < n; r++) len += snprintf(more + len, sizeof more - (size_t)len, "%s%d", r ? "," : "", 1 + r % 2);
    return more;
}

int lab5_argmax(const float *row, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (row[i] > row[best]) best = i;
    return best;
}

double lab5_prompt_tolerance(const llm_config *cfg, int positions, double base) {
    double k = cfg->n_embd;
    double q = (double)cfg->n_head * cfg->head_dim;
    if (q > k) k = q;
    if (cfg->n_ff > k) k = cfg->n_ff;
    if (positions > k) k = positions;
    double derived = LAB5_PROMPT_MARGIN * sqrt(2.0) * ldexp(1.0, -24) * sqrt(k) * sqrt(2.0 * cfg->n_layer + 1);
    return derived > base ? derived : base;
}

/* ================================================================================== */
/* The rules.* examples                                                               */
/* ================================================================================== */

const lab5_rule LAB5_RULES[] = {
    {LAB5_R_CUTS, "cuts", 0, NULL, 0, 0},
    /* SmolLM2's worked examples (30 layers + the output slot), then the corners */
    {LAB5_R_LAYER, "layer.L30.ts1,1", 30, "1,1", 0, 0},
    {LAB5_R_LAYER, "layer.L30.ts3,1", 30, "3,1", 0, 0},
    {LAB5_R_LAYER, "layer.L30.ts1,1,1", 30, "1,1,1", 0, 0},
    {LAB5_R_LAYER, "layer.L30.ts30,1", 30, "30,1", 0, 0},  /* the last rank holds only the output */
    {LAB5_R_LAYER, "layer.L30.ts1,0,1", 30, "1,0,1", 0, 0}, /* a rank with nothing */
    {LAB5_R_LAYER, "layer.L30.ts6,2", 30, "6,2", 0, 0},    /* 3,1 once normalised */
    {LAB5_R_LAYER, "layer.L30.ts1,1,0", 30, "1,1,0", 0, 0}, /* the output is not on the last rank */
    {LAB5_R_LAYER, "layer.L6.n8", 6, "n8", 0, 0},
    /* 3,2,1: the second cut is 5/6 rounded once (0.833333313, as slot 5 of 6 is), and
     * 0.5 + 2/6 rounded twice (0.833333373) when each proportion is divided first */
    {LAB5_R_LAYER, "layer.L5.ts3,2,1", 5, "3,2,1", 0, 0},
    {LAB5_R_ROW, "row.576.ts1,1", 576, "1,1", 0, 0},       /* 256 / 320 */
    {LAB5_R_ROW, "row.192.ts1,1", 192, "1,1", 0, 0},       /* 0 / 192 */
    {LAB5_R_ROW, "row.1536.ts1,1,1", 1536, "1,1,1", 0, 0},
    {LAB5_R_ROW, "row.49152.ts3,1", 49152, "3,1", 0, 0},
    {LAB5_R_ROW, "row.576.ts1,1,1,1", 576, "1,1,1,1", 0, 0},
    {LAB5_R_ROW, "row.288.ts2,1,1,0", 288, "2,1,1,0", 0, 0}, /* the last rank keeps what rounding leaves */
    {LAB5_R_ROW, "row.96.ts2,6", 96, "2,6", 0, 0},
    {LAB5_R_TENSOR, "tensor.H9K3F1536", 9, NULL, 3, 1536}, /* SmolLM2 */
    {LAB5_R_TENSOR, "tensor.H8K2F128", 8, NULL, 2, 128},
    {LAB5_R_TENSOR, "tensor.H6K6F96", 6, NULL, 6, 96},     /* plain multi-head attention */
};
const int LAB5_NRULES = (int)(sizeof LAB5_RULES / sizeof LAB5_RULES[0]);

/* Valid proportions first (each against the rule's cuts), then what must be refused: a
 * negative, NaN or infinite proportion, more proportions than ranks, 0 or 17 ranks. */
const lab5_cuts_call LAB5_CUTS_CALLS[] = {
    {"3,1", {0, 0}, -1, 2, true},   {"1,1,1", {0, 0}, -1, 3, true}, {"2,0,2", {0, 0}, -1, 3, true},
    {"0,0", {0, 0}, -1, 2, true},   {"1", {0, 0}, -1, 3, true},     {"0.1,0.2,0.3,0.4", {0, 0}, -1, 4, true},
    {"7", {0, 0}, -1, 1, true},     {"3,2,1", {0, 0}, -1, 3, true}, {NULL, {-1, 1}, 2, 2, false},   {NULL, {NAN, 1}, 2, 2, false},
    {NULL, {INFINITY, 1}, 2, 2, false}, {NULL, {1, -0.5f}, 2, 2, false}, {"1,1,1", {0, 0}, -1, 2, false},
    {NULL, {0, 0}, 0, 0, false},    {NULL, {0, 0}, 0, LAB5_MAX_RANKS + 1, false},
};
const int LAB5_NCUTS_CALLS = (int)(sizeof LAB5_CUTS_CALLS / sizeof LAB5_CUTS_CALLS[0]);

int lab5_rule_split(const lab5_rule *rc, float *p, int *n_props) {
    if (rc->split && rc->split[0] == 'n') {
        *n_props = 0;
        return atoi(rc->split + 1);
    }
    PL_CHECK(lab5_parse_split(rc->split, p, n_props), "a malformed split in the rules table");
    return *n_props;
}

llm_config lab5_rule_config(const lab5_rule *rc) {
    return (llm_config){.n_layer = 1, .n_embd = 64, .n_ff = rc->ff, .n_head = rc->a, .n_head_kv = rc->kv,
                        .head_dim = 8, .n_vocab = 32, .n_ctx = 8, .rope_base = 1e4f, .rms_eps = 1e-5f};
}

size_t lab5_rule_out_bytes(const lab5_rule *rc) {
    float p[LAB5_MAX_RANKS];
    int np;
    switch (rc->kind) {
    case LAB5_R_CUTS: return (size_t)LAB5_NCUTS_CALLS * sizeof(lab5_cuts_out);
    case LAB5_R_LAYER: return sizeof(lab5_cuts_out) + (size_t)(rc->a + 1) * sizeof(int32_t);
    case LAB5_R_ROW: return sizeof(lab5_cuts_out) + (size_t)lab5_rule_split(rc, p, &np) * 2 * sizeof(int64_t);
    case LAB5_R_TENSOR: return (size_t)(rc->a + 1) * (size_t)(rc->a + 2) / 2 * sizeof(lab5_tensor_out);
    }
    return 0;
}

/* ================================================================================== */
/* Slot layouts                                                                       */
/* ================================================================================== */

int32_t lab5_session_n_ints(int P, int K, int B, int D, int bn) { return P + (K + 1) + 3 * bn + B + D * B; }

lab5_session_ints lab5_session_arrays(const lab5_session_in *in) {
    const int32_t *v = (const int32_t *)(in + 1);
    lab5_session_ints a;
    a.prompt = v;
    a.gen = a.prompt + in->P;
    a.btok = a.gen + in->K + 1;
    a.bseq = a.btok + in->bn;
    a.bpos = a.bseq + in->bn;
    a.blen = a.bpos + in->bn;
    a.dtok = a.blen + in->B;
    return a;
}

int64_t lab5_row_gen(const lab5_session_in *in, int k) { return (int64_t)in->P + k; }
int64_t lab5_row_batch(const lab5_session_in *in) { return (int64_t)in->P + in->K; }
int64_t lab5_row_decode(const lab5_session_in *in, int d) { return lab5_row_batch(in) + in->bn + (int64_t)d * in->B; }

int64_t lab5_logits_rows(const lab5_session_in *in) {
    switch (in->kind) {
    case LAB5_S_MAIN: return lab5_row_decode(in, in->D);
    case LAB5_S_UNEVEN: return in->P;
    default: return 1;
    }
}

size_t lab5_timed_in_bytes(int cap) { return sizeof(lab5_timed_in) + 3 * (size_t)cap * sizeof(int32_t); }
int32_t *lab5_timed_ints(lab5_timed_in *in) { return (int32_t *)(in + 1); }

/* ================================================================================== */
/* The table                                                                          */
/* ================================================================================== */

static void plan_rules(const drv_test *t, drv_plan *p) {
    for (int i = 0; i < LAB5_NRULES; i++) drv_plan_add(p, t, "rules.%s", LAB5_RULES[i].name)->arg[0] = i;
}

static const struct {
    const char *name;
    int session; /* LAB5_S_MAIN, LAB5_S_UNEVEN (layer and row only), LAB5_S_ERRORS */
} CHECKS[LAB5_NCHECKS] = {
    {"prefill", LAB5_S_MAIN}, {"generate", LAB5_S_MAIN}, {"batch", LAB5_S_MAIN},   {"traffic", LAB5_S_MAIN},
    {"kvcache", LAB5_S_MAIN}, {"weights", LAB5_S_MAIN},  {"errors", LAB5_S_ERRORS}, {"split", LAB5_S_UNEVEN},
};

/* arg[0] = mode, arg[1] = its session, arg[2] = which check; grouped by mode, so a mode
 * that hangs costs only its own cases. */
static void plan_modes(const drv_test *t, drv_plan *p) {
    for (int m = LAB5_LAYER; m <= LAB5_TENSOR; m++)
        for (int k = 0; k < LAB5_NCHECKS; k++) {
            if (CHECKS[k].session == LAB5_S_UNEVEN && m == LAB5_TENSOR) continue; /* tensor shards are even */
            drv_instance *in = drv_plan_add(p, t, "%s.%s", LAB5_MODE_NAME[m], CHECKS[k].name);
            snprintf(in->group, sizeof in->group, "%s", LAB5_MODE_NAME[m]);
            in->arg[0] = m, in->arg[1] = CHECKS[k].session, in->arg[2] = k;
        }
}

static const drv_test TESTS[] = {
    {.name = "rules", .group = "rules", .plan = plan_rules, .setup = DRV_R(lab5_rules_setup),
     .check = DRV_R(lab5_rules_check), .model = DRV_R(lab5_leak_model), .play = DRV_P(lab5_play_rules)},
    {.name = "modes", .plan = plan_modes, .setup = DRV_R(lab5_modes_setup), .check = DRV_R(lab5_modes_check),
     .model = DRV_R(lab5_leak_model), .perf = DRV_R(lab5_modes_perf), .refresh = DRV_R(lab5_modes_refresh), .verify = DRV_R(lab5_modes_verify),
     .teardown = DRV_R(lab5_modes_teardown), .play = DRV_P(lab5_play_modes), .timed = DRV_P(lab5_timed),
     .release = DRV_P(lab5_release)},
    {NULL},
};

static const drv_flag FLAGS[] = {
    {"--model", DRV_STR, &g_flags5.model, 0, 0,
     "tiny|smollm2: the project's tiny llama, or SmolLM2-135M (default; $GGUF or datasets/cache/)"},
    {"--gguf", DRV_STR, &g_flags5.gguf, 0, 0, "FILE: a GGUF llama (wins over --model)"},
    {"--prompt", DRV_STR, &g_flags5.prompt, 0, 0,
     "TEXT: the prompt (default \"" LAB5_DEFAULT_PROMPT "\"; another is checked within a bound derived from its "
     "length)"},
    {"--gen", DRV_INT, &g_flags5.gen, 0, 256, "greedy tokens checked after the prompt (default 6, plus the first)"},
    {"--batch", DRV_INT, &g_flags5.batch, 1, 256, "sequences in the graded batch (default 4)"},
    {"--decode", DRV_INT, &g_flags5.decode, 1, 64, "decode steps of the batch (default 2)"},
    {"--micro", DRV_INT, &g_flags5.micro, 1, 256, "layer split: micro-batches per batch at most (default 4)"},
    {"--tensor-split", DRV_STR, &g_flags5.split, 0, 0, "LIST: proportions for --run chat and sweep, e.g. 3,1 (default equal)"},
    {"--tokens", DRV_INT, &g_flags5.tokens, 1, 4096, "--run chat: tokens to generate (default 32)"},
    {"--prompt-len", DRV_INT, &g_flags5.prompt_len, 1, 512, "--run sweep: prompt tokens per sequence (default 8)"},
    {NULL},
};

static const drv_mode MODES[] = {
    {"chat", "generate from --prompt in each split mode: the text, tokens/s and the prompt's logits against the "
     "single-device forward per mode (make lab-5 RUN=chat PROMPT=...)", DRV_P(lab5_mode_chat), "2", NULL},
    {"sweep", "tokens/s vs batch 1 4 16 64 per mode, prefill and decode, measured and predicted (dgx-h100, pcie-4gpu); "
     "a plot", DRV_P(lab5_mode_sweep), "1 2 4", "scripts/plot-lab5-sweep.sh"},
    {"bench", "at 1 rank float32 vs quantised weights and llama.cpp's tokens/s (ratio lines), then the sweep's table "
     "(make bench LAB=5)", DRV_P(lab5_mode_bench), "1 2 4", "scripts/bench-lab5.sh"},
    {NULL},
};

static const drv_lab LAB = {
    .name = "05-llama-split",
    .title = "Lab 5: llama.cpp-style inference over n ranks (layer, row and tensor split)",
    .flags = FLAGS,
    .tests = TESTS,
    .modes = MODES,
    .init = DRV_R(lab5_init),
    .player_init = DRV_P(lab5_player_init),
    .finish = DRV_R(lab5_finish),
};

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) g_flags5.list_only |= !strcmp(argv[i], "--list");
    return drv_main(&LAB, argc, argv);
}
