/* lab04_trace.c - what Lab 4 reads from the trace of a step: the order the actions ran in
 * (the model's regions), each rank's idle share, the cost model's replay of the step, and
 * TRACE=1's Chrome trace per schedule. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab04.h"

/* The model's regions each action leaves, in order (the recomputation's rebuild is nested
 * inside B and W, and not listed). */
static int expected_regions(const pp_stage *st, pp_action a, bool split, const char **out) {
    int vs = a.chunk * st->cfg.stages + st->stage, V = st->cfg.stages * st->cfg.chunks, n = 0;
    int blocks = st->chunk[a.chunk].count;
    if (a.kind == PP_B && vs == V - 1) out[n++] = "gpt.head.B";
    for (int l = 0; l < blocks; l++)
        out[n++] = a.kind == PP_F ? "gpt.block.F" : a.kind == PP_W ? "gpt.block.W" : split ? "gpt.block.B" : "gpt.block.BW";
    if (a.kind == PP_F && vs == V - 1) out[n++] = "gpt.head.F";
    return n;
}

/* The top-level gpt.* regions of the trace, one at a time (a region that starts inside
 * the previous one is nested: skipped). Returns the next index, or the count at the end. */
static size_t next_region(size_t at, double *top_end) {
    const pl_trace_event *ev = pl_trace_events();
    size_t n = pl_trace_count();
    for (; at < n; at++) {
        const pl_trace_event *e = &ev[at];
        if (e->kind != PL_OP_REGION || !e->name || strncmp(e->name, "gpt.", 4) != 0 || e->t_start < *top_end) continue;
        *top_end = e->t_end;
        return at;
    }
    return n;
}

bool trace_order(const pp_stage *st, const pp_action *a, int n, bool split, char *why, size_t len) {
    const pl_trace_event *ev = pl_trace_events();
    size_t ne = pl_trace_count();
    const char *want[1026]; /* one action's regions: at most L <= 1024 blocks and the head */
    double top_end = -1;
    size_t at = next_region(0, &top_end);
    for (int i = 0; i < n; i++) {
        char nm[32];
        action_name(a[i], st->cfg.chunks, nm, sizeof nm);
        int nw = expected_regions(st, a[i], split, want);
        for (int k = 0; k < nw; k++, at = next_region(at + 1, &top_end)) {
            if (at >= ne) {
                snprintf(why, len, "the step ended before action %d, %s (%s expected)", i, nm, want[k]);
                return false;
            }
            if (strcmp(ev[at].name, want[k]) != 0) {
                snprintf(why, len, "action %d, %s: the trace shows %s where the plan needs %s", i, nm, ev[at].name, want[k]);
                return false;
            }
        }
    }
    if (at < ne) {
        snprintf(why, len, "after the plan's last action the trace shows %s", ev[at].name);
        return false;
    }
    return true;
}

double trace_idle_share(void) {
    const pl_trace_event *ev = pl_trace_events();
    double top_end = -1, busy = 0, first = -1, last = -1;
    for (size_t at = next_region(0, &top_end); at < pl_trace_count(); at = next_region(at + 1, &top_end)) {
        busy += ev[at].t_end - ev[at].t_start;
        if (first < 0) first = ev[at].t_start;
        last = ev[at].t_end;
    }
    return last > first ? (last - first - busy) / (last - first) : 0;
}

/* TRACE=1: one Chrome trace per schedule, beside the harness's own (trace.json ->
 * trace-1f1b.json). */
void write_trace(pp_schedule_kind k, bool recompute) {
    if (!pl_info()->trace) return;
    char path[300];
    const char *base = pl_info()->trace_path, *dot = strrchr(base, '.');
    int stem = dot ? (int)(dot - base) : (int)strlen(base);
    snprintf(path, sizeof path, "%.*s-%s%s%s", stem, base, SCHED_NAMES[k], recompute ? "-recompute" : "", dot ? dot : ".json");
    pl_trace_write_chrome(path);
    if (pl_rank() == 0) pl_log("trace of the %s step written to %s (open it in ui.perfetto.dev)", SCHED_NAMES[k], path);
}

/* The cost model's replay of this step (collective). The recorded trace holds dozens of
 * small compute ops per block; each run of consecutive compute ops on one stream (none
 * waiting on the other stream but the first) becomes one op that costs exactly their
 * summed prediction, so the replay sees the same times in a few hundred ops. */
bool predict_step(const plc_profile *p, pl_comm *world, plc_prediction *out) {
    size_t avail = pl_trace_count();
    plc_op *ops = malloc((avail + 1) * sizeof *ops);
    size_t *map = malloc((avail + 1) * sizeof *map), n = plc_ops_from_trace(0, pl_comm_rank(world), ops, avail), w = 0;
    PL_CHECK(ops && map, "out of host memory");
    for (size_t i = 0; i < n; i++) {
        plc_op o = ops[i];
        bool compute = o.kind == PL_OP_GEMM || o.kind == PL_OP_KERNEL;
        double t = o.kind == PL_OP_GEMM ? plc_gemm_time(p, o.flops, o.bytes) : plc_kernel_time(p, o.flops, o.bytes);
        if (o.after > 0) o.after = (int)map[o.after - 1] + 1;
        plc_op *prev = w ? &ops[w - 1] : NULL;
        if (compute && prev && prev->kind == PL_OP_KERNEL && prev->flops < 0 && prev->stream == o.stream && o.after == 0) {
            prev->bytes += t * p->mem_bw; /* a merged op: its time, as bytes over the memory bandwidth */
            prev->t_end = o.t_end;
        } else if (compute) {
            o.kind = PL_OP_KERNEL, o.flops = -1, o.bytes = (t - p->launch) * p->mem_bw;
            ops[w++] = o;
        } else {
            ops[w++] = o;
        }
        map[i] = w - 1;
    }
    for (size_t i = 0; i < w; i++)
        if (ops[i].flops < 0) ops[i].flops = 0; /* the marker of a merged op */
    size_t *counts = calloc((size_t)pl_comm_size(world), sizeof *counts), total = 0;
    PL_CHECK(counts != NULL, "out of host memory");
    plc_op *all = pl_host_allgatherv(ops, w * sizeof *ops, counts, world);
    for (int r = 0; r < pl_comm_size(world); r++) total += counts[r];
    char err[200];
    int rc = plc_replay(p, all, total / sizeof *all, pl_comm_size(world), out, err, sizeof err);
    free(ops), free(map), free(counts), free(all);
    return rc == 0;
}

