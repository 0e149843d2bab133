/* pipeline.c - Lab 4: pipeline parallelism. THE FILE YOU EDIT.
 *
 * Implement the functions declared in pipeline.h (read it, and README.md, first):
 *   1. pp_config_check: the errors for a configuration that cannot be split;
 *   2. the schedule generators: GPipe, 1F1B, interleaved 1F1B (Megatron's order) and
 *      ZB-H1 (zero bubble): stage s's ordered list of F, B (and W) actions;
 *   3. pp_execute: one training step of a plan with real activations: the stash (first
 *      in, first out), the sends and receives paired so that nothing can deadlock, the
 *      loss scaled by 1/m, gradients accumulated over the micro-batches, the SGD step;
 *   4. full activation recomputation in pp_execute when st->cfg.recompute is set.
 * Allowed: pl_send/pl_recv/pl_group_start/pl_group_end on st->comm, pl_malloc/pl_free,
 * pl_copy, pl_fill, and the model's pieces from models/gpt.h (gpt_block_*, gpt_acts_*,
 * gpt_embed_*, gpt_head_*, gpt_sgd_step). No collective: stages talk to their neighbours
 * only. Shapes of every argument are in pipeline.h.
 *
 * As handed out, everything compiles and runs and every test fails cleanly.
 */
#include "pipeline.h"

int pp_config_check(const pp_config *c) {
    (void)c;
    return PP_ERR_TODO; /* TODO: PP_ERR_STAGES, PP_ERR_MICRO, PP_ERR_CHUNKS, PP_ERR_DIVIDE */
}

int pp_schedule_gpipe(int p, int s, int m, pp_action *out, int cap) {
    (void)p, (void)s, (void)m, (void)out, (void)cap;
    return PP_ERR_TODO; /* TODO: all forwards, then all backwards */
}

int pp_schedule_1f1b(int p, int s, int m, pp_action *out, int cap) {
    (void)p, (void)s, (void)m, (void)out, (void)cap;
    return PP_ERR_TODO; /* TODO: warm-up min(p-s-1, m) forwards, steady F/B pairs, cool-down */
}

int pp_schedule_interleaved(int p, int s, int m, int v, pp_action *out, int cap) {
    (void)p, (void)s, (void)m, (void)v, (void)out, (void)cap;
    return PP_ERR_TODO; /* TODO: Megatron's table, warm-up 2(p-s-1) + (v-1)p */
}

int pp_schedule_zbh1(int p, int s, int m, pp_action *out, int cap) {
    (void)p, (void)s, (void)m, (void)out, (void)cap;
    return PP_ERR_TODO; /* TODO: 1F1B with B split from W, W deferred by s backward passes */
}

int pp_execute(pp_stage *st, const pp_plan *plan, const pp_batch *batch, double *loss) {
    (void)st, (void)plan, (void)batch;
    *loss = 0.0;
    return PP_ERR_TODO; /* TODO: stash, paired exchanges, accumulation, the SGD step */
}
