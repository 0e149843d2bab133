/* bench_pingpong: raw MPI ping-pong between ranks 0 and 1, timed as Lab 0's player times it
 * (grader/player/lab00.c): before each round rank 1 sends a one-int token, so the clock
 * starts once it is ready to receive; rank 0 sends, rank 1 echoes, rank 0 times the round
 * trip; the median over rounds, halved, is the one-way time. Prints one line per size:
 * `pingpong BYTES: LAT us, BW GB/s` (1 GB = 1e9 bytes), for tests/bench.sh to set beside
 * Lab 0's graded sweep. Plain MPI on host memory: whatever single-copy mechanism Open MPI
 * picks unless the environment turns it off. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world != 2) {
        if (rank == 0) fprintf(stderr, "bench_pingpong: needs exactly 2 ranks, got %d\n", world);
        MPI_Finalize();
        return 2;
    }
    static const size_t sizes[] = {64u << 10, 16u << 20};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t bytes = sizes[s];
        int iters = bytes >= (1u << 20) ? 20 : 200, warm = 3, token = 0;
        char *out = malloc(bytes), *in = malloc(bytes);
        double *t = malloc(sizeof(double) * (size_t)iters);
        if (!out || !in || !t) MPI_Abort(MPI_COMM_WORLD, 1);
        memset(out, rank + 1, bytes);
        for (int it = -warm; it < iters; it++) {
            if (rank == 0) {
                MPI_Recv(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                double t0 = MPI_Wtime();
                MPI_Send(out, (int)bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(in, (int)bytes, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (it >= 0) t[it] = MPI_Wtime() - t0;
            } else {
                MPI_Send(&token, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
                MPI_Recv(in, (int)bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(in, (int)bytes, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
            }
        }
        if (rank == 0) {
            qsort(t, (size_t)iters, sizeof *t, cmp);
            double med = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
            double one_way = med / 2;
            printf("pingpong %zu: %.2f us, %.3f GB/s\n", bytes, one_way * 1e6, (double)bytes / one_way / 1e9);
        }
        free(out), free(in), free(t);
    }
    MPI_Finalize();
    return 0;
}
