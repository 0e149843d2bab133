// expect: wrong train.z3n
/* Broken on purpose: stream discipline in ZeRO-3. A unit's gradient is copied into its
 * send slot on the compute stream, and the comm stream's reduce-scatter of that slot no
 * longer waits for the copy (the comm stream's pl_stream_wait_event on the compute stream
 * is dropped there). On the cpu device's eager streams the copy has run by the time the
 * reduce-scatter is issued, so every result is right; on a GPU - and under the deferred
 * streams of a graded run - the reduce-scatter reads the slot before the gradient is in
 * it. (With resharding, each backward waits for the next unit's all-gather, queued on the
 * comm stream behind the reduce-scatter, before its copies: the order hides the missing
 * wait there, so it shows without resharding.) */
#include "pl.h" /* declared before the macro below */
static bool g_reducing;
#define pl_stream_wait_event(s, e) (g_reducing && (s) == pl_stream_comm() ? (void)(e) : pl_stream_wait_event(s, e))
#define zero_post_backward zero_post_backward_solution
#include "../../../solutions/07-zero/zero.c"
#undef zero_post_backward
void zero_post_backward(zero_state *z, int u) {
    g_reducing = z->cfg.stage == 3;
    zero_post_backward_solution(z, u);
    g_reducing = false;
}
