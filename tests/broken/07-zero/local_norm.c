// expect: wrong train.*
/* Broken on purpose: the gradient is clipped by each rank's own shard's norm (no
 * all-reduce of the sum of squares), so ranks clip their slices by different factors. */
#define pl_allreduce pl_allreduce_unused
#include "../../../solutions/07-zero/zero.c"
#undef pl_allreduce
void pl_allreduce_unused(const float *sb, float *rb, size_t n, pl_op op, pl_comm *c, pl_stream *s) {
    (void)sb, (void)rb, (void)n, (void)op, (void)c, (void)s; /* the bug: the local sum stays */
}
