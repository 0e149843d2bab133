/* lab05.c - the driver of Lab 5 (llama.cpp-style multi-rank inference of a GGUF llama).
 *
 * The model and ls_load are in lab05_kit.c, the rules and the per-rank expectations in
 * lab05_rules.c, the scenario and its single-device reference in lab05_scenario.c, the runs
 * of the student's splits and the checks in lab05_session.c, the chat and sweep modes in
 * lab05_modes.c. Cases (never trusting what student code prints or returns beyond its
 * logits):
 *   rules.*            ls_cuts, ls_layer_owner, ls_row_range, ls_tensor_split against the
 *                      driver's statement of llama.cpp's rules (SmolLM2's worked examples)
 *   M.prefill          the prompt's logits at every position vs the single-device forward
 *   M.generate         greedy decoding: the same tokens, the same logits; tokens/s
 *   M.batch            sequences of different lengths in one batch, then decode steps
 *   M.traffic          counted bytes, messages and collectives of the prompt and of a
 *                      decode step, on every rank, against the mode's formula
 *   M.kvcache          KV-cache bytes per rank: the layers / KV heads it owns
 *   M.weights          weight bytes per rank: its share of the split, in the stored types
 *   M.errors           an invalid batch and invalid proportions refused by every rank
 *   M.split            an uneven --tensor-split (layer and row): logits, traffic, weights
 * with M = layer, row, tensor. One run per mode serves its cases (the uneven split and the
 * invalid inputs have runs of their own).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab05.h"

const char *g_model = "smollm2", *g_gguf, *g_prompt = "The capital of France is", *g_split = "";
int g_gen = 6, g_batch = 4, g_decode = 2, g_micro = 4, g_tokens = 32, g_prompt_len = 8;
int g_n, g_me;
pl_comm *g_comm;
const char *MODE_NAME[3] = {"layer", "row", "tensor"};
bool g_keep_file;
static bool g_light;     /* --run, --list, --modes, --help: no graded scenario to prepare */
static bool g_list_only; /* --list: not even a model */

/* ---- the per-mode cases --------------------------------------------------------------------- */

static const struct {
    const char *name;
    void (*check)(drv_case *c);
    int session; /* S_MAIN, S_UNEVEN (layer and row only), S_ERRORS */
} CHECKS[] = {
    {"prefill", check_prefill, S_MAIN}, {"generate", check_generate, S_MAIN}, {"batch", check_batch, S_MAIN},
    {"traffic", check_traffic, S_MAIN}, {"kvcache", check_kvcache, S_MAIN},   {"weights", check_weights, S_MAIN},
    {"errors", check_errors, S_ERRORS}, {"split", check_split, S_UNEVEN},
};
#define NCHECKS (int)(sizeof CHECKS / sizeof CHECKS[0])

/* arg[0] = mode, arg[1] = its session, arg[2] = which check; grouped by mode, so a mode
 * that hangs costs only its own cases. */
static void plan_modes(const drv_test *t, drv_plan *p) {
    for (int m = LS_LAYER; m <= LS_TENSOR; m++)
        for (int k = 0; k < NCHECKS; k++) {
            if (CHECKS[k].session == S_UNEVEN && m == LS_TENSOR) continue; /* tensor shards are even */
            drv_instance *in = drv_plan_add(p, t, "%s.%s", MODE_NAME[m], CHECKS[k].name);
            snprintf(in->group, sizeof in->group, "%s", MODE_NAME[m]);
            in->arg[0] = m, in->arg[1] = CHECKS[k].session, in->arg[2] = k;
        }
}

static void mode_check(drv_case *c) { CHECKS[c->arg[2]].check(c); }

static const drv_test TESTS[] = {
    {"rules", "rules", plan_rules, NULL, NULL, rules_run, NULL, NULL, NULL, NULL},
    {"modes", NULL, plan_modes, NULL, session_run, mode_check, NULL, NULL, NULL, NULL},
    {NULL},
};

/* ---- the lab ----------------------------------------------------------------------------------- */

static void lab5_init(void) {
    g_comm = pl_comm_world();
    g_n = pl_comm_size(g_comm);
    g_me = pl_comm_rank(g_comm);
    if (g_n > LS_MAX_RANKS) pl_usage_error("%d ranks: the split takes at most %d", g_n, LS_MAX_RANKS);
    float p[LS_MAX_RANKS];
    int np;
    bool ok = rl_parse(g_split, p, &np) && np <= g_n;
    for (int r = 0; r < np; r++) ok &= p[r] >= 0 && p[r] < 1e30f;
    if (!ok) pl_usage_error("--tensor-split '%s': at most %d proportions, finite and >= 0, comma-separated", g_split, g_n);
    if (g_list_only) return; /* the plan needs no model */
    kit_open();
    if (!g_light) scenario_init();
    if (!g_keep_file) kit_forget_path(); /* the bench reads the file again, then removes it */
    drv_print("# lab05: %d rank(s), device %s, %s\n", g_n, pl_device_name(pl_info()->device), g_model_desc);
    if (!g_light)
        drv_print("# scenario: prompt \"%s\", %d greedy tokens, a batch of %d sequences and %d decode steps, %d "
                  "micro-batches at most; tolerance %.0e (%s)\n", g_prompt, g_gen + 1, g_batch, g_decode, g_micro,
                  drv_tolerance(), drv_tolerance_why());
}

static void lab5_finish(void) {
    sessions_free();
    scenario_free();
    kit_close();
}

static const drv_flag FLAGS[] = {
    {"--model", DRV_STR, &g_model, 0, 0,
     "tiny|smollm2: the project's tiny llama, or SmolLM2-135M (default; $GGUF or datasets/cache/)"},
    {"--gguf", DRV_STR, &g_gguf, 0, 0, "FILE: a GGUF llama (wins over --model)"},
    {"--prompt", DRV_STR, &g_prompt, 0, 0, "TEXT: the prompt (default \"The capital of France is\")"},
    {"--gen", DRV_INT, &g_gen, 0, 256, "greedy tokens checked after the prompt (default 6, plus the first)"},
    {"--batch", DRV_INT, &g_batch, 1, 256, "sequences in the graded batch (default 4)"},
    {"--decode", DRV_INT, &g_decode, 1, 64, "decode steps of the batch (default 2)"},
    {"--micro", DRV_INT, &g_micro, 1, 256, "layer split: micro-batches per batch at most (default 4)"},
    {"--tensor-split", DRV_STR, &g_split, 0, 0, "LIST: proportions for --run chat and sweep, e.g. 3,1 (default equal)"},
    {"--tokens", DRV_INT, &g_tokens, 1, 4096, "--run chat: tokens to generate (default 32)"},
    {"--prompt-len", DRV_INT, &g_prompt_len, 1, 512, "--run sweep: prompt tokens per sequence (default 8)"},
    {NULL},
};
static const drv_mode MODES[] = {
    {"chat", "generate from --prompt in each split mode: the text and tokens/s per mode (make lab-5 RUN=chat PROMPT=...)",
     mode_chat, "2", NULL},
    {"sweep", "tokens/s vs batch 1 4 16 64 per mode, prefill and decode, measured and predicted (dgx-h100, pcie-4gpu); "
     "a plot", mode_sweep, "1 2 4", "scripts/plot-lab5-sweep.sh"},
    {"bench", "at 1 rank float32 vs quantised weights and llama.cpp's tokens/s (ratio lines), then the sweep's table "
     "(make bench LAB=5)", mode_bench, "1 2 4", "scripts/bench-lab5.sh"},
    {NULL},
};
static const drv_lab LAB = {
    .name = "05-llama-split",
    .title = "Lab 5: llama.cpp-style inference over n ranks (layer, row and tensor split)",
    .flags = FLAGS,
    .tests = TESTS,
    .modes = MODES,
    .init = lab5_init,
    .finish = lab5_finish,
};

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        g_list_only |= !strcmp(argv[i], "--list");
        g_keep_file |= !strcmp(argv[i], "--run") && i + 1 < argc && !strcmp(argv[i + 1], "bench");
        g_light |= g_list_only || !strcmp(argv[i], "--run") || !strcmp(argv[i], "--modes") || !strcmp(argv[i], "-h") ||
                   !strcmp(argv[i], "--help");
    }
    return drv_main(&LAB, argc, argv);
}
