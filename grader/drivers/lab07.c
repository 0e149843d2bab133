/* lab07.c - the driver of Lab 7 (sharded data parallelism: ZeRO-1, ZeRO-2, ZeRO-3/FSDP).
 *
 * The case table, the lab's state and the glue of every case: setup() asks the referee for
 * inputs, run() hands them to the player, check() gives the player's outputs to the
 * referee. One training run per variant (stage, resharding, dtypes) serves all of its
 * cases. The cases:
 *   layout.buckets, layout.chunks  zero_buckets and zero_chunk against the driver's own
 *   plan.reshard, plan.errors      zero_ckpt_plan from every saved layout to every new one
 *   train.V     K AdamW steps with global-norm clipping: every rank's parameters, its master
 *               weights and moments, and the loss of every step against the single-rank run
 *               (fp32: 1e-5 relative; bf16: the single-rank bf16 run, README.md's bound)
 *   pieces.V    the buckets and the pieces this rank owns, against the layout rules
 *   memory.V    bytes per category against ZeRO's formulas, exactly (padding included);
 *               the transients' peaks against their bounds
 *   traffic.V   every collective of every step: calls and bytes per kind, exactly
 *   overlap.V   ZeRO-2/3: reduce-scatters issued while backward still runs
 *   prefetch.V  ZeRO-3: unit u+1's all-gather issued before unit u's compute; the step
 *               replayed on the profile with and without prefetch
 *   ckpt.NtoM   save at N ranks, load at M (another stage too), continue: equal to the
 *               uninterrupted run
 *   ckpt.errors truncated, mismatching, missing, another model's: refused naming the file,
 *               nothing changed
 * with V = z1 z2 z3 z3n (fp32) and bf16.z1 bf16.z2 bf16.z3. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab07.h"

static lab7 g_lab = {.layers = 3, .seq = 6, .hidden = 20, .heads = 4, .ffn = 36, .vocab = 37, .batch = 24,
                     .steps = 4, .cap = 4000, .lr = 1e-2, .eps = 1e-6, .wd = 0.1, .max_norm = 1.0,
                     .profile = "dgx-h100", .train_steps = 200, .mode_layers = 4, .mode_hidden = 64, .mode_batch = 8};
static int g_cap_flag = 4000;

static lab7 *lab_of(const drv_case *c) { return (lab7 *)c->inst->test->data; }

/* The sequences' seed, once per run: rank 0's case seed (fresh random bits in a graded run,
 * so no rank's code can make another rank's sequences; from --seed when run by hand). Every
 * rank sets up every case, so every rank gets here at the same case. */
static void data_seed(drv_case *c, lab7 *L) {
    if (L->have_data_seed) return;
    uint64_t *all = calloc((size_t)L->np, sizeof *all);
    PL_CHECK(all != NULL, "out of host memory");
    drv_allgather_u64(drv_case_seed(c), all);
    L->data_seed = all[0];
    L->have_data_seed = true;
    free(all);
}

/* ==================================================================================== */
/* Layouts and plans                                                                     */
/* ==================================================================================== */

/* The questions are the same on every rank: rank 0 asks them. */
static void layouts_setup(drv_case *c) {
    l7_layouts *q = drv_state(c, sizeof *q);
    if (c->rank == 0) l7_layouts_make(lab_of(c), (int)c->arg[0], q);
}
static void layouts_run(drv_case *c) { l7_play_layouts(c->state); }
static void layouts_check(drv_case *c) { l7_layouts_check(c, c->state, (int)c->arg[0]); }
static void layouts_teardown(drv_case *c) {
    if (c->state) l7_layouts_free(c->state);
}

static void plan_layouts(const drv_test *t, drv_plan *p) {
    static const char *const names[] = {"layout.buckets", "layout.chunks", "plan.reshard", "plan.errors"};
    int from = !strcmp(t->name, "layout") ? 0 : 2;
    for (int i = from; i < from + 2; i++) drv_plan_add(p, t, "%s", names[i])->arg[0] = i;
}

/* ==================================================================================== */
/* The training runs                                                                     */
/* ==================================================================================== */

enum { K_TRAIN, K_PIECES, K_MEMORY, K_TRAFFIC, K_OVERLAP, K_PREFETCH };
static const char *const KIND_NAMES[] = {"train", "pieces", "memory", "traffic", "overlap", "prefetch"};

/* arg[0] variant, arg[1] kind */
static void plan_variants(const drv_test *t, drv_plan *p) {
    int kind = 0;
    while (strcmp(KIND_NAMES[kind], t->name)) kind++;
    for (int v = 0; v < L7_NVARIANTS; v++) {
        const l7_variant_info *vi = &L7_VARIANTS[v];
        bool bf16 = vi->param == ZERO_BF16;
        if (bf16 && (kind == K_PIECES || kind >= K_OVERLAP)) continue;
        if (kind == K_OVERLAP && vi->stage == 1) continue;
        if (kind == K_PREFETCH && vi->stage != 3) continue;
        drv_instance *in = drv_plan_add(p, t, "%s.%s", t->name, vi->name);
        in->arg[0] = v, in->arg[1] = kind;
        if (bf16) snprintf(in->group, sizeof in->group, "bf16");
    }
}

typedef struct {
    l7_in in;
    bool made;
} run_state;

static void variant_setup(drv_case *c) {
    lab7 *L = lab_of(c);
    run_state *st = drv_state(c, sizeof *st);
    data_seed(c, L);
    if (L->run[c->arg[0]]) return; /* an earlier case of the variant ran it */
    l7_inputs(L, &st->in, (l7_variant)c->arg[0], L->np, L->rank, 0, L->steps);
    st->made = true;
}

static void variant_run(drv_case *c) {
    lab7 *L = lab_of(c);
    run_state *st = c->state;
    if (!st->made) return;
    l7_out *o = calloc(1, sizeof *o);
    PL_CHECK(o != NULL, "out of host memory");
    l7_play(&st->in, &L->model, L->world, L->have_prof ? &L->prof : NULL, o);
    L->run[c->arg[0]] = o;
}

static void variant_check(drv_case *c) {
    lab7 *L = lab_of(c);
    l7_variant v = (l7_variant)c->arg[0];
    const l7_out *o = L->run[v];
    zero_config cfg = l7_config(L, v);
    switch ((int)c->arg[1]) {
    case K_TRAIN: {
        const l7_ref *ref = l7_reference(L, cfg.param_dtype);
        double tol = cfg.param_dtype == ZERO_BF16 ? l7_bf16_tolerance(L, L->np) : drv_tolerance();
        if (l7_check_params(c, L, o, ref, tol, cfg.param_dtype == ZERO_BF16 ? "bf16 run vs the single-rank bf16 run" : "vs the single-rank run"))
            l7_check_losses(c, o, ref, 0, L->steps, L->np, tol);
        break;
    }
    case K_PIECES: l7_check_layout(c, L, o, &cfg, L->np, L->rank); break;
    case K_MEMORY: l7_check_memory(c, L, o, &cfg, L->np); break;
    case K_TRAFFIC: l7_check_traffic(c, L, o, &cfg, L->np); break;
    case K_OVERLAP: l7_check_overlap(c, L, o, &cfg, L->np); break;
    default: l7_check_prefetch(c, L, o, &cfg, L->np); break;
    }
}

static void variant_teardown(drv_case *c) {
    run_state *st = c->state;
    if (st && st->made) l7_in_free(&st->in, lab_of(c)->model.nunits);
}

/* ==================================================================================== */
/* Checkpoints                                                                           */
/* ==================================================================================== */

/* (N, M): the world sizes of the save and of the load, and the variants of each side. */
static const struct {
    int n, m;
    l7_variant save, load;
} PAIRS[] = {{4, 2, V_Z3, V_Z1}, {2, 4, V_Z1, V_Z3}, {3, 8, V_Z2, V_Z3N}, {8, 1, V_Z3, V_Z2}, {1, 3, V_Z3N, V_Z2}};
enum { NPAIRS = sizeof PAIRS / sizeof PAIRS[0] };

static void plan_ckpt(const drv_test *t, drv_plan *p) {
    int np = pl_world();
    for (int i = 0; i < NPAIRS; i++)
        if (np >= PAIRS[i].n && np >= PAIRS[i].m) drv_plan_add(p, t, "ckpt.%dto%d", PAIRS[i].n, PAIRS[i].m)->arg[0] = i;
    if (np >= 2) drv_plan_add(p, t, "ckpt.errors")->arg[0] = -1;
}

typedef struct {
    l7_in save_in, load_in;
    bool saver, loader;
    int save_rc, load_rc;
    char why[300];
    l7_out *out;
    /* the error case: per damage */
    int err_rc[CK_NKINDS];
    char err_msg[CK_NKINDS][300], err_file[CK_NKINDS][64];
    uint64_t hash_before[CK_NKINDS], hash_after[CK_NKINDS];
    zero_model other;
    l7_in other_in;
} ckpt_state;

static void ckpt_setup(drv_case *c) {
    lab7 *L = lab_of(c);
    ckpt_state *st = drv_state(c, sizeof *st);
    int half = L->steps / 2, i = (int)c->arg[0];
    data_seed(c, L);
    if (i < 0) { /* errors: save at 2 ranks after one step, load at 2 */
        st->saver = st->loader = L->rank < 2;
        if (st->saver) {
            l7_inputs(L, &st->save_in, V_Z3, 2, L->rank, 0, 1);
            l7_inputs(L, &st->load_in, V_Z1, 2, L->rank, 1, 1);
            /* another model: one more head's width */
            gpt_config g = l7_model_config(L, L->batch / 2);
            g.hidden += g.heads;
            l7_describe(&st->other, &g, L->layers);
            st->other_in = st->save_in;
            st->other_in.mc = g;
            st->other_in.tokens = st->other_in.targets = NULL;
            gpt_config gg = g;
            gg.batch = L->batch;
            for (int u = 0; u < st->other.nunits; u++) st->other_in.init[u] = l7_init_unit(&st->other, &gg, L->seed, u);
        }
        return;
    }
    st->saver = L->rank < PAIRS[i].n, st->loader = L->rank < PAIRS[i].m;
    if (st->saver) l7_inputs(L, &st->save_in, PAIRS[i].save, PAIRS[i].n, L->rank, 0, half);
    if (st->loader) l7_inputs(L, &st->load_in, PAIRS[i].load, PAIRS[i].m, L->rank, half, L->steps - half);
}

static void ckpt_run(drv_case *c) {
    lab7 *L = lab_of(c);
    ckpt_state *st = c->state;
    int i = (int)c->arg[0], n = i < 0 ? 2 : PAIRS[i].n, m = i < 0 ? 2 : PAIRS[i].m;
    pl_comm *cn = pl_comm_split(L->world, st->saver ? 0 : -1, L->rank);
    pl_comm *cm = pl_comm_split(L->world, st->loader ? 0 : -1, L->rank);
    (void)n, (void)m;
    st->out = calloc(1, sizeof *st->out);
    PL_CHECK(st->out != NULL, "out of host memory");
    if (i < 0) {
        for (int k = 0; k < CK_NKINDS; k++) {
            char dir[256];
            l7_ckpt_mkdir(L->world, dir, sizeof dir);
            if (st->saver) {
                l7_out scratch = {0};
                if (k == CK_OTHER_MODEL) {
                    zero_state z;
                    float *init[ZERO_MAX_UNITS];
                    for (int u = 0; u < st->other.nunits; u++) {
                        init[u] = pl_malloc_floats(st->other.unit[u].numel);
                        pl_upload(init[u], st->other_in.init[u], st->other.unit[u].numel * 4);
                    }
                    zero_init(&z, &st->other, &st->other_in.cfg, cn, init);
                    for (int u = 0; u < st->other.nunits; u++) pl_free(init[u]);
                    st->save_rc = l7_ckpt_save(&z, dir, st->why, sizeof st->why);
                    zero_free(&z);
                } else {
                    l7_session *s = l7_session_start(&st->save_in, &L->model, cn, &scratch);
                    l7_session_steps(s, &st->save_in, 0, 1, &scratch);
                    st->save_rc = l7_ckpt_save(l7_session_state(s), dir, st->why, sizeof st->why);
                    l7_session_finish(s, &scratch);
                    l7_out_free(&scratch);
                }
            }
            double saved = st->save_rc == 0; /* the files are written, or some rank could not */
            pl_host_allreduce(&saved, 1, PL_HOST_MIN, L->world);
            if (!saved) {
                l7_ckpt_rmdir(L->world, dir);
                break;
            }
            if (L->rank == 0) l7_ckpt_damage(dir, (l7_damage)k, 2, st->err_file[k], sizeof st->err_file[k]);
            pl_host_bcast(st->err_file[k], sizeof st->err_file[k], 0, L->world);
            if (st->loader) {
                l7_out scratch = {0};
                l7_session *s = l7_session_start(&st->load_in, &L->model, cm, &scratch);
                st->hash_before[k] = l7_state_hash(l7_session_state(s));
                st->err_rc[k] = l7_ckpt_load(l7_session_state(s), dir, st->err_msg[k], sizeof st->err_msg[k]);
                st->hash_after[k] = l7_state_hash(l7_session_state(s));
                l7_session_finish(s, &scratch);
                l7_out_free(&scratch);
            }
            l7_ckpt_rmdir(L->world, dir);
        }
    } else {
        char dir[256];
        l7_ckpt_mkdir(L->world, dir, sizeof dir);
        int half = L->steps / 2;
        if (st->saver) {
            l7_out scratch = {0};
            l7_session *s = l7_session_start(&st->save_in, &L->model, cn, &scratch);
            l7_session_steps(s, &st->save_in, 0, half, &scratch);
            st->save_rc = scratch.why[0] ? -1 : l7_ckpt_save(l7_session_state(s), dir, st->why, sizeof st->why);
            if (scratch.why[0]) snprintf(st->why, sizeof st->why, "before the save: %s", scratch.why);
            l7_session_finish(s, &scratch);
            l7_out_free(&scratch);
        }
        double rc = st->save_rc;
        pl_host_allreduce(&rc, 1, PL_HOST_MIN, L->world);
        st->out->idle = !st->loader;
        if (st->loader && rc == 0) {
            l7_session *s = l7_session_start(&st->load_in, &L->model, cm, st->out);
            st->load_rc = l7_ckpt_load(l7_session_state(s), dir, st->why, sizeof st->why);
            if (st->load_rc == 0) l7_session_steps(s, &st->load_in, 0, L->steps - half, st->out);
            l7_session_finish(s, st->out);
        }
        l7_ckpt_rmdir(L->world, dir);
    }
    if (cn) pl_comm_free(cn);
    if (cm) pl_comm_free(cm);
}

static void ckpt_check(drv_case *c) {
    lab7 *L = lab_of(c);
    ckpt_state *st = c->state;
    int i = (int)c->arg[0];
    if (i < 0) {
        if (st->saver && st->save_rc) {
            drv_fail(c, "saving the checkpoint to damage failed: %s", st->why);
            return;
        }
        for (int k = 0; k < CK_NKINDS; k++) {
            bool refused = !st->loader || st->err_rc[k] != 0, named = !st->loader || strstr(st->err_msg[k], st->err_file[k]),
                 same = !st->loader || st->hash_before[k] == st->hash_after[k];
            if (!st->loader || (refused && named && same)) continue;
            if (!refused) drv_fail(c, "a %s checkpoint was loaded without an error", L7_DAMAGE_NAMES[k]);
            else if (!named) drv_fail(c, "a %s checkpoint: the error does not name %s: %s", L7_DAMAGE_NAMES[k], st->err_file[k], st->err_msg[k]);
            else drv_fail(c, "a %s checkpoint was refused (%s) but the state changed", L7_DAMAGE_NAMES[k], st->err_msg[k]);
            break;
        }
        return;
    }
    int half = L->steps / 2;
    if ((st->saver && st->save_rc) || (st->loader && st->load_rc))
        drv_fail(c, "%s failed: %s", st->saver && st->save_rc ? "saving" : "loading", st->why);
    bool ok = drv_min(!drv_failed(c)) > 0;
    if (!ok) return;
    const l7_ref *ref = l7_reference(L, ZERO_FP32);
    if (l7_check_params(c, L, st->out, ref, drv_tolerance(), "after the save, the load and the rest of the steps"))
        l7_check_losses(c, st->out, ref, half, L->steps - half, PAIRS[i].m, drv_tolerance());
}

static void ckpt_teardown(drv_case *c) {
    ckpt_state *st = c->state;
    if (!st) return;
    int U = lab_of(c)->model.nunits;
    if (st->saver) l7_in_free(&st->save_in, U);
    if (st->loader) l7_in_free(&st->load_in, U);
    if (st->other.nunits) {
        for (int u = 0; u < st->other.nunits; u++) free(st->other_in.init[u]);
    }
    if (st->out) l7_out_free(st->out), free(st->out);
}

/* ==================================================================================== */
/* The table                                                                             */
/* ==================================================================================== */

/* name, group, plan, setup, run, check, model, perf, teardown, data */
#define VARIANT_ROW(name, group) \
    {name, group, plan_variants, variant_setup, variant_run, variant_check, NULL, NULL, variant_teardown, &g_lab}
static const drv_test TESTS[] = {
    {"layout", "layout", plan_layouts, layouts_setup, layouts_run, layouts_check, NULL, NULL, layouts_teardown, &g_lab},
    {"plan", "plan", plan_layouts, layouts_setup, layouts_run, layouts_check, NULL, NULL, layouts_teardown, &g_lab},
    VARIANT_ROW("train", "train"),
    VARIANT_ROW("pieces", "pieces"),
    VARIANT_ROW("memory", "memory"),
    VARIANT_ROW("traffic", "traffic"),
    VARIANT_ROW("overlap", "overlap"),
    VARIANT_ROW("prefetch", "prefetch"),
    {"ckpt", "ckpt", plan_ckpt, ckpt_setup, ckpt_run, ckpt_check, NULL, NULL, ckpt_teardown, &g_lab},
    {NULL},
};

static void lab7_init(void) {
    lab7 *L = &g_lab;
    L->world = pl_comm_world();
    L->np = pl_comm_size(L->world);
    L->rank = pl_comm_rank(L->world);
    L->seed = pl_info()->seed;
    L->cap = (size_t)g_cap_flag;
    if (L->hidden % L->heads) pl_usage_error("--hidden %d is not a multiple of --heads %d", L->hidden, L->heads);
    if (L->batch % L->np) pl_usage_error("--batch %d is not a multiple of the world size %d", L->batch, L->np);
    if (L->layers + 2 > ZERO_MAX_UNITS) pl_usage_error("--layers %d: at most %d", L->layers, ZERO_MAX_UNITS - 2);
    if (L->np > 8) pl_usage_error("Lab 7's checkpoint cases need at most 8 ranks, not %d", L->np);
    char err[300];
    L->have_prof = plc_profile_load(&L->prof, L->profile, err, sizeof err) == 0;
    if (!L->have_prof && strcmp(L->profile, "dgx-h100")) pl_usage_error("--profile: %s", err);
    gpt_config g = l7_model_config(L, L->batch);
    l7_describe(&L->model, &g, L->layers);
    drv_print("# lab07: %d rank(s), device %s; GPT L=%d T=%d C=%d H=%d F=%d V=%d (%zu parameters in %d units), global "
              "batch %d, %d AdamW steps, bucket cap %zu\n",
              L->np, pl_device_name(pl_info()->device), L->layers, L->seq, L->hidden, L->heads, L->ffn, L->vocab,
              L->model.numel, L->model.nunits, L->batch, L->steps, L->cap);
}

static void lab7_finish(void) {
    lab7 *L = &g_lab;
    for (int v = 0; v < L7_NVARIANTS; v++)
        if (L->run[v]) l7_out_free(L->run[v]), free(L->run[v]);
    for (int d = 0; d < 2; d++)
        if (L->ref[d]) {
            for (int u = 0; u < L->model.nunits; u++)
                free(L->ref[d]->master[u]), free(L->ref[d]->m[u]), free(L->ref[d]->v[u]), free(L->ref[d]->param[u]);
            free(L->ref[d]);
        }
}

static int mode_train(void) { return l7_mode_train(&g_lab); }
static int mode_memory(void) { return l7_mode_memory(&g_lab); }
static int mode_bench(void) { return l7_mode_bench(&g_lab); }

static const drv_flag FLAGS[] = {
    {"--layers", DRV_INT, &g_lab.layers, 1, 30, "transformer blocks of the graded GPT (default 3)"},
    {"--seq", DRV_INT, &g_lab.seq, 1, 4096, "positions per sequence (and rows of the position table; default 6)"},
    {"--hidden", DRV_INT, &g_lab.hidden, 1, 8192, "hidden width (default 20)"},
    {"--heads", DRV_INT, &g_lab.heads, 1, 256, "attention heads (default 4)"},
    {"--ffn", DRV_INT, &g_lab.ffn, 1, 32768, "MLP width (default 36)"},
    {"--vocab", DRV_INT, &g_lab.vocab, 2, 1 << 20, "vocabulary (default 37)"},
    {"--batch", DRV_INT, &g_lab.batch, 1, 1 << 16, "global sequences per step, a multiple of the world size (default 24)"},
    {"--grade-steps", DRV_INT, &g_lab.steps, 2, L7_MAX_STEPS, "AdamW steps of a graded run (default 4; checkpoints save after half)"},
    {"--cap", DRV_INT, &g_cap_flag, 1, 1 << 30, "bucket cap in elements, ZeRO-1/2 (default 4000)"},
    {"--lr", DRV_DOUBLE, &g_lab.lr, 1e-9, 10, "AdamW learning rate (default 1e-2)"},
    {"--eps", DRV_DOUBLE, &g_lab.eps, 1e-12, 1, "AdamW epsilon (default 1e-6: README.md says why not 1e-8)"},
    {"--wd", DRV_DOUBLE, &g_lab.wd, 0, 1, "AdamW weight decay (default 0.1)"},
    {"--max-norm", DRV_DOUBLE, &g_lab.max_norm, 1e-9, 1e9, "clip the gradient to this global norm (default 1)"},
    {"--profile", DRV_STR, &g_lab.profile, 0, 0, "NAME|FILE: the cost-model profile of the replays (default dgx-h100)"},
    {"--steps", DRV_INT, &g_lab.train_steps, 1, 1 << 20, "--run train: steps (default 200)"},
    {"--text", DRV_STR, &g_lab.text, 0, 0, "--run train: the text to learn (default a licence Debian ships)"},
    {"--mode-layers", DRV_INT, &g_lab.mode_layers, 1, 30, "--run train/memory/bench: blocks (default 4)"},
    {"--mode-hidden", DRV_INT, &g_lab.mode_hidden, 4, 8192, "--run train/memory/bench: hidden width (default 64)"},
    {"--mode-batch", DRV_INT, &g_lab.mode_batch, 1, 1 << 16, "--run train/bench: global sequences per step (default 8)"},
    {NULL},
};
static const drv_mode MODES[] = {
    {"train", "a tiny GPT learns a text with DDP and each ZeRO stage; the loss curves, equal, in a plot", mode_train, "2 4",
     "scripts/plot-train-7.sh"},
    {"memory", "bytes per rank vs N for DDP and each stage, measured and by formula, in a plot; GPT-3 and Llama-3-70B", mode_memory,
     "1 2 4 8", "scripts/plot-memory-7.sh"},
    {"bench", "step time of DDP and each stage, measured here and predicted for dgx-h100 (make bench LAB=7)", mode_bench,
     "1 2 4", NULL},
    {NULL},
};
static const drv_lab LAB = {
    .name = "07-zero",
    .title = "Lab 7: sharded data parallelism (ZeRO-1, ZeRO-2, ZeRO-3 / FSDP)",
    .flags = FLAGS,
    .tests = TESTS,
    .modes = MODES,
    .init = lab7_init,
    .finish = lab7_finish,
};

int main(int argc, char **argv) { return drv_main(&LAB, argc, argv); }
