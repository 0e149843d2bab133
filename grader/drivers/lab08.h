/* lab08.h - what the files of Lab 8's driver share. The driver is split the way the
 * grader is being split, so that moving to a trusted referee process and a player process
 * is mechanical:
 *   lab08.c               the case table (each case: the referee's setup, the player's run,
 *                         the referee's check), the plan, the flags, the lab's state
 *   lab08_layout.c        pure: where each parameter of a rank sits (both sides need it)
 *   lab08_referee.c       the inputs (host arrays), the group membership rule, the traffic
 *                         formulas, the references of the embedding and the loss
 *   lab08_referee_cases.c the referee's callbacks: setup (inputs into the case's slots) and
 *                         check (verdicts) of every case
 *   lab08_referee_train.c the single-rank reference training (tied embedding, clipping,
 *                         AdamW) and the slices of it each rank is compared with
 *   lab08_player.c        the kit's functions for the student, device buffers from the
 *                         referee's host inputs, the student's calls, results back to host
 *                         arrays, and what only a player can count (its traffic per group);
 *                         the run callbacks
 *   lab08_player_modes.c  the modes: plan (the planner), bench (Table 1, the tiny GPT)
 * The referee never touches the device or calls the student; the player decides nothing.
 * No globals cross these files: the lab's state (l8_state) is passed to whoever needs it.
 */
#ifndef LAB08_DRIVER_H
#define LAB08_DRIVER_H

#include <stdbool.h>
#include <stdint.h>

#include "driver.h"       // defines: drv_* (the case runner)
#include "threed.h"       // defines: the lab API (td_*)

#define L8_MAX_STEPS 16
#define L8_MAX_CONFIGS 16

/* ==================================================================================== */
/* The lab's state (lab08.c owns the one instance)                                        */
/* ==================================================================================== */

typedef struct {
    int t, p, d;
} l8_tpd;

typedef struct l8_run l8_run; /* one (t, p, d)'s training run and its results (lab08.c) */

typedef struct {
    /* the graded model and step (flags) */
    int T, b, C, H, F, V, L, steps;
    double lr, clip;
    uint64_t seed;            /* --seed: the model's weights and the targets            */
    /* the modes */
    const char *profile, *model;
    int gpus, gbatch, top, bench_steps;
    /* the runs of this world size's configurations, filled by the step cases */
    l8_tpd cfgs[L8_MAX_CONFIGS];
    int ncfgs;
    l8_run *runs[L8_MAX_CONFIGS];
} l8_state;

static inline l8_state *l8_state_of(const drv_case *c) { return (l8_state *)c->inst->test->data; }

/* The configuration of the graded steps at (t, p): the flags' model, m = p + 1
 * micro-batches, AdamW (lr, 0.9, 0.95, 1e-8, weight decay 0.01), max_norm = --clip. */
td_config l8_config(const l8_state *S, int t, int p);

/* ==================================================================================== */
/* lab08_layout.c: where things live (pure functions of the config)                       */
/* ==================================================================================== */

/* world rank -> (tp, dp, pp) and back, Megatron's order */
void l8_coords(int rank, int t, int d, int *tp, int *dp, int *pp);
int l8_rank_of(int tp, int dp, int pp, int t, int d);
/* Stage s of p holds blocks [*first, *first + count) of L (L/p each, one more for the
 * first L % p stages); returns count. */
int l8_stage_layers(int L, int p, int s, int *first);

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
    td_segment *seg;          /* malloc'd, nseg of them                                 */
    int nseg;
} l8_layout;
void l8_layout_make(l8_layout *lay, const td_config *c, int world, int rank);
void l8_layout_free(l8_layout *lay);

/* ==================================================================================== */
/* Traffic per group (what the player counts, what the referee expects)                   */
/* ==================================================================================== */

enum { L8_TENSOR, L8_PIPE, L8_DATA, L8_EMBED, L8_WORLD, L8_OTHER, L8_NGROUPS };
const char *l8_group_name(int group); /* "tensor", "pipeline", "data", "embedding", "world", "other" */
typedef struct {
    double calls[PL_OP_COUNT]; /* library collectives by kind                          */
    double bytes;              /* their S, summed                                      */
    double msgs, msg_bytes;    /* point-to-point messages sent, and their bytes         */
} l8_tally;

/* ==================================================================================== */
/* lab08_referee.c: inputs, rules, references, checks (host arrays only)                  */
/* ==================================================================================== */

/* Token or target ids [n] in [0, V) from (seed, id). */
void l8_ids(int *out, size_t n, int V, uint64_t seed, uint64_t id);
/* This rank's initial parameters, laid out as lay says ([lay->count], padding zero). */
void l8_initial_params(float *flat, const l8_layout *lay, const td_config *c, uint64_t seed);
/* The ids of one step: a replica's tokens come from its private seed, the targets from
 * the public one; [m][T, b]. */
void l8_step_tokens(int *out, const td_config *c, uint64_t replica_seed, int step);
void l8_step_targets(int *out, const td_config *c, uint64_t seed, int dp, int step);

/* The group rule: the world ranks of this rank's `group` (L8_TENSOR, L8_PIPE, L8_DATA,
 * L8_EMBED) in the order of their ranks in it; returns how many (0: no group). */
int l8_members(int rank, int t, int p, int d, int group, int *out);
/* What one step sends on each group, for this rank (the formulas of the handout). */
void l8_expected_traffic(const td_config *c, const l8_layout *lay, int world, l8_tally want[L8_NGROUPS]);
/* The first group whose counted traffic differs from want, with a sentence in why; -1
 * when they all agree. */
int l8_traffic_diff(const l8_tally got[L8_NGROUPS], const l8_tally want[L8_NGROUPS], char *why, size_t len);

/* The configurations td_config_check must refuse or accept, and their codes. */
typedef struct {
    td_config cfg;
    int world, want;
    const char *what;
} l8_config_case;
int l8_config_cases(const l8_state *S, l8_config_case *out, int cap);

/* Embedding and loss references (double, whole vocabulary). */
void l8_embed_reference(double *x, double *dwte, double *dwpe, const float *wte_full, const float *wpe, const int *tokens,
                        const float *dx, int T, int b, int C, int V);
void l8_xent_reference(double *losses, double *dlogits, const float *logits_full, const int *targets, int N, int V,
                       float scale);
/* ||got - want|| / ||want|| (absolute when want is zero; NaN or inf: infinite). */
double l8_rel_err(const float *got, const double *want, size_t n);

/* ==================================================================================== */
/* lab08_referee_train.c: the single-rank reference                                       */
/* ==================================================================================== */

typedef struct l8_serial l8_serial;
/* The whole model from the public seed, AdamW state zero. */
l8_serial *l8_serial_new(const td_config *c, uint64_t seed);
void l8_serial_free(l8_serial *m);
/* One step on the global batch ([T, B] tokens and targets, B = d m b sequences: replica
 * dp's micro-batch k, sequence j is global sequence (dp m + k) b + j): the mean loss over
 * every token, the global norm (each parameter once), clipping, AdamW. */
void l8_serial_step(l8_serial *m, const int *tokens, const int *targets, int B, double *loss, double *norm);
/* The parameters rank `lay` holds, laid out as its flat buffer ([lay->count]). */
void l8_serial_slice(const l8_serial *m, const l8_layout *lay, float *flat);
/* Replica-ordered [m][T, b] ids of every replica -> the global batch [T, d m b]. */
void l8_to_global(int *global, const int *const *replica_ids, int d, int m, int T, int b);

/* ==================================================================================== */
/* lab08_player.c: the student's calls on device buffers                                  */
/* ==================================================================================== */

/* The kit's grid (the rule, with pl_comm_split): the step cases run on it, so that they
 * grade the step whatever td_grid_build does. */
void l8_kit_grid(td_grid *g, int t, int p);
void l8_kit_grid_free(td_grid *g);

/* config.errors: td_config_check on every case, its codes into codes[n]. */
void l8_play_config(const l8_config_case *cases, int n, int *codes);

/* grid.*: td_grid_build(t, p); per group the world ranks of its members in its order
 * (host: members[group][0 .. count[group])), and the coordinates it reported. */
typedef struct {
    int rc;
    int count[4], members[4][TD_MAX_STAGES * 8];
    int t, p, d, tp, pp, dp;
} l8_grid_out;
void l8_play_grid(int t, int p, l8_grid_out *out);

/* embed.*: td_embed_forward then td_embed_backward on host inputs; outputs to host. */
typedef struct {
    const float *wte, *wpe, *dx, *dwte0, *dwpe0; /* shard [Vt, C], [T, C], [N, C], the
                                                    gradients' starting values            */
    const int *tokens;
} l8_embed_in;
typedef struct {
    float *x, *dwte, *dwpe; /* [N, C], [Vt, C], [T, C]: caller's host arrays */
    l8_tally tally[2][L8_NGROUPS]; /* forward, backward: every group                   */
} l8_embed_out;
void l8_play_embed(const td_grid *g, const l8_embed_in *in, int T, int b, int C, int V, l8_embed_out *out);

typedef struct {
    float *dlogits;   /* [N, Vt] host */
    double *losses;   /* [N] host     */
    l8_tally tally[L8_NGROUPS];
} l8_xent_out;
void l8_play_xent(const td_grid *g, const float *logits, const int *targets, int N, int V, float scale, l8_xent_out *out);

/* step.*: build the stage from this rank's host parameters, run `steps` steps on the
 * per-step batches (host, NULL where this rank gets none), copy back. */
typedef struct {
    int rc;                         /* the first non-OK td_train_step code, or TD_OK     */
    double loss[L8_MAX_STEPS], norm[L8_MAX_STEPS];
    float *params;                  /* [lay->count], caller's host array                 */
    l8_tally tally[L8_NGROUPS];     /* step 1                                            */
    bool counters_differ;           /* the API's counters disagree with the backend's    */
    double seconds[L8_MAX_STEPS];   /* wall time of each step (max over ranks)           */
} l8_step_out;
void l8_play_steps(const td_grid *g, const td_config *c, const l8_layout *lay, const float *params0,
                   const int *const *tokens, const int *const *targets, int steps, l8_step_out *out);

/* Count the trace's point-to-point and collective ops since index `from` into the grid's
 * groups (ops on other communicators go to L8_OTHER, on the world to L8_WORLD). */
void l8_tally_trace(const td_grid *g, size_t from, l8_tally out[L8_NGROUPS]);

/* ==================================================================================== */
/* The cases' slots: what the referee hands the player (host) and what comes back        */
/* ==================================================================================== */

typedef struct {
    l8_config_case cases[32];
    int codes[32], n;
} l8_config_slots;

typedef struct {
    int n, t[5], p[5];  /* the referee's bad grids                               */
    int rc[5];          /* the player's: td_grid_build's codes ...               */
    bool touched[5];    /* ... and whether it wrote into the grid anyway         */
} l8_grid_err_slots;

typedef struct {
    int t, T, b, C, V;
    uint64_t private_seed;       /* this rank's shard: nobody else knows it until the check */
    l8_embed_in in;              /* host: wte shard, wpe, dx, dwte0, dwpe0, tokens           */
    l8_embed_out out;            /* host: x, dwte, dwpe, the traffic                         */
} l8_embed_slots;

typedef struct {
    int t, N, V;
    float scale;
    uint64_t private_seed;
    float *logits;               /* this rank's columns [N, V/t]                              */
    int *targets;                /* [N]                                                       */
    l8_xent_out out;
} l8_xent_slots;

/* One (t, p, d)'s run, shared by its step and traffic cases: the first of them to reach
 * each phase does it (inputs, play, judgement). */
struct l8_run {
    bool prepared, played, judged;
    td_config cfg;
    l8_layout lay;
    uint64_t replica_seed;       /* this replica's tokens (the first stage's), private    */
    float *params0;              /* [lay.count] this rank's initial parameters            */
    int *ids;                    /* [2][steps][m T b]: tokens, then targets               */
    l8_step_out out;
    bool failed_rc;
    char rc_msg[200];
    double loss[L8_MAX_STEPS], ref_loss[L8_MAX_STEPS], ref_norm[L8_MAX_STEPS];
    double loss_err, norm_err, param_err;
    l8_tally want[L8_NGROUPS];
};

/* lab08_referee_cases.c: setup and check callbacks */
void l8_config_setup(drv_case *c);
void l8_config_check(drv_case *c);
void l8_grid_check(drv_case *c);
void l8_grid_errors_setup(drv_case *c);
void l8_grid_errors_check(drv_case *c);
void l8_embed_setup(drv_case *c);
void l8_embed_check(drv_case *c);
void l8_embed_teardown(drv_case *c);
void l8_xent_setup(drv_case *c);
void l8_xent_check(drv_case *c);
void l8_xent_teardown(drv_case *c);
void l8_step_setup(drv_case *c);
void l8_step_check(drv_case *c);
void l8_traffic_check(drv_case *c);
void l8_runs_free(l8_state *S);
/* The (t, p, d) of the step cases at N ranks (into S->cfgs), and the tensor size of the
 * embed and xent cases. */
void l8_step_configs(l8_state *S, int N);
int l8_tensor_size(const l8_state *S, int N);

/* lab08_player.c: run callbacks */
void l8_config_run(drv_case *c);
void l8_grid_run(drv_case *c);
void l8_grid_errors_run(drv_case *c);
void l8_embed_run(drv_case *c);
void l8_xent_run(drv_case *c);
void l8_step_run(drv_case *c);

/* ==================================================================================== */
/* lab08_player_modes.c                                                                   */
/* ==================================================================================== */

int l8_mode_plan(l8_state *S);
bool l8_model_known(const char *name); /* a row of Table 1, "tiny" or "all" */
int l8_mode_bench(l8_state *S);

#endif
