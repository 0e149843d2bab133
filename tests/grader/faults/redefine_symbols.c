// lab: 01-collectives
// expect: wrong broadcast.*
// speed: quick
// sandbox: both
/* A submission that defines symbols the driver itself uses - the randomness source of the
 * inputs (getrandom), the seeds and the signatures (drv_case_seed, siphash_record), memcpy
 * and the harness's rank - hoping the driver's calls land in its versions. The inputs,
 * seeds and signatures are the referee's, a program without student code; in the player
 * every global the submission defines beyond the starter's API (grader/api/) is made local
 * to its object. Its broadcast does nothing: the starter's score. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

long getrandom(void *buf, size_t n, unsigned flags) {
    (void)flags;
    memset(buf, 0, n);
    return (long)n;
}
uint64_t drv_case_seed(const void *c, int r, int run) { (void)c, (void)r, (void)run; return 7; }
uint64_t siphash_record(const void *k, uint64_t s, const char *d, size_t n) { (void)k, (void)s, (void)d, (void)n; return 0; }
int pl_rank(void) { return 0; }

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    (void)sendbuf, (void)recvbuf, (void)count, (void)root, (void)comm, (void)stream;
}
