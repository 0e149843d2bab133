// expect: wrong merge.*
/* Broken on purpose: the merge averages the two partial outputs and keeps the larger
 * log-sum-exp, as if both sides had seen keys of equal weight: no rescaling by
 * exp(lse - m). */
#include "context.h"
#define cp_merge cp_merge_solution
#include "../../../solutions/10-context/context.c"
#undef cp_merge

void cp_merge(float *o, float *lse, const float *o_blk, const float *lse_blk, int rows, int d) {
    for (int r = 0; r < rows; r++) {
        if (lse_blk[r] == -INFINITY) continue;
        for (int i = 0; i < d; i++) o[(size_t)r * d + i] = 0.5f * (o[(size_t)r * d + i] + o_blk[(size_t)r * d + i]);
        lse[r] = fmaxf(lse[r], lse_blk[r]);
    }
}
