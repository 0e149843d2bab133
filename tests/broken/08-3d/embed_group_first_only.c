// expect: wrong grid.*
/* Broken on purpose: the embedding group is built from the first stage alone (colour
 * only where pp == 0), so the last stage, which holds the LM head's copy of the tied
 * embedding, is in no group and its half of the gradient can never be added. */
#define td_grid_build td_grid_build_solution
#include "../../../solutions/08-3d/threed.c"
#undef td_grid_build

int td_grid_build(td_grid *g, int t, int p) {
    int world = pl_world(), rank = pl_rank();
    if (t < 1 || p < 1 || world % (t * p)) return TD_ERR_WORLD;
    int d = world / (t * p);
    td_grid x = {.t = t, .p = p, .d = d, .tp = rank % t, .dp = (rank / t) % d, .pp = rank / (t * d)};
    pl_comm *w = pl_comm_world();
    x.tensor = pl_comm_split(w, x.dp + d * x.pp, x.tp);
    x.data = pl_comm_split(w, x.tp + t * x.pp, x.dp);
    x.pipeline = pl_comm_split(w, x.tp + t * x.dp, x.pp);
    x.embed = pl_comm_split(w, x.pp == 0 ? x.tp + t * x.dp : -1, x.pp); /* the bug: no last stage */
    *g = x;
    return TD_OK;
}
