// expect: wrong step.*
/* Broken on purpose: the last stage's copy of the tied embedding is counted in the
 * gradient norm as well as the first stage's: the embedding's share counted twice. */
#define td_train_step td_train_step_solution
#include "../../../solutions/08-3d/threed.c"
#undef td_train_step

static double norm_with_copy(const td_stage *st, size_t from, size_t n) {
    float *g = malloc((n + 1) * sizeof *g);
    pl_download(g, st->grads + from, n * sizeof *g);
    double sum = 0;
    for (int k = 0; k < st->nseg; k++) {
        const td_segment *sg = &st->seg[k];
        if (sg->kind == TD_REPLICATED && st->grid->tp != 0) continue; /* the bug: no TD_TIED_COPY test */
        size_t a = sg->offset > from ? sg->offset : from, b = sg->offset + sg->count < from + n ? sg->offset + sg->count : from + n;
        for (size_t i = a; i < b; i++) sum += (double)g[i - from] * g[i - from];
    }
    free(g);
    float ss = (float)sum;
    if (pl_world() > 1) {
        float *d = pl_malloc_floats(1);
        pl_upload(d, &ss, sizeof ss);
        pl_allreduce(d, d, 1, PL_SUM, pl_comm_world(), NULL);
        pl_download(&ss, d, sizeof ss);
        pl_free(d);
    }
    return sqrt((double)ss);
}

int td_train_step(td_stage *st, const td_batch *batch, td_result *result) {
    float scale = 1.0f / ((float)st->cfg.micro * st->cfg.seq * st->cfg.batch);
    double loss = run_schedule(st, batch, scale);
    sync_tied_embedding(st);
    size_t from, shard = reduce_gradients(st, &from);
    double norm = norm_with_copy(st, from, shard);
    clip_and_update(st, from, shard, norm);
    gather_parameters(st, from, shard);
    result->loss = st->last ? loss : 0.0;
    result->grad_norm = norm;
    return TD_OK;
}
