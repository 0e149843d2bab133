/* pl_sym.h - symmetric memory: a partitioned global address space over the ranks of the
 * world, with one-sided puts and 64-bit signals. The names and the semantics follow
 * NVSHMEM / OpenSHMEM (nvshmem_malloc, nvshmem_putmem, nvshmem_putmem_signal,
 * nvshmem_signal_wait_until, nvshmem_fence, nvshmem_quiet, nvshmem_barrier_all,
 * nvshmem_ptr), so that what works here transfers.
 *
 *   pl_sym_malloc(bytes)    collective: every rank allocates the same size; the returned
 *                           address is "symmetric": the same object exists on every rank,
 *                           and a put names a peer's copy by this rank's address of it.
 *   pl_sym_put(dst, ...)    write bytes into rank pe's copy of dst. Returns once src may be
 *                           reused; the bytes are only guaranteed to have ARRIVED after
 *                           pl_sym_quiet (or pl_sym_barrier), and two puts to the same pe
 *                           arrive in order only with a pl_sym_fence between them.
 *   pl_sym_put_signal       a put, then an update of a 64-bit signal word on pe that is
 *                           seen only after the put's bytes: the one ordered pair.
 *   pl_sym_wait_until       wait until a local signal word compares true with a value.
 *   pl_sym_peer_ptr         a pointer to pe's copy that this rank can load from and store to
 *                           directly (NVLink load/store; one node's shared memory), or NULL.
 *
 * Every put, signal, wait and barrier is counted and traced like the two-sided calls
 * (kinds put, signal, wait, barrier); loads and stores through pl_sym_peer_ptr are not:
 * they are memory accesses, not calls. Signals are uint64_t words inside a symmetric
 * allocation, 8-byte aligned. Operations take a stream: they are ordered on it like the
 * rest of the rank's device work (NULL: the compute stream).
 *
 * Which implementation runs is pl_sym_impl(): "mpi-rma" (the cpu device: an MPI-3 window
 * per allocation, MPI_Put + MPI_Win_flush, signals by MPI_Accumulate), "cuda-ipc" (ranks
 * sharing GPUs: cudaIpc handles, stream-ordered copies and signal kernels) or "nvshmem"
 * (a GPU per rank, where the build found NVSHMEM). The mpi-rma implementation delivers
 * puts as late as the rules above allow (at the next fence, quiet or barrier), so a
 * missing fence or quiet shows up as wrong data here rather than only on some GPUs.
 */
#ifndef PL_SYM_H
#define PL_SYM_H

#include <stddef.h>
#include <stdint.h>

#include "pl_device.h" // defines: pl_stream

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { PL_SIG_SET = 0, PL_SIG_ADD = 1 } pl_sig_op;
typedef enum { PL_CMP_EQ = 0, PL_CMP_NE, PL_CMP_GT, PL_CMP_GE, PL_CMP_LT, PL_CMP_LE } pl_cmp;

/* Collective over the world. `bytes` must be the same on every rank (else a usage error on
 * every rank); the memory is zeroed. 0 bytes returns NULL on every rank. The macro names
 * its call site, which a leak report gives (as pl_malloc's, pl_device.h). */
void *pl_sym_malloc_at(size_t bytes, const char *file, int line);
#define pl_sym_malloc(bytes) pl_sym_malloc_at((bytes), __FILE__, __LINE__)
/* Collective: every rank frees its copy of the same allocation (pending puts first). */
void pl_sym_free(void *p);

/* dst and sig are this rank's addresses inside a symmetric allocation; src is any device
 * buffer of this rank. pe may be this rank. */
void pl_sym_put(void *dst, const void *src, size_t bytes, int pe, pl_stream *s);
/* The same, but src must not change until the next pl_sym_quiet / pl_sym_barrier. */
void pl_sym_put_nbi(void *dst, const void *src, size_t bytes, int pe, pl_stream *s);
/* The put, then *sig on pe = value (PL_SIG_SET) or += value (PL_SIG_ADD), visible only once
 * the put's bytes are. Earlier puts are not covered: fence first if they must be. */
void pl_sym_put_signal(void *dst, const void *src, size_t bytes, uint64_t *sig, uint64_t value,
                       pl_sig_op op, int pe, pl_stream *s);
/* Only the signal update (nvshmemx_signal_op): ordered with nothing before it. */
void pl_sym_signal(uint64_t *sig, uint64_t value, pl_sig_op op, int pe, pl_stream *s);
/* Until this rank's *sig (cmp) value holds. Work on s after it sees what was put before the
 * signal that satisfied it. Watched by the comm watchdog. */
void pl_sym_wait_until(uint64_t *sig, pl_cmp cmp, uint64_t value, pl_stream *s);

/* Puts to each pe before the fence arrive before puts to it after the fence. */
void pl_sym_fence(pl_stream *s);
/* Every put and signal this rank issued has arrived. */
void pl_sym_quiet(pl_stream *s);
/* quiet, then a barrier over every rank: after it, every rank sees everything every rank
 * put or stored before it. */
void pl_sym_barrier(pl_stream *s);

/* A load/store pointer to rank pe's copy of p, or NULL where pe's memory is not directly
 * reachable from this rank (another node). pe == this rank gives p. */
void *pl_sym_peer_ptr(const void *p, int pe);

/* The implementation that runs ("mpi-rma", "cuda-ipc", "nvshmem"), and why, in one line. */
const char *pl_sym_impl(void);
const char *pl_sym_why(void);

#ifdef __cplusplus
}
#endif

#endif
