/* pl_sym.c - the generic symmetric-memory layer (pl_sym.h): chooses the backend, keeps the
 * table of symmetric allocations, turns an address into (allocation, offset), checks every
 * argument, records every call for the trace and the counters, and injects the graders'
 * timing jitter. The backend in g_sb moves the bytes. It sits above the comm layer (it
 * reaches the world through pl_host_* and the backends' own communicators). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pl_backend.h"     // defines: pl_stream_resolve, struct pl_stream
#include "pl_instrument.h"  // defines: pl_trace_event, pl_host_allreduce
#include "pl_internal.h"    // defines: pl_trace_record_open, pl_trace_close, pl_mem_track_*, pl_mem_guard_*
#include "pl_sym_backend.h" // defines: pl_sym_backend, pl_sym_region

static const pl_sym_backend *g_sb;
static char g_why[200];
static pl_sym_region *g_regions; /* live allocations, in allocation order */
static size_t g_nregions, g_cap;

/* ---- choosing the backend --------------------------------------------------------------- */

/* The cpu device uses MPI RMA windows over host memory. On the cuda device, NVSHMEM where
 * the build has it and every rank owns its GPU (NVSHMEM needs MPS to put several PEs on one
 * GPU), CUDA IPC otherwise (one node). PL_SYM overrides, for testing a backend by hand. */
static void choose(void) {
    const pl_runtime_info *in = pl_info();
    const char *want = getenv("PL_SYM");
    bool own_gpu = in->local_world <= in->gpus_on_node;
    double all_own = own_gpu ? 1 : 0;
    pl_host_allreduce(&all_own, 1, PL_HOST_MIN, NULL);
    if (in->comm == PL_COMM_REFEREE) { /* no MPI in this process: no RMA windows */
        g_sb = NULL;
        snprintf(g_why, sizeof g_why, "none: the referees move every message of this run (no MPI windows)");
        return;
    }
    if (in->device != PL_DEVICE_CUDA) {
        if (want && *want && strcmp(want, "mpi-rma") != 0)
            pl_usage_error("PL_SYM=%s: the cpu device has only mpi-rma", want);
        g_sb = &pl_sym_mpi;
        snprintf(g_why, sizeof g_why, "device cpu: MPI-3 RMA windows over host memory%s",
                 in->nodes == 1 ? " (one node: shared windows, peer pointers work)" : " (several nodes: no peer pointers)");
        return;
    }
#ifdef PL_HAVE_CUDA
#ifdef PL_HAVE_NVSHMEM
    if ((!want || !*want || !strcmp(want, "nvshmem")) && (all_own > 0 || (want && *want))) {
        g_sb = &pl_sym_nvshmem;
        snprintf(g_why, sizeof g_why, "%s: every rank has its own GPU and the build has NVSHMEM",
                 want && *want ? "requested by PL_SYM" : "auto");
        return;
    }
#endif
    if (want && *want && strcmp(want, "cuda-ipc") != 0)
        pl_usage_error("PL_SYM=%s is not available here (this build or this placement has only cuda-ipc)", want);
    if (in->nodes > 1) pl_usage_error("symmetric memory across %d nodes needs NVSHMEM (not in this build)", in->nodes);
    g_sb = &pl_sym_cuda_ipc;
    snprintf(g_why, sizeof g_why, "%s", all_own > 0 ? "auto: the build has no NVSHMEM; CUDA IPC handles on one node"
                                                    : "auto: ranks share GPUs (NVSHMEM would need MPS); CUDA IPC handles");
#else
    pl_fatal(__FILE__, __LINE__, "pl_sym", "cuda device in a build without CUDA");
#endif
}

/* The choice is made in pl_init (collective); the backend starts at the first call that
 * needs it, which every rank makes (an allocation, a barrier): most programs never do. */
static bool g_started;
static void ensure(void) {
    if (!g_sb && g_why[0]) pl_fatal(__FILE__, __LINE__, "pl_sym", g_why);
    PL_CHECK(g_sb != NULL, "pl_sym_* before pl_init");
    if (g_started) return;
    g_sb->init();
    g_started = true;
}

void pl_sym_setup(void) { choose(); }

void pl_sym_teardown(void) {
    if (g_started) {
        while (g_nregions) pl_sym_free((char *)g_regions[g_nregions - 1].base + g_regions[g_nregions - 1].guard);
        if (g_sb->finalize) g_sb->finalize();
    }
    free(g_regions);
    g_regions = NULL;
    g_cap = 0;
    g_sb = NULL;
    g_started = false;
}

const char *pl_sym_impl(void) { return g_sb ? g_sb->name : "none"; }
const char *pl_sym_why(void) { return g_sb ? g_why : "pl_init has not run"; }

/* ---- the table of allocations --------------------------------------------------------- */

static pl_sym_region *find(const void *p, size_t bytes, const char *what) {
    const char *a = p;
    for (size_t i = 0; i < g_nregions; i++) {
        const char *b = g_regions[i].base;
        if (a >= b && a < b + g_regions[i].bytes) {
            if (bytes > g_regions[i].bytes - (size_t)(a - b)) {
                char why[160];
                snprintf(why, sizeof why, "%zu bytes at offset %zu run past the end of a symmetric allocation of %zu",
                         bytes, (size_t)(a - b), g_regions[i].bytes);
                pl_fatal(__FILE__, __LINE__, what, why);
            }
            return &g_regions[i];
        }
    }
    pl_fatal(__FILE__, __LINE__, what, "the address is not inside a pl_sym_malloc allocation of this rank");
}

static size_t offset_of(const pl_sym_region *r, const void *p) { return (size_t)((const char *)p - (const char *)r->base); }

void *pl_sym_malloc_at(size_t bytes, const char *file, int line) {
    ensure();
    pl_device_sync();
    double v[2] = {(double)bytes, -(double)bytes};
    pl_host_allreduce(v, 2, PL_HOST_MAX, NULL);
    if (v[0] != -v[1]) pl_usage_error("pl_sym_malloc: ranks ask for different sizes (%.0f to %.0f bytes); a symmetric allocation is the same size everywhere", -v[1], v[0]);
    if (bytes == 0) return NULL;
    if (g_nregions == g_cap) {
        g_cap = g_cap ? 2 * g_cap : 16;
        g_regions = realloc(g_regions, g_cap * sizeof *g_regions);
        PL_CHECK(g_regions != NULL, "out of host memory");
    }
    pl_sym_region *r = &g_regions[g_nregions];
    memset(r, 0, sizeof *r);
    /* checked mode: red zones inside the symmetric region, so a put or a store that runs
     * past the buffer lands in them (every rank has the same layout) */
    r->guard = pl_mem_checked() ? PL_GUARD_BYTES : 0;
    PL_CHECK(bytes <= SIZE_MAX - 2 * r->guard, "allocation size overflows size_t");
    r->bytes = bytes + 2 * r->guard;
    r->peer = calloc((size_t)pl_world(), sizeof *r->peer);
    PL_CHECK(r->peer != NULL, "out of host memory");
    g_sb->alloc(r);
    PL_CHECK(r->base != NULL, "symmetric allocation failed");
    g_nregions++;
    char *mine = (char *)r->base + r->guard;
    pl_alloc_info a = {.ptr = mine, .bytes = bytes, .file = file, .line = line, .guarded = r->guard > 0};
    if (a.guarded) pl_mem_guard_fill(&a);
    pl_mem_track_alloc(&a);
    return mine;
}

void pl_sym_free(void *p) {
    if (!p) return;
    ensure();
    pl_device_sync();
    pl_sym_region *r = find(p, 0, "pl_sym_free");
    if ((char *)r->base + r->guard != p) pl_fatal(__FILE__, __LINE__, "pl_sym_free", "not the start of a symmetric allocation");
    pl_alloc_info gone;
    pl_mem_track_free(p, &gone);
    pl_mem_guard_freed(&gone);
    g_sb->release(r);
    free(r->peer);
    size_t i = (size_t)(r - g_regions);
    memmove(&g_regions[i], &g_regions[i + 1], (g_nregions - i - 1) * sizeof *g_regions);
    g_nregions--;
}

/* ---- instrumentation and checks ------------------------------------------------------- */

static size_t open_ev(pl_op_kind kind, int peer, uint64_t bytes, pl_stream *s, const char *name) {
    pl_trace_event e = {.kind = kind, .stream = s->id, .peer = peer, .comm_id = 0, .comm_size = pl_world(),
                        .bytes = bytes, .t_start = pl_trace_clock(), .t_end = -1, .name = name};
    return pl_trace_record_open(&e);
}
static void close_ev(size_t i) { pl_trace_close(i, pl_trace_clock()); }

static void check_pe(int pe, const char *what) {
    if (pe < 0 || pe >= pl_world()) {
        char why[96];
        snprintf(why, sizeof why, "pe %d is not a rank of the world of %d", pe, pl_world());
        pl_fatal(__FILE__, __LINE__, what, why);
    }
}

static pl_sym_region *check_sig(uint64_t *sig, size_t *off, const char *what) {
    if (!sig) pl_fatal(__FILE__, __LINE__, what, "NULL signal word");
    if ((uintptr_t)sig % 8) pl_fatal(__FILE__, __LINE__, what, "a signal word must be 8-byte aligned");
    pl_sym_region *r = find(sig, 8, what);
    *off = offset_of(r, sig);
    return r;
}

/* ---- jitter (pl_sym_backend.h) -------------------------------------------------------- */

static double g_jitter_us;
static uint64_t g_jitter_state;

void pl_sym_set_jitter(double max_us, uint64_t seed) {
    g_jitter_us = max_us > 0 ? max_us : 0;
    g_jitter_state = (seed ^ 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull + (uint64_t)pl_rank() * 0x94D049BB133111EBull + 1;
}

static void jitter(void) {
    if (g_jitter_us <= 0 || pl_info()->device == PL_DEVICE_CUDA) return;
    uint64_t x = g_jitter_state; /* xorshift64 */
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    g_jitter_state = x;
    if (x & 1) return;
    double us = g_jitter_us * (double)((x >> 11) & 0xFFFFF) / (double)0x100000;
    struct timespec d = {(time_t)(us / 1e6), (long)((us - 1e6 * (double)(time_t)(us / 1e6)) * 1e3)};
    nanosleep(&d, NULL);
}

/* ---- the calls ------------------------------------------------------------------------ */

static void put_common(void *dst, const void *src, size_t bytes, int pe, bool nbi, pl_stream *s) {
    const char *what = nbi ? "pl_sym_put_nbi" : "pl_sym_put";
    ensure();
    check_pe(pe, what);
    if (!bytes) return;
    if (!src) pl_fatal(__FILE__, __LINE__, what, "NULL source with bytes > 0");
    pl_sym_region *r = find(dst, bytes, what);
    s = pl_stream_ready(s);
    size_t ev = open_ev(PL_OP_PUT, pe, bytes, s, nbi ? "put_nbi" : "put");
    g_sb->put(r, offset_of(r, dst), src, bytes, pe, nbi, s);
    close_ev(ev);
}

void pl_sym_put(void *dst, const void *src, size_t bytes, int pe, pl_stream *s) { put_common(dst, src, bytes, pe, false, s); }
void pl_sym_put_nbi(void *dst, const void *src, size_t bytes, int pe, pl_stream *s) { put_common(dst, src, bytes, pe, true, s); }

void pl_sym_put_signal(void *dst, const void *src, size_t bytes, uint64_t *sig, uint64_t value, pl_sig_op op, int pe,
                       pl_stream *s) {
    ensure();
    check_pe(pe, "pl_sym_put_signal");
    size_t soff;
    pl_sym_region *sr = check_sig(sig, &soff, "pl_sym_put_signal");
    if (bytes && !src) pl_fatal(__FILE__, __LINE__, "pl_sym_put_signal", "NULL source with bytes > 0");
    pl_sym_region *r = bytes ? find(dst, bytes, "pl_sym_put_signal") : NULL;
    if (op != PL_SIG_SET && op != PL_SIG_ADD) pl_fatal(__FILE__, __LINE__, "pl_sym_put_signal", "op is PL_SIG_SET or PL_SIG_ADD");
    s = pl_stream_ready(s);
    jitter(); /* before a signal too: a sender held up between its peers reorders the signals
               * a rank sees from different senders, and so from different phases */
    size_t ev = bytes ? open_ev(PL_OP_PUT, pe, bytes, s, "put_signal") : (size_t)-1;
    size_t es = open_ev(PL_OP_SIGNAL, pe, 8, s, "signal");
    if (r) g_sb->put_signal(r, offset_of(r, dst), src, bytes, sr, soff, value, op, pe, s);
    else g_sb->signal(sr, soff, value, op, pe, s);
    if (ev != (size_t)-1) close_ev(ev);
    close_ev(es);
}

void pl_sym_signal(uint64_t *sig, uint64_t value, pl_sig_op op, int pe, pl_stream *s) {
    ensure();
    check_pe(pe, "pl_sym_signal");
    size_t soff;
    pl_sym_region *sr = check_sig(sig, &soff, "pl_sym_signal");
    if (op != PL_SIG_SET && op != PL_SIG_ADD) pl_fatal(__FILE__, __LINE__, "pl_sym_signal", "op is PL_SIG_SET or PL_SIG_ADD");
    s = pl_stream_ready(s);
    jitter();
    size_t es = open_ev(PL_OP_SIGNAL, pe, 8, s, "signal");
    g_sb->signal(sr, soff, value, op, pe, s);
    close_ev(es);
}

void pl_sym_wait_until(uint64_t *sig, pl_cmp cmp, uint64_t value, pl_stream *s) {
    ensure();
    size_t soff;
    pl_sym_region *sr = check_sig(sig, &soff, "pl_sym_wait_until");
    if ((unsigned)cmp > PL_CMP_LE) pl_fatal(__FILE__, __LINE__, "pl_sym_wait_until", "unknown comparison");
    s = pl_stream_ready(s);
    size_t ev = open_ev(PL_OP_WAIT, -1, 0, s, "wait");
    g_sb->wait_until(sr, soff, cmp, value, s);
    close_ev(ev);
    jitter();
}

void pl_sym_fence(pl_stream *s) {
    ensure();
    s = pl_stream_ready(s);
    g_sb->fence(s);
}

void pl_sym_quiet(pl_stream *s) {
    ensure();
    s = pl_stream_ready(s);
    g_sb->quiet(s);
}

void pl_sym_barrier(pl_stream *s) {
    ensure();
    s = pl_stream_ready(s);
    size_t ev = open_ev(PL_OP_BARRIER, -1, 0, s, "sym_barrier");
    g_sb->barrier(s);
    close_ev(ev);
    jitter();
}

void *pl_sym_peer_ptr(const void *p, int pe) {
    check_pe(pe, "pl_sym_peer_ptr");
    if (!p) return NULL;
    pl_sym_region *r = find(p, 0, "pl_sym_peer_ptr");
    if (pe == pl_rank()) return (void *)p;
    char *base = r->peer[pe];
    return base ? base + offset_of(r, p) : NULL;
}
