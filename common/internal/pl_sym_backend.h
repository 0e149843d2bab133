/* pl_sym_backend.h - the symmetric-memory backends behind pl_sym.h (internal).
 *
 * Like the device and comm backends, a table of function pointers; the generic layer
 * (pl_sym.c) finds the allocation an address belongs to, checks ranges and alignment,
 * records every call for the trace and the counters, and hands the backend a region and
 * offsets. A backend only moves bytes and signals.
 */
#ifndef PL_SYM_BACKEND_H
#define PL_SYM_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pl_sym.h" // defines: pl_sig_op, pl_cmp

#ifdef __cplusplus
extern "C" {
#endif

/* One symmetric allocation as this rank sees it. */
typedef struct {
    void *base;    /* this rank's copy                                              */
    size_t bytes;  /* the size every rank asked for                                 */
    void **peer;   /* [world]: load/store pointers to every rank's copy, NULL where
                      a copy is not directly reachable (filled by the backend)       */
    void *native;  /* the backend's own state (an MPI window, IPC handles, ...)      */
    size_t guard;  /* red zones (checked mode): the caller's pointer is base + guard,
                      and `bytes` counts both zones                                    */
} pl_sym_region;

typedef struct {
    const char *name;
    void (*init)(void);
    void (*finalize)(void);
    /* Collective: set r->base, r->peer, r->native for r->bytes (> 0) bytes, zeroed. */
    void (*alloc)(pl_sym_region *r);
    void (*release)(pl_sym_region *r); /* collective */
    /* Offsets are in bytes from the regions' bases; the generic layer checked them. */
    void (*put)(pl_sym_region *r, size_t off, const void *src, size_t bytes, int pe, bool nbi,
                pl_stream *s);
    void (*put_signal)(pl_sym_region *r, size_t off, const void *src, size_t bytes,
                       pl_sym_region *sr, size_t soff, uint64_t value, pl_sig_op op, int pe,
                       pl_stream *s);
    void (*signal)(pl_sym_region *sr, size_t soff, uint64_t value, pl_sig_op op, int pe,
                   pl_stream *s);
    void (*wait_until)(pl_sym_region *sr, size_t soff, pl_cmp cmp, uint64_t value, pl_stream *s);
    void (*fence)(pl_stream *s);
    void (*quiet)(pl_stream *s);
    void (*barrier)(pl_stream *s);
} pl_sym_backend;

extern const pl_sym_backend pl_sym_mpi;
#ifdef PL_HAVE_CUDA
extern const pl_sym_backend pl_sym_cuda_ipc;
#endif
#ifdef PL_HAVE_NVSHMEM
extern const pl_sym_backend pl_sym_nvshmem;
#endif

/* pl_cmp on two values, the one definition every backend uses. */
static inline bool pl_sym_compare(uint64_t have, pl_cmp cmp, uint64_t want) {
    switch (cmp) {
    case PL_CMP_EQ: return have == want;
    case PL_CMP_NE: return have != want;
    case PL_CMP_GT: return have > want;
    case PL_CMP_GE: return have >= want;
    case PL_CMP_LT: return have < want;
    case PL_CMP_LE: return have <= want;
    }
    return false;
}

/* Set up / tear down the symmetric heap (pl_init and pl_finalize call these). */
void pl_sym_setup(void);
void pl_sym_teardown(void);

/* Testing aid for graders (cpu implementation): after every wait and barrier, this rank
 * sleeps for a random 0..max_us microseconds half of the time, from a generator seeded by
 * seed and the rank. A correct protocol is indifferent to it; one that relies on luck
 * (a missing barrier before a buffer is reused, too few signals awaited) meets the
 * interleaving that breaks it. max_us = 0 turns it off. */
void pl_sym_set_jitter(double max_us, uint64_t seed);

/* What the symmetric backend was handed on this rank since pl_init (never reset): the
 * counterpart of pl_wire for one-sided calls. */
typedef struct {
    uint64_t puts, put_bytes, signals, waits, barriers;
} pl_sym_wire;
void pl_sym_wire_get(pl_sym_wire *w);
/* Backends count here, at the call into MPI / CUDA / NVSHMEM. */
void pl_sym_wire_put(uint64_t bytes);
void pl_sym_wire_signal(void);
void pl_sym_wire_wait(void);
void pl_sym_wire_barrier(void);

#ifdef __cplusplus
}
#endif

#endif
