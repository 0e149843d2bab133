/* pl_memguard.c - device allocations (device layer): pl_malloc, pl_malloc_tagged, pl_free
 * and pl_tensor_free with their call sites, and in checked mode the red zones around each
 * allocation and their verification (pl_memcheck.h says what the grader gets). The zones are filled and read back through
 * the backend, so the same code checks host memory on cpu and GPU memory on cuda. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_backend.h"   // defines: pl_dev
#include "pl_internal.h"  // defines: pl_mem_track_*, pl_mem_each
#include "pl_memcheck.h"  // defines: the checked-mode API implemented here
#include "pl_memtag_internal.h" // defines: pl_memtag_note, pl_memtag_forget (memory categories)
#include "pl_tensor.h"    // defines: pl_tensor_alloc_at

static bool g_checked;
/* Damage found when a guarded allocation was freed, until pl_mem_check_guards reports it. */
enum { FREED_LINES = 16 };
static char g_freed[FREED_LINES][320];
static size_t g_freed_n;

bool pl_mem_checked(void) { return g_checked; }
bool pl_mem_set_checked(bool on) {
    bool was = g_checked;
    g_checked = on;
    return was;
}

/* -- allocation -------------------------------------------------------------------------- */
static void *alloc(size_t bytes, const char *file, int line, const void *caller) {
    bool guarded = g_checked;
    size_t extra = guarded ? 2 * (size_t)PL_GUARD_BYTES : 0;
    PL_CHECK(bytes <= SIZE_MAX - extra, "allocation size overflows size_t");
    char *raw = pl_dev->malloc(bytes + extra);
    PL_CHECK(raw != NULL, "device allocation failed");
    char *p = raw + (guarded ? PL_GUARD_BYTES : 0);
    if (guarded) {
        pl_dev->memset(raw, PL_GUARD_BYTE, PL_GUARD_BYTES, NULL);
        pl_dev->memset(p, PL_FRESH_BYTE, bytes, NULL);
        pl_dev->memset(p + bytes, PL_GUARD_BYTE, PL_GUARD_BYTES, NULL);
        /* on a GPU these ran on the compute stream: done before the caller's first work on
         * any other stream (a race with it would put NaN back over what it wrote) */
        if (pl_dev->stream_sync) pl_dev->stream_sync(pl_stream_compute());
    }
    pl_alloc_info a = {.ptr = p, .bytes = bytes, .file = file, .line = line,
                       .caller = file ? NULL : caller, .guarded = guarded};
    pl_mem_track_alloc(&a);
    return p;
}

static size_t floats_bytes(size_t count) {
    PL_CHECK(count <= SIZE_MAX / sizeof(float), "float count overflows size_t");
    return count * sizeof(float);
}

void *pl_malloc_at(size_t bytes, const char *file, int line) {
    return alloc(bytes, file, line, __builtin_return_address(0));
}
float *pl_malloc_floats_at(size_t count, const char *file, int line) {
    return alloc(floats_bytes(count), file, line, __builtin_return_address(0));
}
/* Reached only without the header's macros (a function pointer): the caller's address. */
void *(pl_malloc)(size_t bytes) { return alloc(bytes, NULL, 0, __builtin_return_address(0)); }
float *(pl_malloc_floats)(size_t count) {
    return alloc(floats_bytes(count), NULL, 0, __builtin_return_address(0));
}

static pl_tensor tensor_alloc(int64_t rows, int64_t cols, const char *file, int line, const void *caller) {
    PL_CHECK(rows >= 0 && cols >= 0, "pl_tensor_alloc: negative shape");
    PL_CHECK(cols == 0 || (uint64_t)rows <= SIZE_MAX / sizeof(float) / (uint64_t)cols,
             "pl_tensor_alloc: shape overflows size_t");
    return pl_tensor_view(alloc((size_t)rows * (size_t)cols * sizeof(float), file, line, caller), rows, cols);
}
pl_tensor pl_tensor_alloc_at(int64_t rows, int64_t cols, const char *file, int line) {
    return tensor_alloc(rows, cols, file, line, __builtin_return_address(0));
}
pl_tensor (pl_tensor_alloc)(int64_t rows, int64_t cols) {
    return tensor_alloc(rows, cols, NULL, 0, __builtin_return_address(0));
}

/* -- red zones ----------------------------------------------------------------------------- */
/* One zone read back: how many bytes lie between the allocation and the farthest damaged
 * byte (0: intact). `after`: the zone past the end (distance from its start), else the
 * zone before the start (distance from its end). */
static size_t damage(const unsigned char *zone, bool after) {
    for (size_t i = 0; i < PL_GUARD_BYTES; i++) {
        size_t k = after ? PL_GUARD_BYTES - 1 - i : i;
        if (zone[k] != PL_GUARD_BYTE) return after ? k + 1 : PL_GUARD_BYTES - k;
    }
    return 0;
}

/* Checks a's zones; on damage writes one line into line and refills them. */
static bool check_zones(const pl_alloc_info *a, char *line, size_t len) {
    unsigned char zone[2][PL_GUARD_BYTES];
    char *p = (char *)a->ptr;
    pl_dev->download(zone[0], p - PL_GUARD_BYTES, PL_GUARD_BYTES);
    pl_dev->download(zone[1], p + a->bytes, PL_GUARD_BYTES);
    size_t before = damage(zone[0], false), past = damage(zone[1], true);
    if (!before && !past) return false;
    char site[200], what[160] = "";
    pl_mem_site(a, site, sizeof site);
    if (past && before)
        snprintf(what, sizeof what, "wrote %zu bytes past the end and %zu bytes before the start", past, before);
    else if (past) snprintf(what, sizeof what, "wrote %zu bytes past the end", past);
    else snprintf(what, sizeof what, "wrote %zu bytes before the start", before);
    snprintf(line, len, "%s of an allocation of %zu bytes made at %s%s", what, a->bytes, site,
             before == PL_GUARD_BYTES || past == PL_GUARD_BYTES ? " (at least: the whole red zone)" : "");
    pl_dev->upload(p - PL_GUARD_BYTES, memset(zone[0], PL_GUARD_BYTE, PL_GUARD_BYTES), PL_GUARD_BYTES);
    pl_dev->upload(p + a->bytes, zone[0], PL_GUARD_BYTES);
    return true;
}

void pl_mem_guard_fill(const pl_alloc_info *a) {
    char *p = (char *)a->ptr;
    pl_dev->memset(p - PL_GUARD_BYTES, PL_GUARD_BYTE, PL_GUARD_BYTES, NULL);
    pl_dev->memset(p + a->bytes, PL_GUARD_BYTE, PL_GUARD_BYTES, NULL);
}

void pl_mem_guard_freed(const pl_alloc_info *a) {
    char line[sizeof g_freed[0]];
    if (!a->guarded || !check_zones(a, line, sizeof line)) return;
    if (g_freed_n < FREED_LINES) snprintf(g_freed[g_freed_n], sizeof g_freed[0], "%s", line);
    g_freed_n++;
}

void pl_free(void *p) {
    if (!p) return;
    pl_device_sync(); /* memory may still be in use by queued work */
    pl_alloc_info a;
    PL_CHECK(pl_mem_track_free(p, &a), "pl_free of a pointer that pl_malloc did not return (double free?)");
    pl_memtag_forget(p); /* its memory category (pl_malloc_tagged) no longer holds it */
    if (!a.guarded) {
        pl_dev->free(p);
        return;
    }
    pl_mem_guard_freed(&a);
    pl_dev->free((char *)p - PL_GUARD_BYTES);
}

typedef struct {
    char *report;
    size_t len, used, found;
} guard_walk;

static void add_line(guard_walk *g, const char *line) {
    g->found++;
    if (!g->report || g->used + 1 >= g->len) return;
    int w = snprintf(g->report + g->used, g->len - g->used, "%s%s", g->used ? "\n" : "", line);
    if (w > 0) g->used += (size_t)w < g->len - g->used ? (size_t)w : g->len - g->used - 1;
}

static void check_one(pl_alloc_info *a, void *ctx) {
    char line[sizeof g_freed[0]];
    if (a->guarded && check_zones(a, line, sizeof line)) add_line(ctx, line);
}

size_t pl_mem_check_guards(char *report, size_t len) {
    pl_device_sync();
    guard_walk g = {report, len, 0, 0};
    if (report && len) report[0] = '\0';
    for (size_t i = 0; i < g_freed_n; i++) {
        if (i < FREED_LINES) add_line(&g, g_freed[i]);
        else g.found++;
    }
    g_freed_n = 0;
    pl_mem_each(check_one, &g);
    return g.found;
}

void pl_tensor_free(pl_tensor *t) {
    pl_free(t->data);
    t->data = NULL;
}

/* pl_malloc_tagged (pl_memtag.h): pl_malloc, and the bytes counted in their category. */
void *pl_malloc_tagged_at(size_t bytes, pl_mem_tag tag, const char *file, int line) {
    PL_CHECK(tag > PL_MEM_UNTAGGED && tag < PL_MEM_NTAGS, "pl_malloc_tagged: not a memory category");
    void *p = pl_malloc_at(bytes, file, line);
    pl_memtag_note(p, bytes, tag);
    return p;
}
/* Reached only without the header's macro (a function pointer): the site is this file's. */
void *(pl_malloc_tagged)(size_t bytes, pl_mem_tag tag) { return pl_malloc_tagged_at(bytes, tag, __FILE__, __LINE__); }
