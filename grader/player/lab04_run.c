/* lab04_run.c (player) - Lab 4's real runs: the stage built from the referee's weights,
 * one pp_execute of the referee's plan on this stage's tokens or targets, measured as the
 * runner measures play(), and what the referee needs back: the parameters and gradient
 * buffers after the step, the loss, and the player's own account of the step (its stash,
 * rebuilds, peers, the order of the model's regions and the idle share from its trace, the
 * cost model's replay). errors.plan runs the broken plans. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab04_play.h"

/* ==================================================================================== */
/* The stage                                                                              */
/* ==================================================================================== */

static void load(float *dev, const float *w, size_t at, size_t count) { pl_upload(dev, w + at, count * sizeof(float)); }

/* A gradient buffer: g's values at `at`, or zero. */
static void load_grad(float *dev, const float *g, size_t *at, size_t count) {
    if (g) load(dev, g, *at, count);
    else pl_fill(dev, 0.0f, count, NULL);
    *at += count;
}

int lab4_stage_build(pp_stage *st, const pp_config *c, const gpt_config *model, pl_comm *comm, const float *w,
                     const float *g, uint64_t seed, float lr) {
    memset(st, 0, sizeof *st);
    int p = c->stages, v = c->chunks;
    if (p < 1 || p > PP_MAX_STAGES || p != pl_comm_size(comm) || c->layers < p) return PP_ERR_STAGES;
    if (c->micro < 1) return PP_ERR_MICRO;
    if (v < 1 || v > PP_MAX_CHUNKS || v * p > c->layers) return PP_ERR_CHUNKS;
    st->cfg = *c;
    st->model = *model;
    st->comm = comm;
    st->stage = pl_comm_rank(comm);
    st->lr = lr;
    size_t at = 0;
    for (int k = 0; k < v; k++) {
        pp_chunk *ch = &st->chunk[k];
        ch->count = pp_layers(c, st->stage, k, &ch->first);
        ch->params = calloc((size_t)ch->count, sizeof *ch->params);
        ch->grads = calloc((size_t)ch->count, sizeof *ch->grads);
        PL_CHECK(ch->params && ch->grads, "out of host memory");
        for (int l = 0; l < ch->count; l++) {
            gpt_block_params_alloc(&ch->params[l], model);
            if (w) load(ch->params[l].base, w, at, ch->params[l].count);
            else gpt_block_init(&ch->params[l], model, ch->first + l, seed);
            gpt_block_params_alloc(&ch->grads[l], model);
            load_grad(ch->grads[l].base, g, &at, ch->grads[l].count);
        }
    }
    st->has_embed = st->stage == 0;
    st->has_head = st->stage == p - 1;
    if (st->has_embed) {
        gpt_embed_params_alloc(&st->embed, model);
        if (w) load(st->embed.base, w, at, st->embed.count);
        else gpt_embed_init(&st->embed, model, seed);
        gpt_embed_params_alloc(&st->dembed, model);
        load_grad(st->dembed.base, g, &at, st->dembed.count);
    }
    if (st->has_head) {
        gpt_head_params_alloc(&st->head, model);
        if (w) load(st->head.base, w, at, st->head.count);
        else gpt_head_init(&st->head, model, seed);
        gpt_head_params_alloc(&st->dhead, model);
        load_grad(st->dhead.base, g, &at, st->dhead.count);
    }
    st->ws = gpt_workspace_alloc(model, (c->recompute ? GPT_WS_RECOMPUTE : 0) | (st->has_head ? GPT_WS_HEAD : 0));
    return PP_OK;
}

void lab4_stage_free(pp_stage *st) {
    for (int k = 0; k < st->cfg.chunks; k++) {
        pp_chunk *ch = &st->chunk[k];
        for (int l = 0; l < ch->count; l++) gpt_block_params_free(&ch->params[l]), gpt_block_params_free(&ch->grads[l]);
        free(ch->params), free(ch->grads);
    }
    if (st->has_embed) gpt_embed_params_free(&st->embed), gpt_embed_params_free(&st->dembed);
    if (st->has_head) gpt_head_params_free(&st->head), gpt_head_params_free(&st->dhead);
    gpt_workspace_free(st->ws);
    memset(st, 0, sizeof *st);
}

static void save(float *params, float *grads, const float *p, const float *g, size_t *at, size_t count) {
    pl_download(params + *at, p, count * sizeof(float));
    pl_download(grads + *at, g, count * sizeof(float));
    *at += count;
}

void lab4_stage_download(const pp_stage *st, float *params, float *grads) {
    size_t at = 0;
    pl_device_sync();
    for (int k = 0; k < st->cfg.chunks; k++)
        for (int l = 0; l < st->chunk[k].count; l++)
            save(params, grads, st->chunk[k].params[l].base, st->chunk[k].grads[l].base, &at, st->chunk[k].params[l].count);
    if (st->has_embed) save(params, grads, st->embed.base, st->dembed.base, &at, st->embed.count);
    if (st->has_head) save(params, grads, st->head.base, st->dhead.base, &at, st->head.count);
}

/* ==================================================================================== */
/* The trace of a step                                                                    */
/* ==================================================================================== */

/* The top-level gpt.* regions of the trace, one at a time (a region that starts inside
 * the previous one is nested: skipped). Returns the next index, or the count at the end. */
static size_t next_region(size_t at, double *top_end) {
    const pl_trace_event *ev = pl_trace_events();
    size_t n = pl_trace_count();
    for (; at < n; at++) {
        const pl_trace_event *e = &ev[at];
        if (e->kind != PL_OP_REGION || !e->name || strncmp(e->name, "gpt.", 4) != 0 || e->t_start < *top_end) continue;
        *top_end = e->t_end;
        return at;
    }
    return n;
}

int lab4_trace_regions(int32_t *out, int cap) {
    const pl_trace_event *ev = pl_trace_events();
    double top_end = -1;
    int n = 0;
    for (size_t at = next_region(0, &top_end); at < pl_trace_count(); at = next_region(at + 1, &top_end), n++) {
        int code = R_OTHER;
        for (int r = 0; r < R_OTHER; r++)
            if (!strcmp(ev[at].name, LAB4_REGIONS[r])) code = r;
        if (n < cap) out[n] = code;
    }
    return n;
}

double lab4_trace_idle(void) {
    const pl_trace_event *ev = pl_trace_events();
    double top_end = -1, busy = 0, first = -1, last = -1;
    for (size_t at = next_region(0, &top_end); at < pl_trace_count(); at = next_region(at + 1, &top_end)) {
        busy += ev[at].t_end - ev[at].t_start;
        if (first < 0) first = ev[at].t_start;
        last = ev[at].t_end;
    }
    return last > first ? (last - first - busy) / (last - first) : 0;
}

/* TRACE=1: one Chrome trace per schedule, beside the harness's own (trace.json ->
 * trace-1f1b.json, trace-1f1b-recompute.json). */
static void lab4_trace_path(char *path, size_t cap, int k, bool recompute) {
    const char *base = pl_info()->trace_path, *dot = strrchr(base, '.');
    int stem = dot ? (int)(dot - base) : (int)strlen(base);
    snprintf(path, cap, "%.*s-%s%s%s", stem, base, LAB4_SCHED[k], recompute ? "-recompute" : "", dot ? dot : ".json");
}

void lab4_write_trace(int k, bool recompute) {
    if (!pl_info()->trace) return;
    char path[300];
    lab4_trace_path(path, sizeof path, k, recompute);
    if (pl_trace_write_chrome(path) && pl_rank() == 0)
        pl_log("trace of the %s step written to %s (open it in ui.perfetto.dev)", LAB4_SCHED[k], path);
}

/* The cost model's replay of this step (collective). The recorded trace holds dozens of
 * small compute ops per block; each run of consecutive compute ops on one stream (none
 * waiting on the other stream but the first) becomes one op that costs exactly their
 * summed prediction, so the replay sees the same times in a few hundred ops. */
bool lab4_predict_step(const plc_profile *p, pl_comm *world, plc_prediction *out) {
    size_t avail = pl_trace_count();
    plc_op *ops = malloc((avail + 1) * sizeof *ops);
    size_t *map = malloc((avail + 1) * sizeof *map), n = plc_ops_from_trace(0, pl_comm_rank(world), ops, avail), w = 0;
    PL_CHECK(ops && map, "out of host memory");
    for (size_t i = 0; i < n; i++) {
        plc_op o = ops[i];
        bool compute = o.kind == PL_OP_GEMM || o.kind == PL_OP_KERNEL;
        double t = o.kind == PL_OP_GEMM ? plc_gemm_time(p, o.flops, o.bytes) : plc_kernel_time(p, o.flops, o.bytes);
        if (o.after > 0) o.after = (int)map[o.after - 1] + 1;
        plc_op *prev = w ? &ops[w - 1] : NULL;
        if (compute && prev && prev->kind == PL_OP_KERNEL && prev->flops < 0 && prev->stream == o.stream && o.after == 0) {
            prev->bytes += t * p->mem_bw; /* a merged op: its time, as bytes over the memory bandwidth */
            prev->t_end = o.t_end;
        } else if (compute) {
            o.kind = PL_OP_KERNEL, o.flops = -1, o.bytes = (t - p->launch) * p->mem_bw;
            ops[w++] = o;
        } else {
            ops[w++] = o;
        }
        map[i] = w - 1;
    }
    for (size_t i = 0; i < w; i++)
        if (ops[i].flops < 0) ops[i].flops = 0; /* the marker of a merged op */
    size_t *counts = calloc((size_t)pl_comm_size(world), sizeof *counts), total = 0;
    PL_CHECK(counts != NULL, "out of host memory");
    plc_op *all = pl_host_allgatherv(ops, w * sizeof *ops, counts, world);
    for (int r = 0; r < pl_comm_size(world); r++) total += counts[r];
    char err[200];
    int rc = plc_replay(p, all, total / sizeof *all, pl_comm_size(world), out, err, sizeof err);
    free(ops), free(map), free(counts), free(all);
    return rc == 0;
}

/* --profile and pcie-4gpu, loaded before the player is confined. */
static struct {
    plc_profile prof[2];
    bool have[2];
} g_cost4;

const plc_profile *lab4_profile(int i) { return g_cost4.have[i] ? &g_cost4.prof[i] : NULL; }

void lab4_player_init(void) {
    /* the player opens no file once it plays: rank 0 opens the schedules' traces now (the
     * ones no step writes are removed at the end) */
    for (int k = 0; k < L4_NSCHED && pl_info()->trace && pl_rank() == 0; k++)
        for (int rc = 0; rc < 2; rc++) {
            char path[300];
            lab4_trace_path(path, sizeof path, k, rc);
            if (!pl_trace_reserve(path)) pl_log("cannot write trace file %s", path);
        }
    const char *names[2] = {lab4_opts()->profile, "pcie-4gpu"};
    for (int i = 0; i < 2; i++) {
        char err[300];
        g_cost4.have[i] = plc_profile_load(&g_cost4.prof[i], names[i], err, sizeof err) == 0;
        if (!g_cost4.have[i] && i == 0 && strcmp(names[0], "dgx-h100")) pl_usage_error("--profile: %s", err);
    }
}

/* ==================================================================================== */
/* The runs                                                                               */
/* ==================================================================================== */

typedef struct {
    pp_stage *st;
    const pp_plan *plan;
    const pp_batch *batch;
    double loss;
    int rc;
} exec_args;

static void exec_fn(void *arg) {
    exec_args *x = arg;
    x->rc = pp_execute(x->st, x->plan, x->batch, &x->loss);
}

/* A plan the referee put in a slot: int32 count[p], then the lists one after another. */
static pp_plan plan_of(drv_case *c, const char *name, int p) {
    const int32_t *count = drv_slot(c, name);
    const pp_action *a = (const pp_action *)(count + p);
    pp_plan pl = {.stages = p};
    for (int s = 0; s < p; s++) pl.acts[s] = a, pl.count[s] = count[s], a += count[s];
    return pl;
}

/* The stage of a case, from the weights slot. */
static void stage_of(drv_case *c, pp_stage *st, int k, int m, int v, bool recompute) {
    const lab4_flags *o = lab4_opts();
    pp_config cfg = {c->world, m, v, o->L, (pp_schedule_kind)k, recompute};
    gpt_config mc = lab4_model(o->b);
    PL_CHECK(lab4_stage_build(st, &cfg, &mc, pl_comm_world(), drv_slot(c, "weights"), drv_slot(c, "grads0"), 0,
                              (float)o->lr) == PP_OK,
             "the kit could not build the stage");
}

static pp_batch batch_of(drv_case *c, const pp_stage *st) {
    return (pp_batch){st->has_embed ? drv_slot(c, "tokens") : NULL, st->has_head ? drv_slot(c, "targets") : NULL};
}

/* step, traffic, memory, order, recompute: one step of the referee's plan. */
void lab4_play_run(drv_case *c) {
    int k = (int)c->arg[0], p = c->world, s = c->rank, m, v;
    bool recompute = c->arg[1] == K_RECOMPUTE;
    lab4_run_shape(k, p, &m, &v);
    pp_stage st;
    stage_of(c, &st, k, m, v, recompute);
    pp_plan plan = plan_of(c, "plan", p);
    pp_batch batch = batch_of(c, &st);
    lab4_report *r = drv_slot(c, "report");
    memset(r, 0, sizeof *r);
    r->bad_peer = -1;
    /* the ranks start together: a host reduction, which no counter of the lab's sees */
    pl_device_sync();
    double one = 1;
    pl_host_allreduce(&one, 1, PL_HOST_SUM, NULL);
    pl_trace_clear();
    uint64_t rec0 = gpt_recompute_count();
    size_t in_use = pl_mem_in_use();
    exec_args x = {&st, &plan, &batch, NAN, 0}; /* *loss is pp_execute's to set on every stage */
    pl_metrics met;
    drv_measure(exec_fn, &x, &met);
    r->rc = x.rc;
    r->loss = x.loss;
    r->stash = met.mem_peak > in_use ? (double)(met.mem_peak - in_use) : 0;
    r->recomputes = (double)(gpt_recompute_count() - rec0);
    const pl_trace_event *ev = pl_trace_events();
    for (size_t i = 0; i < pl_trace_count(); i++)
        if ((ev[i].kind == PL_OP_SEND || ev[i].kind == PL_OP_RECV) && ev[i].peer != (s + 1) % p && ev[i].peer != (s + p - 1) % p)
            r->bad_peer = ev[i].peer;
    r->norder = lab4_trace_regions(drv_slot(c, "order"), (int)(drv_slot_bytes(c, "order") / sizeof(int32_t)));
    r->idle = lab4_trace_idle();
    for (int i = 0; i < 2; i++) {
        plc_prediction pp;
        r->pred_ok[i] = lab4_profile(i) && lab4_predict_step(lab4_profile(i), pl_comm_world(), &pp);
        if (r->pred_ok[i]) r->pred_us[i] = pp.step_time * 1e6, r->pred_bubble[i] = 1 - pp.compute_time / pp.step_time;
    }
    lab4_write_trace(k, recompute);
    lab4_stage_download(&st, drv_slot(c, "params"), drv_slot(c, "grads"));
    lab4_stage_free(&st);
}

/* errors.plan: each broken plan in turn, while every rank gave PP_ERR_PLAN and sent nothing
 * for the one before (after a plan that some rank ran, the ranks' states have parted). */
void lab4_play_plan_err(drv_case *c) {
    int p = c->world;
    pp_stage st;
    stage_of(c, &st, PP_1F1B, p + 1, 1, false);
    pp_batch batch = batch_of(c, &st);
    lab4_plan_result *res = drv_slot(c, "result");
    for (int t = 0; t < lab4_broken_plans(p); t++) {
        char name[16];
        snprintf(name, sizeof name, "plan%d", t);
        pp_plan plan = plan_of(c, name, p);
        exec_args x = {&st, &plan, &batch, 0, 0};
        pl_metrics met;
        drv_measure(exec_fn, &x, &met);
        res[t] = (lab4_plan_result){.rc = x.rc, .ran = 1, .msgs = (int64_t)(met.msgs_sent + met.msgs_recv)};
        double clean = x.rc == PP_ERR_PLAN && res[t].msgs == 0;
        pl_host_allreduce(&clean, 1, PL_HOST_MIN, NULL);
        if (clean <= 0) break;
    }
    lab4_stage_free(&st);
}
