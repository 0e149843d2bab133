/* pl_defer.c - device work as closures, and the deferred streams of the cpu device (device
 * layer). pl_defer.h says what deferred streams are and the order they run in; this file
 * is the queue per stream and the loop that empties them. The comm layer gives it its
 * work as pl_comm_work (post, test, commit), so nothing here knows about MPI. */
#include <sched.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "pl_defer.h"    // defines: the API implemented here, struct pl_stream
#include "pl_internal.h" // defines: pl_trace_record_open, pl_trace_retime, pl_progress_*

/* One piece of queued work: device work (run) or communication (comm). */
typedef struct pl_work {
    struct pl_work *next;
    pl_work_fn run;           /* device work, or NULL                                 */
    const pl_comm_work *comm; /* communication, or NULL; both NULL: an event wait   */
    uint64_t issue;           /* global issue number: the policy's key                */
    uint64_t pos;             /* position on its stream, from 1                       */
    int dep_stream;           /* -1, or the stream that must first reach dep_pos      */
    uint64_t dep_pos;
    pl_order *order[PL_DEFER_MAX_ORDERS];
    uint64_t ticket[PL_DEFER_MAX_ORDERS];
    int norders;
    size_t trace;             /* device work: its record, timed when it runs          */
    bool posted;              /* communication: started, not yet committed            */
    max_align_t args[];
} pl_work;

static bool g_deferred, g_running;
static uint64_t g_issue;

static pl_stream *stream_of(int id) { return id ? pl_stream_comm() : pl_stream_compute(); }

bool pl_streams_deferred(void) { return g_deferred; }

bool pl_streams_set_deferred(bool on) {
    if (on && pl_info()->device != PL_DEVICE_CPU) return false;
    if (on == g_deferred) return true;
    pl_device_sync(); /* what is pending runs under the mode it was issued in */
    g_deferred = on;
    /* Deferred, the backend sees communication only from the loop below, which must
     * never block in it: every stream is asynchronous. */
    pl_stream_compute()->async = on;
    pl_stream_comm()->async = true;
    return true;
}

static pl_work *new_work(size_t size) {
    pl_work *w = calloc(1, sizeof *w + size);
    PL_CHECK(w != NULL, "out of host memory for deferred work");
    w->dep_stream = -1;
    w->trace = (size_t)-1;
    return w;
}

static void enqueue(pl_stream *s, pl_work *w) {
    w->issue = ++g_issue;
    w->pos = ++s->q_enq;
    if (s->q_tail) s->q_tail->next = w;
    else s->q_head = w;
    s->q_tail = w;
}

static void pop(pl_stream *s, pl_work *w) {
    s->q_head = w->next;
    if (!s->q_head) s->q_tail = NULL;
    s->q_done = w->pos;
    s->q_done_at = pl_trace_clock();
    free(w);
    pl_progress_tick();
}

uint64_t pl_defer_tail(const pl_stream *s) { return s->q_enq; }

/* -- issuing -------------------------------------------------------------------------- */
void pl_launch(pl_stream *s, const pl_trace_event *rec, pl_work_fn fn, const void *args,
               size_t size) {
    s = pl_stream_resolve(s);
    pl_trace_event e = *rec;
    e.stream = s->id;
    e.t_start = pl_trace_clock();
    e.t_end = -1;
    size_t tr = pl_trace_record_open(&e);
    if (!g_deferred) {
        pl_stream_ready(s);
        double t0 = pl_trace_clock();
        pl_progress_busy(1);
        fn((void *)args, s);
        pl_progress_busy(0);
        pl_trace_retime(tr, t0, pl_trace_clock());
        return;
    }
    pl_work *w = new_work(size);
    if (size) memcpy(w->args, args, size);
    w->run = fn;
    w->trace = tr;
    enqueue(s, w);
}

void pl_defer_comm(pl_stream *s, const pl_comm_work *ops, const void *args, size_t size,
                   pl_order *const *orders, int norders) {
    PL_CHECK(g_deferred, "pl_defer_comm on eager streams");
    PL_CHECK(norders >= 0 && norders <= PL_DEFER_MAX_ORDERS, "too many communicators in one group");
    s = pl_stream_resolve(s);
    pl_work *w = new_work(size);
    if (size) memcpy(w->args, args, size);
    w->comm = ops;
    w->norders = norders;
    for (int i = 0; i < norders; i++) {
        w->order[i] = orders[i];
        w->ticket[i] = orders[i]->issued++;
    }
    enqueue(s, w);
}

void pl_defer_wait(pl_stream *waiter, pl_stream *on, uint64_t pos) {
    waiter = pl_stream_resolve(waiter);
    on = pl_stream_resolve(on);
    if (waiter == on || on->q_done >= pos) return;
    pl_work *w = new_work(0);
    w->dep_stream = on->id;
    w->dep_pos = pos;
    enqueue(waiter, w);
}

/* -- running --------------------------------------------------------------------------- */
static bool may_start(const pl_work *w) {
    if (w->dep_stream >= 0 && stream_of(w->dep_stream)->q_done < w->dep_pos) return false;
    for (int i = 0; i < w->norders; i++)
        if (w->order[i]->posted != w->ticket[i]) return false;
    return true;
}

/* What a target needs: its stream's work up to pos, and whatever that waits for. */
static void close_need(uint64_t need[2]) {
    for (bool grew = true; grew;) {
        grew = false;
        for (int i = 0; i < 2; i++)
            for (pl_work *w = stream_of(i)->q_head; w && w->pos <= need[i]; w = w->next)
                if (w->dep_stream >= 0 && w->dep_pos > need[w->dep_stream]) {
                    need[w->dep_stream] = w->dep_pos;
                    grew = true;
                }
    }
}

/* Nothing could run beside w until it completes: the other stream is empty, or its next
 * work waits for this stream to get past w. (Not when it waits only for its turn on a
 * communicator: that turn comes when w starts, and a peer may need both in flight.) */
static bool alone(const pl_stream *s, const pl_work *w) {
    const pl_work *o = stream_of(!s->id)->q_head;
    return !o || (!o->posted && o->dep_stream == s->id && o->dep_pos >= w->pos);
}

static void start(pl_stream *s, pl_work *w) {
    if (w->comm && alone(s, w)) {
        /* it may as well block: the same outcome, at the speed of MPI's blocking calls */
        for (int i = 0; i < w->norders; i++) w->order[i]->posted++;
        w->comm->run(w->args, s);
        pop(s, w);
        return;
    }
    if (w->comm) {
        w->posted = true;
        for (int i = 0; i < w->norders; i++) w->order[i]->posted++;
        w->comm->post(w->args, s);
        pl_progress_tick();
        return;
    }
    if (w->run) {
        double t0 = pl_trace_clock();
        pl_progress_busy(1);
        w->run(w->args, s);
        pl_progress_busy(0);
        pl_trace_retime(w->trace, t0, pl_trace_clock());
    }
    pop(s, w);
}

/* Commit one started communication that has completed, the later issued first. */
static bool commit_one(void) {
    pl_work *h[2] = {stream_of(0)->q_head, stream_of(1)->q_head};
    int first = (h[0] && h[1] && h[0]->issue > h[1]->issue) ? 0 : 1;
    for (int k = 0; k < 2; k++) {
        int i = k ? !first : first;
        pl_work *w = h[i];
        if (!w || !w->posted || !w->comm->test(w->args, stream_of(i))) continue;
        w->comm->commit(w->args, stream_of(i));
        pop(stream_of(i), w);
        return true;
    }
    return false;
}

static void arm_for(void) {
    for (int i = 0; i < 2; i++) {
        pl_work *w = stream_of(i)->q_head;
        if (w && w->posted) {
            pl_watchdog_arm(w->comm->name, w->comm->peer ? w->comm->peer(w->args) : -1);
            return;
        }
    }
}

void pl_defer_run(pl_stream *t, uint64_t pos) {
    if (!g_deferred) return;
    PL_CHECK(!g_running, "deferred streams: a wait inside deferred work");
    g_running = true;
    pl_stream *sv[2] = {stream_of(0), stream_of(1)};
    uint64_t need[2] = {sv[0]->q_enq, sv[1]->q_enq};
    bool all = t == NULL;
    if (!all) {
        t = pl_stream_resolve(t);
        need[0] = sv[0]->q_done;
        need[1] = sv[1]->q_done;
        need[t->id] = pos < t->q_enq ? pos : t->q_enq;
        close_need(need);
    }
    size_t spins = 0;
    bool armed = false;
    for (;;) {
        if (all ? !sv[0]->q_head && !sv[1]->q_head : t->q_done >= need[t->id]) break;
        pl_work *best = NULL;
        int bi = 0;
        for (int i = 0; i < 2; i++) {
            pl_work *w = sv[i]->q_head;
            if (w && w->pos <= need[i] && !w->posted && may_start(w) && (!best || w->issue > best->issue)) {
                best = w;
                bi = i;
            }
        }
        if (best) {
            start(sv[bi], best);
            continue;
        }
        bool inflight = (sv[0]->q_head && sv[0]->q_head->posted) || (sv[1]->q_head && sv[1]->q_head->posted);
        if (!all) {
            /* Waiting on communication (or on an earlier operation of a communicator):
             * everything pending may be what a peer waits for, so all of it runs. */
            all = true;
            need[0] = sv[0]->q_enq;
            need[1] = sv[1]->q_enq;
            continue;
        }
        PL_CHECK(inflight, "deferred streams: pending work that can never run");
        if (commit_one()) {
            if (armed) pl_watchdog_disarm();
            armed = false;
            spins = 0;
            continue;
        }
        if (!armed) arm_for();
        armed = true;
        pl_watchdog_poll();
        if (++spins > 16) sched_yield(); /* ranks usually outnumber cores: let peers run */
    }
    if (armed) pl_watchdog_disarm();
    g_running = false;
}
