// expect: wrong step.*
/* Broken on purpose: the gradient is always scaled by max_norm / (norm + 1e-6), also when the
 * norm is under max_norm (the gradients then grow). Right whenever every norm exceeds the
 * limit; the step cases with p = 1 run with a limit above every norm. */
#define td_train_step td_train_step_solution
#include "../../../solutions/08-3d/threed.c"
#undef td_train_step

int td_train_step(td_stage *st, const td_batch *batch, td_result *result) {
    float scale = 1.0f / ((float)st->cfg.micro * st->cfg.seq * st->cfg.batch);
    double loss = run_schedule(st, batch, scale);
    sync_tied_embedding(st);
    size_t from, shard = reduce_gradients(st, &from);
    double norm = global_norm(st, from, shard);
    pl_scale(st->grads + from, (float)(st->cfg.max_norm / (norm + 1e-6)), shard, NULL); /* the bug: always */
    st->step++;
    kern_optim_adamw(st->params + from, st->adam_m, st->adam_v, st->grads + from, shard, st->cfg.lr, st->cfg.beta1,
                     st->cfg.beta2, st->cfg.eps, st->cfg.weight_decay, st->step, NULL);
    gather_parameters(st, from, shard);
    result->loss = st->last ? loss : 0.0;
    result->grad_norm = norm;
    return TD_OK;
}
