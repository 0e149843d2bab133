/* lab09.h - what the files of Lab 9's driver share.
 *
 * The driver is cut along the line the grader's referee/player split will follow:
 *   lab09_referee.c  makes every input as host arrays from seeds, computes the expected
 *                    outputs with the float64 reference (models/internal/moe_ref.h) and
 *                    checks host arrays: it never touches device memory and never calls the
 *                    student;
 *   lab09_player.c   turns the host inputs into device buffers, calls the student's
 *                    functions, and copies the outputs back into host arrays;
 *   lab09.c          the case table, the lab state, and the glue between the two;
 *   lab09_modes.c    RUN=route and RUN=bench.
 * A rank's inputs come from its own seed (its tokens, its experts, its gradients); the router
 * and the counts of the all-to-all-v cases come from a public one. The other ranks' seeds
 * are learned only after the student's call, to compute the reference.
 */
#ifndef LAB09_DRIVER_H
#define LAB09_DRIVER_H

#include <stdbool.h>
#include <stdint.h>

#include "driver.h" // defines: drv_* (the case runner)
#include "moe.h"    // defines: the lab API

/* ---- the lab state ------------------------------------------------------------------- */
typedef struct {
    int n, me;
    pl_comm *comm;
    int tokens, hidden, ffn; /* --tokens, --hidden, --ffn: the layer cases' shapes     */
    int reuse_calls;         /* --reuse-calls: back-to-back all-reduces in the reuse cases */
    double jitter_us;        /* --jitter-us: delays injected after waits and barriers  */
    const char *profile;     /* --profile for the bench's prediction                    */
} lab9_state;
extern lab9_state L9;

/* ---- the cases' parameters (decoded from drv_instance.arg) ---------------------------- */
typedef enum { K_CONFIG, K_ROUTE, K_A2A, K_LAYER, K_REUSE, K_AR } l9_kind;
enum { V_UNIFORM, V_DROPS, V_SKEW };                          /* routing of route/layer cases */
enum { CFG_OK, CFG_SHAPE, CFG_TOPK3, CFG_TOPK_GT_E, CFG_CAP0, CFG_CAPNEG, CFG_EXPERTS, CFG_MISMATCH, CFG_COUNT };
enum { A2A_RANDOM, A2A_EMPTY, A2A_SKEW };

typedef struct {
    l9_kind kind;
    int variant;      /* routing (V_*), config error (CFG_*), all-to-all pattern (A2A_*)  */
    int disp;         /* layer: MOE_TWO_SIDED / MOE_ONE_SIDED; all-reduce: 0 one-shot, 1 two-shot */
    int T, H, F, E, k;
    double cf, alpha;
    int calls;        /* layer: forwards back to back; all-reduce: calls back to back     */
    int64_t count;    /* all-reduce elements                                              */
    bool in_place;
} l9_params;
void l9_params_of(const drv_case *c, l9_params *p);
moe_config l9_config_of(const l9_params *p);

/* ---- referee: inputs, reference, checks (host arrays only) ----------------------------- */
typedef struct {
    /* layer and reuse */
    float *x;              /* [calls, T, H]  this rank's tokens for each call                */
    float *wr;             /* [E, H]         public                                          */
    float *wg, *wu, *wd;   /* [Le, F, H] x2, [Le, H, F]  this rank's experts                 */
    float *dy;             /* [T, H]                                                        */
    float daux;
    /* route */
    float *logits, *dgate; /* [T, E], [T, k]                                                 */
    /* config */
    moe_config cfg;
    int expect_code;
    /* all-to-all-v */
    int *send_counts, *recv_counts; /* [n]                                                   */
    float *a2a_send;       /* [sum of send counts]                                           */
    /* all-reduce */
    float *ar_in;          /* [calls, count]                                                 */
} l9_inputs;

/* What the player brings back (host arrays, allocated by l9_outputs_alloc). */
typedef struct {
    int code;
    moe_routing r;          /* route: the student's routing; layer: the last forward's     */
    float *dlogits;         /* route                                                        */
    float *y;               /* [calls, T, H]                                                */
    float *dx, *dwr, *dwg, *dwu, *dwd;
    float *a2a_recv;
    float *ar_out;          /* [calls, count]                                               */
    double *pair_fwd, *pair_bwd; /* [n] bytes to each rank (sends or puts), from the trace  */
    int *kinds_fwd, *kinds_bwd;  /* [PL_OP_COUNT] ops of each kind                          */
} l9_outputs;

void l9_inputs_make(const l9_params *p, int rank, uint64_t seed, uint64_t pub, l9_inputs *in);
void l9_inputs_free(l9_inputs *in);
void l9_outputs_alloc(const l9_params *p, l9_outputs *o);
void l9_outputs_free(l9_outputs *o);
/* Compare the player's outputs with the reference computed from every rank's seed; fails
 * the case with the reason. seeds[n]: every rank's seed (learned after the call). */
void l9_referee_check(drv_case *c, const l9_params *p, const l9_inputs *in, const l9_outputs *o,
                      const uint64_t *seeds, uint64_t pub);
uint64_t l9_public_seed(const drv_case *c);

/* ---- player: device buffers, the student's calls ---------------------------------------- */
typedef struct l9_player l9_player;
l9_player *l9_player_setup(const l9_params *p, const l9_inputs *in);  /* collective */
void l9_player_run(l9_player *pl, const l9_params *p, const l9_inputs *in, l9_outputs *o, uint64_t jitter_seed);
void l9_player_collect(l9_player *pl, const l9_params *p, l9_outputs *o);
void l9_player_free(l9_player *pl);                                   /* collective */

/* ---- modes (lab09_modes.c) ------------------------------------------------------------- */
int l9_mode_route(void);
int l9_mode_bench(void);

#endif
