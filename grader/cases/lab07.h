/* lab07.h - Lab 7's driver (sharded data parallelism: ZeRO-1, ZeRO-2, ZeRO-3 / FSDP): what
 * its case table (grader/cases/lab07*.c), its referee half (grader/referee/lab07*.c) and its
 * player half (grader/player/lab07*.c) share: the flags, the runs a case asks for, the
 * model's description in the referee's own types, and the records the player leaves in its
 * OUT slots.
 *
 * The referee never reads labs/07-zero/zero.h (a student may edit it in their tree): the
 * l7_* types below mirror zero.h's byte for byte, and the player checks at compile time that
 * they agree before it hands them to the student's functions.
 *
 * Slots (all DRV_HOST: the player's kit uploads and downloads what it needs itself):
 *   a training run (the first case of a variant; the referee keeps what it left for the
 *   variant's other cases):
 *     "cfg"   IN const   l7_run_in: the model's shape, the stage's config, the steps
 *     "init"  IN const   every unit's initial fp32 parameters, unit after unit (Ψ floats)
 *     "tok", "tgt"  IN const   this rank's sequences of every step, [steps][T][b] ints;
 *                        never another rank's, never a seed
 *     "rec"   OUT        l7_record: what each step did (the player's counters, trace and
 *                        memory categories), the buckets and the pieces at the end
 *     "vals"  OUT        the pieces' master weights, m and v (3 x Ψ floats, piece by piece)
 *     "full"  OUT        every unit's parameters at the end, as zero_pre_forward gives them
 *     "ops"   OUT        ZeRO-3: the last step's recorded ops, for the referee's replay
 *   a checkpoint case (ckpt.NtoM, ckpt.errors): "init", "s.cfg"/"s.tok"/"s.tgt" on the ranks
 *   that save, "l.cfg"/"l.tok"/"l.tgt" on those that load, and
 *     "ck.save" OUT      l7_ck_save: this rank's pieces as the kit saved them, and its file's
 *     "ck.file" OUT        bytes; the referee writes the files (interlude 0), damages them
 *     "ckK.dir" IN       l7_ck_dir: the directory as the referee found it, staged for the
 *     "ckK.data" IN        kit's reads (K = 0, or 0..3 for the damaged ones of ckpt.errors)
 *     "ck.try"  OUT      l7_ck_try per load: its verdict and what the kit read
 *     "ck.vals" OUT      ckpt.errors: every piece's values before and after each load
 *   and "rec"/"vals"/"full" for the continued run of ckpt.NtoM.
 *   the pure functions (layout.*, plan.*; rank 0 only): "models", "bq"/"ba", "cq"/"ca",
 *   "pq"/"mine"/"saved"/"pa"/"reads" (questions IN, answers OUT); what answer is expected
 *   never leaves the referee.
 * Everything in "rec", "ops" and "ck.try" that is a count (memory, traffic, order, bytes
 * read) is the player's own account: docs/grader.md lists the rubric items resting on it.
 */
#ifndef LAB07_CASES_H
#define LAB07_CASES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "driver.h"           // defines: drv_case, drv_test
#include "gpt.h"              // defines: gpt_config
#include "pl_costmodel.h"     // defines: plc_op

#define L7_MAX_UNITS 32       /* zero.h: ZERO_MAX_UNITS                                  */
#define L7_MAX_TENSORS 384    /* zero.h: ZERO_MAX_TENSORS                                */
#define L7_MAX_BUCKETS 32     /* zero.h: ZERO_MAX_BUCKETS                                */
#define L7_MAX_STEPS 16
#define L7_MAX_PIECES 4096
#define L7_MAX_OPS 4096       /* ops of the replayed step                                */
#define L7_MAX_TRACE 16384    /* trace events of one step                                */
#define L7_MAX_FILES 16       /* files of a staged checkpoint directory                  */
#define L7_CK_HEADER 12       /* a rank file's header: "PLZ7", rank, pieces (int32 each)  */
#define L7_BETA1 0.9f
#define L7_BETA2 0.95f

/* zero.h's return codes and dtypes (the player checks). */
enum { L7_OK = 0, L7_ERR_ARG = -1, L7_ERR_CAPACITY = -2, L7_ERR_COVERAGE = -3, L7_ERR_TODO = -99 };
enum { L7_FP32 = 0, L7_BF16 = 1 };
const char *l7_error_string(int rc);

/* ==================================================================================== */
/* Flags and the runs a case asks for                                                    */
/* ==================================================================================== */

typedef struct {
    int layers, seq, hidden, heads, ffn, vocab, batch, steps, cap; /* the graded model and run */
    double lr, eps, wd, max_norm;
    const char *profile;
    int train_steps, mode_layers, mode_hidden, mode_batch;          /* the modes             */
    const char *text;
} l7_flags;
const l7_flags *l7_opts(void);

/* A stage with its options: the training runs of the graded cases. */
typedef enum { V_Z1, V_Z2, V_Z3, V_Z3N, V_B1, V_B2, V_B3, V_B3F, L7_NVARIANTS } l7_variant;
typedef struct {
    const char *name; /* case-name part: "z1", "z3n", "bf16.z2" */
    int stage;
    bool reshard;
    int param, reduce; /* L7_FP32, L7_BF16 */
} l7_variant_info;
extern const l7_variant_info L7_VARIANTS[L7_NVARIANTS];

/* What a training run's cases check: arg[0] the variant, arg[1] this. */
enum { K_TRAIN, K_PIECES, K_MEMORY, K_TRAFFIC, K_OVERLAP, K_PREFETCH };
/* The checkpoint cases: save at n ranks with one variant, load at m with another;
 * arg[0] indexes this table, -1 for ckpt.errors (save and load at 2 ranks). */
typedef struct {
    int n, m;
    l7_variant save, load;
} l7_pair;
extern const l7_pair L7_PAIRS[6];
enum { L7_NPAIRS = 6 };
/* The damaged checkpoints of ckpt.errors, in the order the player tries them. */
typedef enum { CK_TRUNCATED, CK_METADATA, CK_MISSING, CK_OTHER_MODEL, CK_NKINDS } l7_damage;
extern const char *const L7_DAMAGE_NAMES[CK_NKINDS];

/* ==================================================================================== */
/* The model, in zero.h's layout                                                         */
/* ==================================================================================== */

typedef struct {
    char name[24];
    int unit;
    size_t dim0, row, numel, offset;
} l7_tensor;
typedef struct {
    int first, count;
    size_t numel;
} l7_unit;
typedef struct {
    int nunits, ntensors;
    l7_unit unit[L7_MAX_UNITS];
    l7_tensor tensor[L7_MAX_TENSORS];
    size_t numel;
} l7_model;
typedef struct {
    int first_unit, nunits;
    size_t numel, padded, shard, offset;
} l7_bucket;
typedef struct { /* zero_piece without its three device buffers */
    int tensor;
    size_t begin, count;
} l7_piece;
typedef struct {
    int rank, tensor;
    size_t begin, count;
} l7_saved;
typedef struct {
    int piece;
    size_t dst_offset;
    int saved;
    size_t src_offset, count;
} l7_read;
typedef struct { /* zero_config's fields */
    int stage, reshard, param, reduce;
    size_t cap;
    float lr, beta1, beta2, eps, wd, max_norm;
} l7_cfg;

/* The graded model's shape with `batch` sequences (lab07_model.c, both sides). */
gpt_config l7_gpt(const l7_flags *f, int batch);
/* The units and tensors of the GPT mc with `layers` blocks. */
void l7_describe(l7_model *m, const gpt_config *mc, int layers);
l7_cfg l7_config(const l7_flags *f, l7_variant v);
/* Unit u's initial parameters from the counter RNG (host, numel floats, malloc'd). */
float *l7_init_unit(const l7_model *m, const gpt_config *mc, uint64_t seed, int u);
/* Where unit u starts in a buffer of every unit's elements, unit after unit. */
size_t l7_unit_at(const l7_model *m, int u);

/* ==================================================================================== */
/* The player's records                                                                  */
/* ==================================================================================== */

/* "cfg": what a training run needs (the player never sees a seed or another rank's data). */
typedef struct {
    int32_t seq, batch, hidden, heads, ffn, vocab, layers; /* batch: this rank's sequences */
    l7_cfg cfg;
    int32_t steps;
} l7_run_in;

/* One step, as the harness counted and recorded it on this rank. */
typedef struct {
    double loss;                       /* the local mean loss                              */
    uint64_t calls[PL_OP_COUNT], bytes[PL_OP_COUNT]; /* collectives by kind, their S      */
    uint64_t wire_calls, wire_bytes;   /* what reached MPI/NCCL                            */
    uint64_t peak[PL_MEM_NTAGS];       /* each memory category's peak during the step      */
    /* the issue order (trace indices) */
    int32_t nag, nrs;
    int32_t ag_at[2 * L7_MAX_UNITS + 1], rs_at[L7_MAX_UNITS + L7_MAX_BUCKETS + 1];
    int32_t fwd_call[L7_MAX_UNITS], fwd_start[L7_MAX_UNITS]; /* pre_forward called, compute */
    int32_t bwd_call[L7_MAX_UNITS], bwd_start[L7_MAX_UNITS];
    int32_t fwd_end, bwd_end;          /* after post_forward(U-1), after post_backward(0)  */
    int32_t rs_off_comm;               /* reduce-scatters of backward on the compute stream */
    int32_t rs_waited;                 /* backward compute ops that waited for the reduce-
                                          scatter issued just before them (no compute op
                                          between: a host sync or an event wait at issue) */
    double ag_overlap;                 /* the share of all-gather time beside compute here  */
} l7_step;

/* "rec" */
typedef struct {
    char why[240];                     /* the first thing the kit refused, "" if nothing   */
    int32_t nsteps, zstep, nbuckets, npieces;
    uint64_t mem_init[PL_MEM_NTAGS];   /* each category after zero_init                     */
    uint64_t untagged_init;            /* plain pl_malloc bytes zero_init kept              */
    uint64_t mem_end[PL_MEM_NTAGS];    /* after zero_free                                  */
    uint64_t nvalues;                  /* elements of the pieces: floats of each of master,
                                          m and v in "vals"                                */
    uint64_t nmaster0;                 /* floats in "master0": the pieces' master weights
                                          right after zero_init                            */
    l7_step step[L7_MAX_STEPS];
    l7_bucket bucket[L7_MAX_BUCKETS];
    l7_piece piece[L7_MAX_PIECES];
} l7_record;

/* "ops": the last step's ops as recorded (plc_ops_from_trace), and for every trace event
 * the index of its op (-1: a region) */
typedef struct {
    int32_t nops, ntrace;
    plc_op op[L7_MAX_OPS];
    int32_t op_of[L7_MAX_TRACE];
} l7_ops;

/* "ck.save": what the kit saved on this rank (its file's bytes are in "ck.file"). */
typedef struct {
    int32_t tensor;
    int64_t begin, count, at;          /* elements [begin, begin+count), at byte `at`      */
} l7_ck_piece;
typedef struct {
    int32_t saved;                     /* 1: this rank's file is in "ck.file"              */
    char why[300];                     /* why not                                          */
    int32_t step, npieces;
    int64_t file_bytes;
    l7_ck_piece piece[L7_MAX_PIECES];
} l7_ck_save;

/* "ckK.dir": a checkpoint directory as the referee wrote (and damaged) it; the files'
 * bytes follow one another in "ckK.data". */
typedef struct {
    char name[32];
    int64_t offset, size;
} l7_ck_file;
typedef struct {
    int32_t staged;                    /* 0: no checkpoint (a save failed): load nothing   */
    char dir[200];                     /* where it is on the referee's side (errors name it) */
    int32_t nfiles;
    l7_ck_file file[L7_MAX_FILES];
} l7_ck_dir;

/* "ck.try": one load */
typedef struct {
    int32_t tried;                     /* 1: the kit tried to load                         */
    int32_t rc;                        /* 0: loaded                                        */
    char why[300];
    int64_t meta_read, rank_read;      /* bytes the kit read: the metadata, the rank files */
    int32_t step_before, step_after;   /* z->step around the load (ckpt.errors)            */
    int64_t nbefore, nafter;           /* elements of the pieces before and after         */
} l7_ck_try;

/* ---- the pure functions' questions ---- */
typedef struct {
    int model, world, max;
    size_t cap;
} l7_bucket_q;
typedef struct {
    int rc;
    l7_bucket b[L7_MAX_BUCKETS];
} l7_bucket_a;
typedef struct {
    size_t dim0;
    int world, rank;
} l7_chunk_q;
typedef struct {
    size_t chunk, first, held;
} l7_chunk_a;
typedef struct {
    int nmine, nsaved, max;            /* max: room for reads                              */
    size_t mine_at, saved_at, reads_at; /* where its arrays start in "mine", "saved", "reads" */
} l7_plan_q;

/* ==================================================================================== */
/* The two halves' entry points (the case table names them)                              */
/* ==================================================================================== */

/* referee */
void l7_init(void);
void l7_finish(void);
void l7_layouts_setup(drv_case *c);
void l7_layouts_check(drv_case *c);
void l7_layouts_teardown(drv_case *c);
void l7_run_setup(drv_case *c);
void l7_run_check(drv_case *c);
void l7_leak_model(drv_case *c, drv_model *m);
void l7_ckpt_setup(drv_case *c);
void l7_ckpt_interlude(drv_case *c, int which);
void l7_ckpt_check(drv_case *c);
void l7_ckpt_teardown(drv_case *c);
/* player */
void l7_play_layouts(drv_case *c);
void l7_play_run(drv_case *c);
void l7_play_ckpt(drv_case *c);
int l7_mode_train(void);
int l7_mode_memory(void);
int l7_mode_bench(void);

#endif
