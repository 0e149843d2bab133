/* main.c - the player: the harness, the student's object and the driver's calling code,
 * started by its referee (never directly: it needs the referee's socket and region).
 *
 * It starts MPI and the device, says it is ready, confines itself with the play filter
 * (grader/runner/confine.c) and then only obeys its referee: run a case's play() on the
 * slots, stage and time a timed() run, relay the referees' signed values over a private
 * host communicator, release a case, exit. It judges nothing and signs nothing; the
 * counters it reports are its own (docs/grader.md says which rubric items read them).
 *
 * A mode (make lab-N RUN=MODE) is the student's own program: the referee execs the
 * player directly and it runs the mode without a referee or a filter. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "confine.h"
#include "pl_defer.h"    // defines: pl_launch, pl_streams_deferred
#include "pl_internal.h" // defines: pl_mem_reset_peak
#include "pl_memcheck.h" // defines: pl_mem_mark, pl_mem_check_guards, pl_mem_leak_report
#include "runner.h"
#include "transport.h"

static unsigned char *g_region;
static uint64_t g_region_bytes;
static slot_table g_slots;  /* the case's slots, as the referee published them       */
static drv_case g_case;     /* the case being played                                  */
static drv_instance g_inst;
static bool g_cuda;         /* device buffers are not the region: copy in and out     */
static uint64_t g_mark;     /* allocations from here on are the case's (pl_mem_mark)  */

/* ================================================================================== */
/* Slots as device buffers                                                            */
/* ================================================================================== */

void *drv_slot(drv_case *c, const char *name) {
    int i;
    const wire_slot *s = slot_find(c->slots, name, &i);
    if (!s) pl_fatal(__FILE__, __LINE__, name, "drv_slot: the case has no slot of that name");
    return ((slot_table *)c->slots)->dev[i];
}

float *drv_slot_f(drv_case *c, const char *name) { return drv_slot(c, name); }

/* Copy the whole slot with its red zones: what the player wrote out of bounds on the
 * device lands where the referee looks. */
static void slot_span(const wire_slot *s, uint64_t *off, uint64_t *len) {
    uint64_t padded = (s->bytes + WIRE_ALIGN - 1) / WIRE_ALIGN * WIRE_ALIGN;
    *off = s->offset - WIRE_GUARD;
    *len = WIRE_GUARD + padded + WIRE_GUARD;
}

static void slots_take(void) {
    const wire_header *h = (const wire_header *)g_region;
    memset(&g_slots, 0, sizeof g_slots);
    int n = h->nslots;
    if (n < 0 || n > WIRE_SLOTS_MAX) pl_fatal(__FILE__, __LINE__, "the case's slot table", "malformed");
    memcpy(g_slots.v, h->slots, (size_t)n * sizeof g_slots.v[0]);
    g_slots.n = n;
    for (int i = 0; i < n; i++) {
        wire_slot *s = &g_slots.v[i];
        s->name[WIRE_SLOT_NAME - 1] = '\0';
        uint64_t off, len;
        slot_span(s, &off, &len);
        if (s->offset < WIRE_HEADER_BYTES + WIRE_GUARD || off + len > g_region_bytes || len < s->bytes)
            pl_fatal(__FILE__, __LINE__, s->name, "a slot outside the shared region");
        if (!g_cuda || (s->flags & DRV_HOST)) {
            g_slots.dev[i] = g_region + s->offset;
        } else {
            unsigned char *d = pl_malloc(len);
            g_slots.dev[i] = d + WIRE_GUARD;
        }
    }
}

/* A slot that lives on the device (cuda, not DRV_HOST). */
static bool on_device(int i) { return g_cuda && !(g_slots.v[i].flags & DRV_HOST); }

static void slots_upload(void) {
    if (!g_cuda) return;
    for (int i = 0; i < g_slots.n; i++) {
        if (!on_device(i)) continue;
        uint64_t off, len;
        slot_span(&g_slots.v[i], &off, &len);
        pl_upload((unsigned char *)g_slots.dev[i] - WIRE_GUARD, g_region + off, len);
    }
}

static void slots_download(void) {
    if (!g_cuda) return;
    pl_device_sync();
    for (int i = 0; i < g_slots.n; i++) {
        if (!on_device(i)) continue;
        uint64_t off, len;
        slot_span(&g_slots.v[i], &off, &len);
        pl_download(g_region + off, (unsigned char *)g_slots.dev[i] - WIRE_GUARD, len);
    }
}

static void slots_free(void) {
    for (int i = 0; i < g_slots.n; i++)
        if (on_device(i)) pl_free((unsigned char *)g_slots.dev[i] - WIRE_GUARD);
    memset(&g_slots, 0, sizeof g_slots);
}

/* The outputs as the caller's stream read them (drv_consume): a copy per slot, taken by
 * work on that stream, put back into the slot once play() has synced the device. */
static struct {
    struct {
        int slot;
        unsigned char *copy;
    } v[WIRE_SLOTS_MAX];
    int n;
    bool open; /* inside play() */
} g_read;

typedef struct {
    const void *from;
    void *to;
    size_t bytes;
} read_args;

static void read_on_stream(void *args, pl_stream *s) {
    (void)s;
    const read_args *a = args;
    memcpy(a->to, a->from, a->bytes);
}

void drv_consume(drv_case *c, pl_stream *s, ...) {
    bool reads = g_read.open && !g_cuda && pl_streams_deferred();
    va_list ap;
    va_start(ap, s);
    for (const char *name; (name = va_arg(ap, const char *)) != NULL;) {
        int i;
        const wire_slot *w = slot_find(c->slots, name, &i);
        if (!w) pl_fatal(__FILE__, __LINE__, name, "drv_consume: the case has no slot of that name");
        if (!reads || !w->bytes) continue;
        int k = 0;
        while (k < g_read.n && g_read.v[k].slot != i) k++;
        if (k == g_read.n) {
            PL_CHECK(k < WIRE_SLOTS_MAX, "drv_consume: too many slots");
            g_read.v[k].slot = i;
            g_read.v[k].copy = malloc(w->bytes);
            PL_CHECK(g_read.v[k].copy != NULL, "out of host memory");
            g_read.n++;
        }
        read_args a = {g_slots.dev[i], g_read.v[k].copy, w->bytes};
        pl_trace_event rec = {.kind = PL_OP_REGION, .peer = -1, .name = "the caller reads the outputs"};
        pl_launch(s, &rec, read_on_stream, &a, sizeof a);
    }
    va_end(ap);
}

pl_stream *drv_stream(const drv_case *c) {
    uint32_t h = 2166136261u; /* FNV-1a of the case's name */
    for (const char *p = c->name; *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
    return ((h >> 7) + (uint32_t)c->rank) & 1 ? pl_stream_comm() : pl_stream_compute();
}

static void consumed_restore(void) {
    pl_device_sync();
    for (int k = 0; k < g_read.n; k++) {
        memcpy(g_slots.dev[g_read.v[k].slot], g_read.v[k].copy, g_slots.v[g_read.v[k].slot].bytes);
        free(g_read.v[k].copy);
    }
    g_read.n = 0;
}

/* ================================================================================== */
/* Commands                                                                           */
/* ================================================================================== */

void drv_measure(void (*fn)(void *), void *arg, pl_metrics *m) {
    pl_device_sync();
    pl_metrics_reset();
    fn(arg);
    pl_device_sync();
    pl_metrics_get(m);
}

/* The counters are cumulative: a phase is the difference around it (mem_peak excepted),
 * so the runner's count of the whole play() stays whole. */
static void metrics_minus(pl_metrics *a, const pl_metrics *b) {
    a->bytes_sent -= b->bytes_sent, a->bytes_recv -= b->bytes_recv;
    a->msgs_sent -= b->msgs_sent, a->msgs_recv -= b->msgs_recv;
    for (int k = 0; k < PL_OP_COUNT; k++) a->coll_calls[k] -= b->coll_calls[k];
    a->coll_bytes -= b->coll_bytes, a->coll_total -= b->coll_total;
    a->gemm_calls -= b->gemm_calls, a->gemm_flops -= b->gemm_flops;
    a->kernel_calls -= b->kernel_calls, a->kernel_bytes -= b->kernel_bytes, a->reduce_elems -= b->reduce_elems;
}

void drv_mark(int phase, bool end) {
    PL_CHECK(phase >= 0 && phase < DRV_PHASES, "drv_mark: a phase out of range");
    if (pl_info()->comm == PL_COMM_REFEREE) transport_mark(WIRE_SLOTS_MAX + phase, end);
}

void drv_name_comm(pl_comm *c, int label) {
    PL_CHECK(label >= 0 && label < 64, "drv_name_comm: a name out of range");
    if (c && c != pl_comm_world() && pl_info()->comm == PL_COMM_REFEREE) transport_name(c, label);
}

void drv_measure_slot(drv_case *c, const char *name, void (*fn)(void *), void *arg) {
    if (drv_slot_bytes(c, name) < sizeof(drv_counters))
        pl_fatal(__FILE__, __LINE__, name, "drv_measure_slot: not a slot of drv_counters_slot");
    drv_counters k = {.measured = 1};
    pl_metrics m0;
    pl_wire w0;
    pl_device_sync();
    int slot = -1;
    slot_find(c->slots, name, &slot);
    bool marked = pl_info()->comm == PL_COMM_REFEREE;
    if (marked) transport_mark(slot, false);
    pl_metrics_get(&m0);
    pl_wire_get(&w0);
    k.mem_before = (int64_t)pl_mem_in_use();
    fn(arg);
    pl_device_sync();
    if (marked) transport_mark(slot, true);
    pl_metrics_get(&k.m);
    pl_wire_get(&k.wire);
    k.mem_after = (int64_t)pl_mem_in_use();
    metrics_minus(&k.m, &m0);
    k.wire = (pl_wire){k.wire.p2p_bytes_sent - w0.p2p_bytes_sent, k.wire.p2p_msgs_sent - w0.p2p_msgs_sent,
                       k.wire.p2p_bytes_recv - w0.p2p_bytes_recv, k.wire.p2p_msgs_recv - w0.p2p_msgs_recv,
                       k.wire.coll_calls - w0.coll_calls, k.wire.coll_bytes - w0.coll_bytes};
    pl_upload(drv_slot(c, name), &k, sizeof k);
    pl_device_sync();
}

bool drv_everyone(bool mine) { return drv_min(mine ? 1 : 0) > 0; }

static void play_fn(void *arg) {
    drv_case *c = arg;
    c->inst->test->play(c);
}

static wire_report *report(void) { return &((wire_header *)g_region)->report; }

static void on_play(void) {
    const wire_header *h = (const wire_header *)g_region;
    if (h->test_index < 0 || h->test_index >= test_count())
        pl_fatal(__FILE__, __LINE__, "the case's test", "not in this lab's table");
    memset(&g_inst, 0, sizeof g_inst);
    snprintf(g_inst.name, sizeof g_inst.name, "%.*s", (int)sizeof g_inst.name - 1, h->name);
    snprintf(g_inst.group, sizeof g_inst.group, "%.*s", (int)sizeof g_inst.group - 1, h->group);
    memcpy(g_inst.arg, h->arg, sizeof g_inst.arg);
    g_inst.test = &g_lab->tests[h->test_index];
    free(g_case.state);
    g_case = (drv_case){.inst = &g_inst, .name = g_inst.name, .arg = g_inst.arg, .rank = pl_rank(),
                        .world = pl_world(), .slots = &g_slots, .batch = 1};
    slots_take();
    slots_upload();
    wire_report r = {0};
    pl_wire w0, w1;
    pl_wire_get(&w0);
    pl_device_sync();
    pl_mem_reset_peak();
    r.mem_before = (int64_t)pl_mem_in_use();
    g_mark = pl_mem_mark();
    g_read.open = true;
    drv_measure(play_fn, &g_case, &r.m);
    g_read.open = false;
    consumed_restore();
    r.mem_peak = (int64_t)pl_mem_peak();
    pl_mem_check_guards(r.guards, sizeof r.guards);
    pl_wire_get(&w1);
    r.wire = (pl_wire){w1.p2p_bytes_sent - w0.p2p_bytes_sent, w1.p2p_msgs_sent - w0.p2p_msgs_sent,
                       w1.p2p_bytes_recv - w0.p2p_bytes_recv, w1.p2p_msgs_recv - w0.p2p_msgs_recv,
                       w1.coll_calls - w0.coll_calls, w1.coll_bytes - w0.coll_bytes};
    slots_download();
    *report() = r;
}

/* Before the clock starts: the ranks start together (a wait on the other referees, which
 * may still be writing inputs: not the student's, and not timed). */
static void on_ready(void) {
    pl_device_sync();
    double one = 1;
    pl_watchdog_quiet(1);
    pl_host_allreduce(&one, 1, PL_HOST_SUM, NULL);
    pl_watchdog_quiet(0);
}

/* arg: which call (low 8 bits), and how many of it back to back (the rest), call k on the
 * slots' set k (drv_batch_sets) */
static void on_go(uint32_t arg) {
    int which = (int)(arg & 0xFF), calls = (int)(arg >> 8);
    if (calls < 1 || calls > 1024) pl_fatal(__FILE__, __LINE__, "a timed run's calls from the referee", "out of range");
    g_case.batch = calls;
    for (int k = 0; k < calls; k++) {
        g_case.batch_index = k;
        g_inst.test->timed(&g_case, which);
    }
    g_case.batch_index = 0;
    pl_device_sync();
}

static void on_release(void) {
    if (g_inst.test && g_inst.test->release) g_inst.test->release(&g_case);
    pl_device_sync();
    wire_report *r = report();
    r->mem_after = (int64_t)pl_mem_in_use();
    memset(r->guards, 0, sizeof r->guards);
    memset(r->leaks, 0, sizeof r->leaks);
    pl_mem_check_guards(r->guards, sizeof r->guards);
    pl_mem_leak_report(g_mark, r->leaks, sizeof r->leaks);
    slots_free();
    free(g_case.state);
    g_case.state = NULL;
    g_inst.test = NULL;
}

/* The referees' values, through every player: a wait on the other referees (which may be
 * computing a reference meanwhile), which the student's watchdog does not judge. */
static void on_relay(const void *mine, uint64_t len) {
    size_t *counts = calloc((size_t)pl_world(), sizeof *counts);
    PL_CHECK(counts != NULL, "out of host memory");
    pl_watchdog_quiet(1);
    void *all = pl_host_allgatherv(mine, (size_t)len, counts, NULL);
    pl_watchdog_quiet(0);
    size_t total = 0;
    for (int r = 0; r < pl_world(); r++) total += counts[r];
    if (!wire_send(WIRE_FD_CTL, REP_RELAY, 0, all, total)) exit(PL_EXIT_FATAL);
    free(all);
    free(counts);
}

void drv_interlude(drv_case *c, int which) {
    (void)c;
    pl_device_sync(); /* what play() issued so far is in the slots before the referee looks */
    consumed_restore();
    slots_download();
    if (!wire_send(WIRE_FD_CTL, REP_INTERLUDE, (uint32_t)which, NULL, 0)) exit(PL_EXIT_FATAL);
    for (;;) { /* the referee's interlude may relay values through the players */
        wire_msg m;
        void *payload = NULL;
        if (wire_recv(WIRE_FD_CTL, &m, &payload, ((uint64_t)WIRE_RELAY_MAX + 64) * 2) != 1) exit(PL_EXIT_FATAL);
        bool resume = m.cmd == CMD_RESUME;
        if (m.cmd == CMD_RELAY) on_relay(payload, m.len);
        else if (!resume) pl_fatal(__FILE__, __LINE__, "a command from the referee", "not a relay or a resume in an interlude");
        free(payload);
        if (resume) break;
    }
    slots_upload();
}

static int serve(void) {
    for (;;) {
        wire_msg m;
        void *payload = NULL;
        if (wire_recv(WIRE_FD_CTL, &m, &payload, ((uint64_t)WIRE_RELAY_MAX + 64) * 2) != 1) return PL_EXIT_FATAL;
        bool reply = true;
        switch (m.cmd) {
        case CMD_PLAY: on_play(); break;
        case CMD_STAGE: slots_upload(); break;
        case CMD_READY: on_ready(); break;
        case CMD_GO: on_go(m.arg); break;
        case CMD_COLLECT: slots_download(); break;
        case CMD_RELEASE: on_release(); break;
        case CMD_RELAY: on_relay(payload, m.len); reply = false; break;
        case CMD_EXIT: free(payload); return 0;
        default: pl_fatal(__FILE__, __LINE__, "a command from the referee", "unknown");
        }
        free(payload);
        if (reply && !wire_send(WIRE_FD_CTL, REP_DONE, 0, NULL, 0)) return PL_EXIT_FATAL;
    }
}

/* ================================================================================== */
/* The process                                                                        */
/* ================================================================================== */

static bool refereed(void) {
    struct stat a, b;
    return fstat(WIRE_FD_CTL, &a) == 0 && S_ISSOCK(a.st_mode) && fstat(WIRE_FD_SHM, &b) == 0 && S_ISREG(b.st_mode);
}

static int run_mode(void) {
    for (const drv_mode *m = g_lab->modes; m && m->name; m++)
        if (!strcmp(m->name, g_flags.run_mode)) return m->fn();
    pl_usage_error("--run: this lab has no mode '%s' (try --modes)", g_flags.run_mode);
}

static void map_region(void) {
    struct stat st;
    if (fstat(WIRE_FD_SHM, &st) != 0 || st.st_size <= (off_t)WIRE_HEADER_BYTES)
        pl_fatal(__FILE__, __LINE__, "the shared region", "missing or too small");
    g_region_bytes = (uint64_t)st.st_size;
    void *p = mmap(NULL, g_region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, WIRE_FD_SHM, 0);
    if (p == MAP_FAILED) pl_fatal(__FILE__, __LINE__, "mmap(the shared region)", strerror(errno));
    g_region = p;
    const wire_header *h = p;
    if (h->magic != WIRE_MAGIC || h->version != WIRE_VERSION)
        pl_fatal(__FILE__, __LINE__, "the shared region", "not the referee's (another version?)");
}

/* PL_TRANSPORT=referee (set by the referee): it moves every message; PL_PLACE says where
 * this rank sits ("rank,world,local_rank,local_world,nodes"). */
static bool referee_moves(void) {
    const char *t = getenv("PL_TRANSPORT"), *where = getenv("PL_PLACE");
    if (!t || strcmp(t, "referee") != 0) return false;
    pl_transport_place pl;
    if (!where || sscanf(where, "%d,%d,%d,%d,%d", &pl.rank, &pl.world, &pl.local_rank, &pl.local_world, &pl.nodes) != 5 ||
        pl.world < 1 || pl.rank < 0 || pl.rank >= pl.world)
        pl_fatal(__FILE__, __LINE__, "PL_PLACE", "the referee's transport needs rank,world,local_rank,local_world,nodes");
    struct stat st;
    if (fstat(WIRE_FD_ARENA, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (1 << 20))
        pl_fatal(__FILE__, __LINE__, "the transport's arena", "missing or too small (start the driver, not the player)");
    void *a = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, WIRE_FD_ARENA, 0);
    if (a == MAP_FAILED) pl_fatal(__FILE__, __LINE__, "mmap(the transport's arena)", strerror(errno));
    transport_attach(a, (uint64_t)st.st_size);
    pl_use_transport(&pl_comm_referee, &pl);
    return true;
}

int drv_main(const drv_lab *lab, int argc, char **argv) {
    g_lab = lab;
    if (lab->defaults) g_opt = *lab->defaults;
    bool by_referee = refereed();
    if (by_referee) map_region();
    bool own_mpi = !(by_referee && referee_moves());
    pl_init(&argc, &argv);
    parse_flags(argc, argv);
    if (g_flags.help) {
        print_usage();
        pl_finalize();
        return 0;
    }
    bool mode = g_flags.run_mode && strcmp(g_flags.run_mode, "cases") != 0;
    if (!by_referee && !mode)
        pl_usage_error("this is the player half of a lab driver: run the driver (%s without .player), which "
                       "starts it", argv[0]);
    /* the play filter below lets no file be opened: the trace's is opened now */
    if (pl_info()->trace && pl_rank() == 0 && !pl_trace_reserve(pl_info()->trace_path))
        pl_log("cannot write trace file %s", pl_info()->trace_path);
    if (lab->player_init) lab->player_init();
    if (mode) {
        int rc = run_mode();
        pl_finalize();
        return rc;
    }
    g_cuda = pl_info()->device == PL_DEVICE_CUDA;
    wire_ready r = {.rank = pl_rank(), .world = pl_world(), .device = pl_info()->device, .comm = pl_info()->comm,
                    .nodes = pl_info()->nodes};
    snprintf(r.device_why, sizeof r.device_why, "%s", pl_info()->device_why);
    snprintf(r.comm_why, sizeof r.comm_why, "%s", pl_info()->comm_why);
    if (!wire_send(WIRE_FD_CTL, REP_READY, 0, &r, sizeof r)) return PL_EXIT_FATAL;
    /* from here on, student code may run: confine first */
    if (!getenv("PL_NO_SECCOMP") && !confine_play(getpid(), g_cuda, own_mpi))
        pl_fatal(__FILE__, __LINE__, "seccomp (the play filter)", strerror(errno));
    int rc = serve();
    if (g_inst.test) on_release();
    pl_finalize();
    return rc;
}
