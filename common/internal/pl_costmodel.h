/* pl_costmodel.h - an alpha-beta model of links plus a roofline of devices, with machine
 * profiles kept as small text files (common/profiles/NAME.profile). It replays a run's
 * recorded operations (pl_trace_events of every rank, per stream, sends matched with
 * receives, collectives synchronising their members) to predict step time, the fraction
 * of the step spent in exposed communication, and scaling on a machine you do not have.
 * Every formula is written out in docs/cost-model.md.
 */
#ifndef PL_COSTMODEL_H
#define PL_COSTMODEL_H

#include <stddef.h>

#include "pl_comm.h"       // defines: pl_comm
#include "pl_instrument.h" // defines: pl_op_kind, pl_trace_event

#ifdef __cplusplus
extern "C" {
#endif

/* A machine. Units in the file are the ones in the key names; here everything is SI. */
typedef struct {
    char name[64];
    char description[160];
    int gpus_per_node;    /* ranks per node; rank r lives on node r / gpus_per_node   */
    int nodes;            /* how many nodes the machine has (largest world it models) */
    double peak_flops;    /* FLOP/s of one device at the precision the labs use      */
    double gemm_eff;      /* fraction of peak_flops a large GEMM reaches              */
    double vector_flops;  /* FLOP/s of elementwise kernels (no tensor cores / BLAS)   */
    double mem_bw;        /* device memory bandwidth, B/s                             */
    double launch;        /* fixed cost of one compute op (kernel launch), s          */
    double intra_alpha;   /* latency of one message inside a node, s                  */
    double intra_beta;    /* bandwidth of one link direction inside a node, B/s       */
    double inter_alpha;   /* the same between nodes                                   */
    double inter_beta;
    double put_alpha;     /* a one-sided put inside a node (symmetric memory), s:     */
    double put_beta;      /* optional keys, default intra_alpha / intra_beta          */
    /* Optional keys (docs/cost-model.md): absent, they keep these defaults. */
    double mem_capacity;  /* device memory, bytes (memory_GB); 0 = not given          */
    int elem_bytes;       /* bytes per weight/activation element at the precision of
                             peak_flops (element_bytes): 4 (fp32/TF32, the labs'), 2 (bf16) */
    int sm_count;         /* streaming multiprocessors (sm_count); 0 = no tiling      */
    int tile_m, tile_n;   /* output tile one SM computes (gemm_tile_m, gemm_tile_n)   */
} plc_profile;

/* Load a profile: a path (contains '/' or ends in .profile), or a name looked up as
 * $PL_PROFILE_DIR/NAME.profile, then common/profiles/NAME.profile. Returns 0, or -1 with a
 * one-line reason in err (unknown key, missing key, bad number, missing file). */
int plc_profile_load(plc_profile *p, const char *name_or_path, char *err, size_t errlen);
int plc_profile_parse(plc_profile *p, const char *text, char *err, size_t errlen);
/* Write a profile file in the format plc_profile_load reads; 0 or -1. */
int plc_profile_write(const plc_profile *p, const char *path);

/* -- the formulas (docs/cost-model.md) ------------------------------------------------- */
/* GEMM: max(flops / (peak * eff), bytes / mem_bw) + launch. */
double plc_gemm_time(const plc_profile *p, double flops, double bytes);
/* `count` GEMMs of an m x n output over k, E-byte operands, where the shape is known: as
 * plc_gemm_time, with the compute term quantised to whole waves of output tiles when the
 * profile gives sm_count and a tile (docs/cost-model.md, "Formulas"). */
double plc_gemm_shape_time(const plc_profile *p, double count, double m, double n, double k, double elem);
/* Kernel (elementwise, reduction, copy): max(flops / vector, bytes / mem_bw) + launch. */
double plc_kernel_time(const plc_profile *p, double flops, double bytes);
/* Point-to-point message of S bytes: alpha + S / beta (intra- or inter-node link). */
double plc_p2p_time(const plc_profile *p, int same_node, double bytes);
/* One-sided put of S bytes (pl_sym_put): put_alpha + S / put_beta inside a node, the
 * inter-node link otherwise. No receiver takes part. */
double plc_put_time(const plc_profile *p, int same_node, double bytes);
/* Library collective over n ranks spanning `nodes` nodes, S as in nccl-tests
 * (all-reduce: the buffer; all-gather / reduce-scatter / all-to-all: the whole buffer):
 *   all-reduce                      2(n-1) alpha + 2(n-1)/n S / beta
 *   all-gather, reduce-scatter, a2a  (n-1) alpha +  (n-1)/n S / beta
 *   broadcast, reduce                (n-1) alpha +          S / beta
 *   barrier                          ceil(log2 n) alpha
 * with the inter-node link when nodes > 1; 0 when n == 1. */
double plc_coll_time(const plc_profile *p, pl_op_kind kind, int n, int nodes, double bytes);

/* -- replay ---------------------------------------------------------------------------- */
/* One recorded operation of any rank (what the replay needs from a pl_trace_event). */
typedef struct {
    int rank;           /* world rank that recorded it                                */
    pl_op_kind kind;
    int stream;         /* 0 compute, 1 comm                                          */
    int comm_id, comm_size;
    int peer;           /* p2p: peer's rank in the communicator                       */
    bool has_peer_world; /* p2p: the trace knew the peer's world rank (peer_world); if
                            not, communicators are taken as blocks of consecutive ranks */
    int peer_world;
    double bytes, flops;
    double t_start, t_end; /* measured; only their order is used (see the docs)       */
    /* Cross-stream dependency. explicit_deps = 1 (ops from a trace): `after` is 1 + the
     * index, among the same rank's ops (regions excluded), of the other stream's op that
     * this one must follow, 0 for none: the order events and host syncs gave on the
     * recording machine, as a GPU keeps it. explicit_deps = 0 (ops written by hand): the
     * dependency is inferred from t_start/t_end (docs/cost-model.md). */
    int explicit_deps, after;
} plc_op;

typedef struct {
    double step_time;      /* predicted: latest end over all ranks, s                  */
    double compute_time;   /* max over ranks of the predicted compute busy time, s     */
    double comm_time;      /* max over ranks of the predicted comm busy time, s        */
    double comm_fraction;  /* exposed communication: 1 - compute_time / step_time      */
    double comm_overlap;   /* hidden communication: the share of comm busy time (all
                              ranks) during which the same rank's compute ran            */
    double flops;          /* total over ranks                                         */
    double comm_bytes;     /* total over ranks: p2p bytes sent + collective S          */
    size_t ops;            /* ops replayed                                             */
} plc_prediction;

/* Replay ops of `world` ranks (any order; the order of each rank's ops is kept). Ranks of
 * a communicator of size m < world are taken to be consecutive blocks of m world ranks
 * (Megatron's layout). Returns 0, or -1 with the reason in err (an op nobody matches). */
int plc_replay(const plc_profile *p, const plc_op *ops, size_t nops, int world,
               plc_prediction *out, char *err, size_t errlen);

/* -- hand-written op lists (the ideal step of a lab, a block at a size nobody ran) ------ */
/* Ops of every rank in program order on the compute stream; each op takes the next time
 * slot of the list [t, t + 0.5), so the replay keeps the order it was written in. */
typedef struct {
    plc_op *ops;
    size_t n, cap;
    int rank, comm_id, comm_size; /* of the ops added next (plc_list_rank) */
} plc_list;
/* The ops added next are rank `rank`'s; their collectives run over a communicator of
 * comm_size ranks with id comm_id (0 = the world). */
void plc_list_rank(plc_list *l, int rank, int comm_id, int comm_size);
void plc_list_gemm(plc_list *l, double m, double n, double k); /* 2mnk flops, fp32 bytes */
void plc_list_op(plc_list *l, pl_op_kind kind, double flops, double bytes);
void plc_list_free(plc_list *l);

/* Collective over `world`: every rank contributes its pl_trace_events() recorded since
 * index `first` (pl_trace_count() before the step), every rank gets the same prediction.
 * Returns what plc_replay returns (on every rank). */
int plc_replay_trace(const plc_profile *p, size_t first, pl_comm *world, plc_prediction *out,
                     char *err, size_t errlen);

/* The events of this rank since `first` as plc_ops (n written, at most cap). */
size_t plc_ops_from_trace(size_t first, int rank, plc_op *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
