// expect: wrong layout.buckets
/* Broken on purpose: buckets are not padded to a multiple of the world size, and each rank
 * takes numel / world elements: the last elements of an uneven bucket belong to nobody. */
#define zero_buckets zero_buckets_solution
#include "../../../solutions/07-zero/zero.c"
#undef zero_buckets
int zero_buckets(const zero_model *m, size_t cap, int world, zero_bucket *out, int max) {
    int n = zero_buckets_solution(m, cap, world, out, max);
    size_t offset = 0;
    for (int b = 0; b < n; b++) {
        out[b].padded = out[b].numel; /* the bug */
        out[b].shard = out[b].numel / (size_t)world;
        out[b].offset = offset;
        offset += out[b].padded;
    }
    return n;
}
