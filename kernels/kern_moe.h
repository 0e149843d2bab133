/* kern_moe.h - moving a mixture-of-experts layer's tokens between the two layouts it
 * lives in: the rank's batch (token t, with k assignments (t, j) to experts) and the
 * expert work (one row per kept assignment, grouped by destination and expert). A slot
 * array says where assignment (t, j) lives on the expert side: slot[t*k + j] is its row,
 * or -1 when it was dropped; slots of kept assignments are distinct.
 *
 *   kern_moe_scatter   rows[slot] = scale * x[t]          (dispatch: copy each token to its
 *                                                          rows; backward: dy times the gate)
 *   kern_moe_gather    out[t] = sum_j weight * rows[slot] (combine: the gate-weighted sum of
 *                                                          a token's expert outputs; backward:
 *                                                          the sum of its input gradients)
 *   kern_moe_rowdot    dot[t*k+j] = <a[t], rows[slot]>    (the gates' gradient: dy . output)
 *
 * Three entry points per function, as in every kernels/ family (_ref: CPU reference; _cuda:
 * CUDA version; no suffix: the dispatcher). slot, scale, weight and dot are device arrays
 * (host memory on the cpu device); scale and weight may be NULL (all ones). Dropped
 * assignments (slot -1) are skipped: gather adds nothing for them, rowdot writes 0.
 */
#ifndef KERN_MOE_H
#define KERN_MOE_H

#include "pl_device.h" // defines: pl_stream

#ifdef __cplusplus
extern "C" {
#endif

void kern_moe_scatter(float *rows,        /* [R, H]: rows not named by a slot are untouched */
                      const float *x,     /* [T, H]                                         */
                      const int *slot,    /* [T*k]: row of (t, j), or -1                    */
                      const float *scale, /* [T*k] or NULL                                  */
                      int T, int k, int H, pl_stream *s);
void kern_moe_gather(float *out,          /* [T, H]: written, every row                      */
                     const float *rows,   /* [R, H]                                          */
                     const int *slot,     /* [T*k]                                           */
                     const float *weight, /* [T*k] or NULL                                   */
                     int T, int k, int H, pl_stream *s);
void kern_moe_rowdot(float *dot,          /* [T*k]: written                                  */
                     const float *a,      /* [T, H]                                          */
                     const float *rows,   /* [R, H]                                          */
                     const int *slot,     /* [T*k]                                           */
                     int T, int k, int H, pl_stream *s);

/* Bytes read + written and flops of one call (docs/cost-model.md, "Kernels"); `kept` is the
 * number of slots >= 0. which: 0 scatter, 1 gather, 2 rowdot. */
void kern_moe_cost(int which, int T, int k, int H, int kept, double *bytes, double *flops);

void kern_moe_scatter_ref(float *rows, const float *x, const int *slot, const float *scale, int T, int k, int H);
void kern_moe_gather_ref(float *out, const float *rows, const int *slot, const float *weight, int T, int k, int H);
void kern_moe_rowdot_ref(float *dot, const float *a, const float *rows, const int *slot, int T, int k, int H);
#ifdef PL_HAVE_CUDA
void kern_moe_scatter_cuda(float *rows, const float *x, const int *slot, const float *scale, int T, int k, int H,
                           pl_stream *s);
void kern_moe_gather_cuda(float *out, const float *rows, const int *slot, const float *weight, int T, int k, int H,
                          pl_stream *s);
void kern_moe_rowdot_cuda(float *dot, const float *a, const float *rows, const int *slot, int T, int k, int H,
                          pl_stream *s);
#endif

#ifdef __cplusplus
}
#endif

#endif
