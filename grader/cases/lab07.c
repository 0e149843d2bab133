/* lab07.c - the case table of Lab 7 (sharded data parallelism: ZeRO-1, ZeRO-2, ZeRO-3/FSDP).
 *
 * The referee (grader/referee/lab07*.c) makes every input - the initial weights, each rank's
 * sequences, the questions of the pure functions - keeps the single-rank reference run, the
 * layouts and ZeRO's formulas, writes and damages the checkpoint files, and judges; the
 * player (grader/player/lab07*.c) runs the GPT of models/gpt.h through the student's hooks
 * and leaves what it computed and counted in its slots. One training run per variant serves
 * all of the variant's cases. The cases:
 *   layout.buckets, layout.chunks  zero_buckets and zero_chunk against the referee's own
 *   plan.reshard, plan.errors      zero_ckpt_plan from every saved layout to every new one
 *   train.V     the master weights right after zero_init, bit for bit the fp32 initial
 *               values; then K AdamW steps with global-norm clipping: every rank's parameters, its master
 *               weights and moments, and the loss of every step against the single-rank run
 *               (fp32: 1e-5 relative; bf16: the single-rank bf16 run, README.md's bound)
 *   pieces.V    the buckets and the pieces this rank owns, against the layout rules
 *   memory.V    bytes per category against ZeRO's formulas, exactly (padding included);
 *               the transients' peaks against their bounds [the player's memory accounting]
 *   traffic.V   every collective of every step: calls and bytes per kind, exactly [the
 *               referees' count on the cpu device, else the player's counters]
 *   overlap.V   ZeRO-2/3: reduce-scatters issued while backward still runs [the player's
 *               trace]
 *   prefetch.V  ZeRO-3: unit u+1's all-gather issued before unit u's compute [the player's
 *               trace]; the step replayed by the referee on the profile with and without
 *               prefetch [the player's recorded ops]
 *   ckpt.NtoM   save at N ranks, the referee writes the files, load at M (another stage
 *               too), continue: equal to the uninterrupted run
 *   ckpt.errors truncated, mismatching, missing, another model's (damaged or written by the
 *               referee): refused naming the file, nothing changed
 * with V = z1 z2 z3 z3n (fp32) and bf16.z1 bf16.z2 bf16.z3 bf16.z3f (reduce: bf16, fp32, bf16,
 * fp32).
 */
#include <stdio.h>
#include <string.h>

#include "lab07.h"

static l7_flags g_flags7 = {.layers = 3, .seq = 6, .hidden = 20, .heads = 4, .ffn = 36, .vocab = 37, .batch = 24,
                            .steps = 4, .cap = 4000, .lr = 1e-2, .eps = 1e-6, .wd = 0.1, .max_norm = 1.0,
                            .profile = "dgx-h100", .train_steps = 200, .mode_layers = 4, .mode_hidden = 64,
                            .mode_batch = 8};
const l7_flags *l7_opts(void) { return &g_flags7; }

const l7_variant_info L7_VARIANTS[L7_NVARIANTS] = {
    {"z1", 1, true, L7_FP32, L7_FP32},      {"z2", 2, true, L7_FP32, L7_FP32},
    {"z3", 3, true, L7_FP32, L7_FP32},      {"z3n", 3, false, L7_FP32, L7_FP32},
    {"bf16.z1", 1, true, L7_BF16, L7_BF16}, {"bf16.z2", 2, true, L7_BF16, L7_FP32},
    {"bf16.z3", 3, true, L7_BF16, L7_BF16}, {"bf16.z3f", 3, true, L7_BF16, L7_FP32},
};

const l7_pair L7_PAIRS[L7_NPAIRS] = {
    {4, 2, V_Z3, V_Z1}, {2, 4, V_Z1, V_Z3}, {3, 8, V_Z2, V_Z3N}, {8, 1, V_Z3, V_Z2}, {1, 3, V_Z3N, V_Z2},
    /* mixed precision (both reduce in bf16): the load rebuilds the bf16 parameters from the
     * fp32 masters it read */
    {3, 2, V_B3, V_B1}};

const char *const L7_DAMAGE_NAMES[CK_NKINDS] = {"truncated", "metadata", "missing", "other_model"};

const char *l7_error_string(int rc) {
    switch (rc) {
    case L7_OK: return "ok";
    case L7_ERR_ARG: return "bad argument";
    case L7_ERR_CAPACITY: return "output array too small";
    case L7_ERR_COVERAGE: return "the saved pieces do not cover every element";
    case L7_ERR_TODO: return "not implemented yet";
    default: return rc > 0 ? "a count, not an error" : "unknown error";
    }
}

/* ==================================================================================== */
/* The plan                                                                              */
/* ==================================================================================== */

static void plan_layouts(const drv_test *t, drv_plan *p) {
    static const char *const names[] = {"layout.buckets", "layout.chunks", "plan.reshard", "plan.errors"};
    int from = !strcmp(t->name, "layout") ? 0 : 2;
    for (int i = from; i < from + 2; i++) drv_plan_add(p, t, "%s", names[i])->arg[0] = i;
}

static const char *const KIND_NAMES[] = {"train", "pieces", "memory", "traffic", "overlap", "prefetch"};

/* arg[0] variant, arg[1] kind */
static void plan_variants(const drv_test *t, drv_plan *p) {
    int kind = 0;
    while (strcmp(KIND_NAMES[kind], t->name)) kind++;
    for (int v = 0; v < L7_NVARIANTS; v++) {
        const l7_variant_info *vi = &L7_VARIANTS[v];
        bool bf16 = vi->param == L7_BF16;
        if (bf16 && (kind == K_PIECES || kind >= K_OVERLAP)) continue;
        if (kind == K_OVERLAP && vi->stage == 1) continue;
        if (kind == K_PREFETCH && vi->stage != 3) continue;
        drv_instance *in = drv_plan_add(p, t, "%s.%s", t->name, vi->name);
        in->arg[0] = v, in->arg[1] = kind;
        if (bf16) snprintf(in->group, sizeof in->group, "bf16");
    }
}

static void plan_ckpt(const drv_test *t, drv_plan *p) {
    int np = pl_world();
    for (int i = 0; i < L7_NPAIRS; i++)
        if (np >= L7_PAIRS[i].n && np >= L7_PAIRS[i].m)
            drv_plan_add(p, t, "ckpt.%s%dto%d", L7_VARIANTS[L7_PAIRS[i].load].param == L7_BF16 ? "bf16." : "",
                         L7_PAIRS[i].n, L7_PAIRS[i].m)->arg[0] = i;
    if (np >= 2) drv_plan_add(p, t, "ckpt.errors")->arg[0] = -1;
}

/* ==================================================================================== */
/* The table                                                                             */
/* ==================================================================================== */

#define LAYOUT_ROW(nm)                                                                                       \
    {.name = nm, .group = nm, .plan = plan_layouts, .setup = DRV_R(l7_layouts_setup),                        \
     .check = DRV_R(l7_layouts_check), .teardown = DRV_R(l7_layouts_teardown), .play = DRV_P(l7_play_layouts)}
#define VARIANT_ROW(nm)                                                                                      \
    {.name = nm, .group = nm, .plan = plan_variants, .setup = DRV_R(l7_run_setup), .check = DRV_R(l7_run_check), \
     .model = DRV_R(l7_leak_model), .play = DRV_P(l7_play_run)}
static const drv_test TESTS[] = {
    LAYOUT_ROW("layout"),
    LAYOUT_ROW("plan"),
    VARIANT_ROW("train"),
    VARIANT_ROW("pieces"),
    VARIANT_ROW("memory"),
    VARIANT_ROW("traffic"),
    VARIANT_ROW("overlap"),
    VARIANT_ROW("prefetch"),
    {.name = "ckpt", .group = "ckpt", .plan = plan_ckpt, .setup = DRV_R(l7_ckpt_setup), .check = DRV_R(l7_ckpt_check),
     .model = DRV_R(l7_leak_model), .teardown = DRV_R(l7_ckpt_teardown), .interlude = DRV_R(l7_ckpt_interlude), .play = DRV_P(l7_play_ckpt)},
    {NULL},
};

static const drv_flag FLAGS[] = {
    {"--layers", DRV_INT, &g_flags7.layers, 1, 30, "transformer blocks of the graded GPT (default 3)"},
    {"--seq", DRV_INT, &g_flags7.seq, 1, 4096, "positions per sequence (and rows of the position table; default 6)"},
    {"--hidden", DRV_INT, &g_flags7.hidden, 1, 8192, "hidden width (default 20)"},
    {"--heads", DRV_INT, &g_flags7.heads, 1, 256, "attention heads (default 4)"},
    {"--ffn", DRV_INT, &g_flags7.ffn, 1, 32768, "MLP width (default 36)"},
    {"--vocab", DRV_INT, &g_flags7.vocab, 2, 1 << 20, "vocabulary (default 37)"},
    {"--batch", DRV_INT, &g_flags7.batch, 1, 1 << 16, "global sequences per step, a multiple of the world size (default 24)"},
    {"--grade-steps", DRV_INT, &g_flags7.steps, 2, L7_MAX_STEPS,
     "AdamW steps of a graded run (default 4; checkpoints save after half)"},
    {"--cap", DRV_INT, &g_flags7.cap, 1, 1 << 30, "bucket cap in elements, ZeRO-1/2 (default 4000)"},
    {"--lr", DRV_DOUBLE, &g_flags7.lr, 1e-9, 10, "AdamW learning rate (default 1e-2)"},
    {"--eps", DRV_DOUBLE, &g_flags7.eps, 1e-12, 1, "AdamW epsilon (default 1e-6: README.md says why not 1e-8)"},
    {"--wd", DRV_DOUBLE, &g_flags7.wd, 0, 1, "AdamW weight decay (default 0.1)"},
    {"--max-norm", DRV_DOUBLE, &g_flags7.max_norm, 1e-9, 1e9, "clip the gradient to this global norm (default 1)"},
    {"--profile", DRV_STR, &g_flags7.profile, 0, 0, "NAME|FILE: the cost-model profile of the replays (default dgx-h100)"},
    {"--steps", DRV_INT, &g_flags7.train_steps, 1, 1 << 20, "--run train: steps (default 200)"},
    {"--text", DRV_STR, &g_flags7.text, 0, 0, "--run train: the text to learn (default a licence Debian ships)"},
    {"--mode-layers", DRV_INT, &g_flags7.mode_layers, 1, 30, "--run train/memory/bench: blocks (default 4)"},
    {"--mode-hidden", DRV_INT, &g_flags7.mode_hidden, 4, 8192, "--run train/memory/bench: hidden width (default 64)"},
    {"--mode-batch", DRV_INT, &g_flags7.mode_batch, 1, 1 << 16, "--run train/bench: global sequences per step (default 8)"},
    {NULL},
};

static const drv_mode MODES[] = {
    {"train", "a tiny GPT learns a text with DDP and each ZeRO stage; the loss curves, equal, in a plot",
     DRV_P(l7_mode_train), "2 4", "scripts/plot-train-7.sh"},
    {"memory", "bytes per rank vs N for DDP and each stage, measured and by formula, in a plot; GPT-3 and Llama-3-70B",
     DRV_P(l7_mode_memory), "1 2 4 8", "scripts/plot-memory-7.sh"},
    {"bench", "step time of DDP and each stage, measured here and predicted for dgx-h100 (make bench LAB=7)",
     DRV_P(l7_mode_bench), "1 2 4", NULL},
    {NULL},
};

static const drv_lab LAB = {
    .name = "07-zero",
    .title = "Lab 7: sharded data parallelism (ZeRO-1, ZeRO-2, ZeRO-3 / FSDP)",
    .flags = FLAGS,
    .tests = TESTS,
    .modes = MODES,
    .init = DRV_R(l7_init),
    .finish = DRV_R(l7_finish),
};

int main(int argc, char **argv) { return drv_main(&LAB, argc, argv); }
