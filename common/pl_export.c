/* pl_export.c - the Chrome trace of a run (TRACE=1, --trace FILE): every rank's record
 * gathered to rank 0 through the comm layer's host gather, written as one JSON file that
 * opens in Perfetto (ui.perfetto.dev) or chrome://tracing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_comm.h"       // defines: pl_comm_world, pl_comm_rank, pl_comm_size
#include "pl_instrument.h" // defines: pl_trace_events, pl_host_gatherv
#include "pl_runtime.h"    // defines: pl_log, PL_CHECK

/* What travels to rank 0: fixed-size records (names are copied, pointers are not). */
typedef struct {
    int kind, stream, peer, comm_size;
    double bytes, flops, t_start, t_end;
    char name[32];
} wire_event;

/* A name as a JSON string body: region names come from lab code. */
static void json_name(FILE *f, const char *s) {
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f) fputc('?', f);
        else fputc(ch, f);
    }
}

static void write_file(const char *path, const wire_event *all, const size_t *counts, int size) {
    FILE *f = fopen(path, "w");
    if (!f) {
        pl_log("cannot write trace file %s", path);
        return;
    }
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    static const char *threads[3] = {"compute stream", "comm stream", "regions"};
    for (int r = 0; r < size; r++) {
        fprintf(f, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}}",
                r ? ",\n" : "", r, r);
        for (int t = 0; t < 3; t++)
            fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
                    r, t, threads[t]);
    }
    for (int r = 0, k = 0; r < size; r++) {
        size_t cnt = counts[r] / sizeof(wire_event);
        for (size_t i = 0; i < cnt; i++, k++) {
            const wire_event *e = &all[k];
            int tid = e->kind == PL_OP_REGION ? 2 : e->stream;
            fprintf(f, ",\n{\"ph\":\"X\",\"name\":\"");
            json_name(f, e->name);
            fprintf(f, "\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
                       "\"args\":{\"bytes\":%.0f,\"peer\":%d,\"ranks\":%d,\"flops\":%.0f}}",
                    r, tid, e->t_start * 1e6, (e->t_end - e->t_start) * 1e6, e->bytes, e->peer,
                    e->comm_size, e->flops);
        }
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0) pl_log("cannot write trace file %s", path);
}

void pl_trace_write_chrome(const char *path) {
    pl_comm *w = pl_comm_world();
    size_t n = pl_trace_count();
    const pl_trace_event *ev = pl_trace_events();
    wire_event *mine = calloc(n + 1, sizeof *mine);
    PL_CHECK(mine != NULL, "out of host memory");
    for (size_t i = 0; i < n; i++) {
        const pl_trace_event *e = &ev[i];
        mine[i] = (wire_event){e->kind, e->stream, e->peer, e->comm_size, (double)e->bytes,
                               e->flops, e->t_start, e->t_end >= 0 ? e->t_end : e->t_start, {0}};
        snprintf(mine[i].name, sizeof mine[i].name, "%s",
                 (e->kind == PL_OP_REGION || e->kind == PL_OP_KERNEL) && e->name ? e->name : pl_op_kind_name(e->kind));
    }
    int size = pl_comm_size(w);
    size_t *counts = calloc((size_t)size, sizeof *counts);
    PL_CHECK(counts != NULL, "out of host memory");
    wire_event *all = pl_host_gatherv(mine, n * sizeof *mine, counts, 0, w);
    if (pl_comm_rank(w) == 0) write_file(path, all, counts, size);
    free(mine);
    free(all);
    free(counts);
}
