/* pl_memcheck.h - what the grader asks of device memory (internal): where each live
 * allocation was made, which ones a piece of code left behind, and whether anything wrote
 * outside one.
 *
 * Every pl_malloc, pl_malloc_floats and pl_tensor_alloc records its call site: the public
 * headers turn each call into its _at form with __FILE__ and __LINE__, so a site reads
 * "labs/06-ddp/ddp.c:53"; a call through a function pointer records the return address
 * instead ("lab06+0x1a2b", for addr2line). pl_mem_in_use() counts exactly the bytes asked
 * for, red zones excluded.
 *
 * Checked mode (PL_CHECKED=1, or pl_mem_set_checked): every allocation made while it is on
 * gets PL_GUARD_BYTES of red zone before and after, filled with a pattern. The zones are
 * verified when the allocation is freed and by pl_mem_check_guards (both backends; on
 * cuda by copying the zones back), and a damaged zone is reported once, with the offset
 * and the site:
 *   "wrote 4 bytes past the end of an allocation of 4096 bytes made at lab.c:123"
 * docs/harness.md, "Memory checks".
 */
#ifndef PL_MEMCHECK_H
#define PL_MEMCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Alignment-preserving on both backends (cudaMalloc gives 256-byte alignment). */
#define PL_GUARD_BYTES 256
#define PL_GUARD_BYTE 0xFB /* as a float 0xFBFBFBFB = -2.6e36: no result looks like it */
/* What a checked allocation holds before anything writes it: NaN as a float, a double or a
 * bf16, -1 as an integer, as cudaMalloc's memory may hold anything; code that reads memory
 * it never wrote (gradients never zeroed, padding assumed zero) gives a visibly wrong
 * result instead of passing wherever the allocator happened to return zeros. */
#define PL_FRESH_BYTE 0xFF

typedef struct {
    const void *ptr;    /* what the allocation returned                                */
    size_t bytes;       /* what it asked for                                           */
    const char *file;   /* the call site, or NULL (then `caller` says where it was)     */
    int line;
    const void *caller; /* the return address into the caller, when file is NULL     */
    uint64_t serial;    /* allocations are numbered from 1 in the order they are made   */
    bool guarded;       /* made in checked mode: has red zones                         */
} pl_alloc_info;

/* -- leaks ------------------------------------------------------------------------------ */
/* The serial the next allocation will get: allocations made from now on are "since". */
uint64_t pl_mem_mark(void);
/* Live allocations made since `mark`, oldest first: fills up to max of them into out
 * (may be NULL), their total size into *bytes (may be NULL), returns how many there are. */
size_t pl_mem_live_since(uint64_t mark, pl_alloc_info *out, size_t max, size_t *bytes);
/* One line for the grader, e.g. "leaked 2 allocations (8192 bytes): lab.c:88, lab.c:91"
 * (nothing written when there are none); returns the number of allocations. */
size_t pl_mem_leak_report(uint64_t mark, char *buf, size_t len);
/* "file:line", or the caller's return address as "module+0xoffset" (or "symbol+0xoff"). */
void pl_mem_site(const pl_alloc_info *a, char *buf, size_t len);

/* -- red zones -------------------------------------------------------------------------- */
/* Checked mode for the allocations made from now on; returns the previous setting. */
bool pl_mem_set_checked(bool on);
bool pl_mem_checked(void);
/* Completes pending device work, verifies the red zones of every live guarded allocation
 * and collects the damage found at pl_free since the last call: one line per damaged
 * allocation into report (newline-separated, cut at len; may be NULL). Damage is reported
 * once (the zones are refilled). Returns the number of damaged allocations. */
size_t pl_mem_check_guards(char *report, size_t len);
/* Red zones for another allocator (pl_sym_malloc), which tracks `a` itself with
 * a.guarded set: fill the PL_GUARD_BYTES before a.ptr and after a.ptr + a.bytes; and, as
 * it is freed, check them (the damage joins pl_free's in pl_mem_check_guards). */
void pl_mem_guard_fill(const pl_alloc_info *a);
void pl_mem_guard_freed(const pl_alloc_info *a);

#ifdef __cplusplus
}
#endif

#endif
