/* lab04.c - the case table of Lab 4 (pipeline parallelism).
 *
 *   schedule.<s>   every stage's list for p = 1..8, m in {1, p-1, p, 2p, 4p+1}, v in
 *                  {1, 2, 3} (interleaved): the rules (every action once, B after its F, W
 *                  after its B, the warm-up length, no stage waiting forever) and then
 *                  action by action against the referee's own generator
 *   clock.<s>      the same lists on the logical clock (F = 1, B = 2 ticks; zero bubble
 *                  F = B = W = 1): makespan and idle ticks of every stage, and the peak of
 *                  stashed micro-batches per stage, against the closed forms; bubble_ratio
 *   errors.config, errors.schedule   bad input: the codes of pp_config_check and of the
 *                  generators, nothing written past the arrays (each its own slot)
 *   errors.plan    plans that cannot run: PP_ERR_PLAN on every rank, nothing sent
 *                  [messages: the player's counters]; broken on stage 0, on the last stage,
 *                  on stage 0 where only the lists' own check sees it (no other stage waits
 *                  for stage 0's backward), and (p >= 2) every list right on its own but the
 *                  whole unable to run (stage 0 runs each B right after its F, the last stage
 *                  takes the micro-batches in reverse)
 *   step.<s>       one training step at p = the world size, from the gradient buffers a
 *                  previous step left (-lr g: pp_execute zeroes them first): loss, every
 *                  gradient this stage holds and its parameters after the SGD step against
 *                  the whole model run serially on the global batch (the referee's
 *                  float64-accumulating host model, models/gpt_host.h)
 *   traffic.<s>    point-to-point bytes and messages of every rank: m activations and m
 *                  gradients per boundary between virtual stages; only to neighbours; no
 *                  collective [the player's counters and trace]
 *   memory.<s>     peak of pl_mem_in_use during the step: the schedule's stash bound plus
 *                  --slack exchange buffers of [N, C] [the player's memory accounting]
 *   order.<s>      the executed order (the model's regions in the trace) is the plan's;
 *                  the bubble: theory, logical clock, measured from the trace, predicted
 *                  by the cost model (dgx-h100, pcie-4gpu) [the player's trace]
 *   recompute.<s>  the same step with recomputation: results, the smaller stash, one
 *                  forward rebuild per block and backward pass (two with B and W apart)
 *                  [stash and rebuild count: the player's accounting]
 * Every real run gets its own inputs: the weights of this rank's stage only (and what a
 * previous step left in its gradient buffers), the tokens on the first stage only, the
 * targets on the last only, and the referee's plan. Every case that runs pp_execute also
 * checks that the step left no device memory allocated [the player's accounting].
 */
#include <stdio.h>
#include <string.h>

#include "lab04.h"

const char *const LAB4_SCHED[L4_NSCHED] = {"gpipe", "1f1b", "interleaved", "zbh1"};

static lab4_flags g_flags4 = {.T = 8, .b = 2, .C = 32, .H = 4, .F = 64, .V = 64, .L = 16, .v = 2, .slack = 8,
                              .lr = 0.1, .profile = "dgx-h100", .steps = 400, .train_micro = 0, .train_lr = 0.5};
const lab4_flags *lab4_opts(void) { return &g_flags4; }

gpt_config lab4_model(int batch) {
    const lab4_flags *o = &g_flags4;
    return (gpt_config){.seq = o->T, .batch = batch, .hidden = o->C, .heads = o->H, .ffn = o->F, .vocab = o->V,
                        .max_pos = o->T};
}

void lab4_run_shape(int k, int p, int *m, int *v) {
    *v = 1;
    *m = 2 * p + 1;
    if (k == L4_INTERLEAVED) {
        *m = 2 * p;
        *v = g_flags4.v * p <= g_flags4.L ? g_flags4.v : g_flags4.L / p;
    }
}

/* ---- pipeline.h's facts ---- */

const char *lab4_error_string(int rc) {
    switch (rc) {
    case L4_OK: return "ok";
    case L4_ERR_STAGES: return "bad number of stages (p < 1, p > layers) or stage out of range";
    case L4_ERR_MICRO: return "fewer than one micro-batch";
    case L4_ERR_DIVIDE: return "interleaved: micro-batches not a multiple of the stages";
    case L4_ERR_CHUNKS: return "bad number of chunks (v < 1, v * p > layers, or v > 1 without interleaving)";
    case L4_ERR_CAPACITY: return "output array too small";
    case L4_ERR_PLAN: return "the plan is not a runnable schedule";
    case L4_ERR_TODO: return "not implemented yet";
    default: return rc > 0 ? "a count, not an error" : "unknown error";
    }
}

int lab4_schedule_length(int k, int m, int v) { return k == L4_ZBH1 ? 3 * m : k == L4_INTERLEAVED ? 2 * m * v : 2 * m; }

int lab4_layers(int p, int v, int L, int stage, int chunk, int *first) {
    int V = v * p, j = chunk * p + stage;
    int base = L / V, extra = L % V;
    *first = j * base + (j < extra ? j : extra);
    return base + (j < extra ? 1 : 0);
}

/* ---- the schedule cases' shapes and slots ---- */

int lab4_shapes(int k, lab4_shape *out) {
    int n = 0;
    for (int p = 1; p <= 8; p++) {
        int ms[5] = {1, p - 1, p, 2 * p, 4 * p + 1};
        for (int i = 0; i < 5; i++) {
            bool dup = ms[i] < 1;
            for (int j = 0; j < i; j++) dup |= ms[j] == ms[i];
            if (dup) continue;
            for (int v = 1; v <= (k == L4_INTERLEAVED ? 3 : 1); v++) out[n++] = (lab4_shape){p, ms[i], v};
        }
    }
    return n;
}

static bool undividable(int k, lab4_shape sh) { return k == L4_INTERLEAVED && sh.m % sh.p; }
int lab4_list_calls(int k, lab4_shape sh) { return undividable(k, sh) ? 1 : sh.p; }
int lab4_list_cap(int k, lab4_shape sh) {
    int need = lab4_schedule_length(k, sh.m, sh.v);
    /* exactly the length where m is odd (an array of pp_schedule_length's size must do),
     * room to spare elsewhere */
    return undividable(k, sh) || sh.m % 2 ? need : need + 4;
}

/* The entries of shapes [0, i). */
static size_t entries_before(int k, const lab4_shape *shapes, int i) {
    size_t at = 0;
    for (int j = 0; j < i; j++) at += (size_t)lab4_list_calls(k, shapes[j]) * (size_t)(lab4_list_cap(k, shapes[j]) + LAB4_GUARD);
    return at;
}

size_t lab4_list_at(int k, const lab4_shape *shapes, int i, int s) {
    return entries_before(k, shapes, i) + (size_t)s * (size_t)(lab4_list_cap(k, shapes[i]) + LAB4_GUARD);
}

size_t lab4_list_total(int k, const lab4_shape *shapes, int n) { return entries_before(k, shapes, n); }

int lab4_rc_at(int k, const lab4_shape *shapes, int i, int s) {
    int at = 0;
    for (int j = 0; j < i; j++) at += lab4_list_calls(k, shapes[j]);
    return at + s;
}

int lab4_broken_plans(int p) { return p >= 2 ? LAB4_BROKEN_PLANS : LAB4_BROKEN_PLANS - 1; }

size_t lab4_plan_bytes(int p, const int *count) {
    size_t n = 0;
    for (int s = 0; s < p; s++) n += (size_t)count[s];
    return (size_t)p * sizeof(int32_t) + n * sizeof(lab4_action);
}

size_t lab4_stage_floats(const gpt_config *mc, const lab4_config *cfg, int s) {
    size_t n = 0;
    for (int k = 0; k < cfg->chunks; k++) {
        int first;
        n += (size_t)lab4_layers(cfg->stages, cfg->chunks, cfg->layers, s, k, &first) * gpt_part_count(mc, GPT_PART_BLOCK);
    }
    if (s == 0) n += gpt_part_count(mc, GPT_PART_EMBED);
    if (s == cfg->stages - 1) n += gpt_part_count(mc, GPT_PART_HEAD);
    return n;
}

const char *const LAB4_REGIONS[R_KINDS] = {"gpt.block.F", "gpt.block.B",  "gpt.block.BW", "gpt.block.W",
                                           "gpt.block.R", "gpt.head.F",   "gpt.head.B",   "another gpt.* region"};

/* ---- errors.config, errors.schedule: the inputs ---- */

const lab4_config LAB4_CONFIGS[LAB4_NCONFIGS] = {
    {2, 4, 1, 4, L4_1F1B, false},        {2, 4, 2, 4, L4_INTERLEAVED, false}, {5, 4, 1, 4, L4_1F1B, false},
    {0, 4, 1, 4, L4_GPIPE, false},       {2, 0, 1, 4, L4_ZBH1, false},        {2, 3, 2, 8, L4_INTERLEAVED, false},
    {2, 4, 3, 4, L4_INTERLEAVED, false}, {2, 4, 2, 8, L4_1F1B, false},        {2, 4, 0, 8, L4_INTERLEAVED, false},
    /* two problems at once: the first in pp_config_check's order (pipeline.h) */
    {5, 0, 1, 4, L4_1F1B, false},        {0, 4, 2, 8, L4_1F1B, false},        {2, 0, 0, 8, L4_INTERLEAVED, false},
    {2, 3, 3, 4, L4_INTERLEAVED, false}, {2, 4, 9, 18, L4_INTERLEAVED, false},
};
const char *const LAB4_CONFIG_WHAT[LAB4_NCONFIGS] = {
    "p 2, m 4, L 4, 1F1B", "interleaved p 2, m 4, v 2, L 4", "p 5 > L 4", "p 0", "m 0", "interleaved m 3 with p 2",
    "v 3 * p 2 > L 4", "v 2 without interleaving", "v 0", "p 5 > L 4 with m 0 (the stages first)",
    "p 0 with v 2 without interleaving (the stages first)", "m 0 with v 0 (the micro-batches first)",
    "interleaved m 3 with p 2 and v 3 * p 2 > L 4 (the chunks first)", "interleaved v 9 > PP_MAX_CHUNKS (p 2, L 18)",
};

const lab4_bad_call LAB4_BAD[LAB4_NBAD] = {
    {L4_GPIPE, 2, 0, 0, 1, 64, "gpipe m 0"},
    {L4_1F1B, 2, 2, 4, 1, 64, "1f1b stage 2 of 2"},
    {L4_1F1B, 2, -1, 4, 1, 64, "1f1b stage -1"},
    {L4_ZBH1, 0, 0, 4, 1, 64, "zbh1 p 0"},
    {L4_ZBH1, 2, 1, -3, 1, 64, "zbh1 m -3"},
    {L4_INTERLEAVED, 2, 0, 3, 2, 64, "interleaved m 3 with p 2"},
    {L4_INTERLEAVED, 2, 0, 4, 0, 64, "interleaved v 0"},
    {L4_1F1B, 2, 0, 4, 1, 7, "1f1b m 4 in 7 actions"},
    {L4_ZBH1, 3, 1, 5, 1, 14, "zbh1 m 5 in 14 actions"},
    {L4_INTERLEAVED, 2, 1, 4, 2, 15, "interleaved m 4 v 2 in 15 actions"},
    {L4_INTERLEAVED, 2, 0, 4, 9, 1024, "interleaved v 9 > PP_MAX_CHUNKS"},
};

/* ---- the plan ---- */

static void plan_sched(const drv_test *t, drv_plan *p) {
    for (int k = 0; k < L4_NSCHED; k++) {
        drv_instance *in = drv_plan_add(p, t, "%s.%s", t->name, LAB4_SCHED[k]);
        in->arg[0] = k, in->arg[1] = K_LISTS;
    }
}

static void plan_one(const drv_test *t, drv_plan *p) {
    lab4_kind kind = !strcmp(t->name, "errors.config") ? K_CONFIG : !strcmp(t->name, "errors.schedule") ? K_SCHED_ERR : K_PLAN_ERR;
    drv_plan_add(p, t, "%s", t->name)->arg[1] = kind;
}

/* The real runs, planned from the "step" row: per schedule its step, traffic, memory,
 * order and recompute cases (the four rows after it), in their own group, so that a
 * deadlock costs only that schedule. */
static void plan_runs(const drv_test *t, drv_plan *p) {
    for (int k = 0; k < L4_NSCHED; k++)
        for (int j = 0; j < 5; j++) {
            drv_instance *in = drv_plan_add(p, &t[j], "%s.%s", t[j].name, LAB4_SCHED[k]);
            snprintf(in->group, sizeof in->group, "%s", LAB4_SCHED[k]);
            in->arg[0] = k, in->arg[1] = K_STEP + j;
        }
}
static void plan_none(const drv_test *t, drv_plan *p) { (void)t, (void)p; }

#define ROW(nm, grp, planfn, setupfn, checkfn, teardownfn, playfn)                                            \
    {.name = nm, .group = grp, .plan = planfn, .setup = DRV_R(setupfn), .check = DRV_R(checkfn),              \
     .teardown = DRV_R(teardownfn), .play = DRV_P(playfn)}
/* The cases that run pp_execute: the memory they leave allocated is checked too. */
#define RUN_ROW(nm, grp, planfn, checkfn, playfn)                                                             \
    {.name = nm, .group = grp, .plan = planfn, .setup = DRV_R(lab4_run_setup), .check = DRV_R(checkfn),      \
     .model = DRV_R(lab4_run_model), .teardown = DRV_R(lab4_run_teardown), .play = DRV_P(playfn)}

static const drv_test TESTS[] = {
    ROW("schedule", "schedule", plan_sched, lab4_setup, lab4_schedule_check, lab4_teardown, lab4_play_lists),
    ROW("clock", "clock", plan_sched, lab4_setup, lab4_clock_check, lab4_teardown, lab4_play_lists),
    ROW("errors.config", "errors", plan_one, lab4_setup, lab4_config_check, lab4_teardown, lab4_play_config),
    ROW("errors.schedule", "errors", plan_one, lab4_setup, lab4_sched_err_check, lab4_teardown, lab4_play_sched_err),
    RUN_ROW("errors.plan", "errors_plan", plan_one, lab4_plan_err_check, lab4_play_plan_err),
    /* these five rows are planned together by the first (plan_runs) */
    RUN_ROW("step", NULL, plan_runs, lab4_step_check, lab4_play_run),
    RUN_ROW("traffic", NULL, plan_none, lab4_traffic_check, lab4_play_run),
    RUN_ROW("memory", NULL, plan_none, lab4_memory_check, lab4_play_run),
    RUN_ROW("order", NULL, plan_none, lab4_order_check, lab4_play_run),
    RUN_ROW("recompute", NULL, plan_none, lab4_recompute_check, lab4_play_run),
    {NULL},
};

static const drv_flag FLAGS[] = {
    {"--seq", DRV_INT, &g_flags4.T, 1, 4096, "T: positions per sequence (default 8)"},
    {"--batch", DRV_INT, &g_flags4.b, 1, 4096, "b: sequences per micro-batch (default 2)"},
    {"--hidden", DRV_INT, &g_flags4.C, 1, 8192, "C (default 32)"},
    {"--heads", DRV_INT, &g_flags4.H, 1, 256, "H, dividing C (default 4)"},
    {"--ffn", DRV_INT, &g_flags4.F, 1, 32768, "F: MLP width (default 64)"},
    {"--vocab", DRV_INT, &g_flags4.V, 2, 65536, "V (default 64)"},
    {"--layers", DRV_INT, &g_flags4.L, 1, 1024, "L blocks, at least the number of stages (default 16)"},
    {"--chunks", DRV_INT, &g_flags4.v, 1, LAB4_MAX_CHUNKS, "v: model chunks per stage of the interleaved runs (default 2)"},
    {"--lr", DRV_DOUBLE, &g_flags4.lr, 1e-6, 10, "SGD learning rate of the graded step (default 0.1)"},
    {"--slack", DRV_INT, &g_flags4.slack, 0, 1024, "[N, C] exchange buffers allowed beyond the stash bound (default 8)"},
    {"--profile", DRV_STR, &g_flags4.profile, 0, 0,
     "NAME|FILE: cost-model profile of the predictions (default dgx-h100; pcie-4gpu too)"},
    {"--steps", DRV_INT, &g_flags4.steps, 1, 100000, "--run train: steps (default 400)"},
    {"--micro", DRV_INT, &g_flags4.train_micro, 1, 4096,
     "--run train: micro-batches per step (default 4; sweep: the largest m)"},
    {"--train-lr", DRV_DOUBLE, &g_flags4.train_lr, 1e-6, 100, "--run train: SGD learning rate (default 0.5)"},
    {"--text", DRV_STR, &g_flags4.text, 0, 0, "--run train: the text to learn (default /usr/share/common-licenses/GPL-3)"},
    {"--schedule", DRV_STR, &g_flags4.schedule, 0, 0, "--run train/bench/sweep: gpipe|1f1b|interleaved|zbh1|all"},
    {NULL},
};

static const drv_mode MODES[] = {
    {"sweep", "bubble and peak stash as m grows, per schedule: logical, theory, measured, predicted; a plot",
     DRV_P(lab4_mode_sweep), "4", "scripts/plot-sweep-4.sh"},
    {"train", "a tiny GPT on a real text over the pipeline, its loss curve beside single-rank training; a plot",
     DRV_P(lab4_mode_train), "2 4", "scripts/plot-train-4.sh"},
    {"bench", "step time per schedule against one rank doing the same work, bubble, dgx-h100 prediction (make bench LAB=4)",
     DRV_P(lab4_mode_bench), "2 4", NULL},
    {NULL},
};

static const drv_lab LAB = {
    .name = "04-pipeline",
    .title = "Lab 4: pipeline parallelism (GPipe, 1F1B, interleaved 1F1B, ZB-H1)",
    .flags = FLAGS,
    .tests = TESTS,
    .modes = MODES,
    .init = DRV_R(lab4_init),
    .player_init = DRV_P(lab4_player_init),
};

int main(int argc, char **argv) { return drv_main(&LAB, argc, argv); }
