/* spawn_probe.c - a hostile "driver" for tests/grader/test_landlock.sh: under mpirun it asks
 * the launcher (MPI_Comm_spawn, which is PMIx_Spawn underneath) to start a shell that copies
 * a secret into a directory outside the run, and proves it ran by a mark in /dev/shm. With
 * PROBE_SELF=1 rank 0 runs that shell itself instead (what a rank that srun started can do:
 * tests/multinode/multinode.sh). With --list it prints a one-case plan, so that the engine
 * starts the run at all. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--list")) {
            puts("escape.spawn escape");
            return 0;
        }
    const char *script = getenv("PROBE_SCRIPT");
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (script && getenv("PROBE_SELF")) {
        if (rank == 0 && system(script) != 0) fprintf(stderr, "spawn_probe: the shell failed\n");
    } else if (script) {
        char *args[] = {"-c", (char *)script, NULL};
        MPI_Comm child;
        int errs[1];
        /* one shell for the whole job (collective, rank 0 asks): the launcher puts it on the
         * first free slot, wherever that is, and no second request can fail the job */
        MPI_Comm_spawn("/bin/sh", args, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &child, errs);
    }
    MPI_Finalize();
    return 0;
}
