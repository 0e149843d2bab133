/* pl_memstat.c - device memory accounting: every live pl_malloc allocation, its size and
 * where it was made, the bytes in use and the peak, and the leak reports built on them
 * (instrumentation layer: the device layer reports allocations, the counters and the
 * grader read them). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_device.h"   // defines: pl_mem_in_use, pl_mem_peak (public)
#include "pl_internal.h" // defines: pl_mem_track_alloc, pl_mem_track_free, pl_mem_reset_peak
#include "pl_memcheck.h" // defines: pl_alloc_info, the leak reports implemented here
#include "pl_runtime.h"  // defines: PL_CHECK

/* A small open-addressing table of live allocations, keyed by pointer. */
typedef pl_alloc_info alloc_slot;
static alloc_slot *g_slots;
static size_t g_cap, g_live;
static size_t g_in_use, g_peak;
static uint64_t g_serial;

static size_t slot_of(const void *p, size_t cap) {
    uintptr_t h = (uintptr_t)p;
    h ^= h >> 17;
    h *= 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & (cap - 1);
}

static void table_put(const alloc_slot *a) {
    if (2 * (g_live + 1) > g_cap) {
        size_t ncap = g_cap ? 2 * g_cap : 256;
        alloc_slot *n = calloc(ncap, sizeof *n);
        PL_CHECK(n != NULL, "out of host memory for the allocation table");
        for (size_t i = 0; i < g_cap; i++) {
            if (!g_slots[i].ptr) continue;
            size_t j = slot_of(g_slots[i].ptr, ncap);
            while (n[j].ptr) j = (j + 1) & (ncap - 1);
            n[j] = g_slots[i];
        }
        free(g_slots);
        g_slots = n;
        g_cap = ncap;
    }
    size_t j = slot_of(a->ptr, g_cap);
    while (g_slots[j].ptr) j = (j + 1) & (g_cap - 1);
    g_slots[j] = *a;
    g_live++;
}

/* Removes p's entry into *out; false when p was never allocated here. */
static bool table_take(const void *p, alloc_slot *out) {
    if (!g_cap) return false;
    size_t j = slot_of(p, g_cap);
    while (g_slots[j].ptr) {
        if (g_slots[j].ptr == p) {
            *out = g_slots[j];
            /* Backward-shift deletion keeps probe chains intact. */
            size_t hole = j;
            for (size_t k = (j + 1) & (g_cap - 1); g_slots[k].ptr; k = (k + 1) & (g_cap - 1)) {
                size_t home = slot_of(g_slots[k].ptr, g_cap);
                int movable = hole <= k ? (home <= hole || home > k) : (home <= hole && home > k);
                if (movable) {
                    g_slots[hole] = g_slots[k];
                    hole = k;
                }
            }
            g_slots[hole].ptr = NULL;
            g_live--;
            return true;
        }
        j = (j + 1) & (g_cap - 1);
    }
    return false;
}

void pl_mem_track_alloc(const pl_alloc_info *a) {
    alloc_slot s = *a;
    s.serial = ++g_serial;
    table_put(&s);
    g_in_use += a->bytes;
    if (g_in_use > g_peak) g_peak = g_in_use;
}

bool pl_mem_track_free(const void *p, pl_alloc_info *out) {
    if (!table_take(p, out)) return false;
    g_in_use -= out->bytes;
    return true;
}

void pl_mem_each(void (*fn)(pl_alloc_info *a, void *ctx), void *ctx) {
    for (size_t i = 0; i < g_cap; i++)
        if (g_slots[i].ptr) fn(&g_slots[i], ctx);
}

size_t pl_mem_in_use(void) { return g_in_use; }
size_t pl_mem_peak(void) { return g_peak; }
void pl_mem_reset_peak(void) { g_peak = g_in_use; }


/* -- leaks ------------------------------------------------------------------------------ */
uint64_t pl_mem_mark(void) { return g_serial + 1; }

static int by_serial(const void *a, const void *b) {
    uint64_t x = ((const alloc_slot *)a)->serial, y = ((const alloc_slot *)b)->serial;
    return (x > y) - (x < y);
}

size_t pl_mem_live_since(uint64_t mark, pl_alloc_info *out, size_t max, size_t *bytes) {
    size_t n = 0, total = 0;
    alloc_slot *all = g_live ? malloc(g_live * sizeof *all) : NULL;
    PL_CHECK(!g_live || all, "out of host memory");
    for (size_t i = 0; i < g_cap; i++)
        if (g_slots[i].ptr && g_slots[i].serial >= mark) {
            all[n++] = g_slots[i];
            total += g_slots[i].bytes;
        }
    qsort(all, n, sizeof *all, by_serial);
    for (size_t i = 0; out && i < n && i < max; i++) out[i] = all[i];
    free(all);
    if (bytes) *bytes = total;
    return n;
}

void pl_mem_site(const pl_alloc_info *a, char *buf, size_t len) {
    if (!len) return;
    if (a->file) {
        snprintf(buf, len, "%s:%d", a->file, a->line);
        return;
    }
    Dl_info d;
    if (a->caller && dladdr(a->caller, &d) && d.dli_fname) {
        const char *mod = strrchr(d.dli_fname, '/');
        if (d.dli_sname && d.dli_saddr)
            snprintf(buf, len, "%s+0x%zx", d.dli_sname, (size_t)((const char *)a->caller - (const char *)d.dli_saddr));
        else
            snprintf(buf, len, "%s+0x%zx", mod ? mod + 1 : d.dli_fname,
                     (size_t)((const char *)a->caller - (const char *)d.dli_fbase));
        return;
    }
    snprintf(buf, len, "%p", a->caller);
}

size_t pl_mem_leak_report(uint64_t mark, char *buf, size_t len) {
    /* the oldest FETCHED allocations, one entry per site ("zero.c:104 (10 times)"): a
     * free function that forgets a per-unit buffer leaks it once per unit */
    enum { FETCHED = 256, SHOWN = 8 };
    pl_alloc_info *a = malloc(FETCHED * sizeof *a);
    PL_CHECK(a != NULL, "out of host memory");
    size_t bytes = 0, n = pl_mem_live_since(mark, a, FETCHED, &bytes);
    if (!n || !buf || !len) {
        free(a);
        return n;
    }
    size_t got = n < FETCHED ? n : FETCHED, nsites = 0, times[SHOWN] = {0};
    char site[SHOWN][160], more[160];
    bool rest = n > got; /* allocations past FETCHED, or at sites past SHOWN */
    for (size_t i = 0; i < got; i++) {
        pl_mem_site(&a[i], more, sizeof more);
        size_t k = 0;
        while (k < nsites && strcmp(site[k], more)) k++;
        if (k == nsites && nsites == SHOWN) {
            rest = true;
            continue;
        }
        if (k == nsites) snprintf(site[nsites++], sizeof site[0], "%s", more);
        times[k]++;
    }
    free(a);
    int w = snprintf(buf, len, "leaked %zu allocation%s (%zu bytes):", n, n == 1 ? "" : "s", bytes);
    for (size_t k = 0; k < nsites && w > 0 && (size_t)w < len; k++) {
        w += snprintf(buf + w, len - (size_t)w, "%s %s", k ? "," : "", site[k]);
        if (times[k] > 1 && w > 0 && (size_t)w < len) w += snprintf(buf + w, len - (size_t)w, " (%zu times)", times[k]);
    }
    if (rest && w > 0 && (size_t)w < len) snprintf(buf + w, len - (size_t)w, ", ...");
    return n;
}
