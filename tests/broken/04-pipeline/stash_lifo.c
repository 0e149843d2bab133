// expect: wrong step.gpipe
/* Broken on purpose: the stash is last in, first out. Before each backward the newest
 * stashed micro-batch of the chunk is moved to the front of the queue, so B(0) runs on
 * the activations of the last forward: every gradient but the last micro-batch's is
 * computed from another micro-batch's activations. */
#define pp_execute pp_execute_solution
#include "../../../solutions/04-pipeline/pipeline.c"
#undef pp_execute

int pp_execute(pp_stage *st, const pp_plan *plan, const pp_batch *batch, double *loss) {
    executor x;
    *loss = 0.0;
    int rc = executor_init(&x, st, plan, batch);
    if (rc != PP_OK) return rc;
    zero_grads(st);
    int next = 0;
    for (int i = 0; i < x.n; i++) {
        while (next < x.nx && x.xs[next].tick <= x.start[i]) next = run_boundary(&x, next);
        if (x.acts[i].kind == PP_B) { /* the bug: the newest entry first */
            fifo *q = &x.stash[x.acts[i].chunk];
            stash_entry newest = q->e[q->tail - 1];
            memmove(&q->e[q->head + 1], &q->e[q->head], (size_t)(q->tail - 1 - q->head) * sizeof newest);
            q->e[q->head] = newest;
        }
        run_action(&x, x.acts[i]);
    }
    while (next < x.nx) next = run_boundary(&x, next);
    sgd_step(st);
    if (st->has_head) *loss = x.loss_sum / x.m;
    executor_free(&x);
    return PP_OK;
}
