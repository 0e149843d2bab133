/* lab04_play.h - the player's half of Lab 4: the student's generators and executor on the
 * slots, the stage the kit builds for pp_execute, and what a step's trace shows. The
 * modes (sweep, train, bench) use it too. Player side only: nothing here judges. */
#ifndef LAB04_PLAY_H
#define LAB04_PLAY_H

#include "lab04.h"        // defines: lab4_*, LAB4_*
#include "pipeline.h"     // defines: the lab API (pp_*)
#include "pl_costmodel.h" // defines: plc_profile, plc_prediction

/* The student's generator of schedule k. */
int lab4_student_schedule(int k, int p, int s, int m, int v, pp_action *out, int cap);
/* Every stage's list from the student's generator (free with lab4_plan_release, even on
 * failure); false with why on an error code or a write past the count (the modes stop on
 * it: they are the student's own program). */
bool lab4_student_plan(int k, int p, int m, int v, pp_plan *pl, char *why, size_t len);
void lab4_plan_release(pp_plan *pl);
/* pp_plan's lists as a lab4_plan (the same bytes: the player checks the mirror). */
lab4_plan lab4_plan_view(const pp_plan *pl);

/* The stage pp_execute works on: this rank's blocks, and the embedding or head where they
 * live, from host values in the slots' order (lab4_stage_floats) or, with w NULL, from the
 * counter RNG (the modes); gradient buffers from g (the same order) or zero. Returns PP_OK
 * or the code of a configuration the kit cannot build. */
int lab4_stage_build(pp_stage *st, const pp_config *c, const gpt_config *model, pl_comm *comm, const float *w,
                     const float *g, uint64_t seed, float lr);
void lab4_stage_free(pp_stage *st);
/* Its parameters and gradient buffers, in the slots' order. */
void lab4_stage_download(const pp_stage *st, float *params, float *grads);

/* The step recorded in the trace since the last pl_trace_clear. */
/* Its top-level model regions as R_* codes into out[0 .. cap); returns how many there are. */
int lab4_trace_regions(int32_t *out, int cap);
/* This rank's idle share between the start of its first action and the end of its last. */
double lab4_trace_idle(void);
/* The cost model's replay of the step (collective; false when it cannot be replayed). */
bool lab4_predict_step(const plc_profile *p, pl_comm *world, plc_prediction *out);
/* TRACE=1: the step as a Chrome trace of its own (trace.json -> trace-1f1b.json). */
void lab4_write_trace(int k, bool recompute);
/* The profiles: 0 = --profile, 1 = pcie-4gpu (NULL when not loaded). */
const plc_profile *lab4_profile(int i);

#endif
