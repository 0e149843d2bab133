// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
/* Issue item 3: the broadcast forks a child that leaves mpirun's process group and
 * outlives the run (Open MPI gives each rank its own group, so killing mpirun's missed it).
 * The object checker refuses fork(); were it to run, the engine (a child subreaper) kills
 * every descendant after each run and before writing its reports. */
#include <unistd.h>

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    if (fork() == 0) {
        setsid();
        for (;;) sleep(1000);
    }
    lab_broadcast_solution(sendbuf, recvbuf, count, root, comm, stream);
}
