// expect: wrong positions.zigzag.*
/* Broken on purpose: the zig-zag layout gives rank r chunks r and 2n - 2 - r (one chunk
 * off from 2n - 1 - r): ranks share a chunk and the last chunk belongs to nobody. */
#include "context.h"
#define cp_positions cp_positions_solution
#include "../../../solutions/10-context/context.c"
#undef cp_positions

int cp_positions(const cp_config *c, int rank, int *pos) {
    int n = pl_comm_size(c->comm), C = chunks_of(c, n), k = 0;
    int ch[2] = {rank, 2 * n - 2 - rank}, m = c->layout == CP_ZIGZAG ? 2 : 1;
    for (int i = 0; i < m; i++)
        for (int t = 0; t < chunk_len(c->seq, C, ch[i]); t++) pos[k++] = chunk_start(c->seq, C, ch[i]) + t;
    return k;
}
