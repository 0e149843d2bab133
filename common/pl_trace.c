/* pl_trace.c - the per-rank operation record, metrics, regions, the clock and the comm
 * watchdog: the instrumentation layer. It sits below the device and comm layers and calls
 * neither: they register hooks (NVTX ranges, an async-error poll and an abort for the
 * watchdog) at start-up. The Chrome trace export, which needs every rank's record, is in
 * pl_export.c above the comm layer. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pl_device.h"     // defines: pl_mem_peak
#include "pl_instrument.h" // defines: the API implemented here
#include "pl_internal.h"   // defines: the hooks the lower layers register
#include "pl_runtime.h"    // defines: pl_info, pl_log, pl_abort, PL_CHECK

/* -- clock ------------------------------------------------------------------------------- */
double pl_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double g_t0;
void pl_trace_start_clock(void) { g_t0 = pl_now(); }
double pl_trace_clock(void) { return pl_now() - g_t0; }

/* -- record and metrics ------------------------------------------------------------------- */
/* The record keeps at most this many events; metrics keep counting past it. */
#define PL_TRACE_MAX_EVENTS (1u << 20)

static pl_trace_event *g_ev;
static size_t g_n, g_cap;
static pl_metrics g_m;

static const char *const kind_names[PL_OP_COUNT] = {
    "send", "recv", "allreduce", "allgather", "reduce_scatter", "broadcast",
    "reduce", "alltoall", "barrier", "gemm", "kernel", "region", "put", "signal", "wait"};

const char *pl_op_kind_name(pl_op_kind k) {
    return (unsigned)k < PL_OP_COUNT ? kind_names[k] : "?";
}

static void count(const pl_trace_event *e) {
    switch (e->kind) {
    case PL_OP_SEND: g_m.bytes_sent += e->bytes; g_m.msgs_sent++; break;
    case PL_OP_RECV: g_m.bytes_recv += e->bytes; g_m.msgs_recv++; break;
    case PL_OP_GEMM: g_m.gemm_calls++; g_m.gemm_flops += e->flops; break;
    case PL_OP_KERNEL:
        g_m.kernel_calls++, g_m.kernel_bytes += (double)e->bytes;
        if (e->name && !strcmp(e->name, "reduce_local")) g_m.reduce_elems += e->flops; /* one per element */
        break;
    case PL_OP_PUT: g_m.puts++; g_m.put_bytes += e->bytes; break;
    case PL_OP_SIGNAL: g_m.signals++; break;
    case PL_OP_WAIT: g_m.waits++; break;
    case PL_OP_BARRIER: g_m.barriers++; break;
    default:
        if (pl_op_is_collective(e->kind)) {
            g_m.coll_calls[e->kind]++;
            g_m.coll_total++;
            g_m.coll_bytes += e->bytes;
        }
    }
}

/* Positions count every op recorded since pl_init (g_base of them cleared away), so an
 * event recorded before a pl_trace_clear still names the right op, or one before the trace. */
static int64_t g_base;
static int64_t g_last[2] = {-1, -1};  /* position of the last op on each stream       */
static int64_t g_after[2] = {-1, -1}; /* what the next op on each stream must follow  */

int64_t pl_trace_stream_pos(int stream) { return g_last[stream ? 1 : 0]; }
void pl_trace_stream_waits(int stream, int64_t pos) {
    int s = stream ? 1 : 0;
    if (pos > g_after[s]) g_after[s] = pos;
}
void pl_trace_host_synced(int stream) { pl_trace_stream_waits(!stream, g_last[stream ? 1 : 0]); }

/* Records are named by their position since pl_init (g_base + index), so a record opened
 * before a pl_trace_clear and closed after it is simply dropped, never mistaken for
 * another. */
size_t pl_trace_record_open(const pl_trace_event *e) {
    count(e);
    pl_progress_tick();
    if (g_n == g_cap) {
        if (g_cap >= PL_TRACE_MAX_EVENTS) return (size_t)-1;
        g_cap = g_cap ? 2 * g_cap : 4096;
        g_ev = realloc(g_ev, g_cap * sizeof *g_ev);
        PL_CHECK(g_ev != NULL, "out of host memory for the trace");
    }
    g_ev[g_n] = *e;
    g_ev[g_n].after = -1;
    if (e->kind != PL_OP_REGION) {
        int s = e->stream ? 1 : 0;
        if (g_after[s] >= g_base) g_ev[g_n].after = g_after[s] - g_base;
        g_last[s] = g_base + (int64_t)g_n;
    }
    return (size_t)g_base + g_n++;
}

void pl_trace_record(const pl_trace_event *e) { pl_trace_record_open(e); }

void pl_trace_kernel(const char *name, int stream, double bytes, double flops, double t_start) {
    pl_trace_event e = {.kind = PL_OP_KERNEL, .stream = stream, .peer = -1, .name = name,
                        .bytes = (uint64_t)bytes, .flops = flops, .t_start = t_start,
                        .t_end = pl_trace_clock()};
    pl_trace_record_open(&e);
}

static pl_trace_event *record_at(size_t pos) {
    if (pos == (size_t)-1 || pos < (size_t)g_base || pos - (size_t)g_base >= g_n) return NULL;
    return &g_ev[pos - (size_t)g_base];
}

void pl_trace_close(size_t pos, double t_end) {
    pl_trace_event *e = record_at(pos);
    pl_progress_tick();
    if (e && e->t_end < 0) e->t_end = t_end;
}

void pl_trace_close_now(size_t pos) {
    pl_trace_event *e = record_at(pos);
    pl_progress_tick();
    if (e && e->t_end < 0) e->t_end = pl_trace_clock(); /* the clock only for a record still open */
}

void pl_trace_retime(size_t pos, double t_start, double t_end) {
    pl_trace_event *e = record_at(pos);
    if (!e) return;
    e->t_start = t_start;
    e->t_end = t_end;
}

size_t pl_trace_count(void) { return g_n; }
const pl_trace_event *pl_trace_events(void) { return g_ev; }
void pl_trace_clear(void) {
    g_base += (int64_t)g_n;
    g_n = 0;
}

void pl_metrics_get(pl_metrics *m) {
    *m = g_m;
    m->mem_peak = pl_mem_peak();
}

void pl_metrics_reset(void) {
    memset(&g_m, 0, sizeof g_m);
    pl_mem_reset_peak();
}

/* -- regions ------------------------------------------------------------------------------ */
static void (*g_region_begin_hook)(const char *);
static void (*g_region_end_hook)(void);
void pl_trace_set_region_hooks(void (*begin)(const char *), void (*end)(void)) {
    g_region_begin_hook = begin;
    g_region_end_hook = end;
}

#define PL_REGION_DEPTH 32
static size_t g_region_stack[PL_REGION_DEPTH];
static int g_region_depth;

void pl_region_begin(const char *name) {
    pl_trace_event e = {.kind = PL_OP_REGION, .peer = -1, .name = name,
                        .t_start = pl_trace_clock(), .t_end = -1};
    size_t i = pl_trace_record_open(&e);
    if (g_region_depth < PL_REGION_DEPTH) g_region_stack[g_region_depth] = i;
    g_region_depth++;
    if (g_region_begin_hook) g_region_begin_hook(name);
}

void pl_region_end(void) {
    PL_CHECK(g_region_depth > 0, "pl_region_end without pl_region_begin");
    g_region_depth--;
    if (g_region_depth < PL_REGION_DEPTH) pl_trace_close(g_region_stack[g_region_depth], pl_trace_clock());
    if (g_region_end_hook) g_region_end_hook();
}

/* -- watchdog -----------------------------------------------------------------------------
 * Waits that poll (point-to-point) call pl_watchdog_poll(); blocking calls (MPI's blocking
 * collectives, a CUDA sync, NCCL setup) are covered by a thread that watches the same
 * state. The verdict rests on progress, not on time alone: a rank is reported only once
 * it has waited the limit AND no rank of its node has advanced for the limit (no op
 * recorded or completed, no message received, no deferred work run, no long call in
 * progress). A slow rank on a loaded machine keeps its peers' watchdogs quiet for as long
 * as it advances; ranks that all wait do not. A rank computing outside the harness (the
 * grader's own checks, or a student's endless loop: they look alike) holds the verdict
 * off for at most PL_WD_HOST_LIMITS limits.
 * Every duration is on the watchdog's own clock: wall time less the time this rank's main
 * thread spent runnable but waiting for a core (its run-queue delay, from the kernel's
 * schedstat), and less the time the watchdog's thread was due to tick and did not run (a
 * stopped process, or a virtual machine whose host paused it). On a machine loaded by
 * other work a rank may wait seconds for a core, and a virtual machine may stand still for
 * seconds; that time is the machine's, not a deadlock's, and never counts toward the limit.
 * Either checker fires: it prints the waiting rank's line, lets the other stuck ranks
 * print theirs, and ends the job with PL_EXIT_DEADLOCK. The thread makes no MPI calls. */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>

/* Arming happens around every wait, so it must be cheap: atomics, no lock. Only the
 * first caller past the limit (main thread or watchdog thread) reports. */
static void (*g_wd_poll_hook)(void);  /* e.g. NCCL's asynchronous errors      */
static void (*g_wd_abort_hook)(void); /* tear the comm backend down first     */
void pl_watchdog_set_hooks(void (*poll)(void), void (*abort_comm)(void)) {
    g_wd_poll_hook = poll;
    g_wd_abort_hook = abort_comm;
}

static const char *_Atomic g_wd_op;
static _Atomic int g_wd_peer;
static _Atomic double g_wd_since;
static _Atomic int g_wd_armed, g_wd_fired;

static _Atomic int g_wd_quiet;
void pl_watchdog_quiet(int quiet) {
    atomic_store_explicit(&g_wd_quiet, quiet, memory_order_relaxed);
    if (quiet) atomic_store_explicit(&g_wd_armed, 0, memory_order_release);
}

#define PL_WD_HOST_LIMITS 4

/* Progress: two words per rank of the node, a cache line apart, in memory they share
 * (pl_init sets it up; the rank's own words when it could not). Word 0, written by the
 * main thread: bit 0 in a long call, the rest counts ticks. Word 1, written by the
 * watchdog thread: periods the rank spent computing while not waiting. */
static volatile uint64_t g_own_words[2];
static volatile uint64_t *_Atomic g_board = g_own_words;
static _Atomic int g_board_n = 1, g_board_me, g_board_reading;
static uint64_t g_ticks, g_host_periods;
static int g_busy;
static const volatile uint64_t *_Atomic g_watch_words;
static _Atomic double g_last_progress; /* wd_now() a word 0 last moved (the thread)  */
static _Atomic double g_last_host;     /* ... and a word 1                          */

/* The watchdog's clock (above): wall time less two kinds of time that are not a wait's.
 * The main thread's run-queue delay: its schedstat, opened at start, before a graded player
 * is confined, and re-read in place by the thread every tick (where it cannot be read,
 * only the second kind counts). And the time the thread itself was due and did not run:
 * it ticks every WD_TICK_S, so a gap of more than two ticks between ticks is a process
 * or a whole machine that was stopped (a virtual machine's host pauses its CPUs for
 * seconds when it is busy), in which no rank could have moved and nothing was waited
 * for. Per tick the larger of the two is taken off, never both; time since the last tick
 * beyond two ticks does not count until the thread has ticked again. */
#define WD_TICK_S 0.1
static _Atomic double g_off;        /* seconds taken off the wall clock so far         */
static _Atomic double g_last_tick;  /* pl_now() of the thread's last tick (0: none yet) */
static int g_schedstat_fd = -1;
static pthread_mutex_t g_clock_lock = PTHREAD_MUTEX_INITIALIZER;

static double wd_now(void) {
    double now = pl_now(), last = atomic_load_explicit(&g_last_tick, memory_order_relaxed);
    double unseen = last > 0 ? now - last - 2 * WD_TICK_S : 0;
    return now - atomic_load_explicit(&g_off, memory_order_relaxed) - (unseen > 0 ? unseen : 0);
}

/* Seconds the main thread has waited for a core since it started; -1 if unknown. */
static double main_queued(void) {
    char buf[128];
    if (g_schedstat_fd < 0) return -1;
    ssize_t n = pread(g_schedstat_fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return -1;
    buf[n] = '\0';
    unsigned long long run_ns, wait_ns;
    if (sscanf(buf, "%llu %llu", &run_ns, &wait_ns) != 2) return -1;
    return 1e-9 * (double)wait_ns;
}

/* One tick of the clock (the thread's, or a reporter's while it waits for the others). */
static void watch_clock(void) {
    static double queued_before = -1;
    pthread_mutex_lock(&g_clock_lock);
    double now = pl_now(), last = atomic_load(&g_last_tick), q = main_queued();
    if (last > 0) {
        double gap = now - last, missed = gap - 2 * WD_TICK_S, starved = q >= 0 && queued_before >= 0 ? q - queued_before : 0;
        double off = missed > starved ? missed : starved;
        if (off > gap) off = gap;
        if (off > 0) atomic_store(&g_off, atomic_load(&g_off) + off);
    }
    if (q >= 0) queued_before = q;
    atomic_store(&g_last_tick, now);
    pthread_mutex_unlock(&g_clock_lock);
}

/* slots NULL: back to this rank's own words (before the shared memory goes away; waits
 * until no thread is reading it: the main thread and the watchdog thread both read, so
 * g_board_reading counts its readers). */
void pl_watchdog_set_board(volatile uint64_t *slots, int nranks, int mine) {
    if (!slots || nranks < 1 || mine < 0 || mine >= nranks) {
        slots = g_own_words;
        nranks = 1;
        mine = 0;
    }
    atomic_store(&g_board_n, 1);
    atomic_store(&g_board_me, 0);
    atomic_store(&g_board, g_own_words);
    while (atomic_load(&g_board_reading)) sched_yield();
    atomic_store(&g_board_me, mine);
    atomic_store(&g_board, slots);
    atomic_store(&g_board_n, nranks);
}

static void publish(int word, uint64_t value) {
    volatile uint64_t *b = atomic_load_explicit(&g_board, memory_order_relaxed);
    __atomic_store_n(&b[PL_BOARD_WORDS * atomic_load_explicit(&g_board_me, memory_order_relaxed) + word], value,
                     __ATOMIC_RELAXED);
}
void pl_progress_tick(void) {
    g_ticks++;
    publish(0, (g_ticks << 1) | (g_busy > 0));
}
void pl_progress_busy(int busy) {
    g_busy += busy ? 1 : -1;
    pl_progress_tick();
}
void pl_watchdog_watch_words(const volatile uint64_t *words) { atomic_store(&g_watch_words, words); }

/* The board's words summed over the ranks: sum[0] the ticks, sum[1] the host periods; *busy
 * whether any rank marks a long call. */
static void read_board(uint64_t sum[2], int *busy) {
    sum[0] = sum[1] = 0;
    *busy = 0;
    atomic_fetch_add(&g_board_reading, 1);
    volatile uint64_t *b = atomic_load(&g_board);
    int n = atomic_load(&g_board_n);
    if (b == g_own_words) n = 1;
    for (int i = 0; i < n; i++) {
        uint64_t w = __atomic_load_n(&b[PL_BOARD_WORDS * i], __ATOMIC_RELAXED);
        sum[0] += w >> 1;
        *busy |= (int)(w & 1);
        sum[1] += __atomic_load_n(&b[PL_BOARD_WORDS * i + 1], __ATOMIC_RELAXED);
    }
    atomic_fetch_sub(&g_board_reading, 1);
}

uint64_t pl_progress_node(int *any_busy) {
    uint64_t sum[2];
    int busy;
    read_board(sum, &busy);
    if (any_busy) *any_busy = busy;
    return sum[0];
}

/* Every tick of the thread: did this rank compute since the last without waiting? (Any
 * real share of a core counts: a loaded machine may give a busy rank only a few percent;
 * a rank blocked or asleep gets none.) */
static void watch_self(void) {
    static double last_cpu = -1, last_wall;
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    double cpu = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec, wall = wd_now();
    if (last_cpu >= 0 && !atomic_load(&g_wd_armed) && cpu - last_cpu >= (wall - last_wall) / 50)
        publish(1, ++g_host_periods);
    last_cpu = cpu;
    last_wall = wall;
}

/* The thread's view of the board, every tick: the last time anything moved. */
static void watch_board(void) {
    static uint64_t last_sum[2];
    static int seen;
    uint64_t sum[2];
    int busy;
    read_board(sum, &busy);
    /* the words another process shows: none yet (0) is a node not yet seen, which may be
     * slow to start (a referee in MPI_Init), never a stuck one */
    const volatile uint64_t *w = atomic_load(&g_watch_words);
    if (w) {
        uint64_t ticks = __atomic_load_n(&w[0], __ATOMIC_RELAXED);
        busy |= ticks == 0;
        sum[0] += ticks;
        sum[1] += __atomic_load_n(&w[1], __ATOMIC_RELAXED);
    }
    double now = wd_now();
    if (!seen || busy || sum[0] != last_sum[0]) atomic_store(&g_last_progress, now);
    if (!seen || sum[1] != last_sum[1]) atomic_store(&g_last_host, now);
    last_sum[0] = sum[0];
    last_sum[1] = sum[1];
    seen = 1;
}

void pl_watchdog_arm(const char *op, int peer) {
    if (atomic_load_explicit(&g_wd_quiet, memory_order_relaxed)) return;
    /* when the wait began is read by the first look at it (the thread's next tick, or a
     * poll of the waiting rank): no clock on the path of every call */
    if (!atomic_load_explicit(&g_wd_armed, memory_order_relaxed))
        atomic_store_explicit(&g_wd_since, -1.0, memory_order_relaxed);
    atomic_store_explicit(&g_wd_op, op, memory_order_relaxed);
    atomic_store_explicit(&g_wd_peer, peer, memory_order_relaxed);
    atomic_store_explicit(&g_wd_armed, 1, memory_order_release);
}

void pl_watchdog_disarm(void) { atomic_store_explicit(&g_wd_armed, 0, memory_order_release); }

/* Returns 1 for the one caller that must report: armed past the limit (+ slack), and
 * nothing on the node advanced for as long (nor computed, for up to PL_WD_HOST_LIMITS). */
static int past_limit(double slack, const char **op, int *peer, double *waited, double *still) {
    double limit = pl_watchdog_sec();
    if (limit <= 0 || !atomic_load_explicit(&g_wd_armed, memory_order_acquire)) return 0;
    double now = wd_now(), since = atomic_load_explicit(&g_wd_since, memory_order_relaxed);
    if (since < 0) { /* armed since this moment, as far as anyone can tell */
        atomic_compare_exchange_strong(&g_wd_since, &since, now);
        return 0;
    }
    double moved = atomic_load(&g_last_progress), host = atomic_load(&g_last_host);
    if (now - since < limit + slack || now - moved < limit + slack) return 0;
    if (now - host < limit + slack && now - moved < PL_WD_HOST_LIMITS * limit + slack) return 0;
    if (atomic_exchange(&g_wd_fired, 1)) return 0;
    *op = atomic_load_explicit(&g_wd_op, memory_order_relaxed);
    *peer = atomic_load_explicit(&g_wd_peer, memory_order_relaxed);
    *waited = now - since;
    *still = now - (moved > since ? moved : since);
    return 1;
}

static void report_and_exit(const char *op, int peer, double waited, double still, int from_thread) {
    if (peer >= 0)
        pl_log("rank %d waits in %s for peer %d (%.1f s; no progress on this node for %.1f s): deadlock? aborting",
               pl_rank(), op, peer, waited, still);
    else
        pl_log("rank %d waits in %s (%.1f s; no progress on this node for %.1f s): deadlock? aborting",
               pl_rank(), op, waited, still);
    if (!from_thread && g_wd_abort_hook) g_wd_abort_hook();
    /* Give the other stuck ranks time to print their own line before the job dies: 1.5 s on
     * the watchdog's clock (a loaded machine gives them less of each second), 15 s at most. */
    double t0 = wd_now(), w0 = pl_now();
    while (wd_now() - t0 < 1.5 && pl_now() - w0 < 15) {
        struct timespec tick = {0, (long)(WD_TICK_S * 1e9)};
        nanosleep(&tick, NULL);
        watch_clock();
    }
    if (from_thread) _exit(PL_EXIT_DEADLOCK); /* MPI belongs to the main thread */
    pl_abort(PL_EXIT_DEADLOCK);
}

void pl_watchdog_poll(void) {
    /* NCCL reports some failures only asynchronously: surface them while waiting. */
    if (g_wd_poll_hook) g_wd_poll_hook();
    const char *op;
    int peer;
    double waited, still;
    if (past_limit(0, &op, &peer, &waited, &still)) report_and_exit(op, peer, waited, still, 0);
}

/* Polling waits are left to the main thread (which can abort NCCL cleanly); the thread
 * steps in half a second later, i.e. only when the main thread is stuck in a call. */
static void *watchdog_thread(void *arg) {
    (void)arg;
    struct timespec tick = {0, (long)(WD_TICK_S * 1e9)};
    for (;;) {
        nanosleep(&tick, NULL);
        watch_clock();
        watch_self();
        watch_board();
        const char *op;
        int peer;
        double waited, still;
        if (past_limit(0.5, &op, &peer, &waited, &still)) report_and_exit(op, peer, waited, still, 1);
    }
    return NULL;
}

void pl_watchdog_start(void) {
    if (pl_info()->watchdog_sec <= 0) return;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld/schedstat", (long)syscall(SYS_gettid));
    if (g_schedstat_fd < 0) g_schedstat_fd = open(path, O_RDONLY | O_CLOEXEC);
    watch_clock();
    atomic_store(&g_last_progress, wd_now());
    atomic_store(&g_last_host, wd_now());
    pthread_t t;
    if (pthread_create(&t, NULL, watchdog_thread, NULL) == 0) pthread_detach(t);
}
