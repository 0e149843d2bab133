// expect: full allreduce_rd.oop.c512
// np: 3
/* A correct alternative, slow on one rank: before its first recursive doubling, rank 0
 * computes for 6 s, joins a barrier the others already wait in, then computes for
 * 6 s more while the others wait for it in their first send (each wait longer than the
 * rubric's 5-s watchdog, shorter than four of it). In a graded run every wait goes through
 * the referees, and a waiting player sees its node only on their board: a rank that
 * computes is alive, and a wait for it is no deadlock. */
#define lab_allreduce_rd lab_allreduce_rd_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allreduce_rd
void lab_allreduce_rd(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream);

static void compute(double seconds) {
    volatile double x = 0;
    for (double t0 = pl_now(); pl_now() - t0 < seconds;) x += 1e-9;
}

void lab_allreduce_rd(const float *sendbuf, float *recvbuf, size_t count, pl_comm *comm, pl_stream *stream) {
    static int first = 1;
    if (first) {
        if (pl_comm_rank(comm) == 0) compute(6);
        pl_barrier(comm);
        if (pl_comm_rank(comm) == 0) compute(6);
        first = 0;
    }
    lab_allreduce_rd_solution(sendbuf, recvbuf, count, comm, stream);
}
