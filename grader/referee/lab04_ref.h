/* lab04_ref.h - the referee's half of Lab 4: its own schedules and their rules
 * (lab04_sched.c), and the serial model the real runs are judged against (lab04_run.c).
 * Plain functions on host arrays: no MPI, no device, no student code. */
#ifndef LAB04_REF_H
#define LAB04_REF_H

#include "lab04.h"

/* The referee's schedules, derived as in-flight policies (not from the formulas the
 * student codes). */
int ref_schedule(int k, int p, int s, int m, int v, lab4_action *out);
int ref_warmup(int k, int p, int s, int m, int v); /* forwards before the first B       */
int ref_peak(int k, int p, int s, int m, int v);   /* micro-batches stashed at most    */
/* Every stage's reference list, allocated (plan_free). */
void ref_plan(lab4_plan *pl, int k, int p, int m, int v);
void plan_free(lab4_plan *pl);
/* The rules a stage's list must keep (false with why): every action once, in range, B
 * after its F, W after its B, the warm-up length. */
bool list_rules(int k, int p, int s, int m, int v, const lab4_action *a, int n, char *why, size_t len);

/* The name of cost-model profile i (0: --profile, 1: pcie-4gpu). */
const char *lab4_profile_name(int i);

#endif
