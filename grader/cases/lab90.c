/* lab90.c - the case table of Lab 90 (a scan from point-to-point send/recv): every count
 * of the sweep, out of place and in place. */
#include "lab90.h"

static const size_t COUNTS[] = {0, 1, 7, 1000, 65539};

static void plan(const drv_test *t, drv_plan *p) {
    for (size_t i = 0; i < sizeof COUNTS / sizeof COUNTS[0]; i++)
        for (int ip = 0; ip < 2; ip++) {
            drv_instance *in = drv_plan_add(p, t, "scan.%s.c%zu", ip ? "ip" : "oop", COUNTS[i]);
            in->arg[0] = (int64_t)COUNTS[i], in->arg[1] = ip;
        }
}

static const drv_test TESTS[] = {
    {.name = "scan", .plan = plan, .setup = DRV_R(lab90_setup), .check = DRV_R(lab90_check),
     .model = DRV_R(lab90_model), .teardown = DRV_R(lab90_teardown), .play = DRV_P(lab90_play)},
    {NULL},
};

static const drv_flag FLAGS[] = {{NULL}};

static const drv_lab LAB = {
    .name = "90-scan",
    .title = "Lab 90: a prefix sum across the ranks from send/recv",
    .flags = FLAGS,
    .tests = TESTS,
};

int main(int argc, char **argv) { return drv_main(&LAB, argc, argv); }
