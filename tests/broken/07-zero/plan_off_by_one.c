// expect: wrong plan.reshard
/* Broken on purpose: the resharding plan looks for the saved piece holding an element with
 * `<=` at its end, so a read can start one element past a saved piece (it only shows when
 * pieces do not line up: uneven world sizes, another stage). */
#define zero_ckpt_plan zero_ckpt_plan_solution
#include "../../../solutions/07-zero/zero.c"
#undef zero_ckpt_plan
int zero_ckpt_plan(const zero_piece *mine, int nmine, const zero_saved_piece *saved, int nsaved, zero_read *out,
                   int max) {
    int n = 0;
    for (int i = 0; i < nmine; i++) {
        size_t pos = mine[i].begin, end = mine[i].begin + mine[i].count;
        while (pos < end) {
            int j = 0;
            while (j < nsaved && !(saved[j].tensor == mine[i].tensor && saved[j].begin <= pos &&
                                   pos <= saved[j].begin + saved[j].count)) /* the bug: <= */
                j++;
            if (j == nsaved) return ZERO_ERR_COVERAGE;
            size_t stop = saved[j].begin + saved[j].count < end ? saved[j].begin + saved[j].count : end;
            if (stop <= pos) stop = pos + 1;
            if (n == max) return ZERO_ERR_CAPACITY;
            out[n++] = (zero_read){i, pos - mine[i].begin, j, pos - saved[j].begin, stop - pos};
            pos = stop;
        }
    }
    return n;
}
