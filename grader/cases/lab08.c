/* lab08.c - the case table of Lab 8 (3D parallelism), its plan, flags and modes.
 *
 * The referee (grader/referee/lab08*.c) makes every input from seeds only referees know,
 * gives each player what its rank needs (its shard of the weights, its replica's tokens on
 * the first stage, targets on the last), trains the single-rank reference and judges; the
 * player (grader/player/lab08*.c) calls the student on the slots; the traffic is counted
 * group by group by the referees where they move the messages (the cpu device), else by the
 * player. Cases:
 *   config.errors        td_config_check on good and bad configurations (no MPI at all)
 *   grid.t<t>p<p>d<d>    td_grid_build for every t, p with t p | N: each group's members,
 *                        in order, against the rule rank = tp + t (dp + d pp) [the members
 *                        as the player gathers them over the student's groups]
 *   grid.errors          a world that t p does not divide, t or p < 1: TD_ERR_WORLD on
 *                        every rank, the grid untouched, nothing built
 *   embed.t<t>           the vocabulary-parallel embedding at t ranks: x, dwte, dwpe against
 *                        the whole-vocabulary reference; one all-reduce forward, none back
 *                        [traffic: the referees' count on the cpu device]
 *   xent.t<t>            the parallel cross-entropy: losses and dlogits; three all-reduces
 *                        of N floats, the logits never gathered [traffic: as embed]
 *   xent.large.t<t>      the same with logits around 100 (exp overflows a float; a
 *                        maximum combined by a sum underflows it)
 *   step.t<t>p<p>d<d>    k training steps on the kit's grid: loss, global gradient norm
 *                        and every parameter against the single-rank run (1e-5); then
 *                        timed steps, each on a fresh batch and checked
 *   traffic.t<t>p<p>d<d> the first step's traffic, group by group, against the formulas
 *                        [as embed]
 * Modes (the player alone, unrefereed): plan (the planner), bench (Table 1 of the
 * Megatron-LM paper, the tiny GPT measured).
 */
#include <stdio.h>
#include <string.h>

#include "lab08.h"

static l8_state g_state = {.T = 8, .b = 2, .C = 32, .H = 8, .F = 64, .V = 64, .L = 8, .steps = 2, .lr = 1e-2,
                           .clip = 0.25, .profile = "dgx-a100", .model = "all", .gpus = 0, .gbatch = 0, .top = 8,
                           .bench_steps = 9};

l8_state *l8_lab(void) { return &g_state; }

static const char *const TABLE1_ROWS[] = {"1.7B",   "3.6B",   "7.5B",   "18.4B",  "39.1B",
                                          "76.1B",  "145.6B", "310.1B", "529.6B", "1T"};

bool l8_model_known(const char *name) {
    for (size_t i = 0; i < sizeof TABLE1_ROWS / sizeof TABLE1_ROWS[0]; i++)
        if (!strcmp(name, TABLE1_ROWS[i])) return true;
    return !strcmp(name, "tiny") || !strcmp(name, "all");
}

void l8_check_flags(const l8_state *S) {
    if (S->C % S->H) pl_usage_error("--hidden %d is not a multiple of --heads %d", S->C, S->H);
    if (S->steps > L8_MAX_STEPS) pl_usage_error("--steps %d: at most %d", S->steps, L8_MAX_STEPS);
    if (!l8_model_known(S->model))
        pl_usage_error("--model %s: not a row of Table 1 (1.7B 3.6B 7.5B 18.4B 39.1B 76.1B 145.6B 310.1B 529.6B 1T), "
                       "'tiny' or 'all'", S->model);
}

/* ==================================================================================== */
/* The plan                                                                               */
/* ==================================================================================== */

/* grid.t<t>p<p>d<d> for every t, p with t p | N */
static void plan_grid(const drv_test *t, drv_plan *p) {
    int N = pl_world();
    for (int tt = 1; tt <= N; tt++)
        for (int pp = 1; tt * pp <= N; pp++) {
            if (N % (tt * pp)) continue;
            drv_instance *in = drv_plan_add(p, t, "grid.t%dp%dd%d", tt, pp, N / (tt * pp));
            in->arg[0] = tt, in->arg[1] = pp;
        }
}

/* embed.t<t>, xent.t<t> at the largest t dividing N and the vocabulary */
static void plan_tensor(const drv_test *t, drv_plan *p) {
    int tt = l8_tensor_size(t->data, pl_world());
    drv_plan_add(p, t, "%s.t%d", t->name, tt)->arg[0] = tt;
}
/* xent.large.t<t>: the same with logits around L8_LARGE_LOGIT (arg[1] = 1) */
static void plan_tensor_large(const drv_test *t, drv_plan *p) {
    int tt = l8_tensor_size(t->data, pl_world());
    drv_instance *in = drv_plan_add(p, t, "%s.t%d", t->name, tt);
    in->arg[0] = tt, in->arg[1] = 1;
}

/* step.<c> and traffic.<c> for each (t, p, d) of this world, in a group of their own, so
 * that a hang costs only that configuration; arg: the run's index, t, p, d */
static void plan_steps(const drv_test *t, drv_plan *p) {
    l8_state *S = l8_lab();
    l8_step_configs(S, pl_world());
    for (int i = 0; i < S->ncfgs; i++)
        for (int j = 0; j < 2; j++) {
            const l8_tpd *k = &S->cfgs[i];
            drv_instance *in = drv_plan_add(p, &t[j], "%s.t%dp%dd%d", t[j].name, k->t, k->p, k->d);
            snprintf(in->group, sizeof in->group, "t%dp%dd%d", k->t, k->p, k->d);
            in->arg[0] = i, in->arg[1] = k->t, in->arg[2] = k->p, in->arg[3] = k->d;
        }
}
static void plan_none(const drv_test *t, drv_plan *p) { (void)t, (void)p; }

/* ==================================================================================== */
/* The table                                                                              */
/* ==================================================================================== */

static const drv_test TESTS[] = {
    {.name = "config.errors", .group = "config", .setup = DRV_R(l8_config_setup), .check = DRV_R(l8_config_check), .model = DRV_R(l8_model),
     .play = DRV_P(l8_config_play), .data = &g_state},
    {.name = "grid", .group = "grid", .plan = plan_grid, .setup = DRV_R(l8_grid_setup), .check = DRV_R(l8_grid_check), .model = DRV_R(l8_model),
     .play = DRV_P(l8_grid_play), .data = &g_state},
    {.name = "grid.errors", .group = "grid_errors", .setup = DRV_R(l8_grid_errors_setup),
     .check = DRV_R(l8_grid_errors_check), .model = DRV_R(l8_model), .play = DRV_P(l8_grid_errors_play), .data = &g_state},
    {.name = "embed", .group = "embed", .plan = plan_tensor, .setup = DRV_R(l8_embed_setup),
     .check = DRV_R(l8_embed_check), .model = DRV_R(l8_model), .play = DRV_P(l8_embed_play), .data = &g_state},
    {.name = "xent", .group = "xent", .plan = plan_tensor, .setup = DRV_R(l8_xent_setup), .check = DRV_R(l8_xent_check), .model = DRV_R(l8_model),
     .play = DRV_P(l8_xent_play), .data = &g_state},
    {.name = "xent.large", .group = "xent", .plan = plan_tensor_large, .setup = DRV_R(l8_xent_setup),
     .check = DRV_R(l8_xent_check), .model = DRV_R(l8_model), .play = DRV_P(l8_xent_play), .data = &g_state},
    /* these two rows are planned together by the first (plan_steps); the traffic case
     * judges the run its step case played, or plays one itself */
    {.name = "step", .plan = plan_steps, .setup = DRV_R(l8_step_setup), .check = DRV_R(l8_step_check), .model = DRV_R(l8_model),
     .perf = DRV_R(l8_step_perf), .refresh = DRV_R(l8_step_refresh), .verify = DRV_R(l8_step_verify),
     .teardown = DRV_R(l8_step_teardown),
     .play = DRV_P(l8_step_play), .timed = DRV_P(l8_step_timed), .release = DRV_P(l8_step_release), .data = &g_state},
    {.name = "traffic", .plan = plan_none, .setup = DRV_R(l8_step_setup), .check = DRV_R(l8_traffic_check), .model = DRV_R(l8_model),
     .play = DRV_P(l8_step_play), .release = DRV_P(l8_step_release), .data = &g_state},
    {NULL},
};

static const drv_flag FLAGS[] = {
    {"--seq", DRV_INT, &g_state.T, 1, 1024, "T: positions per sequence (default 8)"},
    {"--batch", DRV_INT, &g_state.b, 1, 1024, "b: sequences per micro-batch (default 2)"},
    {"--hidden", DRV_INT, &g_state.C, 1, 8192, "C (default 32)"},
    {"--heads", DRV_INT, &g_state.H, 1, 256, "H, dividing C (default 8)"},
    {"--ffn", DRV_INT, &g_state.F, 1, 32768, "F: MLP width (default 64)"},
    {"--vocab", DRV_INT, &g_state.V, 2, 65536, "V (default 64)"},
    {"--layers", DRV_INT, &g_state.L, 1, L8_MAX_STAGES, "L blocks (default 8)"},
    {"--steps", DRV_INT, &g_state.steps, 1, L8_MAX_STEPS, "training steps of each graded run (default 2)"},
    {"--lr", DRV_DOUBLE, &g_state.lr, 1e-6, 10, "AdamW learning rate (default 0.01)"},
    {"--clip", DRV_DOUBLE, &g_state.clip, 1e-6, 1e6, "max_norm of the gradient clipping (default 0.25)"},
    {"--profile", DRV_STR, &g_state.profile, 0, 0, "--run plan: NAME|FILE of the machine (default dgx-a100)"},
    {"--model", DRV_STR, &g_state.model, 0, 0, "--run plan: a Table 1 row (1.7B .. 1T), 'tiny' (these flags' GPT) or 'all' (default)"},
    {"--gpus", DRV_INT, &g_state.gpus, 0, 1 << 20, "--run plan: GPUs (default: the row's, or the whole profile)"},
    {"--global-batch", DRV_INT, &g_state.gbatch, 0, 1 << 24, "--run plan: sequences per iteration (default: the row's)"},
    {"--top", DRV_INT, &g_state.top, 1, 1000, "--run plan: configurations listed (default 8)"},
    {"--bench-steps", DRV_INT, &g_state.bench_steps, 1, L8_MAX_STEPS - 1, "--run bench: measured steps of the tiny GPT (default 9)"},
    {NULL},
};

static const drv_mode MODES[] = {
    {"plan", "the planner: the best (t, p, d, v, micro-batch, recompute, ZeRO-1) for a model, batch and machine",
     DRV_P(l8_mode_plan), "1", NULL},
    {"bench", "Table 1 of the Megatron-LM paper predicted on dgx-a100 (ratio lines), the tiny GPT measured vs predicted (make bench LAB=8)",
     DRV_P(l8_mode_bench), "2", NULL},
    {NULL},
};

static const drv_lab LAB = {
    .name = "08-3d",
    .title = "Lab 8: 3D parallelism (tensor x pipeline x data) and a planner",
    .flags = FLAGS,
    .tests = TESTS,
    .modes = MODES,
    .init = DRV_R(l8_init),
    .player_init = DRV_P(l8_player_init),
    .finish = DRV_R(l8_finish),
};

int main(int argc, char **argv) { return drv_main(&LAB, argc, argv); }
