// expect: wrong forward.sp
/* Broken on purpose: the sequence-parallel all-gather puts the ranks' shards side by side
 * along the batch (innermost row) dimension: row i of rank r lands at row i*tp + r instead
 * of r*N/tp + i, so the tokens come back in the wrong sequence order. */
#include <stdlib.h>
#include <string.h>
#include "pl.h"
static int broken_hidden = 1;
static void broken_allgather(const float *sb, float *rb, size_t n, pl_comm *c, pl_stream *s) {
    pl_allgather(sb, rb, n, c, s);
    pl_stream_sync(s ? s : pl_stream_compute());
    int tp = pl_comm_size(c);
    size_t C = (size_t)broken_hidden; /* the gathered buffer is [tp][rows][C] */
    size_t rows = n / C;
    float *tmp = malloc(n * (size_t)tp * sizeof(float));
    memcpy(tmp, rb, n * (size_t)tp * sizeof(float));
    for (int r = 0; r < tp; r++)
        for (size_t i = 0; i < rows; i++)
            memcpy(rb + ((size_t)i * tp + r) * C, tmp + ((size_t)r * rows + i) * C, C * sizeof(float));
    free(tmp);
}
#define pl_allgather broken_allgather
#define mg_block_forward mg_block_forward_solution
#include "../../../solutions/03-megatron/megatron.c"
#undef mg_block_forward

void mg_block_forward(const mg_config *c, const mg_params *p, mg_acts *a, float *y,
                      const float *x, pl_stream *s) {
    broken_hidden = c->hidden;
    mg_block_forward_solution(c, p, a, y, x, s);
}
