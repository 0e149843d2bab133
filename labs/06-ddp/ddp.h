/* ddp.h - Lab 6: data-parallel training with gradient buckets (the API the grader calls).
 *
 * The model (grader/player/lab06_mlp.c: an MLP 784 -> H -> H -> 10) registers its parameters
 * in a fixed order (W1, b1, W2, b2, W3, b3) and, during backward, calls
 * ddp_grad_ready(d, i) on the compute stream as soon as parameter i's gradient is final,
 * writing every gradient through params[i].grad. You implement what happens to those
 * gradients so that every rank ends each synced step with the same averaged gradient.
 *
 * Allowed harness calls: pl_malloc/pl_free/pl_copy/pl_fill/pl_scale, pl_allreduce and
 * pl_broadcast on d->comm, pl_stream_comm()/pl_stream_compute(), pl_event_* and
 * pl_stream_wait_event/pl_stream_sync. Nothing else talks to the other ranks.
 */
#ifndef LAB06_DDP_H
#define LAB06_DDP_H

#include <stdbool.h>
#include <stddef.h>

#include "pl.h"

#define DDP_MAX_PARAMS 16

typedef enum {
    DDP_NAIVE = 0, /* after backward: one all-reduce per parameter                       */
    DDP_BUCKETED,  /* after backward: one all-reduce per bucket                          */
    DDP_OVERLAP    /* during backward: a bucket's all-reduce starts once it is full and  */
                   /* every earlier bucket has started                                   */
} ddp_mode;

typedef struct {
    const char *name;
    float *data; /* device [numel]: the values (the optimizer updates them)                 */
    float *grad; /* device [numel]: where the model writes the gradient; bucketed modes     */
                 /* point it into a bucket (gradient_as_bucket_view)                        */
    size_t numel;
} ddp_param;

typedef struct {
    float *buf;                      /* device [numel]: the flat buffer all-reduced at once */
    size_t numel;
    int nparams;
    int params[DDP_MAX_PARAMS];      /* parameter indices, in the order they sit in buf     */
    size_t offsets[DDP_MAX_PARAMS];  /* element offset of each in buf                       */
    int ready;                       /* parameters ready in this backward                   */
    bool launched;                   /* its all-reduce was issued in this backward          */
} ddp_bucket;

typedef struct {
    ddp_mode mode;
    pl_comm *comm;
    ddp_param *params; /* [nparams], registration order; owned by the model */
    int nparams;
    double bucket_cap_mb;       /* cap of every bucket but the first (MiB), default 25  */
    double first_bucket_cap_mb; /* cap of the first bucket (MiB), default 1             */

    ddp_bucket buckets[DDP_MAX_PARAMS];
    int nbuckets;
    int bucket_of[DDP_MAX_PARAMS]; /* parameter -> its bucket                             */
    int next_launch;               /* overlap: the next bucket to launch                  */

    bool sync;                     /* false inside no_sync: no communication at all        */
    int iteration;                 /* synced backward passes completed                    */
    bool rebuilt;                  /* buckets rebuilt in the observed order already        */
    int ready_order[DDP_MAX_PARAMS]; /* order gradients became ready (first synced pass)   */
    int nready;
    pl_event *comm_done;           /* recorded on the comm stream after the last launch    */
    void *extra;                   /* yours, if you need more state                        */
} ddp_state;

/* Set up DDP over `params` (registration order). Bucketed modes build the buckets in
 * reverse registration order, allocate their buffers and make params[i].grad views into
 * them (copying whatever the old gradient held). cap_mb <= 0 means the default. */
void ddp_init(ddp_state *d, ddp_param *params, int nparams, ddp_mode mode, double bucket_cap_mb,
              double first_bucket_cap_mb, pl_comm *comm);
/* (Re)build the buckets with the parameters taken in `order` (nparams indices): a bucket
 * closes once its size in bytes reaches its cap (the first bucket's cap for bucket 0). */
void ddp_build_buckets(ddp_state *d, const int *order);
/* Before each backward. After the first synced iteration (once), rebuild the buckets in
 * the order the gradients became ready, rank 0's order broadcast to every rank. */
void ddp_backward_begin(ddp_state *d);
/* From the model's backward, on the compute stream: parameter i's gradient is final. */
void ddp_grad_ready(ddp_state *d, int i);
/* After backward: issue whatever has not been issued, and make the compute stream wait
 * until every averaged gradient is in place (the optimizer runs next). */
void ddp_backward_end(ddp_state *d);
/* no_sync: with sync false, backward passes accumulate local gradients and communicate
 * nothing; the next synced backward all-reduces the sum. */
void ddp_set_sync(ddp_state *d, bool sync);
void ddp_free(ddp_state *d);

#endif
