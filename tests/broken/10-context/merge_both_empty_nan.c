// expect: wrong merge.mixed
/* Broken on purpose: the merge handles one empty side (its weight exp(-inf - m) is 0) but
 * not two: m = -inf, exp(-inf - -inf) is NaN, and a row that has seen no key yet on either
 * side turns into NaN instead of staying empty. */
#include "context.h"
#define cp_merge cp_merge_solution
#include "../../../solutions/10-context/context.c"
#undef cp_merge

void cp_merge(float *o, float *lse, const float *o_blk, const float *lse_blk, int rows, int d) {
    for (int r = 0; r < rows; r++) {
        float m = fmaxf(lse[r], lse_blk[r]), wa = expf(lse[r] - m), wb = expf(lse_blk[r] - m), sum = wa + wb;
        for (int i = 0; i < d; i++)
            o[(size_t)r * d + i] = (wa * o[(size_t)r * d + i] + wb * o_blk[(size_t)r * d + i]) / sum;
        lse[r] = m + logf(sum);
    }
}
