/* lab07_ref.h - what the referee files of Lab 7 share (the trusted half; no student code,
 * no device memory, host arrays only):
 *   lab07.c            the lab's state, and each case's setup, check and teardown: the
 *                      inputs into the slots, the player's outputs out of them
 *   lab07_reference.c  each rank's sequences and the single-rank reference run (host model,
 *                      AdamW and clipping in double), the bf16 bound
 *   lab07_rules.c      the layouts (buckets, chunks, pieces), ZeRO's memory and traffic
 *                      formulas, the checks of a training run's outputs
 *   lab07_replay.c     the recorded step replayed on the cost-model profile, with and
 *                      without prefetch
 *   lab07_layouts.c    the questions of the pure-function cases and their judgement
 *   lab07_ckpt.c       the checkpoint directory: the files written from what the players
 *                      saved, the damaged ones, another model's, staged for the loads
 * The lab's state (l7_lab) belongs to lab07.c and is passed to whoever needs it. */
#ifndef LAB07_REF_H
#define LAB07_REF_H

#include "lab07.h"

/* A training run as the referee keeps it: what the player left in "rec", "vals", "full"
 * and "ops", copied out and bounds-checked (counts clamped, strings terminated). */
typedef struct {
    bool idle;                         /* this rank took no part (checkpoint cases)        */
    l7_record rec;
    float *master, *m, *v;             /* rec.nvalues each, piece by piece                 */
    float *full;                       /* Ψ: every unit's parameters, unit after unit      */
    float *master0;                    /* rec.nmaster0: the pieces' masters after zero_init */
    l7_ops *ops;                       /* the last step's ops (ZeRO-3), or NULL            */
    int counted;                       /* > 0: the referees counted the traffic of this many
                                          steps (the steps asked for) into rec.step[]      */
} l7_out;
void l7_out_free(l7_out *o);

/* The reference: the whole model on one rank, the global batch in one piece. */
typedef struct {
    int steps, dtype;
    double loss[L7_MAX_STEPS];         /* mean loss over the global batch, per step        */
    float *master[L7_MAX_UNITS];       /* after the last step: fp32 master (the parameters) */
    float *m[L7_MAX_UNITS], *v[L7_MAX_UNITS];
    float *param[L7_MAX_UNITS];        /* what the kit computes with: bf16(master) widened  */
    unsigned char *loose[L7_MAX_UNITS]; /* 1: an Adam RMS under a thousandth of the model's at
                                          some step (its steps rest on rounding: held to
                                          l7_adam_reach, not to the tolerance)             */
} l7_ref;

typedef struct {
    const l7_flags *f;
    int rank, np;
    uint64_t seed;                     /* --seed: the initial parameters (every rank's)     */
    uint64_t data_seed;                /* the sequences: rank 0's seed of the first case    */
    bool have_data_seed;
    l7_model model;                    /* the graded model                                  */
    plc_profile prof;
    bool have_prof;
    l7_ref *ref[2];                    /* by dtype                                          */
    l7_out *run[L7_NVARIANTS];         /* each variant's run, once its first case played    */
} l7_lab;

/* ---- lab07_reference.c ---- */
/* Sequences [j0, j0 + b) of step `step`'s global batch, [T, b], into tokens and targets. */
void l7_batch(const l7_lab *L, int step, int j0, int b, int *tokens, int *targets);
/* The single-rank run of every step (cached in L). */
const l7_ref *l7_reference(l7_lab *L, int dtype);
void l7_reference_free(l7_lab *L);
/* The bound of the bf16 comparison (README.md derives it). */
double l7_bf16_tolerance(const l7_lab *L);
/* float32 runs: what follows an AdamW update (lab07_reference.c says why). */
double l7_adam_tolerance(void);
double l7_adam_reach(const l7_lab *L, const l7_ref *ref);

/* ---- lab07_rules.c ---- */
int l7_ref_buckets(const l7_model *m, size_t cap, int world, l7_bucket *out, int max);
size_t l7_ref_chunk(size_t dim0, int world, int rank, size_t *first, size_t *held);
size_t l7_unit_shard(const l7_model *m, int u, int world); /* S_u */
/* Rank r's pieces at world size n for a stage. */
int l7_ref_pieces(const l7_model *m, int stage, size_t cap, int world, int rank, l7_piece *out, int max);
/* ZeRO's bytes per rank for the run (README.md): what each category holds between steps,
 * and the bounds on the transients. */
typedef struct {
    double params, grads, optim, gather_bound, reduce_bound;
    double psi_padded; /* the padded Ψ the formulas use */
} l7_memory;
l7_memory l7_memory_formula(const l7_model *m, const l7_cfg *c, int world);
/* What a step must move: calls and bytes (S) per collective kind. */
typedef struct {
    uint64_t calls[PL_OP_COUNT], bytes[PL_OP_COUNT];
} l7_traffic;
l7_traffic l7_traffic_formula(const l7_model *m, const l7_cfg *c, int world);
/* The checks of a training run's outputs (every rank calls them in the same order). */
void l7_check_layout(drv_case *c, const l7_lab *L, const l7_out *o, const l7_cfg *cfg);
/* true when every rank passed (decide on it: the same answer everywhere) */
/* The master weights right after zero_init are the initial fp32 parameters, bit for bit
 * (in a bf16 run too: not the rounded parameters). */
bool l7_check_master0(drv_case *c, const l7_lab *L, const l7_out *o);
bool l7_check_params(drv_case *c, const l7_lab *L, const l7_out *o, const l7_ref *ref, double tol, const char *what);
void l7_check_losses(drv_case *c, const l7_out *o, const l7_ref *ref, int first, int nsteps, int world, double tol);
void l7_check_memory(drv_case *c, const l7_lab *L, const l7_out *o, const l7_cfg *cfg);
void l7_check_traffic(drv_case *c, const l7_lab *L, const l7_out *o, const l7_cfg *cfg);
void l7_check_overlap(drv_case *c, const l7_lab *L, const l7_out *o, const l7_cfg *cfg);
void l7_check_prefetch(drv_case *c, const l7_lab *L, const l7_out *o, const l7_cfg *cfg);
/* Did the kit refuse something (a NULL buffer, a failed step)? Fails the case if so. */
bool l7_run_ok(drv_case *c, const l7_out *o);

/* ---- lab07_replay.c ---- */
/* The last step of every rank replayed on the profile as recorded, and with every
 * prefetched all-gather moved after the compute it ran beside (0, 0 when it cannot be: no
 * profile, no record; -1 when a rank's recorded ops are malformed). */
void l7_replay(const l7_lab *L, const l7_out *o, double *pred_us, double *pred_noprefetch_us);

/* ---- lab07_layouts.c ---- */
void *l7_layouts_make(drv_case *c, const l7_lab *L, int which);
void l7_layouts_judge(drv_case *c, void *q, int which);
void l7_layouts_free(void *q);

/* ---- lab07_ckpt.c ---- */
typedef struct l7_ckdir l7_ckdir;
/* Every saver's file and rank 0's metadata, from the players' "ck.save" and "ck.file", in
 * a fresh directory: NULL (every rank alike) when some rank did not save, why says who. */
l7_ckdir *l7_ckdir_write(drv_case *c, bool saver, const l7_model *m, int saved_world, char *why, size_t len);
/* Another model's checkpoint at 2 ranks, as a fresh ZeRO-3 run of it would save it. */
l7_ckdir *l7_ckdir_other_model(drv_case *c, const l7_lab *L);
/* A copy of d with one damage (rank 0 makes it); the file the error must name. */
l7_ckdir *l7_ckdir_damaged(drv_case *c, const l7_ckdir *d, l7_damage kind, char *expect, size_t len);
/* The directory as it is now into "ckK.dir" / "ckK.data" (a loader's slots), or an
 * empty "no checkpoint" when d is NULL or this rank does not load. */
void l7_ckdir_stage(drv_case *c, const l7_ckdir *d, int k, bool loader);
/* Remove the files and the directory (rank 0, once every rank is done with it). */
void l7_ckdir_remove(drv_case *c, l7_ckdir *d);
/* The capacity of a staged directory's data slot for a save at `world` ranks. */
size_t l7_ckdir_capacity(const l7_model *m, int world);

#endif
