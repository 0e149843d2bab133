// expect: wrong step.*
/* Broken on purpose: the tied embedding's gradient is never all-reduced over the
 * embedding group: the first stage updates its wte with the lookup's gradient alone, the
 * last stage its copy with the head's alone, and the two copies drift apart. */
#define td_train_step td_train_step_solution
#include "../../../solutions/08-3d/threed.c"
#undef td_train_step

int td_train_step(td_stage *st, const td_batch *batch, td_result *result) {
    float scale = 1.0f / ((float)st->cfg.micro * st->cfg.seq * st->cfg.batch);
    double loss = run_schedule(st, batch, scale);
    /* the bug: no sync_tied_embedding(st) */
    size_t from, shard = reduce_gradients(st, &from);
    double norm = global_norm(st, from, shard);
    clip_and_update(st, from, shard, norm);
    gather_parameters(st, from, shard);
    result->loss = st->last ? loss : 0.0;
    result->grad_norm = norm;
    return TD_OK;
}
