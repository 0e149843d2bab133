/* pl_export.c - the Chrome trace of a run (TRACE=1, --trace FILE): every rank's record
 * gathered to rank 0 through the comm layer's host gather, written as one JSON file that
 * opens in Perfetto (ui.perfetto.dev) or chrome://tracing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The whole trace as text, in memory (open_memstream allocates and nothing else). */
static char *trace_text(const wire_event *all, const size_t *counts, int size, size_t *len) {
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (!f) return NULL;
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
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* Files opened ahead by pl_trace_reserve: the last text meant for each. */
#define MAX_RESERVED 16
static struct {
    char path[512];
    FILE *f;
    char *text;
    size_t len;
} g_reserved[MAX_RESERVED];
static int g_nreserved;

bool pl_trace_reserve(const char *path) {
    for (int i = 0; i < g_nreserved; i++)
        if (!strcmp(g_reserved[i].path, path)) return true;
    if (g_nreserved == MAX_RESERVED || strlen(path) >= sizeof g_reserved[0].path) return false;
    FILE *f = fopen(path, "w");
    if (!f) return false;
    snprintf(g_reserved[g_nreserved].path, sizeof g_reserved[0].path, "%s", path);
    g_reserved[g_nreserved].f = f;
    g_reserved[g_nreserved].text = NULL;
    g_nreserved++;
    return true;
}

void pl_trace_flush_reserved(void) {
    for (int i = 0; i < g_nreserved; i++) {
        if (g_reserved[i].text) {
            bool ok = fwrite(g_reserved[i].text, 1, g_reserved[i].len, g_reserved[i].f) == g_reserved[i].len;
            if (fclose(g_reserved[i].f) != 0 || !ok) pl_log("cannot write trace file %s", g_reserved[i].path);
            free(g_reserved[i].text);
        } else { /* reserved for a trace that never came */
            fclose(g_reserved[i].f);
            unlink(g_reserved[i].path);
        }
    }
    g_nreserved = 0;
}

static bool write_file(const char *path, const wire_event *all, const size_t *counts, int size) {
    size_t len = 0;
    char *text = trace_text(all, counts, size, &len);
    if (!text) {
        pl_log("cannot write trace file %s: out of host memory", path);
        return false;
    }
    for (int i = 0; i < g_nreserved; i++)
        if (!strcmp(g_reserved[i].path, path)) {
            free(g_reserved[i].text);
            g_reserved[i].text = text;
            g_reserved[i].len = len;
            return true;
        }
    FILE *f = fopen(path, "w");
    bool ok = f && fwrite(text, 1, len, f) == len;
    if (f && fclose(f) != 0) ok = false;
    free(text);
    if (!ok) pl_log("cannot write trace file %s", path);
    return ok;
}

bool pl_trace_write_chrome(const char *path) {
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
    bool ok = pl_comm_rank(w) != 0 || write_file(path, all, counts, size);
    free(mine);
    free(all);
    free(counts);
    return ok;
}
