/* pl_runtime.h - process runtime: init, ranks, backends, logging, fatal errors.
 *
 * Every rank is an MPI process. pl_init() picks the device backend (cpu|cuda) and the
 * comm backend (mpi|nccl) from --device/--comm, PL_DEVICE/PL_COMM, or `auto`, and removes
 * the harness flags it understood from argv so a lab driver only sees its own.
 */
#ifndef PL_RUNTIME_H
#define PL_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

/* C11 spells "does not return" as noreturn (<stdnoreturn.h>); C++ (the .cu files) does
 * not have that header, so the declarations below use PL_NORETURN. */
#ifdef __cplusplus
#define PL_NORETURN [[noreturn]]
#else
#include <stdnoreturn.h>
#define PL_NORETURN noreturn
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { PL_DEVICE_AUTO = 0, PL_DEVICE_CPU, PL_DEVICE_CUDA } pl_device_kind;
/* PL_COMM_REFEREE: a graded cpu run's transport, where the rank's referee moves and counts
 * every message (grader/player/transport.c); never chosen by --comm. */
typedef enum { PL_COMM_AUTO = 0, PL_COMM_MPI, PL_COMM_NCCL, PL_COMM_REFEREE } pl_comm_kind;

/* Exit codes shared by every ParaLab program and read by the grader. */
enum {
    PL_EXIT_OK = 0,
    PL_EXIT_CHECK_FAILED = 1, /* ran fine, some result was wrong                 */
    PL_EXIT_USAGE = 2,        /* bad flag, bad size, unsupported world size, ...   */
    PL_EXIT_FATAL = 3,        /* a CUDA/cuBLAS/NCCL/MPI call failed                */
    PL_EXIT_DEADLOCK = 86,    /* the comm watchdog fired                           */
};

typedef struct {
    int rank, world;             /* in MPI_COMM_WORLD                               */
    int local_rank, local_world; /* ranks on this host                              */
    int nodes;                   /* distinct hosts                                  */
    char host[64];
    pl_device_kind device;
    pl_comm_kind comm;
    char device_why[160]; /* one line: why `auto` (or the user) chose it       */
    char comm_why[160];
    int cuda_device;      /* device ordinal used by this rank, -1 on cpu        */
    int gpus_on_node;     /* CUDA devices visible on this host, 0 without       */
    uint64_t seed;        /* --seed / PL_SEED, default 1234                      */
    double watchdog_sec;  /* --watchdog / PL_WATCHDOG_SEC, 0 disables           */
    int trace;            /* TRACE=1 / --trace: write a Chrome trace at exit    */
    char trace_path[256];
    int blas_threads;
    int tf32;             /* cuda GEMMs in TF32 (PL_TF32=1 on the cuda device)  */
} pl_runtime_info;

/* Initialise MPI and the backends. Harness flags removed from argv:
 *   --device cpu|cuda|auto   --comm mpi|nccl|auto   --seed N   --watchdog SEC   --trace FILE */
void pl_init(int *argc, char ***argv);
void pl_finalize(void);

const pl_runtime_info *pl_info(void);
pl_device_kind pl_device_in_use(void); /* pl_info()->device, without the copy */
int pl_rank(void);
int pl_world(void);
const char *pl_device_name(pl_device_kind k);
const char *pl_comm_name(pl_comm_kind k);

/* printf-style, prefixed with "[rank R] ", to stderr. pl_log0 prints on rank 0 only. */
void pl_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void pl_log0(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A harness call failed: print "[rank R] file:line: stmt -> reason" and abort the job. */
PL_NORETURN void pl_fatal(const char *file, int line, const char *stmt, const char *reason);
/* The same with a printf-style reason: "[rank R] file:line: who -> reason". */
PL_NORETURN void pl_fatalf(const char *file, int line, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Bad input that every rank detects the same way (flags, sizes, world size): rank 0
 * prints "error: <message>" on one line, all ranks exit with PL_EXIT_USAGE.
 * Only call it where every rank reaches the same decision; otherwise use pl_fatal. */
PL_NORETURN void pl_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Abort every rank of the job with `code` (no MPI banner is relied upon). */
PL_NORETURN void pl_abort(int code);

#define PL_CHECK(cond, reason)                                            \
    do {                                                                  \
        if (!(cond)) pl_fatal(__FILE__, __LINE__, #cond, (reason));       \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif
