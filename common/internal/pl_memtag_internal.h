/* pl_memtag_internal.h - what only the harness and the grader see of the memory categories
 * (pl_memtag.h): each category's peak, its reset, and the hooks of pl_malloc_tagged and
 * pl_free. */
#ifndef PL_MEMTAG_INTERNAL_H
#define PL_MEMTAG_INTERNAL_H

#include <stddef.h>

#include "pl_memtag.h" // defines: pl_mem_tag

#ifdef __cplusplus
extern "C" {
#endif

/* The most bytes the category held at once since start or the last reset. */
size_t pl_mem_tag_peak(pl_mem_tag tag);
/* Every category's peak back to what it holds now. */
void pl_mem_tag_reset_peaks(void);
/* pl_malloc_tagged's hook: p (bytes long) joins its category. */
void pl_memtag_note(void *p, size_t bytes, pl_mem_tag tag);
/* pl_free's hook: if p was tagged, it leaves its category. */
void pl_memtag_forget(void *p);

#ifdef __cplusplus
}
#endif

#endif
