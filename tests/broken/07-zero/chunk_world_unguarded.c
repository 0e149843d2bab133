// expect: crash layout.chunks
/* Broken on purpose: zero_chunk checks dim0 == 0 but not world < 1 ("the world is never
 * empty"): a call with world 0 divides by zero, and the player dies of SIGFPE. */
#define zero_chunk zero_chunk_solution
#include "../../../solutions/07-zero/zero.c"
#undef zero_chunk
size_t zero_chunk(size_t dim0, int world, int rank, size_t *first, size_t *held);

size_t zero_chunk(size_t dim0, int world, int rank, size_t *first, size_t *held) {
    *first = *held = 0;
    if (dim0 == 0) return 0; /* the bug: world < 1 is not returned early */
    size_t chunk = (dim0 + (size_t)world - 1) / (size_t)world, r = (size_t)rank;
    *first = r * chunk < dim0 ? r * chunk : dim0;
    *held = dim0 - *first < chunk ? dim0 - *first : chunk;
    return chunk;
}
