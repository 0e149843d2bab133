// expect: wrong rules.cuts
/* Broken on purpose: the --tensor-split proportions are summed but not divided by their
 * total, so 3,1 gives the cuts 0, 3, 4 instead of 0, 0.75, 1. */
#define ls_cuts ls_cuts_solution
#include "../../../solutions/05-llama-split/llama_split.c"
#undef ls_cuts
int ls_cuts(const float *p, int n_props, int n, float *cuts) {
    int rc = ls_cuts_solution(p, n_props, n, cuts);
    float acc = 0.0f;
    bool equal = true;
    for (int r = 0; r < n_props; r++) equal &= p[r] == 0.0f;
    for (int r = 0; rc == LS_OK && r < n; r++) cuts[r + 1] = acc += equal ? 1.0f : r < n_props ? p[r] : 0.0f;
    return rc;
}
