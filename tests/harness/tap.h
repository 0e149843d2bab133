/* tap.h - the tiny check vocabulary of the harness tests: every rank checks, rank 0
 * prints one "ok - ..." or "not ok - ..." line per check, agreed over all ranks. */
#ifndef PL_TEST_TAP_H
#define PL_TEST_TAP_H

#include <mpi.h>
#include <stdio.h>

#include "pl.h"
#include "pl_instrument.h" /* the harness's own tests read its counters and trace */

static int tap_failed;

/* Collective: every rank must call it with the same name. */
static inline void tap_check(int ok, const char *name) {
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (pl_rank() == 0) {
        printf("%s - [np %d] %s\n", all ? "ok" : "not ok", pl_world(), name);
        fflush(stdout);
    }
    if (!all) tap_failed = 1;
}

static inline int tap_finish(void) {
    pl_finalize();
    return tap_failed;
}

#endif
