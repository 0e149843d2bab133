/* lab90.h - Lab 90's driver (a scan from send/recv): what its case table, its referee half
 * (grader/referee/lab90.c) and its player half (grader/player/lab90.c) share.
 *
 * A case is a count x {out-of-place, in-place}: arg[0] the count, arg[1] in place. Slots:
 * out-of-place "send" (IN, const) and "recv" (OUT), count floats each; in place "buf"
 * (INOUT, count floats). */
#ifndef LAB90_CASES_H
#define LAB90_CASES_H

#include "driver.h" // defines: drv_case, drv_model

/* referee */
void lab90_setup(drv_case *c);
void lab90_check(drv_case *c);
void lab90_model(drv_case *c, drv_model *m);
void lab90_teardown(drv_case *c);
/* player */
void lab90_play(drv_case *c);

#endif
