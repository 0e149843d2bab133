// expect: wrong merge.large
/* Broken on purpose: the merge exponentiates the log-sum-exps as they are, without
 * subtracting their maximum first. Right for small scores; with lse in the hundreds
 * exp() overflows float and the outputs become NaN. */
#include "context.h"
#define cp_merge cp_merge_solution
#include "../../../solutions/10-context/context.c"
#undef cp_merge

void cp_merge(float *o, float *lse, const float *o_blk, const float *lse_blk, int rows, int d) {
    for (int r = 0; r < rows; r++) {
        float wa = expf(lse[r]), wb = expf(lse_blk[r]), sum = wa + wb;
        if (sum == 0) continue;
        for (int i = 0; i < d; i++)
            o[(size_t)r * d + i] = (wa * o[(size_t)r * d + i] + wb * o_blk[(size_t)r * d + i]) / sum;
        lse[r] = logf(sum);
    }
}
