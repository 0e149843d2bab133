/* pl_memstat.c - device memory accounting: every live pl_malloc allocation and its size, the
 * bytes in use and the peak (instrumentation layer: the device layer reports allocations,
 * the counters and the grader read them). */
#include <stdint.h>
#include <stdlib.h>

#include "pl_device.h"   // defines: pl_mem_in_use, pl_mem_peak (public)
#include "pl_internal.h" // defines: pl_mem_track_alloc, pl_mem_track_free, pl_mem_reset_peak
#include "pl_runtime.h"  // defines: PL_CHECK

/* A small open-addressing table of live allocations. */
typedef struct { void *p; size_t bytes; } alloc_slot;
static alloc_slot *g_slots;
static size_t g_cap, g_live;
static size_t g_in_use, g_peak;

static size_t slot_of(void *p, size_t cap) {
    uintptr_t h = (uintptr_t)p;
    h ^= h >> 17;
    h *= 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & (cap - 1);
}

static void table_put(void *p, size_t bytes) {
    if (2 * (g_live + 1) > g_cap) {
        size_t ncap = g_cap ? 2 * g_cap : 256;
        alloc_slot *n = calloc(ncap, sizeof *n);
        PL_CHECK(n != NULL, "out of host memory for the allocation table");
        for (size_t i = 0; i < g_cap; i++) {
            if (!g_slots[i].p) continue;
            size_t j = slot_of(g_slots[i].p, ncap);
            while (n[j].p) j = (j + 1) & (ncap - 1);
            n[j] = g_slots[i];
        }
        free(g_slots);
        g_slots = n;
        g_cap = ncap;
    }
    size_t j = slot_of(p, g_cap);
    while (g_slots[j].p) j = (j + 1) & (g_cap - 1);
    g_slots[j].p = p;
    g_slots[j].bytes = bytes;
    g_live++;
}

/* Returns the size, or SIZE_MAX when p was never allocated here. */
static size_t table_take(void *p) {
    if (!g_cap) return SIZE_MAX;
    size_t j = slot_of(p, g_cap);
    while (g_slots[j].p) {
        if (g_slots[j].p == p) {
            size_t bytes = g_slots[j].bytes;
            /* Backward-shift deletion keeps probe chains intact. */
            size_t hole = j;
            for (size_t k = (j + 1) & (g_cap - 1); g_slots[k].p; k = (k + 1) & (g_cap - 1)) {
                size_t home = slot_of(g_slots[k].p, g_cap);
                int movable = hole <= k ? (home <= hole || home > k) : (home <= hole && home > k);
                if (movable) {
                    g_slots[hole] = g_slots[k];
                    hole = k;
                }
            }
            g_slots[hole].p = NULL;
            g_live--;
            return bytes;
        }
        j = (j + 1) & (g_cap - 1);
    }
    return SIZE_MAX;
}

void pl_mem_track_alloc(void *p, size_t bytes) {
    table_put(p, bytes);
    g_in_use += bytes;
    if (g_in_use > g_peak) g_peak = g_in_use;
}

void pl_mem_track_free(void *p) {
    size_t bytes = table_take(p);
    PL_CHECK(bytes != SIZE_MAX, "pl_free of a pointer that pl_malloc did not return (double free?)");
    g_in_use -= bytes;
}

size_t pl_mem_in_use(void) { return g_in_use; }
size_t pl_mem_peak(void) { return g_peak; }
void pl_mem_reset_peak(void) { g_peak = g_in_use; }

