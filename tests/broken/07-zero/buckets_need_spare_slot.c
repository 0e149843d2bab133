// expect: wrong layout.buckets
// expect-message: expected
/* Broken on purpose: zero_buckets checks its room with n >= max after the last bucket, as if
 * out[] needed a spare entry, so a caller who sized out[] for exactly the buckets there are
 * (the kit sizes it with ZERO_MAX_BUCKETS, which always has room) is told ZERO_ERR_CAPACITY.
 * Every layout it does return is right. */
#define zero_buckets zero_buckets_solution
#include "../../../solutions/07-zero/zero.c"
#undef zero_buckets
int zero_buckets(const zero_model *m, size_t cap, int world, zero_bucket *out, int max);

int zero_buckets(const zero_model *m, size_t cap, int world, zero_bucket *out, int max) {
    int n = zero_buckets_solution(m, cap, world, out, max);
    if (n > 0 && n >= max) return ZERO_ERR_CAPACITY; /* the bug: a full array is not too small */
    return n;
}
