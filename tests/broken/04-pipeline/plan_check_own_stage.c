// expect: deadlock errors.plan
/* Broken on purpose: pp_execute checks its own stage's list (every action once, in range,
 * the counts right) and trusts the other stages' lists, replaying them on the clock only.
 * A plan whose fault the clock cannot see (stage 0 runs B(0) twice and never B(m-1): no
 * stage waits for stage 0's backward) is refused by stage 0 alone; the other stages run it
 * and wait for stage 0 forever. */
#define pp_execute pp_execute_solution
#include "../../../solutions/04-pipeline/pipeline.c"
#undef pp_execute

/* plan_valid, for this stage's list only (the bug) */
static bool own_list_valid(const executor *x) {
    const pp_plan *pl = x->plan;
    if (pl->stages != x->p) return false;
    int per = x->m * x->v, r = x->s, cnt[3] = {0, 0, 0};
    char *seen = xcalloc((size_t)3 * x->V * x->m, 1);
    bool ok = pl->count[r] >= 0 && (pl->count[r] == 0 || pl->acts[r]);
    for (int i = 0; ok && i < pl->count[r]; i++) {
        pp_action a = pl->acts[r][i];
        if (a.kind < PP_F || a.kind > PP_W || a.mb < 0 || a.mb >= x->m || a.chunk < 0 || a.chunk >= x->v) {
            ok = false;
            break;
        }
        size_t k = ((size_t)a.kind * x->V + (size_t)(a.chunk * x->p + r)) * x->m + (size_t)a.mb;
        if (seen[k]++) ok = false;
        cnt[a.kind]++;
    }
    if (ok && (cnt[PP_F] != per || cnt[PP_B] != per || (cnt[PP_W] != 0 && cnt[PP_W] != per))) ok = false;
    free(seen);
    return ok;
}

/* executor_init with the check above */
static int executor_init_own(executor *x, pp_stage *st, const pp_plan *plan, const pp_batch *batch) {
    *x = (executor){.st = st, .plan = plan, .batch = batch, .p = st->cfg.stages, .s = st->stage,
                    .m = st->cfg.micro, .v = st->cfg.chunks};
    x->V = x->p * x->v;
    x->N = st->model.seq * st->model.batch;
    x->NC = x->N * st->model.hidden;
    if (!own_list_valid(x)) return PP_ERR_PLAN;
    int **starts = xcalloc((size_t)x->p, sizeof *starts);
    for (int r = 0; r < x->p; r++) starts[r] = xcalloc((size_t)plan->count[r] + 1, sizeof **starts);
    bool runs = replay_clock(x, starts);
    if (runs) plan_exchanges(x, starts);
    x->start = starts[x->s];
    for (int r = 0; r < x->p; r++)
        if (r != x->s) free(starts[r]);
    free(starts);
    if (!runs) {
        free(x->start);
        return PP_ERR_PLAN;
    }
    x->acts = plan->acts[x->s];
    x->n = plan->count[x->s];
    int blocks = 0;
    for (int i = 0; i < x->n; i++) x->split |= x->acts[i].kind == PP_W;
    for (int k = 0; k < x->v; k++) {
        blocks += st->chunk[k].count;
        x->stash[k].e = xcalloc((size_t)x->m, sizeof(stash_entry));
        x->awaiting_w[k].e = xcalloc((size_t)x->m, sizeof(stash_entry));
        for (int i = 0; i < x->m; i++) x->stash[k].e[i].rec = xcalloc((size_t)st->chunk[k].count, sizeof(gpt_acts *));
    }
    x->free_recs = xcalloc((size_t)blocks * x->m, sizeof *x->free_recs);
    x->free_heads = xcalloc((size_t)x->m, sizeof *x->free_heads);
    return PP_OK;
}

int pp_execute(pp_stage *st, const pp_plan *plan, const pp_batch *batch, double *loss) {
    executor x;
    *loss = 0.0;
    int rc = executor_init_own(&x, st, plan, batch);
    if (rc != PP_OK) return rc;
    zero_grads(st);
    int next = 0;
    for (int i = 0; i < x.n; i++) {
        while (next < x.nx && x.xs[next].tick <= x.start[i]) next = run_boundary(&x, next);
        run_action(&x, x.acts[i]);
    }
    while (next < x.nx) next = run_boundary(&x, next);
    sgd_step(st);
    if (st->has_head) *loss = x.loss_sum / x.m;
    executor_free(&x);
    return PP_OK;
}
