// expect: wrong rules.cuts
// np: 2
/* Broken on purpose: each proportion is divided by the total before the prefix sum
 * (acc += p[r] / sum) instead of dividing the prefix sum once (acc / sum), as the handout
 * and llama.cpp do. The same numbers in exact arithmetic; in float, 3,2,1 gives a second
 * cut of 0.833333373 instead of 0.833333313, and the layer at 5/6 changes rank. */
#define ls_cuts ls_cuts_solution
#include "../../../solutions/05-llama-split/llama_split.c"
#undef ls_cuts
int ls_cuts(const float *p, int n_props, int n, float *cuts) {
    int rc = ls_cuts_solution(p, n_props, n, cuts);
    if (rc != LS_OK) return rc;
    float sum = 0.0f;
    for (int r = 0; r < n_props; r++) sum += p[r];
    bool equal = sum == 0.0f;
    float acc = 0.0f, total = equal ? (float)n : sum;
    for (int r = 0; r < n; r++) {
        acc += (equal ? 1.0f : r < n_props ? p[r] : 0.0f) / total;
        cuts[r + 1] = acc;
    }
    return rc;
}
