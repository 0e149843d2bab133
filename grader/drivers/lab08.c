/* lab08.c - the driver of Lab 8 (3D parallelism): the case table, the plan, the flags and
 * the lab's state. Each case is the referee's setup (its inputs into the case's slots,
 * lab08_referee_cases.c), the player's run (lab08_player.c), the referee's check.
 *
 *   config.errors        td_config_check on good and bad configurations (no MPI at all)
 *   grid.t<t>p<p>d<d>    td_grid_build for every t, p with t p | N: each group's members,
 *                        in order, against the rule rank = tp + t (dp + d pp)
 *   grid.errors          a world that t p does not divide, t or p < 1: TD_ERR_WORLD on
 *                        every rank, the grid untouched, nothing built
 *   embed.t<t>           the vocabulary-parallel embedding at t ranks: x, dwte, dwpe against
 *                        the whole-vocabulary reference; one all-reduce forward, none back
 *   xent.t<t>            the parallel cross-entropy: losses and dlogits; three all-reduces
 *                        of N floats, the logits never gathered
 *   step.t<t>p<p>d<d>    k training steps on the kit's grid: loss, global gradient norm
 *                        and every parameter against the single-rank run (1e-5)
 *   traffic.t<t>p<p>d<d> the first step's traffic, group by group, against the formulas
 * Modes: plan (the planner), bench (Table 1 of the Megatron-LM paper, the tiny GPT).
 */
#include <stdio.h>

#include "lab08.h"

static l8_state g_state = {.T = 8, .b = 2, .C = 32, .H = 8, .F = 64, .V = 64, .L = 8, .steps = 2, .lr = 1e-2,
                           .clip = 0.25, .profile = "dgx-a100", .model = "all", .gpus = 0, .gbatch = 0, .top = 8,
                           .bench_steps = 9};

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

/* step.<c> and traffic.<c> for each (t, p, d) of this world, in a group of their own, so
 * that a hang costs only that configuration */
static void plan_steps(const drv_test *t, drv_plan *p) {
    const l8_state *S = t->data;
    for (int i = 0; i < S->ncfgs; i++)
        for (int j = 0; j < 2; j++) {
            const l8_tpd *k = &S->cfgs[i];
            drv_instance *in = drv_plan_add(p, &t[j], "%s.t%dp%dd%d", t[j].name, k->t, k->p, k->d);
            snprintf(in->group, sizeof in->group, "t%dp%dd%d", k->t, k->p, k->d);
            in->arg[0] = i;
        }
}
static void plan_none(const drv_test *t, drv_plan *p) { (void)t, (void)p; }

/* ==================================================================================== */
/* The table                                                                              */
/* ==================================================================================== */

static const drv_test TESTS[] = {   /* name, group, plan, setup (referee), run (player), check (referee), model, perf, teardown, data */
    {"config.errors", "config", NULL, l8_config_setup, l8_config_run, l8_config_check, NULL, NULL, NULL, &g_state},
    {"grid", "grid", plan_grid, NULL, l8_grid_run, l8_grid_check, NULL, NULL, NULL, &g_state},
    {"grid.errors", "grid_errors", NULL, l8_grid_errors_setup, l8_grid_errors_run, l8_grid_errors_check, NULL, NULL, NULL, &g_state},
    {"embed", "embed", plan_tensor, l8_embed_setup, l8_embed_run, l8_embed_check, NULL, NULL, l8_embed_teardown, &g_state},
    {"xent", "xent", plan_tensor, l8_xent_setup, l8_xent_run, l8_xent_check, NULL, NULL, l8_xent_teardown, &g_state},
    /* these two rows are planned together by the first (plan_steps) and share one run */
    {"step", NULL, plan_steps, l8_step_setup, l8_step_run, l8_step_check, NULL, NULL, NULL, &g_state},
    {"traffic", NULL, plan_none, l8_step_setup, l8_step_run, l8_traffic_check, NULL, NULL, NULL, &g_state},
    {NULL},
};

static void lab8_init(void) {
    l8_state *S = &g_state;
    S->seed = pl_info()->seed;
    if (S->C % S->H) pl_usage_error("--hidden %d is not a multiple of --heads %d", S->C, S->H);
    if (S->steps > L8_MAX_STEPS) pl_usage_error("--steps %d: at most %d", S->steps, L8_MAX_STEPS);
    if (!l8_model_known(S->model))
        pl_usage_error("--model %s: not a row of Table 1 (1.7B 3.6B 7.5B 18.4B 39.1B 76.1B 145.6B 310.1B 529.6B 1T), 'tiny' or 'all'",
                       S->model);
    l8_step_configs(S, pl_world());
    drv_print("# lab08: %d rank(s), device %s; GPT T=%d b=%d C=%d H=%d F=%d V=%d L=%d, tied embedding; %d steps of AdamW "
              "(lr %g) clipped to norm %g; m = p + 1 micro-batches per replica\n",
              pl_world(), pl_device_name(pl_info()->device), S->T, S->b, S->C, S->H, S->F, S->V, S->L, S->steps, S->lr, S->clip);
}

static void lab8_finish(void) { l8_runs_free(&g_state); }

static int mode_plan(void) { return l8_mode_plan(&g_state); }
static int mode_bench(void) { return l8_mode_bench(&g_state); }

static const drv_flag FLAGS[] = {
    {"--seq", DRV_INT, &g_state.T, 1, 1024, "T: positions per sequence (default 8)"},
    {"--batch", DRV_INT, &g_state.b, 1, 1024, "b: sequences per micro-batch (default 2)"},
    {"--hidden", DRV_INT, &g_state.C, 1, 8192, "C (default 32)"},
    {"--heads", DRV_INT, &g_state.H, 1, 256, "H, dividing C (default 8)"},
    {"--ffn", DRV_INT, &g_state.F, 1, 32768, "F: MLP width (default 64)"},
    {"--vocab", DRV_INT, &g_state.V, 2, 65536, "V (default 64)"},
    {"--layers", DRV_INT, &g_state.L, 1, TD_MAX_STAGES, "L blocks (default 8)"},
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
    {"plan", "the planner: the best (t, p, d, v, micro-batch, recompute, ZeRO-1) for a model, batch and machine", mode_plan, "1", NULL},
    {"bench", "Table 1 of the Megatron-LM paper predicted on dgx-a100 (ratio lines), the tiny GPT measured vs predicted (make bench LAB=8)",
     mode_bench, "2", NULL},
    {NULL},
};
static const drv_lab LAB = {
    .name = "08-3d",
    .title = "Lab 8: 3D parallelism (tensor x pipeline x data) and a planner",
    .flags = FLAGS,
    .tests = TESTS,
    .modes = MODES,
    .init = lab8_init,
    .finish = lab8_finish,
};

int main(int argc, char **argv) { return drv_main(&LAB, argc, argv); }
