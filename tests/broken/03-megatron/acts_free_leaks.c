// expect: pass forward.nosp
// expect-perf: freed
/* Broken on purpose: mg_acts_free frees every activation but the row layers' reduced
 * output (a->red): each block leaks N_local x C floats. */
#define mg_acts_free mg_acts_free_solution
#include "../../../solutions/03-megatron/megatron.c"
#undef mg_acts_free
void mg_acts_free(mg_acts *a);

void mg_acts_free(mg_acts *a) {
    if (!a) return;
    float *all[] = {a->x, a->ln1, a->x1, a->ln2, a->mean1, a->rstd1, a->mean2, a->rstd2,
                    a->qkv, a->probs, a->att, a->fc1, a->gel, a->full}; /* the bug: no a->red */
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pl_free(all[i]);
    free(a);
}
