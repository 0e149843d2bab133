/* lab07.h - what the files of Lab 7's driver share. They come in two halves, so that the
 * referee (no student code, no device memory) and the player (calls the student) can live
 * in two processes:
 *   lab07.c                the flags, the case table, the lab's state, the glue of each case
 *                          (setup: the referee makes inputs; run: the player; check: the referee)
 *   lab07_referee_model.c  inputs (the model's description, initial weights, each rank's
 *                          batches) and the single-rank reference run, on host arrays
 *   lab07_referee_rules.c  the rules: bucket and chunk layouts, pieces, the slice plan,
 *                          ZeRO's memory and traffic formulas; the checks of a run's outputs
 *   lab07_player_run.c     the device model and a training run through the student's hooks:
 *                          device buffers from host inputs, host arrays back (losses,
 *                          parameters, pieces, what was counted and recorded)
 *   lab07_player_ckpt.c    sharded checkpoint files: save, validate, load through the
 *                          student's slice plan; the damaged checkpoints of the error case
 *   lab07_player_modes.c   --run train, memory, bench, and the kit's own DDP they compare with
 * Every function takes the lab's state (lab7) or what it needs of it: no file shares a
 * global with another. */
#ifndef LAB07_DRIVER_H
#define LAB07_DRIVER_H

#include <stdbool.h>
#include <stdint.h>

#include "driver.h"       // defines: drv_* (the case runner)
#include "gpt.h"          // defines: gpt_config
#include "pl_costmodel.h" // defines: plc_profile
#include "zero.h"         // defines: the lab API (zero_*)

#define L7_MAX_STEPS 16
#define L7_MAX_PIECES 4096
#define L7_BETA1 0.9f
#define L7_BETA2 0.95f

/* ==================================================================================== */
/* The runs a case can ask for                                                           */
/* ==================================================================================== */

/* A stage with its options: the training runs of the graded cases. */
typedef enum { V_Z1, V_Z2, V_Z3, V_Z3N, V_B1, V_B2, V_B3, L7_NVARIANTS } l7_variant;
typedef struct {
    const char *name;  /* case-name part: "z1", "z3n", "bf16.z2"                       */
    int stage;
    bool reshard;
    zero_dtype param, reduce;
} l7_variant_info;
extern const l7_variant_info L7_VARIANTS[L7_NVARIANTS];

/* ==================================================================================== */
/* Referee <-> player: inputs and outputs, host arrays only                              */
/* ==================================================================================== */

/* What a training run needs: the player never sees a seed or another rank's data. */
typedef struct {
    gpt_config mc;                     /* batch = this rank's sequences per step           */
    zero_config cfg;
    int steps;                         /* optimizer steps to run                          */
    float *init[ZERO_MAX_UNITS];       /* host [numel_u] fp32: unit u's initial parameters */
    int *tokens, *targets;             /* host [steps][T, b]: this rank's sequences        */
    bool measure;                      /* count, record and replay every step              */
} l7_in;

/* What one step did, as the harness counted and recorded it on this rank. */
typedef struct {
    double loss;                       /* the local mean loss                              */
    uint64_t calls[PL_OP_COUNT], bytes[PL_OP_COUNT]; /* collectives by kind, their S      */
    uint64_t wire_calls, wire_bytes;   /* what reached MPI/NCCL                            */
    size_t peak[PL_MEM_NTAGS];         /* each memory category's peak during the step      */
    /* the issue order (trace indices) */
    int nag, nrs;
    int ag_at[2 * ZERO_MAX_UNITS + 1], rs_at[ZERO_MAX_UNITS + ZERO_MAX_BUCKETS + 1];
    int fwd_call[ZERO_MAX_UNITS], fwd_start[ZERO_MAX_UNITS];  /* pre_forward called, compute */
    int bwd_call[ZERO_MAX_UNITS], bwd_start[ZERO_MAX_UNITS];
    int fwd_end, bwd_end;              /* after post_forward(U-1), after post_backward(0)  */
    double ag_overlap;                 /* the share of all-gather time beside compute here  */
    double pred_us, pred_noprefetch_us;/* the step replayed on the profile, and without
                                          prefetch (each gather after the compute before its
                                          unit), 0 when not replayed                        */
} l7_step;

typedef struct {
    bool idle;                         /* this rank took no part (checkpoint cases)        */
    char why[240];                     /* the first thing the kit refused, "" if nothing   */
    int nsteps;
    l7_step step[L7_MAX_STEPS];
    size_t mem_init[PL_MEM_NTAGS];     /* each category after zero_init                     */
    size_t untagged_init;              /* plain pl_malloc bytes zero_init kept              */
    size_t mem_end[PL_MEM_NTAGS];      /* after zero_free                                  */
    int zstep;                         /* z->step at the end                               */
    int nbuckets;
    zero_bucket bucket[ZERO_MAX_BUCKETS];
    /* the pieces at the end, and their values (host, fp32) */
    int npieces;
    zero_piece piece[L7_MAX_PIECES];   /* pointers are the player's: only the numbers count */
    float *master, *m, *v;             /* concatenated, piece by piece                     */
    /* every unit's full parameters at the end, as zero_pre_forward returns them (widened) */
    float *full[ZERO_MAX_UNITS];
} l7_out;
void l7_out_free(l7_out *o);

/* The reference: the whole model on one rank, the global batch in one piece. */
typedef struct {
    int steps;
    zero_dtype dtype;
    double loss[L7_MAX_STEPS];         /* mean loss over the global batch, per step        */
    float *master[ZERO_MAX_UNITS];     /* after the last step: fp32 master (the parameters) */
    float *m[ZERO_MAX_UNITS], *v[ZERO_MAX_UNITS];
    float *param[ZERO_MAX_UNITS];      /* what the kit computes with: bf16(master) widened  */
} l7_ref;

/* ==================================================================================== */
/* The lab's state                                                                       */
/* ==================================================================================== */

typedef struct {
    /* flags: the graded model and run (lab07.c) */
    int layers, seq, hidden, heads, ffn, vocab, batch, steps;
    size_t cap;
    double lr, eps, wd, max_norm;
    const char *profile;
    /* flags of the modes */
    int train_steps, mode_layers, mode_hidden, mode_batch;
    const char *text;
    /* the world */
    uint64_t seed;                     /* --seed: the initial parameters (every rank gets them) */
    uint64_t data_seed;                /* the sequences: fresh in a graded run (drv_case_seed) */
    bool have_data_seed;
    pl_comm *world;
    int rank, np;
    zero_model model;                  /* the graded model's description                  */
    plc_profile prof;
    bool have_prof;
    /* caches: the references, the training run of each variant */
    l7_ref *ref[2];                    /* by dtype                                        */
    l7_out *run[L7_NVARIANTS];
    double run_bf16_tol[L7_NVARIANTS];
} lab7;

/* ---- lab07_referee_model.c ------------------------------------------------------------ */
gpt_config l7_model_config(const lab7 *L, int batch);
/* The zero_model of config mc with `layers` blocks (the kit's units and tensors). */
void l7_describe(zero_model *m, const gpt_config *mc, int layers);
zero_config l7_config(const lab7 *L, l7_variant v);
/* Unit u's initial parameters (host, numel floats, malloc'd). */
float *l7_init_unit(const zero_model *m, const gpt_config *mc, uint64_t seed, int u);
/* Sequences [j0, j0 + b) of step `step`'s global batch, [T, b] (host, malloc'd). */
void l7_batch(const lab7 *L, int step, int j0, int b, int **tokens, int **targets);
/* The inputs of a run of `steps` steps from step `first` on `world` ranks, for rank `rank`
 * (free with l7_in_free). */
void l7_inputs(const lab7 *L, l7_in *in, l7_variant v, int world, int rank, int first, int steps);
void l7_in_free(l7_in *in, int nunits);
/* The single-rank run of `steps` steps (cached in L). */
const l7_ref *l7_reference(lab7 *L, zero_dtype dtype);
/* The bound of the bf16 comparison (README.md derives it) for this world size. */
double l7_bf16_tolerance(const lab7 *L, int world);

/* ---- lab07_referee_rules.c ------------------------------------------------------------ */
int l7_ref_buckets(const zero_model *m, size_t cap, int world, zero_bucket *out, int max);
size_t l7_ref_chunk(size_t dim0, int world, int rank, size_t *first, size_t *held);
size_t l7_unit_shard(const zero_model *m, int u, int world); /* S_u */
/* Rank r's pieces at world size n for a stage (numbers only; pointers NULL). */
int l7_ref_pieces(const zero_model *m, int stage, size_t cap, int world, int rank, zero_piece *out, int max);
/* ZeRO's bytes per rank for the run (README.md): what each category holds between steps,
 * and the bounds on the transients. */
typedef struct {
    double params, grads, optim, gather_bound, reduce_bound;
    double psi_padded; /* the padded Ψ the formulas use */
} l7_memory;
l7_memory l7_memory_formula(const zero_model *m, const zero_config *c, int world);
/* What a step must move: calls and bytes (S) per collective kind. */
typedef struct {
    uint64_t calls[PL_OP_COUNT], bytes[PL_OP_COUNT];
} l7_traffic;
l7_traffic l7_traffic_formula(const zero_model *m, const zero_config *c, int world);
/* The checks of a training run's outputs (every rank calls them in the same order). */
void l7_check_layout(drv_case *c, const lab7 *L, const l7_out *o, const zero_config *cfg, int world, int rank);
/* true when every rank passed (decide on it: the same answer everywhere) */
bool l7_check_params(drv_case *c, const lab7 *L, const l7_out *o, const l7_ref *ref, double tol, const char *what);
void l7_check_losses(drv_case *c, const l7_out *o, const l7_ref *ref, int first, int nsteps, int world, double tol);
void l7_check_memory(drv_case *c, const lab7 *L, const l7_out *o, const zero_config *cfg, int world);
void l7_check_traffic(drv_case *c, const lab7 *L, const l7_out *o, const zero_config *cfg, int world);
void l7_check_overlap(drv_case *c, const lab7 *L, const l7_out *o, const zero_config *cfg, int world);
void l7_check_prefetch(drv_case *c, const lab7 *L, const l7_out *o, const zero_config *cfg, int world);
/* A hash of host values (state comparisons). */
uint64_t l7_hash(const void *p, size_t bytes, uint64_t h);

/* ---- lab07_referee_layouts.c: the cases of the pure functions, no communication ------ */
/* Questions for zero_buckets, zero_chunk and zero_ckpt_plan, and the answers the player
 * brings back; the referee makes the first and judges the second. */
typedef struct {
    int model;                         /* index into the models                           */
    size_t cap;
    int world, max;
} l7_bucket_q;
typedef struct {
    int rc;
    zero_bucket b[ZERO_MAX_BUCKETS];
} l7_bucket_a;
typedef struct {
    size_t dim0;
    int world, rank;
} l7_chunk_q;
typedef struct {
    size_t chunk, first, held;
} l7_chunk_a;
typedef struct {
    zero_piece *mine;                  /* numbers only: the plan never follows pointers  */
    int nmine;
    zero_saved_piece *saved;
    int nsaved, max;
    int expect;                        /* 0: a valid plan; else the error code expected  */
    char what[96];
} l7_plan_q;
typedef struct {
    int rc;
    zero_read *reads;                  /* [max]                                           */
} l7_plan_a;
typedef struct {
    int nmodels, nb, nc, np;
    zero_model *models;
    l7_bucket_q *bq;
    l7_chunk_q *cq;
    l7_plan_q *pq;
    l7_bucket_a *ba;
    l7_chunk_a *ca;
    l7_plan_a *pa;
} l7_layouts;
/* which: 0 buckets, 1 chunks, 2 plans that must work, 3 plans that must fail */
void l7_layouts_make(const lab7 *L, int which, l7_layouts *q);
void l7_layouts_check(drv_case *c, const l7_layouts *q, int which);
void l7_layouts_free(l7_layouts *q);

/* ---- lab07_player_run.c --------------------------------------------------------------- */
/* A training run of the student's stage on comm: zero_init from in->init, in->steps steps,
 * then the final state into out. */
void l7_play(const l7_in *in, const zero_model *m, pl_comm *comm, const plc_profile *prof, l7_out *out);
/* The same in pieces, for runs that stop in the middle (checkpoints). */
typedef struct l7_session l7_session;
l7_session *l7_session_start(const l7_in *in, const zero_model *m, pl_comm *comm, l7_out *out);
void l7_session_steps(l7_session *s, const l7_in *in, int from, int count, l7_out *out);
zero_state *l7_session_state(l7_session *s);
void l7_session_finish(l7_session *s, l7_out *out); /* final state into out, then free */
/* The student's pure functions on the referee's questions. */
void l7_play_layouts(l7_layouts *q);
/* One of the kit's model, on the device (modes share it). */
typedef struct l7_kit l7_kit;
l7_kit *l7_kit_new(const gpt_config *mc, const zero_model *m, zero_dtype dtype);
void l7_kit_free(l7_kit *k);
/* One step through hooks (the student's, or the kit's DDP in the modes). */
typedef struct {
    const void *(*pre_forward)(void *z, int u);
    void (*post_forward)(void *z, int u);
    const void *(*pre_backward)(void *z, int u, void **grad);
    void (*post_backward)(void *z, int u);
    void (*step)(void *z);
} l7_hooks;
extern const l7_hooks L7_STUDENT_HOOKS;
double l7_kit_step(l7_kit *k, const l7_hooks *h, void *z, const int *tokens, const int *targets, l7_step *rec,
                   char *why, size_t whylen);

/* ---- lab07_player_ckpt.c -------------------------------------------------------------- */
/* Save z's pieces under dir (every rank of z->comm, collective); 0 or -1 with why. */
int l7_ckpt_save(zero_state *z, const char *dir, char *why, size_t len);
/* Load dir into z (collective over z->comm): 0, or -1 with one line naming the file; on
 * failure nothing of z has changed. */
int l7_ckpt_load(zero_state *z, const char *dir, char *why, size_t len);
/* The damaged checkpoints of the error case (rank 0 of the world writes, all wait). */
typedef enum { CK_TRUNCATED, CK_METADATA, CK_MISSING, CK_OTHER_MODEL, CK_NKINDS } l7_damage;
extern const char *L7_DAMAGE_NAMES[CK_NKINDS];
void l7_ckpt_damage(const char *dir, l7_damage kind, int saved_world, char *expect_file, size_t len);
/* A fresh directory on every rank of comm (rank 0 makes it), removed by l7_ckpt_rmdir. */
void l7_ckpt_mkdir(pl_comm *comm, char *dir, size_t len);
void l7_ckpt_rmdir(pl_comm *comm, const char *dir);
/* A hash of everything a load could change in z (its pieces and step). */
uint64_t l7_state_hash(zero_state *z);

/* ---- lab07_player_modes.c ------------------------------------------------------------- */
int l7_mode_train(lab7 *L);
int l7_mode_memory(lab7 *L);
int l7_mode_bench(lab7 *L);

#endif
