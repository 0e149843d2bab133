// expect: full allreduce_rd.oop.c512
// np: 3
/* A correct alternative, slow on one rank: rank 0 computes for 8 s before its first
 * recursive doubling (longer than the rubric's 5-s watchdog, shorter than four of it), while the
 * other two wait for it in their first send. In a graded run every wait goes through the
 * referees, and a waiting player sees its node only on their board: a rank that computes
 * is alive, and a wait for it is no deadlock. */
#define lab_allreduce_rd lab_allreduce_rd_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allreduce_rd
void lab_allreduce_rd(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream);

void lab_allreduce_rd(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream) {
    static int first = 1;
    if (first && pl_comm_rank(comm) == 0) {
        volatile double x = 0;
        for (double t0 = pl_now(); pl_now() - t0 < 8;) x += 1e-9;
    }
    first = 0;
    lab_allreduce_rd_solution(sendbuf, recvbuf, count, comm, stream);
}
