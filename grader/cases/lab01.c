/* lab01.c - the case table of Lab 1 (collectives from point-to-point send/recv).
 *
 * As in nccl-tests, a collective is one row of small facts (its buffers, its bus-bandwidth
 * factor, its traffic model, what its output is); the cases are every collective x size x
 * {out-of-place, in-place} (x root for broadcast and reduce). The referee makes the inputs
 * and checks (grader/referee/lab01.c), the player calls the student (grader/player/lab01.c).
 *
 * Inputs are small integers stored as floats, so every summation order gives the same
 * bits: a result is right only if it is bit-identical to the expected one. Each rank's
 * inputs come from a seed only referees know (derived from the run's key), fresh for every
 * case and every timed run: the only way to the right answer is to receive it.
 */
#include <stdio.h>
#include <string.h>

#include "lab01.h"

const lab1_coll LAB1_COLLS[] = {
    {"broadcast", "none", true, false, TRAFFIC_BUSIEST, OUT_ROOT_COPY, false},
    {"reduce", "sum", true, false, TRAFFIC_BUSIEST, OUT_SUM, true},
    {"allgather", "none", false, true, TRAFFIC_RING, OUT_GATHER, false},
    {"reduce_scatter", "sum", false, true, TRAFFIC_RING, OUT_SCATTERED_SUM, false},
    {"allreduce_ring", "sum", false, false, TRAFFIC_RING, OUT_SUM, false},
    {"allreduce_rd", "sum", false, false, TRAFFIC_LOG_STEPS, OUT_SUM, false},
    {"allreduce", "sum", false, false, TRAFFIC_RING, OUT_SUM, false},
};
const int LAB1_NCOLLS = (int)(sizeof LAB1_COLLS / sizeof LAB1_COLLS[0]);

static int g_all_roots_max = 1 << 20;
static const char *g_only;

double lab1_busbw(const lab1_coll *k, int n) {
    if (k->rooted) return 1.0;
    if (k->blocked) return (double)(n - 1) / n;
    return 2.0 * (n - 1) / n;
}

lab1_shape lab1_shape_of(const drv_case *c) {
    lab1_shape s = {.k = &LAB1_COLLS[c->arg[0]], .count = (size_t)c->arg[1], .root = (int)c->arg[2],
                    .in_place = c->arg[3] != 0};
    size_t n = (size_t)c->world;
    s.block = s.count / n;
    bool gather = s.k->output == OUT_GATHER;
    s.nsend = s.k->blocked ? (gather ? s.block : s.block * n) : s.count;
    s.nrecv = s.k->blocked ? (gather ? s.block * n : s.block) : s.count;
    s.mine = s.k->blocked ? (size_t)c->rank * s.block : 0;
    return s;
}

static void plan_all(const drv_test *t, drv_plan *p) {
    if (g_only) {
        int i = 0;
        while (i < LAB1_NCOLLS && strcmp(LAB1_COLLS[i].name, g_only) != 0) i++;
        if (i == LAB1_NCOLLS) pl_usage_error("--collective: unknown collective '%s'", g_only);
    }
    int n = pl_world();
    size_t sizes[130], ns = drv_sizes(sizes, 128);
    /* lab_allreduce on both sides of its switch as well (LAB1_ALLREDUCE_SMALL_BYTES: one
     * element under it, and exactly it), inside the sizes asked for */
    size_t edge[2] = {LAB1_ALLREDUCE_SMALL_BYTES / 4 - 1, LAB1_ALLREDUCE_SMALL_BYTES / 4}, nall = ns;
    size_t lo = ns ? sizes[0] : 0, hi = ns ? sizes[ns - 1] : 0;
    for (int e = 0; e < 2; e++) {
        bool have = false;
        for (size_t i = 0; i < ns; i++) have = have || sizes[i] == edge[e];
        if (!have && edge[e] > lo && edge[e] < hi) sizes[nall++] = edge[e];
    }
    for (int k = 0; k < LAB1_NCOLLS; k++) {
        const lab1_coll *co = &LAB1_COLLS[k];
        if (g_only && strcmp(g_only, co->name)) continue;
        /* lab_allreduce only chooses (its two algorithms have groups of their own, at every
         * size): the edge sizes, the largest, and both sides of its switch */
        bool choice = strcmp(co->name, "allreduce") == 0;
        size_t upto = choice ? nall : ns;
        for (size_t i = 0; i < upto; i++) {
            bool edge_size = sizes[i] == edge[0] || sizes[i] == edge[1];
            if (choice && sizes[i] > 8 && i + 1 < ns && !edge_size) continue;
            for (int root = 0; root < (co->rooted ? n : 1); root++) {
                bool every = sizes[i] * 4 <= (size_t)g_all_roots_max;
                if (co->rooted && !every && root != 0 && root != n - 1) continue;
                for (int ip = 0; ip < 2; ip++) {
                    drv_instance *in = co->rooted
                        ? drv_plan_add(p, t, "%s.%s.r%d.c%zu", co->name, ip ? "ip" : "oop", root, sizes[i])
                        : drv_plan_add(p, t, "%s.%s.c%zu", co->name, ip ? "ip" : "oop", sizes[i]);
                    snprintf(in->group, sizeof in->group, "%s", co->name);
                    in->arg[0] = k, in->arg[1] = (int64_t)sizes[i], in->arg[2] = root, in->arg[3] = ip;
                }
            }
        }
    }
}

static const drv_test TESTS[] = {
    {.name = "collectives", .plan = plan_all,
     .setup = DRV_R(lab1_setup), .check = DRV_R(lab1_check), .model = DRV_R(lab1_model), .perf = DRV_R(lab1_perf),
     .refresh = DRV_R(lab1_refresh), .verify = DRV_R(lab1_verify), .teardown = DRV_R(lab1_teardown),
     .play = DRV_P(lab1_play), .timed = DRV_P(lab1_timed)},
    {NULL},
};

static const drv_flag FLAGS[] = {
    {"--collective", DRV_STR, &g_only, 0, 0, "run only this collective (broadcast, reduce, allgather, ...)"},
    {"--all-roots-max", DRV_INT, &g_all_roots_max, 0, 1 << 30,
     "test every root up to this many bytes, roots 0 and n-1 above (default 1M)"},
    {NULL},
};

static const drv_lab LAB = {
    .name = "01-collectives",
    .title = "Lab 1: collectives from point-to-point send/recv",
    .flags = FLAGS,
    .tests = TESTS,
    .init = DRV_R(lab1_init),
    .finish = DRV_R(lab1_finish),
    .after_case = DRV_R(lab1_after_case),
};

int main(int argc, char **argv) { return drv_main(&LAB, argc, argv); }
