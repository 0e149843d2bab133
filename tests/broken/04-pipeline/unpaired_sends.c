// expect: deadlock step.1f1b
/* Broken on purpose: no exchange plan and no group. Each output is sent alone right after
 * the action that made it, each input received alone right before the action that needs
 * it. In 1F1B's steady state stage s sends an activation forward while stage s+1 sends a
 * gradient back; a send completes only once its receive is posted, and each receive comes
 * after the other's send: both wait forever, and the watchdog ends the run. */
#define pp_execute pp_execute_solution
#include "../../../solutions/04-pipeline/pipeline.c"
#undef pp_execute

int pp_execute(pp_stage *st, const pp_plan *plan, const pp_batch *batch, double *loss) {
    executor x;
    *loss = 0.0;
    int rc = executor_init(&x, st, plan, batch);
    if (rc != PP_OK) return rc;
    zero_grads(st);
    for (int i = 0; i < x.n; i++) {
        pp_action a = x.acts[i];
        int vs = a.chunk * x.p + x.s, from = a.kind == PP_F ? vs - 1 : vs + 1;
        if (a.kind != PP_W && from >= 0 && from < x.V && from % x.p != x.s) {
            message msg = {a.kind == PP_F ? MSG_ACT : MSG_GRAD, a.mb, from, buf_get(&x)};
            pl_recv(msg.buf, (size_t)x.NC, from % x.p, st->comm, NULL);
            msg_add(&x.mailbox, &x.nmail, msg);
        }
        run_action(&x, a);
        while (x.nout > 0) {
            message out = x.outbox[--x.nout];
            pl_send(out.buf, (size_t)x.NC, dest_stage(&x, out.kind, out.vs), st->comm, NULL); /* the bug */
            buf_put(&x, out.buf);
        }
    }
    sgd_step(st);
    if (st->has_head) *loss = x.loss_sum / x.m;
    executor_free(&x);
    return PP_OK;
}
