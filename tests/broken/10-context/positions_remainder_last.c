// expect: wrong positions.*
/* Broken on purpose: chunks take S / C tokens and the remainder goes to the last chunk
 * (the handout gives one more token to each of the first S % C chunks instead). */
#include "context.h"
#define cp_positions cp_positions_solution
#include "../../../solutions/10-context/context.c"
#undef cp_positions

int cp_positions(const cp_config *c, int rank, int *pos) {
    int n = pl_comm_size(c->comm), C = chunks_of(c, n), k = 0, base = c->seq / C;
    int ch[2] = {rank, 2 * n - 1 - rank}, m = c->layout == CP_ZIGZAG ? 2 : 1;
    for (int i = 0; i < m; i++) {
        int len = base + (ch[i] == C - 1 ? c->seq % C : 0);
        for (int t = 0; t < len; t++) pos[k++] = ch[i] * base + t;
    }
    return k;
}
