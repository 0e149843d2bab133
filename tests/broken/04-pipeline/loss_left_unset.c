// expect: wrong step.1f1b
/* Broken on purpose: pp_execute writes *loss where the loss head lives and leaves it
 * alone on every other stage ("only the last stage has a loss"). The handout asks for 0
 * there: a caller that sums or logs every rank's loss reads whatever was in its variable. */
#define pp_execute pp_execute_solution
#include "../../../solutions/04-pipeline/pipeline.c"
#undef pp_execute
int pp_execute(pp_stage *st, const pp_plan *plan, const pp_batch *batch, double *loss);

int pp_execute(pp_stage *st, const pp_plan *plan, const pp_batch *batch, double *loss) {
    double mine = 0;
    int rc = pp_execute_solution(st, plan, batch, &mine);
    if (st->has_head) *loss = mine; /* the bug: untouched elsewhere */
    return rc;
}
