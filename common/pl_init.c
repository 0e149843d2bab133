/* pl_init.c - pl_init/pl_finalize: MPI, the harness flags, choosing the backends, and
 * setting up the layers in order (the top of the harness; see pl_internal.h). */

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pl_backend.h"    // defines: the backend tables, pl_dev, pl_cb, PL_MPI_CHECK
#include "pl_defer.h"      // defines: pl_streams_set_deferred
#include "pl_instrument.h" // defines: pl_trace_write_chrome
#include "pl_internal.h"   // defines: the set-up functions and hooks of every layer
#include "pl_sym_backend.h" // defines: pl_sym_setup, pl_sym_teardown (symmetric memory)
#include "pl_memcheck.h"   // defines: pl_mem_set_checked, pl_mem_check_guards

pl_runtime_info *pl_info_mutable(void); /* pl_runtime.c */
void pl_install_crash_handlers(void);

static int g_initialised;
#define g_info (*pl_info_mutable())

/* A transport that is not MPI (pl_use_transport): its table and where this rank sits. */
static const pl_comm_backend *g_transport;
static pl_transport_place g_place;

void pl_use_transport(const pl_comm_backend *cb, const pl_transport_place *where) {
    PL_CHECK(!g_initialised, "pl_use_transport after pl_init");
    PL_CHECK(cb && cb->split && cb->release && cb->barrier && cb->host_allreduce && cb->host_gatherv && cb->host_bcast,
             "pl_use_transport: a transport needs every entry of the host side");
    g_transport = cb;
    g_place = *where;
}

/* The minimum over ranks of v (every rank must agree on the backends). */
static int all_min(int v) {
    if (g_transport) {
        double d = v;
        g_transport->host_allreduce(&d, 1, PL_HOST_MIN, pl_comm_world());
        return (int)d;
    }
    int all = 0;
    PL_MPI_CHECK(MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    return all;
}

/* Remove argv[i] (and its value when has_value) in place. */
static void drop_args(int *argc, char **argv, int i, int n) {
    for (int j = i; j + n <= *argc; j++) argv[j] = argv[j + n];
    *argc -= n;
}

static const char *take_flag(int *argc, char **argv, const char *name) {
    size_t len = strlen(name);
    for (int i = 1; i < *argc; i++) {
        if (strncmp(argv[i], name, len) != 0) continue;
        if (argv[i][len] == '=') {
            const char *v = argv[i] + len + 1;
            drop_args(argc, argv, i, 1);
            return v;
        }
        if (argv[i][len] == 0) {
            if (i + 1 >= *argc) pl_usage_error("%s needs a value", name);
            const char *v = argv[i + 1];
            drop_args(argc, argv, i, 2);
            return v;
        }
    }
    return NULL;
}

static pl_device_kind parse_device(const char *s, const char *from) {
    if (!s || !*s || !strcmp(s, "auto")) return PL_DEVICE_AUTO;
    if (!strcmp(s, "cpu")) return PL_DEVICE_CPU;
    if (!strcmp(s, "cuda") || !strcmp(s, "gpu")) return PL_DEVICE_CUDA;
    pl_usage_error("unknown device '%s' (from %s): use cpu, cuda or auto", s, from);
}

static pl_comm_kind parse_comm(const char *s, const char *from) {
    if (!s || !*s || !strcmp(s, "auto")) return PL_COMM_AUTO;
    if (!strcmp(s, "mpi")) return PL_COMM_MPI;
    if (!strcmp(s, "nccl")) return PL_COMM_NCCL;
    pl_usage_error("unknown comm backend '%s' (from %s): use mpi, nccl or auto", s, from);
}

static double parse_seconds(const char *s, const char *from) {
    char *end = NULL;
    double v = strtod(s, &end);
    if (!end || *end || v < 0) pl_usage_error("bad number of seconds '%s' (from %s)", s, from);
    return v;
}

/* Decide the device backend. Every rank must agree, so the decision uses the minimum
 * over ranks of "this rank can use a GPU". */
static void choose_device(pl_device_kind want, const char *src) {
    int gpus = 0;
    char why[160] = "cpu build (compiled without CUDA; the cuda build is build/cuda/)";
#ifdef PL_HAVE_CUDA
    gpus = pl_cuda_probe(why, sizeof why);
    if (gpus < 0) gpus = 0;
    else if (gpus == 0 && !why[0]) snprintf(why, sizeof why, "no CUDA device visible");
#endif
    g_info.gpus_on_node = gpus;
    int usable = gpus > 0, all_usable = g_transport ? 0 : all_min(usable);
    if (want == PL_DEVICE_CUDA) {
        if (!all_usable) {
            if (!usable) pl_log("cannot use --device cuda: %s", why);
            pl_usage_error("device cuda requested (%s) but not every rank can use a GPU", src);
        }
        g_info.device = PL_DEVICE_CUDA;
        snprintf(g_info.device_why, sizeof g_info.device_why, "requested by %s", src);
    } else if (want == PL_DEVICE_CPU) {
        g_info.device = PL_DEVICE_CPU;
        snprintf(g_info.device_why, sizeof g_info.device_why, "requested by %s", src);
    } else if (all_usable) {
        g_info.device = PL_DEVICE_CUDA;
        snprintf(g_info.device_why, sizeof g_info.device_why,
                 "auto: %d GPU(s) visible on this node", gpus);
    } else {
        g_info.device = PL_DEVICE_CPU;
        snprintf(g_info.device_why, sizeof g_info.device_why, "auto: %s",
                 usable ? "some rank has no usable GPU" : why);
    }
}

/* NCCL needs a GPU of its own per rank (before NCCL 2.30). */
static void choose_comm(pl_comm_kind want, const char *src) {
    int own_gpu = g_info.device == PL_DEVICE_CUDA && g_info.local_world <= g_info.gpus_on_node;
    int all_own = g_transport ? 0 : all_min(own_gpu);
    int have_nccl = 0;
#ifdef PL_HAVE_NCCL
    have_nccl = 1;
#endif
    if (g_transport) {
        if (want == PL_COMM_NCCL) pl_usage_error("comm nccl requested (%s) where the referee moves every message", src);
        g_info.comm = PL_COMM_REFEREE;
        snprintf(g_info.comm_why, sizeof g_info.comm_why, "graded on the cpu: the referees move and count every message");
    } else if (want == PL_COMM_NCCL) {
        if (!have_nccl) pl_usage_error("comm nccl requested (%s) but this build has no NCCL", src);
        if (g_info.device != PL_DEVICE_CUDA)
            pl_usage_error("comm nccl requested (%s) needs --device cuda", src);
        if (!all_own && !getenv("NCCL_MULTI_RANK_GPU_ENABLE"))
            pl_usage_error("comm nccl requested (%s) but some node runs more ranks than it has "
                           "GPUs; NCCL needs one GPU per rank (use --comm mpi)", src);
        g_info.comm = PL_COMM_NCCL;
        snprintf(g_info.comm_why, sizeof g_info.comm_why, "requested by %s", src);
    } else if (want == PL_COMM_MPI) {
        g_info.comm = PL_COMM_MPI;
        snprintf(g_info.comm_why, sizeof g_info.comm_why, "requested by %s", src);
    } else if (g_info.device != PL_DEVICE_CUDA) {
        g_info.comm = PL_COMM_MPI;
        snprintf(g_info.comm_why, sizeof g_info.comm_why, "auto: device is cpu");
    } else if (!have_nccl) {
        g_info.comm = PL_COMM_MPI;
        snprintf(g_info.comm_why, sizeof g_info.comm_why, "auto: this build has no NCCL");
    } else if (!all_own) {
        g_info.comm = PL_COMM_MPI;
        snprintf(g_info.comm_why, sizeof g_info.comm_why,
                 "auto: %d rank(s) share %d GPU(s) on a node; NCCL needs one GPU per rank",
                 g_info.local_world, g_info.gpus_on_node);
    } else {
        g_info.comm = PL_COMM_NCCL;
        snprintf(g_info.comm_why, sizeof g_info.comm_why, "auto: every rank has its own GPU");
    }
}

/* The watchdog's progress board: a cache line per rank of this node in memory they share, so
 * a waiting rank sees whether any of them still advances (pl_trace.c). Without shared
 * memory the watchdog goes by this rank's own progress. */
static MPI_Win g_board_win = MPI_WIN_NULL;

static void share_progress_board(MPI_Comm local) {
    MPI_Comm_set_errhandler(local, MPI_ERRORS_RETURN);
    int me = 0, n = 1;
    PL_MPI_CHECK(MPI_Comm_rank(local, &me));
    PL_MPI_CHECK(MPI_Comm_size(local, &n));
    uint64_t *mine = NULL;
    MPI_Aint size = me == 0 ? PL_BOARD_WORDS * (MPI_Aint)n * (MPI_Aint)sizeof(uint64_t) : 0;
    if (MPI_Win_allocate_shared(size, sizeof(uint64_t), MPI_INFO_NULL, local, &mine, &g_board_win) != MPI_SUCCESS) {
        g_board_win = MPI_WIN_NULL;
        return;
    }
    MPI_Aint got = 0;
    int unit = 0;
    uint64_t *board = NULL;
    if (MPI_Win_shared_query(g_board_win, 0, &got, &unit, &board) != MPI_SUCCESS || got < size) {
        MPI_Win_free(&g_board_win);
        return;
    }
    if (me == 0) memset(board, 0, PL_BOARD_WORDS * (size_t)n * sizeof *board);
    PL_MPI_CHECK(MPI_Barrier(local));
    pl_watchdog_set_board(board, n, me);
}

static void free_progress_board(void) {
    if (g_board_win == MPI_WIN_NULL) return;
    pl_watchdog_set_board(NULL, 0, 0);
    MPI_Win_free(&g_board_win);
}

void pl_share_progress_board(void) {
    if (g_board_win != MPI_WIN_NULL) return;
    MPI_Comm local;
    PL_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local));
    share_progress_board(local);
    PL_MPI_CHECK(MPI_Comm_free(&local));
}
void pl_free_progress_board(void) { free_progress_board(); }

/* PL_STREAMS=deferred|eager and PL_CHECKED=1: the checks the grader turns on. */
static void set_checks(void) {
    const char *streams = getenv("PL_STREAMS"), *checked = getenv("PL_CHECKED");
    if (streams && *streams && strcmp(streams, "eager") != 0) {
        if (strcmp(streams, "deferred") != 0)
            pl_usage_error("unknown PL_STREAMS '%s': use eager or deferred", streams);
        if (!pl_streams_set_deferred(true))
            pl_log0("PL_STREAMS=deferred applies to the cpu device only: streams stay as they are on %s",
                    pl_device_name(g_info.device));
    }
    if (checked && *checked && strcmp(checked, "0") != 0) pl_mem_set_checked(true);
}

/* Checked mode at the end of a run: what the red zones caught, said where people look. */
static void report_guards(void) {
    if (!pl_mem_checked()) return;
    char report[2048];
    size_t n = pl_mem_check_guards(report, sizeof report);
    if (n) pl_log("memory check: %zu allocation(s) written outside their bounds:\n%s", n, report);
}

/* Ranks on several hosts, with Open MPI: two of its defaults do not hold there.
 * - MPI_Win_allocate (pl_sym_malloc) gets the osc rdma component even where the hosts are
 *   joined by TCP alone, and the window then fails (MPI_ERR_WIN); UCX's, next in line,
 *   cannot start inside a player's filter (it wants pipes, /sys and new sockets). The pt2pt
 *   component (active messages over the MPI connections already open) works on any network:
 *   windows use it, and sm where every rank shares the node.
 * - TCP connections are opened at a pair's first message; a graded player's filter allows
 *   no new socket once it plays, so every connection is opened in MPI_Init
 *   (mpi_preconnect_mpi).
 * What the user set is kept; one host keeps Open MPI's own choices. */
static void set_mca_across_hosts(void) {
    const char *size = getenv("OMPI_COMM_WORLD_SIZE"), *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const char *nodes = getenv("SLURM_STEP_NUM_NODES");
    bool span = (size && local && atoi(local) < atoi(size)) || (nodes && atoi(nodes) > 1);
    if (!span) return;
    setenv("OMPI_MCA_osc", "sm,pt2pt", 0);
    setenv("OMPI_MCA_mpi_preconnect_mpi", "1", 0);
}

/* Rank, world and the node's ranks from MPI (or from the transport, which has no MPI). */
static void place_rank(int *argc, char ***argv) {
    if (g_transport) {
        g_info.rank = g_place.rank, g_info.world = g_place.world;
        g_info.local_rank = g_place.local_rank, g_info.local_world = g_place.local_world;
        g_info.nodes = g_place.nodes;
        return;
    }
    int inited = 0;
    PL_MPI_CHECK(MPI_Initialized(&inited));
    if (!inited) {
        set_mca_across_hosts();
        PL_MPI_CHECK(MPI_Init(argc, argv));
    }
    PL_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &g_info.rank));
    PL_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &g_info.world));
    MPI_Comm local;
    PL_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_info.rank, MPI_INFO_NULL, &local));
    PL_MPI_CHECK(MPI_Comm_rank(local, &g_info.local_rank));
    PL_MPI_CHECK(MPI_Comm_size(local, &g_info.local_world));
    share_progress_board(local);
    PL_MPI_CHECK(MPI_Comm_free(&local));
    int leader = g_info.local_rank == 0;
    PL_MPI_CHECK(MPI_Allreduce(&leader, &g_info.nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
}

void pl_init(int *argc, char ***argv) {
    if (g_initialised) return;
    place_rank(argc, argv);
    pl_install_crash_handlers();
    setvbuf(stdout, NULL, _IOLBF, 0);
    gethostname(g_info.host, sizeof g_info.host - 1);

    /* Harness flags: command line wins over the environment. */
    const char *dev_flag = take_flag(argc, *argv, "--device");
    const char *comm_flag = take_flag(argc, *argv, "--comm");
    const char *seed_flag = take_flag(argc, *argv, "--seed");
    const char *wd_flag = take_flag(argc, *argv, "--watchdog");
    const char *trace_flag = take_flag(argc, *argv, "--trace");
    const char *dev_env = getenv("PL_DEVICE"), *comm_env = getenv("PL_COMM");
    const char *dev_src = dev_flag ? "--device" : "PL_DEVICE";
    const char *comm_src = comm_flag ? "--comm" : "PL_COMM";
    pl_device_kind want_dev = parse_device(dev_flag ? dev_flag : dev_env, dev_src);
    if (g_transport && want_dev == PL_DEVICE_CUDA)
        pl_usage_error("device cuda requested (%s) where the referee moves every message (the cpu device only)", dev_src);
    if (g_transport) want_dev = PL_DEVICE_CPU;
    pl_comm_kind want_comm = parse_comm(comm_flag ? comm_flag : comm_env, comm_src);

    const char *seed_s = seed_flag ? seed_flag : getenv("PL_SEED");
    g_info.seed = 1234;
    if (seed_s) {
        char *end = NULL;
        g_info.seed = strtoull(seed_s, &end, 0);
        if (!end || *end) pl_usage_error("bad seed '%s'", seed_s);
    }
    const char *wd_s = wd_flag ? wd_flag : getenv("PL_WATCHDOG_SEC");
    g_info.watchdog_sec = wd_s ? parse_seconds(wd_s, wd_flag ? "--watchdog" : "PL_WATCHDOG_SEC")
                               : 300.0;
    const char *trace_env = getenv("TRACE");
    if (trace_flag) {
        g_info.trace = 1;
        snprintf(g_info.trace_path, sizeof g_info.trace_path, "%s", trace_flag);
    } else if (trace_env && *trace_env && strcmp(trace_env, "0") != 0) {
        g_info.trace = 1;
        const char *p = getenv("PL_TRACE_FILE");
        snprintf(g_info.trace_path, sizeof g_info.trace_path, "%s", p ? p : "trace.json");
    }
    const char *bt = getenv("PL_BLAS_THREADS");
    g_info.blas_threads = bt ? atoi(bt) : 1;
    if (g_info.blas_threads < 1) g_info.blas_threads = 1;

    choose_device(want_dev, dev_src);
    choose_comm(want_comm, comm_src);
    const char *tf32 = getenv("PL_TF32");
    g_info.tf32 = g_info.device == PL_DEVICE_CUDA && tf32 && !strcmp(tf32, "1");
    g_info.cuda_device = -1;

#ifdef PL_HAVE_CUDA
    pl_dev = g_info.device == PL_DEVICE_CUDA ? &pl_device_cuda : &pl_device_cpu;
#else
    pl_dev = &pl_device_cpu;
#endif
#ifdef PL_HAVE_NCCL
    pl_cb = g_info.comm == PL_COMM_NCCL ? &pl_comm_nccl : &pl_comm_mpi;
#else
    pl_cb = &pl_comm_mpi;
#endif
    if (g_transport) pl_cb = g_transport;
    /* The hooks that let a lower layer reach a higher one at run time (pl_internal.h). */
    pl_trace_set_region_hooks(pl_dev->region_begin, pl_dev->region_end);
    pl_watchdog_set_hooks(pl_cb->poll, pl_cb->abort);
    pl_device_set_drain(pl_cb->drain);
    pl_watchdog_start();
    pl_dev->init(&g_info);
    pl_device_setup_streams();
    pl_comm_setup_world();
    /* Under a referee, start-up's waits for the other ranks (the symmetric memory's choice,
     * the clocks' barrier) are the kit's, before any student code: a peer slow to start is
     * no deadlock, and the engine's launch limit bounds them. */
    if (g_transport) pl_watchdog_quiet(1);
    pl_sym_setup();
    set_checks();
    /* Align the trace clocks of all ranks at a common point. */
    if (g_transport) g_transport->barrier(pl_comm_world());
    else PL_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_transport) pl_watchdog_quiet(0);
    pl_trace_start_clock();
    g_initialised = 1;
}

/* A referee: the harness's cpu device, GEMM, kernels and checks in a process that never
 * starts MPI (its player does). Rank and world come from the launcher; the harness flags
 * are taken from argv like pl_init does, and the device asked for is remembered only to
 * choose the tolerance (PL_TF32=1 loosens it only where the player may run cuda). */
void pl_init_local(int rank, int world, int *argc, char ***argv) {
    if (g_initialised) return;
    g_info.rank = rank;
    g_info.world = world;
    g_info.local_rank = rank;
    g_info.local_world = world;
    g_info.nodes = 1;
    gethostname(g_info.host, sizeof g_info.host - 1);
    pl_install_crash_handlers();
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *dev_flag = take_flag(argc, *argv, "--device");
    const char *comm_flag = take_flag(argc, *argv, "--comm");
    const char *seed_flag = take_flag(argc, *argv, "--seed");
    (void)take_flag(argc, *argv, "--watchdog");
    (void)take_flag(argc, *argv, "--trace");
    pl_device_kind want = parse_device(dev_flag ? dev_flag : getenv("PL_DEVICE"), dev_flag ? "--device" : "PL_DEVICE");
    (void)parse_comm(comm_flag ? comm_flag : getenv("PL_COMM"), comm_flag ? "--comm" : "PL_COMM");
    const char *seed_s = seed_flag ? seed_flag : getenv("PL_SEED");
    g_info.seed = 1234;
    if (seed_s) {
        char *end = NULL;
        g_info.seed = strtoull(seed_s, &end, 0);
        if (!end || *end) pl_usage_error("bad seed '%s'", seed_s);
    }
    g_info.blas_threads = 1;
    g_info.device = PL_DEVICE_CPU;
    g_info.comm = PL_COMM_MPI;
    snprintf(g_info.device_why, sizeof g_info.device_why, "a referee computes on the cpu");
    snprintf(g_info.comm_why, sizeof g_info.comm_why, "a referee talks to no other rank");
    const char *tf32 = getenv("PL_TF32");
    g_info.tf32 = want != PL_DEVICE_CPU && tf32 && !strcmp(tf32, "1");
    g_info.cuda_device = -1;
    pl_dev = &pl_device_cpu;
    pl_cb = NULL;
    pl_dev->init(&g_info);
    pl_device_setup_streams();
    pl_trace_start_clock();
    g_initialised = 2;
}

void pl_set_world_local(int rank, int world) {
    g_info.rank = rank;
    g_info.world = world;
}

void pl_finalize(void) {
    if (!g_initialised) return;
    if (g_initialised == 2) {
        g_initialised = 0;
        return;
    }
    pl_device_sync();
    report_guards();
    if (g_info.trace && pl_trace_write_chrome(g_info.trace_path) && g_info.rank == 0)
        pl_log0("trace written to %s (open it in ui.perfetto.dev)", g_info.trace_path);
    pl_trace_flush_reserved();
    pl_sym_teardown();
    pl_streams_set_deferred(false);
    pl_comm_teardown();
    pl_device_teardown_streams();
    if (pl_dev->finalize) pl_dev->finalize();
    free_progress_board();
    g_initialised = 0;
    if (!g_transport) PL_MPI_CHECK(MPI_Finalize());
}
