/* lab09.h - Lab 9's driver (expert parallelism and one-sided communication): what its case
 * table (grader/cases/lab09.c), its referee half (grader/referee/lab09*.c) and its player
 * half (grader/player/lab09*.c) share. No lab header here: the referee never reads them.
 *
 * A case's parameters are its arg[] (A_* below, decoded by l9_params_of on either side).
 * Its slots, by kind (T tokens, H hidden, F ffn, E experts, k top-k, Le = E/n, n ranks):
 *   every case   "cfg"       IN const   l9_cfg: this rank's moe_config (config.hidden_mismatch
 *                                       gives rank 0 another hidden size)
 *                "scalars"   IN const   l9_scalars: daux, the seed of the timing jitter
 *                "counted"   OUT zeroed the player's own count of what its calls did (its
 *                                       trace and its symmetric backend): L9_CNT_* below.
 *                                       Untrusted, as drv_case.m is
 *   config       "code"      OUT        int32: moe_config_check's return
 *   route        "logits" [T, E], "dgate" [T, k] (IN const); "probs" [T, E], "expert",
 *                "gate", "keep" [T, k], "aux" (1 float), "dlogits" [T, E] (OUT)
 *   alltoallv    "send" [sum of send counts], "counts" [2n] int32: send counts then
 *                receive counts (IN const); "recv" [sum of receive counts] (OUT)
 *   layer/reuse  "x" [calls, T, H], "wr" [E, H], "wg" "wu" [Le, F, H], "wd" [Le, H, F],
 *                "dy" [T, H] (IN const); "y" [calls, T, H], "dx" [T, H], the last forward's
 *                routing "probs" "expert" "gate" "keep" "aux" (OUT); "dwr" "dwg" "dwu"
 *                "dwd" (OUT zeroed: moe_backward accumulates into them)
 *   allreduce    "in" [calls, count] (IN const) and "out" [calls, count] (OUT); in place:
 *                "buf" [calls, count] (INOUT)
 * Every input of a rank is its own: its tokens, its experts, its gradients (from its seed)
 * and what all ranks share (the router, the all-to-all-v's counts: from a public seed).
 */
#ifndef LAB09_CASES_H
#define LAB09_CASES_H

#include <stdbool.h>
#include <stdint.h>

#include "driver.h" // defines: drv_case, drv_test, drv_model

/* ---- the lab's flags (both sides parse the same command line) ------------------------ */
typedef struct {
    int tokens, hidden, ffn; /* --tokens, --hidden, --ffn: the layer cases' shapes          */
    int reuse_calls;         /* --reuse-calls: back-to-back all-reduces in the reuse cases   */
    double jitter_us;        /* --jitter-us: delays the player injects after waits, barriers */
    const char *profile;     /* --profile: the bench's prediction                            */
} lab9_flags;
extern lab9_flags L9;

/* ---- the cases' parameters ---------------------------------------------------------- */
typedef enum { K_CONFIG, K_ROUTE, K_A2A, K_LAYER, K_REUSE, K_AR } l9_kind;
enum { V_UNIFORM, V_DROPS, V_SKEW, V_TIES };                          /* routing of route/layer cases */
/* config.*: each error alone, then two at once (the first in moe.h's order wins) */
enum {
    CFG_OK, CFG_SHAPE, CFG_TOPK3, CFG_TOPK_GT_E, CFG_CAP0, CFG_CAPNEG, CFG_EXPERTS, CFG_MISMATCH,
    CFG_SHAPE_TOPK, CFG_TOPK_CAP, CFG_CAP_EXPERTS, CFG_MISMATCH_SHAPE, CFG_COUNT
};
/* the variants that need two ranks or more */
#define CFG_NEEDS_RANKS(v) ((v) == CFG_EXPERTS || (v) == CFG_MISMATCH || (v) == CFG_CAP_EXPERTS || (v) == CFG_MISMATCH_SHAPE)
enum { A2A_RANDOM, A2A_EMPTY, A2A_SKEW };
enum { A_KIND, A_VARIANT, A_DISP, A_E, A_K, A_CALLS, A_COUNT, A_INPLACE };
/* an all-reduce case's variant: AR_TIMED is also timed against the library (perf) */
enum { AR_PLAIN, AR_TIMED };

/* The codes and dispatchers of labs/09-moe/moe.h (the player checks that they agree). */
enum { L9_OK, L9_ERR_SHAPE, L9_ERR_TOPK, L9_ERR_CAPACITY, L9_ERR_EXPERTS, L9_ERR_MISMATCH };
enum { L9_TWO_SIDED = 0, L9_ONE_SIDED = 1 };

typedef struct {
    l9_kind kind;
    int variant;      /* routing (V_*), config error (CFG_*), all-to-all pattern (A2A_*)  */
    int disp;         /* layer: L9_TWO_SIDED / L9_ONE_SIDED; all-reduce: 0 one-shot, 1 two-shot */
    int n;            /* ranks                                                            */
    int T, H, F, E, k;
    double cf, alpha;
    int calls;        /* layer: forwards back to back; all-reduce: calls back to back     */
    int64_t count;    /* all-reduce elements                                              */
    bool in_place;
} l9_params;
void l9_params_of(const drv_case *c, l9_params *p);

/* ---- what crosses in the slots -------------------------------------------------------- */
typedef struct {
    int32_t tokens, hidden, ffn, experts, top_k;
    float capacity_factor, aux_alpha;
    int32_t pad;
} l9_cfg;

typedef struct {
    uint64_t jitter_seed; /* pl_sym_set_jitter's: not an input seed                       */
    float daux;           /* route: the aux loss's gradient; layer: moe_backward's daux   */
    float pad;
} l9_scalars;

/* "counted": doubles. Per phase (0: the forward(s), or the whole call; 1: the backward),
 * bytes this rank sent (two-sided) or put (one-sided) to each rank, and its trace's ops of
 * each kind; then what its symmetric backend was handed during the play. */
enum { L9_SYM_PUTS, L9_SYM_PUT_BYTES, L9_SYM_SIGNALS, L9_SYM_COUNT };
static inline int l9_cnt_pairs(int n, int phase) { return phase * n; }
static inline int l9_cnt_kinds(int n, int phase) { return 2 * n + phase * PL_OP_COUNT; }
static inline int l9_cnt_sym(int n) { return 2 * n + 2 * PL_OP_COUNT; }
static inline int l9_cnt_len(int n) { return 2 * n + 2 * PL_OP_COUNT + L9_SYM_COUNT; }

/* ---- referee (grader/referee/lab09*.c) ---------------------------------------------- */
void lab9_init(void);
void lab9_setup(drv_case *c);
void lab9_check(drv_case *c);
void lab9_model(drv_case *c, drv_model *m);
void lab9_teardown(drv_case *c);
void lab9_perf(drv_case *c);
void lab9_refresh(drv_case *c, int run);
void lab9_verify(drv_case *c, int run);

/* ---- player (grader/player/lab09*.c) ------------------------------------------------- */
void lab9_player_init(void);
void lab9_play(drv_case *c);
void lab9_release(drv_case *c);
void lab9_timed(drv_case *c, int which);
int lab9_mode_route(void);
int lab9_mode_bench(void);

#endif
