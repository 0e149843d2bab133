/* lab08.h - Lab 8's driver (3D parallelism): what its case table, its referee half and its
 * player half share.
 *
 *   cases/lab08.c          the table, the plan, the flags, the modes, the lab's state
 *   cases/lab08_layout.c   pure functions of the configuration, on both sides: grid
 *                          coordinates, a stage's layers, where each parameter sits in a
 *                          rank's flat buffer, the seeded model and ids (the player's modes
 *                          use them with a seed of their own)
 *   referee/lab08.c        config, grid, embed, xent: inputs, the group rule, references,
 *                          checks; the traffic formulas
 *   referee/lab08_train.c  step, traffic: a run's inputs, the single-rank reference
 *                          training, the judgement, the timed steps
 *   player/lab08.c         the kit's functions for the student, the student's calls on the
 *                          slots, the traffic per group (what only a player can count)
 *   player/lab08_modes.c   the modes plan and bench: the student's program, unrefereed
 *
 * The referee includes no lab header: the API's codes, configuration and segment kinds are
 * mirrored here (L8_*, l8_cfg) and the player checks at compile time that they agree with
 * labs/08-3d/threed.h. The slot structs below are plain data that both binaries, built by
 * one compiler from this header, lay out alike.
 */
#ifndef LAB08_CASES_H
#define LAB08_CASES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "driver.h" // defines: drv_case, drv_test, pl_op_kind
#include "gpt.h"    // defines: gpt_config (a stage's block shapes)

#define L8_MAX_STEPS 16
#define L8_MAX_CONFIGS 16
#define L8_MAX_STAGES 64    /* threed.h's TD_MAX_STAGES: --layers at most this        */
#define L8_MAX_MEMBERS 1024 /* ranks of one group the grid cases report               */
#define L8_TIMED_STEPS 1    /* timed training steps of a passing step case (-n wins)  */

/* threed.h's return codes, segment kinds and configuration, for the referee. */
enum { L8_OK = 0, L8_ERR_WORLD = -1, L8_ERR_VOCAB = -2, L8_ERR_HEADS = -3, L8_ERR_LAYERS = -4, L8_ERR_BATCH = -5,
       L8_ERR_TODO = -99 };
enum { L8_SHARDED = 0, L8_REPLICATED = 1, L8_TIED_COPY = 2 };
typedef struct {
    int seq, batch, hidden, heads, ffn, vocab, layers, t, p, micro;
    float lr, beta1, beta2, eps, weight_decay, max_norm;
} l8_cfg;
const char *l8_code_name(int rc); /* "TD_ERR_WORLD" */

/* ==================================================================================== */
/* The lab's state: flags, the configurations of this world, the referee's runs           */
/* ==================================================================================== */

typedef struct {
    int t, p, d;
} l8_tpd;

typedef struct l8_run l8_run; /* referee: one (t, p, d)'s training run (referee/lab08_train.c) */

typedef struct {
    /* the graded model and step (flags) */
    int T, b, C, H, F, V, L, steps;
    double lr, clip;
    /* the modes */
    const char *profile, *model;
    int gpus, gbatch, top, bench_steps;
    /* the (t, p, d) of the step cases at this world size (l8_step_configs) */
    l8_tpd cfgs[L8_MAX_CONFIGS];
    int ncfgs;
    /* referee: the step cases' runs, which their traffic cases judge too */
    l8_run *runs[L8_MAX_CONFIGS];
} l8_state;

static inline l8_state *l8_state_of(const drv_case *c) { return (l8_state *)c->inst->test->data; }
/* The one instance (cases/lab08.c), for the callbacks that get no case: init, modes. */
l8_state *l8_lab(void);

/* The flags' rules (both sides: a mode runs without its referee). */
void l8_check_flags(const l8_state *S);
/* The configuration of the graded steps at (t, p): the flags' model, m = p + 1
 * micro-batches, AdamW (lr, 0.9, 0.95, 1e-6, weight decay 0.01), max_norm = --clip. */
l8_cfg l8_config(const l8_state *S, int t, int p);
/* The (t, p, d) of the step cases at N ranks (into S->cfgs); the tensor size of the embed
 * and xent cases (the largest t dividing N and the vocabulary). */
void l8_step_configs(l8_state *S, int N);
int l8_tensor_size(const l8_state *S, int N);

/* ==================================================================================== */
/* lab08_layout.c: where things live (pure functions of the configuration)                */
/* ==================================================================================== */

/* world rank -> (tp, dp, pp) and back, Megatron's order */
void l8_coords(int rank, int t, int d, int *tp, int *dp, int *pp);
int l8_rank_of(int tp, int dp, int pp, int t, int d);
/* Stage s of p holds blocks [*first, *first + count) of L (L/p each, one more for the
 * first L % p stages); returns count. */
int l8_stage_layers(int L, int p, int s, int *first);

typedef struct {
    size_t offset, count;
    int kind; /* L8_SHARDED, L8_REPLICATED, L8_TIED_COPY */
} l8_segment;

typedef struct {
    int t, p, d, tp, pp, dp;
    int first_layer, nlayers;
    bool first, last;
    gpt_config block;         /* seq T, batch b, C, H, F, vocab 0                      */
    size_t off_wte, off_wpe;  /* first stage                                            */
    size_t off_blocks, block_count;
    size_t off_lnf;           /* last stage: lnf.w then lnf.b                           */
    size_t off_wte_copy;      /* last stage with p > 1                                  */
    size_t used, count;       /* floats holding parameters; count = used rounded up to d */
    l8_segment *seg;          /* malloc'd, nseg of them                                 */
    int nseg;
} l8_layout;
void l8_layout_make(l8_layout *lay, const l8_cfg *c, int world, int rank);
void l8_layout_free(l8_layout *lay);

/* Token or target ids [n] in [0, V) from (seed, id). */
void l8_ids(int *out, size_t n, int V, uint64_t seed, uint64_t id);
/* The parameters of rank `lay` of the model of `seed` ([lay->count], padding zero). */
void l8_initial_params(float *flat, const l8_layout *lay, const l8_cfg *c, uint64_t seed);
/* One step's tokens (or targets) of one replica, [m][T, b], from that replica's seed. */
void l8_step_ids(int *out, const l8_cfg *c, uint64_t seed, int step, bool targets);

/* ==================================================================================== */
/* Traffic per group (what the player counts, what the referee expects)                   */
/* ==================================================================================== */

enum { L8_TENSOR, L8_PIPE, L8_DATA, L8_EMBED, L8_WORLD, L8_OTHER, L8_NGROUPS };
const char *l8_group_name(int group); /* "tensor", "pipeline", "data", "embedding", "world", "other" */
/* xent.large's logits sit around this: exp() of one overflows a float, and twice it below
 * the maximum underflows. */
#define L8_LARGE_LOGIT 100.0f
/* The step cases without pipeline stages clip at this many times --clip: above any norm */
#define L8_NO_CLIP 1000.0
typedef drv_traffic l8_tally; /* calls by kind, their S, messages and their bytes (driver.h) */
/* The phases the referees count group by group where they move the messages (drv_mark):
 * embed's forward and backward, xent's call, a step case's first step. */
enum { L8_MARK_FIRST = 0, L8_MARK_SECOND = 1 };

/* ==================================================================================== */
/* The cases' slots (the referee declares them, the player finds them by name)           */
/* ==================================================================================== */

/* config.errors: "cases" (IN, const) l8_config_in[n], "codes" (OUT) int32_t[n] */
typedef struct {
    l8_cfg cfg;
    int32_t world;
} l8_config_in;

/* grid.<c>: "token" (IN, const) this rank's secret; "grid" (OUT) what td_grid_build made,
 * each group's members gathered over the group itself with their tokens (a list that did
 * not travel through the group cannot carry the other members' tokens) */
typedef struct {
    int32_t rc;
    int32_t t, p, d, tp, pp, dp;              /* the grid's sizes and this rank's coordinates */
    int32_t count[4];                         /* members of L8_TENSOR .. L8_EMBED              */
    int32_t members[4][L8_MAX_MEMBERS];       /* their world ranks, in the group's order       */
    uint64_t tokens[4][L8_MAX_MEMBERS];       /* and their tokens                              */
} l8_grid_out;

/* grid.errors: "bad" (IN, const) the referee's bad grids, "rc" (OUT) what became of them */
#define L8_BAD_GRIDS 5
typedef struct {
    int32_t n, t[L8_BAD_GRIDS], p[L8_BAD_GRIDS];
} l8_grid_bad;
typedef struct {
    int32_t rc[L8_BAD_GRIDS];
    int32_t touched[L8_BAD_GRIDS]; /* returned an error but wrote into the grid            */
} l8_grid_rc;

/* embed.t<t>: IN const "wte" [Vt, C] (this rank's shard), "wpe" [T, C], "dx" [N, C],
 * "tokens" int32_t[N]; INOUT "dwte" [Vt, C], "dwpe" [T, C] (accumulated); OUT "x" [N, C],
 * "tally" l8_tally[2][L8_NGROUPS] (forward, backward).
 * xent.t<t>: IN const "logits" [N, Vt] (this rank's columns), "targets" int32_t[N]; OUT
 * "dlogits" [N, Vt], "losses" double[N], "tally" l8_tally[L8_NGROUPS].
 * step.<c>, traffic.<c>: INOUT "params" [count] (the initial parameters in, the trained
 * ones out); IN const "tokens" int32_t[steps][m T b] (first stage), "targets" (last stage);
 * OUT "losses", "norms" double[steps], "report" l8_step_report. A timed step reads the first
 * [m T b] of tokens and targets and writes losses[0], norms[0] and the report's rc. A
 * traffic case whose step case has played declares no slot: its player plays nothing. */
typedef struct {
    int32_t rc;                 /* the first non-OK td_train_step code, or TD_OK        */
    int32_t counters_differ;    /* step 1: the API's counters disagree with the backend's */
    l8_tally tally[L8_NGROUPS]; /* step 1's traffic, group by group                     */
} l8_step_report;

/* ==================================================================================== */
/* The callbacks                                                                          */
/* ==================================================================================== */

/* referee (referee/lab08.c, referee/lab08_train.c) */
void l8_init(void);
void l8_finish(void);
void l8_config_setup(drv_case *c);
void l8_config_check(drv_case *c);
void l8_grid_setup(drv_case *c);
void l8_grid_check(drv_case *c);
void l8_grid_errors_setup(drv_case *c);
void l8_grid_errors_check(drv_case *c);
void l8_embed_setup(drv_case *c);
void l8_embed_check(drv_case *c);
/* every case gives back the device memory its calls took (the player's pl_mem_in_use) */
void l8_model(drv_case *c, drv_model *m);
void l8_xent_setup(drv_case *c);
void l8_xent_check(drv_case *c);
void l8_step_setup(drv_case *c);
void l8_step_check(drv_case *c);
void l8_step_perf(drv_case *c);
void l8_step_refresh(drv_case *c, int run);
void l8_step_verify(drv_case *c, int run);
void l8_step_teardown(drv_case *c);
void l8_traffic_check(drv_case *c);

/* player (player/lab08.c, player/lab08_modes.c) */
void l8_player_init(void);
void l8_config_play(drv_case *c);
void l8_grid_play(drv_case *c);
void l8_grid_errors_play(drv_case *c);
void l8_embed_play(drv_case *c);
void l8_xent_play(drv_case *c);
void l8_step_play(drv_case *c);
void l8_step_timed(drv_case *c, int which);
void l8_step_release(drv_case *c);
int l8_mode_plan(void);
int l8_mode_bench(void);

/* cases/lab08.c: --model's values, a row of Table 1 of the Megatron-LM paper (the modes
 * hold the rows), "tiny" or "all" */
bool l8_model_known(const char *name);

#endif
