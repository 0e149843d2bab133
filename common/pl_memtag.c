/* pl_memtag.c - device memory by category (pl_memtag.h): the tagged allocations in a small
 * open-addressing table beside pl_memstat.c's, each category's bytes and peak. Bookkeeping
 * only: pl_malloc_tagged (pl_memguard.c) tells it what arrives, pl_free what leaves. */
#include <stdint.h>
#include <stdlib.h>

#include "pl_device.h"           // defines: pl_mem_in_use
#include "pl_memtag_internal.h"  // defines: pl_mem_tag_peak, pl_memtag_forget
#include "pl_runtime.h"          // defines: PL_CHECK

typedef struct {
    void *p;
    size_t bytes;
    pl_mem_tag tag;
} tag_slot;
static tag_slot *g_slots;
static size_t g_cap, g_live;
static size_t g_in_use[PL_MEM_NTAGS], g_peak[PL_MEM_NTAGS];

static size_t slot_of(void *p, size_t cap) {
    uintptr_t h = (uintptr_t)p;
    h ^= h >> 17;
    h *= 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & (cap - 1);
}

static void put(void *p, size_t bytes, pl_mem_tag tag) {
    if (2 * (g_live + 1) > g_cap) {
        size_t ncap = g_cap ? 2 * g_cap : 64;
        tag_slot *n = calloc(ncap, sizeof *n);
        PL_CHECK(n != NULL, "out of host memory for the memory categories");
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
    g_slots[j] = (tag_slot){p, bytes, tag};
    g_live++;
}

void pl_memtag_note(void *p, size_t bytes, pl_mem_tag tag) {
    put(p, bytes, tag);
    g_in_use[tag] += bytes;
    if (g_in_use[tag] > g_peak[tag]) g_peak[tag] = g_in_use[tag];
}

void pl_memtag_forget(void *p) {
    if (!g_live || !p) return;
    size_t j = slot_of(p, g_cap);
    while (g_slots[j].p && g_slots[j].p != p) j = (j + 1) & (g_cap - 1);
    if (!g_slots[j].p) return; /* an untagged allocation */
    g_in_use[g_slots[j].tag] -= g_slots[j].bytes;
    g_live--;
    /* backward-shift deletion keeps the probe chains intact */
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
}

size_t pl_mem_tag_in_use(pl_mem_tag tag) {
    if (tag > PL_MEM_UNTAGGED && tag < PL_MEM_NTAGS) return g_in_use[tag];
    if (tag != PL_MEM_UNTAGGED) return 0;
    size_t tagged = 0;
    for (int t = 1; t < PL_MEM_NTAGS; t++) tagged += g_in_use[t];
    size_t all = pl_mem_in_use();
    return all > tagged ? all - tagged : 0;
}

size_t pl_mem_tag_peak(pl_mem_tag tag) {
    return tag > PL_MEM_UNTAGGED && tag < PL_MEM_NTAGS ? g_peak[tag] : 0;
}

void pl_mem_tag_reset_peaks(void) {
    for (int t = 0; t < PL_MEM_NTAGS; t++) g_peak[t] = g_in_use[t];
}

const char *pl_mem_tag_name(pl_mem_tag tag) {
    static const char *const names[PL_MEM_NTAGS] = {"untagged", "params", "grads", "optim", "gather", "reduce"};
    return tag >= 0 && tag < PL_MEM_NTAGS ? names[tag] : "?";
}
