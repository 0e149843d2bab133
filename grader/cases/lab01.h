/* lab01.h - Lab 1's driver (collectives from send/recv): what its case table, its referee
 * half (grader/referee/lab01.c) and its player half (grader/player/lab01.c) share.
 *
 * A case is one collective x size x {out-of-place, in-place} (x root for broadcast and
 * reduce): arg[0] the collective (index in LAB1_COLLS), arg[1] the count, arg[2] the
 * root, arg[3] in place. Its slots, each holding the referee's number of sets (one call's
 * buffers each, back to back; play() uses set 0, a timed run one set per call):
 *   out-of-place  "send" (IN, const: sendcount floats), "recv" (OUT: recvcount floats)
 *   in-place      "buf"  (INOUT: the larger of the two, the input at NCCL's place in it)
 */
#ifndef LAB01_CASES_H
#define LAB01_CASES_H

#include <stdbool.h>
#include <stddef.h>

#include "driver.h" // defines: drv_case, drv_test

/* The handout's threshold of lab_allreduce (labs/01-collectives/collectives.h says the
 * same; the player checks at compile time that they agree). */
#define LAB1_ALLREDUCE_SMALL_BYTES (64u * 1024u)

typedef enum { TRAFFIC_RING, TRAFFIC_BUSIEST, TRAFFIC_LOG_STEPS } lab1_traffic;
typedef enum { OUT_ROOT_COPY, OUT_SUM, OUT_GATHER, OUT_SCATTERED_SUM } lab1_output;

typedef struct {
    const char *name, *redop;
    bool rooted, blocked;  /* blocked: all-gather, reduce-scatter (per-rank blocks)     */
    lab1_traffic model;
    lab1_output output;    /* what element i of a rank's output is                      */
    bool root_only;        /* only the root's output is defined (reduce)                */
} lab1_coll;

extern const lab1_coll LAB1_COLLS[];
extern const int LAB1_NCOLLS;

/* The buffers' element counts of a case (in-place: the larger is the one buffer). */
typedef struct {
    const lab1_coll *k;
    size_t count;  /* the sweep's count: S / 4                            */
    size_t block;  /* all-gather / reduce-scatter: the per-rank count     */
    size_t nsend, nrecv;
    int root;
    bool in_place;
    size_t mine;   /* in place: where this rank's block sits in the buffer */
} lab1_shape;
lab1_shape lab1_shape_of(const drv_case *c);
/* Elements between one call's buffers and the next's in a timed run's sets (in place: the
 * one buffer; out of place each slot steps by its own count, nsend or nrecv). */
static inline size_t lab1_stride(const lab1_shape *s) { return s->nsend > s->nrecv ? s->nsend : s->nrecv; }
double lab1_busbw(const lab1_coll *k, int n);

/* referee */
void lab1_init(void);
void lab1_setup(drv_case *c);
void lab1_check(drv_case *c);
void lab1_model(drv_case *c, drv_model *m);
void lab1_perf(drv_case *c);
void lab1_refresh(drv_case *c, int run);
void lab1_verify(drv_case *c, int run);
void lab1_after_case(const drv_case *c);
void lab1_teardown(drv_case *c);
void lab1_finish(void);
/* player */
void lab1_play(drv_case *c);
void lab1_timed(drv_case *c, int which);

#endif
