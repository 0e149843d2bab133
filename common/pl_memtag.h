/* pl_memtag.h - device memory by category: what a rank holds as parameters, gradients,
 * optimizer state, and the transient buffers of sharded data parallelism (a unit's gathered
 * parameters, a bucket's gradients waiting for their reduce-scatter).
 *
 * An allocation made with pl_malloc_tagged counts in its category until it is freed (with
 * pl_free, like any other). pl_mem_in_use() still counts everything; what was allocated with
 * plain pl_malloc is PL_MEM_UNTAGGED. The grader of the sharded data-parallel lab reads the
 * categories (and each category's peak) to compare a rank's bytes with ZeRO's formulas:
 * fp32 AdamW holds 4 bytes of parameters, 4 of gradients and 8 of optimizer state per
 * parameter, and each stage shards one more of them.
 */
#ifndef PL_MEMTAG_H
#define PL_MEMTAG_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PL_MEM_UNTAGGED = 0, /* plain pl_malloc                                                */
    PL_MEM_PARAMS,       /* parameters kept between steps (full, or this rank's shard)     */
    PL_MEM_GRADS,        /* gradients kept until the optimizer step (full, or a shard)     */
    PL_MEM_OPTIM,        /* optimizer state: moments, and fp32 master weights in bf16 runs */
    PL_MEM_GATHER,       /* transient: parameters gathered for a unit's compute            */
    PL_MEM_REDUCE,       /* transient: full gradients on their way to a reduce-scatter     */
    PL_MEM_NTAGS
} pl_mem_tag;

/* pl_malloc(bytes), counted in `tag`. Never NULL; fatal on failure, like pl_malloc. A macro
 * over pl_malloc_tagged_at, which records the call site as pl_malloc does (a leak or a
 * damaged red zone then names the line that allocated it). */
void *pl_malloc_tagged(size_t bytes, pl_mem_tag tag);
void *pl_malloc_tagged_at(size_t bytes, pl_mem_tag tag, const char *file, int line);
#define pl_malloc_tagged(bytes, tag) pl_malloc_tagged_at((bytes), (tag), __FILE__, __LINE__)
/* Bytes allocated now in the category (PL_MEM_UNTAGGED: pl_mem_in_use() minus every tagged
 * allocation). */
size_t pl_mem_tag_in_use(pl_mem_tag tag);
const char *pl_mem_tag_name(pl_mem_tag tag); /* "params", "grads", "optim", ... */

#ifdef __cplusplus
}
#endif

#endif
