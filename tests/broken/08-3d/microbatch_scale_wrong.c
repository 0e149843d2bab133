// expect: wrong step.*
/* Broken on purpose: each micro-batch's loss gradient is scaled by 1/N (its own mean)
 * instead of 1/(m N): the accumulated gradient is that of the sum of the m micro-batches'
 * losses, m times too big. (With clipping on, only the norm shows it.) */
#define td_train_step td_train_step_solution
#include "../../../solutions/08-3d/threed.c"
#undef td_train_step

int td_train_step(td_stage *st, const td_batch *batch, td_result *result) {
    float scale = 1.0f / ((float)st->cfg.seq * st->cfg.batch); /* the bug: not divided by m */
    double loss = run_schedule(st, batch, scale);
    sync_tied_embedding(st);
    size_t from, shard = reduce_gradients(st, &from);
    double norm = global_norm(st, from, shard);
    clip_and_update(st, from, shard, norm);
    gather_parameters(st, from, shard);
    result->loss = st->last ? loss : 0.0;
    result->grad_norm = norm;
    return TD_OK;
}
