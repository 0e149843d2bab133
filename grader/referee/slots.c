/* slots.c - the referee's side of the shared region: the slots a case declares, their
 * poison, the red zones around them and the CONST inputs' fingerprints.
 *
 * The region is a memfd the player maps too. Its first WIRE_HEADER_BYTES hold the header
 * (wire.h); slots follow, each between two red zones of WIRE_GUARD bytes of
 * WIRE_GUARD_BYTE. The referee's slot table (c->slots) is the authority: what the player
 * may have written into the header is never read back, except its report, which is copied
 * out and treated as the player's claim. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "referee.h"

static uint64_t g_region_bytes;
static uint64_t g_high_water; /* bytes of the region touched by the cases so far */

void region_open(void) {
    /* A file: RLIMIT_FSIZE (the engine sets 1 GiB) bounds it, and a sparse file costs
     * nothing until its pages are touched. */
    struct rlimit fs;
    g_region_bytes = WIRE_REGION_BYTES;
    if (getrlimit(RLIMIT_FSIZE, &fs) == 0 && fs.rlim_cur != RLIM_INFINITY && fs.rlim_cur < g_region_bytes)
        g_region_bytes = (uint64_t)fs.rlim_cur & ~(uint64_t)(WIRE_ALIGN - 1);
    PL_CHECK(g_region_bytes > 2 * WIRE_HEADER_BYTES, "RLIMIT_FSIZE leaves no room for the shared region");
    g_ref.region_fd = memfd_create("paralab-slots", MFD_CLOEXEC);
    if (g_ref.region_fd < 0) pl_fatal(__FILE__, __LINE__, "memfd_create", strerror(errno));
    if (ftruncate(g_ref.region_fd, (off_t)g_region_bytes) != 0) pl_fatal(__FILE__, __LINE__, "ftruncate(region)", strerror(errno));
    void *p = mmap(NULL, g_region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, g_ref.region_fd, 0);
    if (p == MAP_FAILED) pl_fatal(__FILE__, __LINE__, "mmap(region)", strerror(errno));
    g_ref.region = p;
    wire_header *h = p;
    memset(h, 0, sizeof *h);
    h->magic = WIRE_MAGIC;
    h->version = WIRE_VERSION;
    h->case_index = -1;
}

void arena_open(void) {
    struct rlimit fs;
    g_ref.arena_bytes = WIRE_ARENA_MAX;
    if (getrlimit(RLIMIT_FSIZE, &fs) == 0 && fs.rlim_cur != RLIM_INFINITY && fs.rlim_cur < g_ref.arena_bytes)
        g_ref.arena_bytes = (uint64_t)fs.rlim_cur & ~(uint64_t)(WIRE_ALIGN - 1);
    g_ref.arena_fd = memfd_create("paralab-arena", MFD_CLOEXEC);
    if (g_ref.arena_fd < 0) pl_fatal(__FILE__, __LINE__, "memfd_create(arena)", strerror(errno));
    if (ftruncate(g_ref.arena_fd, (off_t)g_ref.arena_bytes) != 0) pl_fatal(__FILE__, __LINE__, "ftruncate(arena)", strerror(errno));
    void *p = mmap(NULL, g_ref.arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, g_ref.arena_fd, 0);
    if (p == MAP_FAILED) pl_fatal(__FILE__, __LINE__, "mmap(arena)", strerror(errno));
    g_ref.arena = p;
}

static slot_table *table(drv_case *c) { return c->slots; }

void slots_reset(drv_case *c) {
    if (!c->slots) {
        c->slots = calloc(1, sizeof(slot_table));
        PL_CHECK(c->slots != NULL, "out of host memory");
    }
    memset(c->slots, 0, sizeof(slot_table));
    table(c)->next = WIRE_HEADER_BYTES;
}

static bool slot_name_ok(const char *s) {
    size_t n = strlen(s);
    return n > 0 && n < WIRE_SLOT_NAME &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.") == n;
}

static uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

void *drv_slot_new(drv_case *c, const char *name, size_t bytes, unsigned flags) {
    slot_table *t = table(c);
    PL_CHECK(!c->ran, "drv_slot_new after play(): slots are declared in setup()");
    PL_CHECK(slot_name_ok(name), "a slot name must be 1..31 of [A-Za-z0-9_.]");
    PL_CHECK(!slot_find(t, name, NULL), "two slots of one case share a name");
    PL_CHECK(t->n < WIRE_SLOTS_MAX, "more slots in one case than WIRE_SLOTS_MAX");
    PL_CHECK((flags & DRV_INOUT) != 0, "a slot is DRV_IN, DRV_OUT or DRV_INOUT");
    uint64_t data = round_up(t->next + WIRE_GUARD, WIRE_ALIGN);
    uint64_t end = data + round_up(bytes, WIRE_ALIGN) + WIRE_GUARD;
    if (end > g_region_bytes) {
        drv_error(c, "the case needs %llu bytes of shared memory, more than the %llu the run allows (RLIMIT_FSIZE)",
                  (unsigned long long)end, (unsigned long long)g_region_bytes);
        /* a slot of the last bytes that fit, so the caller's writes stay inside: the
         * case fails on its verdict, never by writing out of the region */
        data = WIRE_HEADER_BYTES + WIRE_GUARD;
        bytes = 0;
        end = data + WIRE_GUARD;
        if (end > t->next) t->next = end;
    }
    wire_slot *s = &t->v[t->n++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->offset = data;
    s->bytes = bytes;
    s->flags = flags;
    if (end > t->next) t->next = end;
    if (t->next > g_high_water) g_high_water = t->next;
    unsigned char *p = g_ref.region + data;
    memset(p, 0, bytes); /* IN: the test fills it; OUT: poisoned at publish */
    return p;
}

void *drv_slot_host(drv_case *c, const char *name) {
    const wire_slot *s = slot_find(table(c), name, NULL);
    PL_CHECK(s != NULL, "drv_slot_host: no slot of that name in this case");
    return g_ref.region + s->offset;
}

static const unsigned char POISON[4] = {0xAD, 0xDE, 0xC0, 0x7F}; /* 0x7FC0DEAD, a quiet NaN */

static void poison(unsigned char *p, uint64_t bytes) {
    for (uint64_t i = 0; i < bytes; i++) p[i] = POISON[i & 3];
}

void drv_poison_host(void *p, size_t bytes) { poison(p, bytes); }

int64_t drv_slot_unpoisoned(drv_case *c, const char *name, size_t from) {
    const wire_slot *s = slot_find(table(c), name, NULL);
    PL_CHECK(s != NULL, "drv_slot_unpoisoned: no slot of that name in this case");
    const unsigned char *p = g_ref.region + s->offset;
    for (uint64_t i = from; i < s->bytes; i++)
        if (p[i] != POISON[i & 3]) return (int64_t)(i - from);
    return -1;
}

void drv_slots_repoison(drv_case *c) {
    slot_table *t = table(c);
    for (int i = 0; i < t->n; i++) {
        wire_slot *s = &t->v[i];
        if (s->flags & DRV_OUT && !(s->flags & DRV_IN)) {
            if (s->flags & DRV_ZEROED) memset(g_ref.region + s->offset, 0, s->bytes);
            else poison(g_ref.region + s->offset, s->bytes);
        }
    }
}

/* A fast 64-bit fingerprint (not a MAC: the player cannot choose what we compare with). */
static uint64_t fingerprint(const unsigned char *p, uint64_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n, w;
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    for (; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ull;
    return h ^ (h >> 29);
}

void slots_publish(drv_case *c, int case_index) {
    slot_table *t = table(c);
    wire_header *h = (wire_header *)g_ref.region;
    h->magic = WIRE_MAGIC;
    h->version = WIRE_VERSION;
    if (case_index >= 0) {
        drv_slots_repoison(c);
        h->case_index = case_index;
    }
    h->test_index = test_index(c->inst->test);
    snprintf(h->name, sizeof h->name, "%s", c->inst->name);
    snprintf(h->group, sizeof h->group, "%s", c->inst->group);
    memcpy(h->arg, c->inst->arg, sizeof h->arg);
    h->nslots = t->n;
    memcpy(h->slots, t->v, (size_t)t->n * sizeof t->v[0]);
    memset(&h->report, 0, sizeof h->report);
    for (int i = 0; i < t->n; i++) {
        wire_slot *s = &t->v[i];
        unsigned char *d = g_ref.region + s->offset;
        memset(d - WIRE_GUARD, WIRE_GUARD_BYTE, WIRE_GUARD);
        uint64_t padded = round_up(s->bytes, WIRE_ALIGN);
        memset(d + s->bytes, WIRE_GUARD_BYTE, padded - s->bytes + WIRE_GUARD);
        if ((s->flags & DRV_CONST) && (s->flags & DRV_IN)) t->hash[i] = fingerprint(d, s->bytes);
    }
}

void slots_verify(drv_case *c, const char *when) {
    slot_table *t = table(c);
    for (int i = 0; i < t->n; i++) {
        const wire_slot *s = &t->v[i];
        const unsigned char *d = g_ref.region + s->offset;
        uint64_t padded = round_up(s->bytes, WIRE_ALIGN), after = padded - s->bytes + WIRE_GUARD;
        int64_t past = -1, before = -1;
        for (uint64_t k = 0; k < after; k++)
            if (d[s->bytes + k] != WIRE_GUARD_BYTE) past = (int64_t)k;
        for (uint64_t k = 0; k < WIRE_GUARD; k++)
            if (d[-(int64_t)WIRE_GUARD + (int64_t)k] != WIRE_GUARD_BYTE) {
                before = (int64_t)(WIRE_GUARD - k);
                break;
            }
        if (past >= 0)
            drv_fail(c, "%s wrote %lld byte(s) past the end of '%s' (%llu bytes): out of bounds", when,
                     (long long)past + 1, s->name, (unsigned long long)s->bytes);
        if (before >= 0)
            drv_fail(c, "%s wrote %lld byte(s) before the start of '%s': out of bounds", when, (long long)before,
                     s->name);
        if ((s->flags & DRV_CONST) && (s->flags & DRV_IN) && fingerprint(d, s->bytes) != t->hash[i])
            drv_fail(c, "%s modified its input '%s', which is const", when, s->name);
    }
}

void slots_read_report(drv_case *c) {
    wire_report r;
    memcpy(&r, &((const wire_header *)g_ref.region)->report, sizeof r);
    c->m = r.m;
    c->wire = r.wire;
    c->mem_before = r.mem_before;
    c->mem_after = r.mem_after;
    c->mem_peak = r.mem_peak;
}

void slots_done(drv_case *c) {
    (void)c;
    /* give the pages of a big case back to the system */
    if (g_high_water > WIRE_HEADER_BYTES + (64u << 20)) {
        if (fallocate(g_ref.region_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, WIRE_HEADER_BYTES,
                      (off_t)(g_high_water - WIRE_HEADER_BYTES)) != 0)
            pl_log("note: could not release the shared region's pages: %s", strerror(errno));
        g_high_water = WIRE_HEADER_BYTES;
    }
}

/* ================================================================================== */
/* Counters of a phase                                                                */
/* ================================================================================== */

void drv_counters_slot(drv_case *c, const char *name) { drv_slot_new(c, name, sizeof(drv_counters), DRV_OUT | DRV_ZEROED); }

drv_counters drv_counters_of(drv_case *c, const char *name) {
    drv_counters k;
    PL_CHECK(drv_slot_bytes(c, name) >= sizeof k, "drv_counters_of: not a slot of drv_counters_slot");
    memcpy(&k, drv_slot_host(c, name), sizeof k);
    if (k.measured != 1) memset(&k, 0, sizeof k);
    if (k.measured && transport_on()) { /* the traffic between the phase's marks, as moved */
        int i = -1;
        slot_find(table(c), name, &i);
        transport_counts moved;
        if (!transport_phase(i, &moved)) memset(&moved, 0, sizeof moved);
        transport_overwrite(&k.m, &k.wire, &moved);
    }
    return k;
}

void drv_traffic_from_player(drv_case *c) { c->players_word = true; }

bool drv_moved_in(int phase, drv_moved *out) {
    memset(out, 0, sizeof *out);
    PL_CHECK(phase >= 0 && phase < DRV_PHASES, "drv_moved_in: a phase out of range");
    if (!transport_on()) return false;
    if (!transport_phase(WIRE_SLOTS_MAX + phase, out)) memset(out, 0, sizeof *out);
    return true;
}

void drv_moved_apply(const drv_moved *d, pl_metrics *m, pl_wire *w) { transport_overwrite(m, w, d); }

int drv_moved_by_comm(int phase, drv_comm_moved *out, int max) {
    PL_CHECK(phase >= 0 && phase < DRV_PHASES, "drv_moved_by_comm: a phase out of range");
    return transport_on() ? transport_phase_comms(WIRE_SLOTS_MAX + phase, out, max) : -1;
}

bool drv_use_counters(drv_case *c, const char *name) {
    drv_counters k = drv_counters_of(c, name);
    if (!k.measured) return false;
    c->m = k.m;
    c->wire = k.wire;
    return true;
}

void drv_player_backends(pl_device_kind *device, pl_comm_kind *comm) {
    if (device) *device = (pl_device_kind)g_ref.player_device;
    if (comm) *comm = (pl_comm_kind)g_ref.player_comm;
}
