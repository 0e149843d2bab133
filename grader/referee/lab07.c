/* lab07.c (referee) - Lab 7's state and the glue of every case: setup() writes the inputs
 * into the slots (the initial weights, this rank's sequences, the questions), check() copies
 * what the player left there into the referee's memory - bounds-checked: nothing the player
 * wrote is used as an index or a length unchecked - and judges it against the references
 * of lab07_reference.c and the rules of lab07_rules.c. The checkpoint cases pause the
 * player once (interlude 0): the referee writes the checkpoint files from what the savers
 * left, damages them (ckpt.errors) and stages the directory for the loaders. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab07_ref.h"

static l7_lab g_l7;

/* The sequences' seed, once per run: rank 0's case seed (fresh random bits in a graded run,
 * so no rank's code can make another rank's sequences; from --seed by hand). Every rank
 * sets up every case, so every referee gets here at the same case with the same answer. */
static void data_seed(drv_case *c, l7_lab *L) {
    if (L->have_data_seed) return;
    L->data_seed = drv_case_seed(c, 0, 0);
    L->have_data_seed = true;
}

void l7_init(void) {
    l7_lab *L = &g_l7;
    const l7_flags *f = L->f = l7_opts();
    L->np = pl_world();
    L->rank = pl_rank();
    L->seed = pl_info()->seed;
    if (f->hidden % f->heads) pl_usage_error("--hidden %d is not a multiple of --heads %d", f->hidden, f->heads);
    if (f->batch % L->np) pl_usage_error("--batch %d is not a multiple of the world size %d", f->batch, L->np);
    if (f->layers + 2 > L7_MAX_UNITS) pl_usage_error("--layers %d: at most %d", f->layers, L7_MAX_UNITS - 2);
    if (L->np > 8) pl_usage_error("Lab 7's checkpoint cases need at most 8 ranks, not %d", L->np);
    char err[300];
    L->have_prof = plc_profile_load(&L->prof, f->profile, err, sizeof err) == 0;
    if (!L->have_prof && strcmp(f->profile, "dgx-h100")) pl_usage_error("--profile: %s", err);
    gpt_config g = l7_gpt(f, f->batch);
    l7_describe(&L->model, &g, f->layers);
    drv_print("# lab07: %d rank(s); GPT L=%d T=%d C=%d H=%d F=%d V=%d (%zu parameters in %d units), global batch %d, "
              "%d AdamW steps, bucket cap %d\n",
              L->np, f->layers, f->seq, f->hidden, f->heads, f->ffn, f->vocab, L->model.numel, L->model.nunits,
              f->batch, f->steps, f->cap);
}

void l7_finish(void) {
    l7_lab *L = &g_l7;
    for (int v = 0; v < L7_NVARIANTS; v++)
        if (L->run[v]) l7_out_free(L->run[v]), free(L->run[v]), L->run[v] = NULL;
    l7_reference_free(L);
}

/* ==================================================================================== */
/* Inputs and outputs of a training run                                                  */
/* ==================================================================================== */

/* Every unit's initial parameters, unit after unit ("init": the same on every rank). */
static void put_init(drv_case *c, const l7_lab *L) {
    const l7_model *m = &L->model;
    float *dst = drv_slot_new(c, "init", m->numel * sizeof(float), DRV_IN | DRV_CONST | DRV_HOST);
    gpt_config g = l7_gpt(L->f, L->f->batch);
    for (int u = 0; u < m->nunits; u++) {
        float *h = l7_init_unit(m, &g, L->seed, u);
        memcpy(dst + l7_unit_at(m, u), h, m->unit[u].numel * sizeof(float));
        free(h);
    }
}

/* PREFIX.cfg, .tok, .tgt: a run of variant v at `world` ranks as rank `rank`, steps
 * [first, first + steps) of the global batches, this rank's sequences only. */
static void put_run(drv_case *c, const l7_lab *L, const char *prefix, l7_variant v, int world, int rank, int first,
                    int steps) {
    const l7_flags *f = L->f;
    int b = f->batch / world;
    char name[32];
    snprintf(name, sizeof name, "%scfg", prefix);
    l7_run_in *in = drv_slot_new(c, name, sizeof *in, DRV_IN | DRV_CONST | DRV_HOST);
    *in = (l7_run_in){.seq = f->seq, .batch = b, .hidden = f->hidden, .heads = f->heads, .ffn = f->ffn,
                      .vocab = f->vocab, .layers = f->layers, .cfg = l7_config(f, v), .steps = steps};
    size_t n = (size_t)f->seq * b;
    snprintf(name, sizeof name, "%stok", prefix);
    int *tok = drv_slot_new(c, name, (size_t)steps * n * sizeof(int), DRV_IN | DRV_CONST | DRV_HOST);
    snprintf(name, sizeof name, "%stgt", prefix);
    int *tgt = drv_slot_new(c, name, (size_t)steps * n * sizeof(int), DRV_IN | DRV_CONST | DRV_HOST);
    for (int s = 0; s < steps; s++) l7_batch(L, first + s, rank * b, b, tok + s * n, tgt + s * n);
}

/* "rec", "vals", "full" (and "ops" for a replay) for the player's account of a run. */
static void put_outputs(drv_case *c, const l7_lab *L, bool ops) {
    size_t psi = L->model.numel;
    drv_slot_new(c, "rec", sizeof(l7_record), DRV_OUT | DRV_ZEROED | DRV_HOST);
    drv_slot_new(c, "vals", 3 * psi * sizeof(float), DRV_OUT | DRV_HOST);
    drv_slot_new(c, "full", psi * sizeof(float), DRV_OUT | DRV_HOST);
    drv_slot_new(c, "master0", psi * sizeof(float), DRV_OUT | DRV_HOST);
    if (ops) drv_slot_new(c, "ops", sizeof(l7_ops), DRV_OUT | DRV_ZEROED | DRV_HOST);
}

static int clamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* What the player left, into the referee's memory. The record is the player's claim: every
 * count that indexes an array is clamped to it, every string terminated. */
static l7_out *take_out(drv_case *c, const l7_lab *L) {
    l7_out *o = calloc(1, sizeof *o);
    PL_CHECK(o != NULL, "out of host memory");
    size_t psi = L->model.numel;
    l7_record *r = &o->rec;
    memcpy(r, drv_slot_host(c, "rec"), sizeof *r);
    r->why[sizeof r->why - 1] = '\0';
    r->nsteps = clamp(r->nsteps, 0, L7_MAX_STEPS);
    r->nbuckets = clamp(r->nbuckets, 0, L7_MAX_BUCKETS);
    r->npieces = r->npieces < 0 ? r->npieces : clamp(r->npieces, 0, L7_MAX_PIECES);
    if (r->nvalues > psi) r->nvalues = psi;
    for (int s = 0; s < r->nsteps; s++) {
        l7_step *st = &r->step[s];
        st->nag = clamp(st->nag, 0, (int)(sizeof st->ag_at / sizeof st->ag_at[0]));
        st->nrs = clamp(st->nrs, 0, (int)(sizeof st->rs_at / sizeof st->rs_at[0]));
    }
    const float *vals = drv_slot_host(c, "vals");
    o->master = malloc((r->nvalues + 1) * sizeof(float));
    o->m = malloc((r->nvalues + 1) * sizeof(float));
    o->v = malloc((r->nvalues + 1) * sizeof(float));
    o->full = malloc((psi + 1) * sizeof(float));
    PL_CHECK(o->master && o->m && o->v && o->full, "out of host memory");
    memcpy(o->master, vals, r->nvalues * sizeof(float));
    memcpy(o->m, vals + psi, r->nvalues * sizeof(float));
    memcpy(o->v, vals + 2 * psi, r->nvalues * sizeof(float));
    memcpy(o->full, drv_slot_host(c, "full"), psi * sizeof(float));
    if (r->nmaster0 > psi) r->nmaster0 = psi;
    o->master0 = malloc((psi + 1) * sizeof(float));
    PL_CHECK(o->master0 != NULL, "out of host memory");
    if (drv_slot_bytes(c, "master0")) memcpy(o->master0, drv_slot_host(c, "master0"), r->nmaster0 * sizeof(float));
    else r->nmaster0 = 0;
    if (drv_slot_bytes(c, "ops") >= sizeof(l7_ops)) {
        o->ops = malloc(sizeof *o->ops);
        PL_CHECK(o->ops != NULL, "out of host memory");
        memcpy(o->ops, drv_slot_host(c, "ops"), sizeof *o->ops);
        o->ops->nops = clamp(o->ops->nops, 0, L7_MAX_OPS);
        o->ops->ntrace = clamp(o->ops->ntrace, 0, L7_MAX_TRACE);
    }
    return o;
}

/* Where the referees move the messages, each step's collectives and messages are what they
 * moved between the player's marks of that step (drv_mark: its number), for every step the
 * referee asked for; the player's own records of them are dropped. */
static void count_steps(l7_out *o, int steps) {
    for (int s = 0; s < steps && s < L7_MAX_STEPS; s++) {
        drv_moved mv;
        if (!drv_moved_in(s, &mv)) return;
        l7_step *st = &o->rec.step[s];
        for (int k = 0; k < PL_OP_COUNT; k++) st->calls[k] = mv.m.coll_calls[k], st->bytes[k] = mv.coll_bytes[k];
        st->calls[PL_OP_SEND] = mv.m.msgs_sent, st->bytes[PL_OP_SEND] = mv.m.bytes_sent;
        st->calls[PL_OP_RECV] = mv.m.msgs_recv, st->bytes[PL_OP_RECV] = mv.m.bytes_recv;
        st->wire_calls = mv.wire.coll_calls, st->wire_bytes = mv.wire.coll_bytes;
        o->counted = s + 1;
    }
}

void l7_out_free(l7_out *o) {
    if (!o) return;
    free(o->master), free(o->m), free(o->v), free(o->full), free(o->ops), free(o->master0);
    memset(o, 0, sizeof *o);
}

/* ==================================================================================== */
/* Layouts and plans                                                                     */
/* ==================================================================================== */

typedef struct {
    void *q;
} layouts_state;

/* The questions are the same on every rank: rank 0 asks them. */
void l7_layouts_setup(drv_case *c) {
    layouts_state *st = drv_state(c, sizeof *st);
    if (c->rank == 0) st->q = l7_layouts_make(c, &g_l7, (int)c->arg[0]);
}
void l7_layouts_check(drv_case *c) {
    layouts_state *st = c->state;
    l7_layouts_judge(c, c->ran ? st->q : NULL, (int)c->arg[0]);
}
void l7_layouts_teardown(drv_case *c) {
    layouts_state *st = c->state;
    if (st && st->q) l7_layouts_free(st->q);
}

/* ==================================================================================== */
/* The training runs                                                                     */
/* ==================================================================================== */

typedef struct {
    bool made; /* this case plays the variant's run */
} run_state;

void l7_run_setup(drv_case *c) {
    l7_lab *L = &g_l7;
    run_state *st = drv_state(c, sizeof *st);
    l7_variant v = (l7_variant)c->arg[0];
    data_seed(c, L);
    if (L->run[v]) return; /* an earlier case of the variant ran it: no slots, nothing to play */
    put_init(c, L);
    put_run(c, L, "", v, L->np, L->rank, 0, L->f->steps);
    put_outputs(c, L, L7_VARIANTS[v].stage == 3 && L->have_prof);
    st->made = true;
}

void l7_run_check(drv_case *c) {
    l7_lab *L = &g_l7;
    run_state *st = c->state;
    l7_variant v = (l7_variant)c->arg[0];
    if (st->made && c->ran) {
        L->run[v] = take_out(c, L);
        count_steps(L->run[v], L->f->steps);
    }
    const l7_out *o = L->run[v];
    if (!o) { /* every rank alike: the run never played */
        drv_fail(c, "the run of %s did not play", L7_VARIANTS[v].name);
        return;
    }
    l7_cfg cfg = l7_config(L->f, v);
    switch ((int)c->arg[1]) {
    case K_TRAIN: {
        const l7_ref *ref = l7_reference(L, cfg.param);
        bool bf16 = cfg.param == L7_BF16;
        double tol = bf16 ? l7_bf16_tolerance(L) : l7_adam_tolerance();
        if (l7_check_master0(c, L, o) &&
            l7_check_params(c, L, o, ref, tol, bf16 ? "bf16 run vs the single-rank bf16 run" : "vs the single-rank run"))
            l7_check_losses(c, o, ref, 0, L->f->steps, L->np, tol);
        break;
    }
    case K_PIECES: l7_check_layout(c, L, o, &cfg); break;
    case K_MEMORY: l7_check_memory(c, L, o, &cfg); break;
    case K_TRAFFIC: l7_check_traffic(c, L, o, &cfg); break;
    case K_OVERLAP: l7_check_overlap(c, L, o, &cfg); break;
    default: l7_check_prefetch(c, L, o, &cfg); break;
    }
}

/* ==================================================================================== */
/* Checkpoints                                                                           */
/* ==================================================================================== */

typedef struct {
    bool saver, loader;
    bool paused;                       /* the player paused for the interlude (once)        */
    int saved_world;
    bool saved;                        /* every saver's file was written                   */
    char why[320];                     /* why not (this rank's, or the first failing one's) */
    char expect[CK_NKINDS][64];        /* ckpt.errors: the file each error must name        */
    l7_out *out;                       /* ckpt.NtoM: the continued run                      */
} ckpt_state;

void l7_ckpt_setup(drv_case *c) {
    l7_lab *L = &g_l7;
    ckpt_state *st = drv_state(c, sizeof *st);
    const l7_flags *f = L->f;
    int half = f->steps / 2, i = (int)c->arg[0];
    data_seed(c, L);
    bool errors = i < 0;
    int n = errors ? 2 : L7_PAIRS[i].n, m = errors ? 2 : L7_PAIRS[i].m;
    st->saver = L->rank < n, st->loader = L->rank < m, st->saved_world = n;
    if (st->saver || st->loader) put_init(c, L);
    size_t psi = L->model.numel;
    if (st->saver) {
        /* errors: save at 2 ranks after one step, load at 2 (ZeRO-3 saved, ZeRO-1 loads) */
        put_run(c, L, "s.", errors ? V_Z3 : L7_PAIRS[i].save, n, L->rank, 0, errors ? 1 : half);
        drv_slot_new(c, "ck.save", sizeof(l7_ck_save), DRV_OUT | DRV_ZEROED | DRV_HOST);
        drv_slot_new(c, "ck.file", L7_CK_HEADER + 12 * psi, DRV_OUT | DRV_HOST);
    }
    if (!st->loader) return;
    put_run(c, L, "l.", errors ? V_Z1 : L7_PAIRS[i].load, m, L->rank, errors ? 1 : half, errors ? 1 : f->steps - half);
    int ndirs = errors ? CK_NKINDS : 1;
    size_t cap = l7_ckdir_capacity(&L->model, n);
    if (errors) { /* another model's checkpoint is larger */
        gpt_config g = l7_gpt(f, f->batch);
        g.hidden += g.heads;
        l7_model *other = malloc(sizeof *other);
        PL_CHECK(other != NULL, "out of host memory");
        l7_describe(other, &g, f->layers);
        size_t co = l7_ckdir_capacity(other, 2);
        cap = co > cap ? co : cap;
        free(other);
    }
    for (int k = 0; k < ndirs; k++) {
        char name[32];
        snprintf(name, sizeof name, "ck%d.dir", k);
        drv_slot_new(c, name, sizeof(l7_ck_dir), DRV_IN | DRV_CONST | DRV_HOST);
        snprintf(name, sizeof name, "ck%d.data", k);
        drv_slot_new(c, name, cap, DRV_IN | DRV_CONST | DRV_HOST);
    }
    drv_slot_new(c, "ck.try", (size_t)ndirs * sizeof(l7_ck_try), DRV_OUT | DRV_ZEROED | DRV_HOST);
    if (errors) drv_slot_new(c, "ck.vals", (size_t)CK_NKINDS * 2 * 3 * psi * sizeof(float), DRV_OUT | DRV_HOST);
    else put_outputs(c, L, false);
}

/* The savers have saved: write their files, damage copies (ckpt.errors), stage them. */
void l7_ckpt_interlude(drv_case *c, int which) {
    l7_lab *L = &g_l7;
    ckpt_state *st = c->state;
    /* what a player asks for beyond the one interlude is refused without a relay: the
     * other ranks' referees may not be in an interlude at all */
    if (which != 0 || st->paused) {
        drv_fail(c, "the player asked for interlude %d%s; this case has one (0)", which, st->paused ? " again" : "");
        return;
    }
    st->paused = true;
    l7_ckdir *d = l7_ckdir_write(c, st->saver, &L->model, st->saved_world, st->why, sizeof st->why);
    st->saved = d != NULL;
    if ((int)c->arg[0] >= 0) {
        l7_ckdir_stage(c, d, 0, st->loader);
    } else {
        for (int k = 0; k < CK_NKINDS; k++) {
            l7_ckdir *e = NULL;
            if (d && k == CK_OTHER_MODEL) {
                e = l7_ckdir_other_model(c, L);
                snprintf(st->expect[k], sizeof st->expect[k], ".metadata");
            } else if (d) {
                e = l7_ckdir_damaged(c, d, (l7_damage)k, st->expect[k], sizeof st->expect[k]);
            }
            l7_ckdir_stage(c, e, k, st->loader);
            l7_ckdir_remove(c, e);
        }
    }
    l7_ckdir_remove(c, d);
}

static l7_ck_try take_try(drv_case *c, int k) {
    l7_ck_try t;
    memcpy(&t, (const l7_ck_try *)drv_slot_host(c, "ck.try") + k, sizeof t);
    t.why[sizeof t.why - 1] = '\0';
    return t;
}

/* ckpt.errors: each damaged checkpoint refused, naming its file, the state unchanged (every
 * piece's master, m and v, and z->step, bit for bit as before the load). */
static void check_errors(drv_case *c, ckpt_state *st) {
    l7_lab *L = &g_l7;
    if (st->saver && !st->saved) {
        drv_fail(c, "saving the checkpoint to damage failed: %s", st->why);
        return;
    }
    if (!st->saved) return; /* another rank explains */
    size_t psi = L->model.numel;
    const float *vals = st->loader ? drv_slot_host(c, "ck.vals") : NULL;
    for (int k = 0; k < CK_NKINDS && st->loader; k++) {
        l7_ck_try t = take_try(c, k);
        bool refused = !t.tried || t.rc != 0, named = strstr(t.why, st->expect[k]) != NULL, same = true;
        const float *before = vals + (size_t)k * 6 * psi, *after = before + 3 * psi;
        if (t.step_before != t.step_after || t.nbefore != t.nafter || t.nbefore < 0 || (size_t)t.nbefore > psi)
            same = false;
        else if (memcmp(before, after, 3 * (size_t)t.nbefore * sizeof(float)) != 0)
            same = false;
        if (!t.tried) {
            drv_fail(c, "a %s checkpoint: the load did not run%s%s", L7_DAMAGE_NAMES[k], t.why[0] ? ": " : "", t.why);
            break;
        }
        if (refused && named && same) continue;
        if (!refused) drv_fail(c, "a %s checkpoint was loaded without an error", L7_DAMAGE_NAMES[k]);
        else if (!named)
            drv_fail(c, "a %s checkpoint: the error does not name %s: %s", L7_DAMAGE_NAMES[k], st->expect[k], t.why);
        else drv_fail(c, "a %s checkpoint was refused (%s) but the state changed", L7_DAMAGE_NAMES[k], t.why);
        break;
    }
}

void l7_ckpt_check(drv_case *c) {
    l7_lab *L = &g_l7;
    ckpt_state *st = c->state;
    int i = (int)c->arg[0];
    if (!c->ran) return;
    if (!drv_check_all(c, st->paused, "the play ended without its interlude: no checkpoint was written")) return;
    if (i < 0) {
        check_errors(c, st);
        return;
    }
    int half = L->f->steps / 2;
    l7_ck_try t = {.rc = 0};
    if (st->loader) t = take_try(c, 0);
    if (st->saver && !st->saved) drv_fail(c, "saving failed: %s", st->why);
    else if (st->loader && st->saved && (!t.tried || t.rc)) drv_fail(c, "loading failed: %s", t.why[0] ? t.why : "the kit did not load");
    bool ok = drv_min(!drv_failed(c)) > 0;
    if (!ok) return;
    /* the kit read each element it loads once: master, m and v (the player's count) */
    size_t owned = 0;
    l7_out *o = st->out = st->loader ? take_out(c, L) : calloc(1, sizeof *st->out);
    PL_CHECK(o != NULL, "out of host memory");
    o->idle = !st->loader;
    for (int j = 0; !o->idle && j < o->rec.npieces; j++) owned += o->rec.piece[j].count;
    double read = drv_sum((double)t.rank_read), want = drv_sum(12.0 * (double)owned);
    drv_num(c, "ckpt_bytes_read", read);
    if (read != want)
        drv_fail(c, "the loads read %.0f bytes of the rank files; the pieces they fill hold %.0f (master, m, v once)", read, want);
    /* the uninterrupted single-rank run of the loaded variant's precision (a pair saves and
     * loads in one precision) */
    int dtype = L7_VARIANTS[L7_PAIRS[i].load].param;
    const l7_ref *ref = l7_reference(L, dtype);
    double tol = dtype == L7_BF16 ? l7_bf16_tolerance(L) : l7_adam_tolerance();
    if (l7_check_params(c, L, o, ref, tol, "after the save, the load and the rest of the steps"))
        l7_check_losses(c, o, ref, half, L->f->steps - half, L7_PAIRS[i].m, tol);
}

void l7_ckpt_teardown(drv_case *c) {
    ckpt_state *st = c->state;
    if (st && st->out) l7_out_free(st->out), free(st->out);
}

/* Every training and checkpoint case frees what it allocated: the player's pl_mem_in_use
 * after the play equals its value before it, on every rank (docs/grader.md). */
void l7_leak_model(drv_case *c, drv_model *m) {
    (void)c;
    m->no_leak = true;
}
