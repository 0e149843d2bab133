/* lab04_ref.h - the referee's half of Lab 4: its own schedules and their rules
 * (lab04_sched.c), and the serial model the real runs are judged against (lab04_serial.c).
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

/* A real run's case (lab04_run.c): its shape, the plan handed over, the reference. */
typedef struct {
    int k, kind, p, m, v, s;
    lab4_config cfg;
    gpt_config mc;
    lab4_plan plan;                /* the plan handed to the player                       */
    lab4_plan broken[LAB4_BROKEN_PLANS];
    size_t nw;                     /* floats of this stage's parameters                  */
    float *w0;                     /* their initial values                               */
    double ref_loss, *ref_grad;    /* the serial run: mean loss, this stage's gradients   */
    double want_bytes, want_msgs, bound, slack, want_recomputes;
    int norder, order_cap;         /* expected regions, room in the "order" slot          */
} run_case;
/* The serial run on the case's tokens and targets ([m][T, b]) with the weights of `seed`:
 * st->ref_loss, and st->ref_grad = this stage's gradients in the slots' order
 * (lab04_serial.c; rank 0's referee computes it, the others receive their part: every
 * referee calls it). */
void serial_reference(run_case *st, const int *tokens, const int *targets, uint64_t seed);
/* This stage's initial parameters, in the slots' order (st->nw floats). */
void stage_weights(const run_case *st, float *w, uint64_t seed);

/* The name of cost-model profile i (0: --profile, 1: pcie-4gpu). */
const char *lab4_profile_name(int i);

#endif
