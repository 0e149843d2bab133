// expect: wrong traffic.*
/* Broken on purpose (the traffic only): the gradient norm's sum of squares is all-reduced
 * group by group (tensor, then pipeline, then data) instead of once over the world: the
 * same number, more collectives than the step needs, on groups that should carry none. */
#define td_train_step td_train_step_solution
#include "../../../solutions/08-3d/threed.c"
#undef td_train_step

static double norm_group_by_group(const td_stage *st, size_t from, size_t shard) {
    float ss = (float)shard_sum_squares(st, from, shard);
    pl_comm *groups[3] = {st->grid->tensor, st->grid->pipeline, st->grid->data};
    float *d = pl_malloc_floats(1);
    pl_upload(d, &ss, sizeof ss);
    for (int i = 0; i < 3; i++)
        if (pl_comm_size(groups[i]) > 1) pl_allreduce(d, d, 1, PL_SUM, groups[i], NULL); /* the bug */
    pl_download(&ss, d, sizeof ss);
    pl_free(d);
    return sqrt((double)ss);
}

int td_train_step(td_stage *st, const td_batch *batch, td_result *result) {
    float scale = 1.0f / ((float)st->cfg.micro * st->cfg.seq * st->cfg.batch);
    double loss = run_schedule(st, batch, scale);
    sync_tied_embedding(st);
    size_t from, shard = reduce_gradients(st, &from);
    double norm = norm_group_by_group(st, from, shard);
    clip_and_update(st, from, shard, norm);
    gather_parameters(st, from, shard);
    result->loss = st->last ? loss : 0.0;
    result->grad_norm = norm;
    return TD_OK;
}
