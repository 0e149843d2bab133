// expect: wrong rules.row.*
/* Broken on purpose: the row bounds are not rounded down to multiples of 128, so 576 rows at
 * --tensor-split 1,1 split 288/288 instead of 256/320. */
#define ls_row_range ls_row_range_solution
#include "../../../solutions/05-llama-split/llama_split.c"
#undef ls_row_range
void ls_row_range(const float *cuts, int n, int r, int64_t nrows, int64_t *row0, int64_t *row1) {
    *row0 = r == 0 ? 0 : (int64_t)((float)nrows * cuts[r]);
    *row1 = r == n - 1 ? nrows : (int64_t)((float)nrows * cuts[r + 1]);
}
