// lab: 01-collectives
// expect: wrong allreduce_ring.*
// speed: quick
/* Issue item 2: the ring all-reduce sends nothing and computes the sum over ranks locally
 * from the driver's input formula (protocol 1's driver derived every rank's inputs from a
 * public formula and --seed), so it scored like the reference with a bytes ratio of 1.00.
 * Now each rank's inputs come from a seed of its own that the other ranks learn only after
 * the call: a local sum is wrong. Depends on the driver (per-rank unpredictable inputs). */
#include <stdint.h>
#include <stdlib.h>

#define lab_allreduce_ring lab_allreduce_ring_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allreduce_ring

static float old_input(int r, size_t i) {
    return (float)((int)((i * 31 + (size_t)r * 17) % 9) - 4);
}

void lab_allreduce_ring(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm,
                        pl_stream *stream) {
    (void)sendbuf;
    int n = pl_comm_size(comm);
    float *sums = malloc((count ? count : 1) * sizeof *sums);
    for (size_t i = 0; i < count; i++) {
        sums[i] = 0;
        for (int r = 0; r < n; r++) sums[i] += old_input(r, i);
    }
    (void)stream;
    pl_upload(recvbuf, sums, count * sizeof(float));
    free(sums);
}
