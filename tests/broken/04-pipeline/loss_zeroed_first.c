// expect: full step.*
/* A correct alternative: pp_execute sets *loss to 0 on entry, on every stage, and only the
 * stage of the last virtual stage overwrites it with the mean loss. */
#define pp_execute pp_execute_solution
#include "../../../solutions/04-pipeline/pipeline.c"
#undef pp_execute
int pp_execute(pp_stage *st, const pp_plan *plan, const pp_batch *batch, double *loss);

int pp_execute(pp_stage *st, const pp_plan *plan, const pp_batch *batch, double *loss) {
    *loss = 0;
    double mine = 0;
    int rc = pp_execute_solution(st, plan, batch, &mine);
    if (rc == PP_OK && st->has_head) *loss = mine;
    return rc;
}
