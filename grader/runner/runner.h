/* runner.h - what the runner files of the referee and of the player share (not for labs):
 * the lab, the common flags, the plan, the slot table, the output lines. */
#ifndef PL_RUNNER_H
#define PL_RUNNER_H

#include <stdbool.h>
#include <stddef.h>

#include "driver.h"
#include "wire.h"

extern const drv_lab *g_lab;
extern drv_options g_opt;

/* The runner's own flags, after parse_flags(). */
typedef struct {
    bool list, list_modes, help;
    const char *run_mode;       /* --run MODE                                    */
    const char *start_after;    /* --start-after CASE                            */
    const char *skip_groups[32];
    int nskip;
    int list_world;             /* --world N: the world --list plans for (referee) */
} runner_flags;
extern runner_flags g_flags;

/* Parse argv after the harness took its own flags (pl_init / pl_init_local). */
void parse_flags(int argc, char **argv);
void print_usage(void);
/* "name<TAB>np<TAB>script<TAB>help" per mode, for scripts/run-mode.sh. */
void print_modes(void);

struct drv_plan {
    drv_instance *v;
    size_t n, cap;
};
/* The cases to run: every test's plan, in table order, after --filter, --start-after and
 * --skip-group. */
drv_plan make_plan(void);
int test_index(const drv_test *t);
int test_count(void);

/* The case's slots, as each side sees them (the referee's copy is the authority). */
typedef struct {
    wire_slot v[WIRE_SLOTS_MAX];
    int n;
    uint64_t next;          /* referee: the next free offset in the region        */
    void *dev[WIRE_SLOTS_MAX];  /* player: device addresses                       */
    uint64_t hash[WIRE_SLOTS_MAX]; /* referee: CONST slots' hash after setup      */
} slot_table;
const wire_slot *slot_find(const slot_table *t, const char *name, int *index);

/* Run-time statistics of a timing loop (microseconds). */
pl_timing timing_of(double *us, int n);

#endif
