// expect: wrong grid.*
/* Broken on purpose: the groups in the wrong order, data innermost (rank = dp + d (tp +
 * t pp)): at t 2 the "tensor group" holds ranks 0 and d instead of 0 and 1, so its
 * all-reduces would sum activations of different replicas. */
#define td_grid_build td_grid_build_solution
#include "../../../solutions/08-3d/threed.c"
#undef td_grid_build

int td_grid_build(td_grid *g, int t, int p) {
    int world = pl_world(), rank = pl_rank();
    if (t < 1 || p < 1 || world % (t * p)) return TD_ERR_WORLD;
    int d = world / (t * p);
    td_grid x = {.t = t, .p = p, .d = d, .dp = rank % d, .tp = (rank / d) % t, .pp = rank / (t * d)}; /* the bug */
    pl_comm *w = pl_comm_world();
    x.tensor = pl_comm_split(w, x.dp + d * x.pp, x.tp);
    x.data = pl_comm_split(w, x.tp + t * x.pp, x.dp);
    x.pipeline = pl_comm_split(w, x.tp + t * x.dp, x.pp);
    bool ends = x.pp == 0 || x.pp == p - 1;
    x.embed = pl_comm_split(w, ends ? x.tp + t * x.dp : -1, x.pp);
    *g = x;
    return TD_OK;
}
