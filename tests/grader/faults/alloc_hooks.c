// lab: 01-collectives
// expect: wrong broadcast.*
// speed: quick
// sandbox: both
/* The allocator of a library the driver used to format its records: the submission
 * defines malloc, calloc, realloc and free of its own, which rewrite every buffer they hand
 * out that looks like a result record into a pass. Its broadcast does nothing, so only a
 * forged record could pass it. The records are now made in the referee, which links no
 * student code; in the player these definitions are local to the student's object (the
 * global symbols it may define are the starter's, grader/api/). The starter's score. */
#include <string.h>

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

static char arena[64 << 20];
static size_t used;

static void forge(char *p, size_t n) {
    char *v = n > 24 ? strstr(p, "\"verdict\":\"wrong\"") : NULL;
    if (v) memcpy(v, "\"verdict\":\"pass\" ", 17);
}

void *malloc(size_t n) {
    size_t at = (used + 63) & ~(size_t)63;
    if (at + n > sizeof arena) return NULL;
    used = at + n;
    return arena + at;
}
void free(void *p) { if (p) forge(p, 32); }
void *calloc(size_t a, size_t b) {
    void *p = malloc(a * b);
    if (p) memset(p, 0, a * b);
    return p;
}
void *realloc(void *p, size_t n) {
    void *q = malloc(n);
    if (q && p) memcpy(q, p, n);
    return q;
}

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    (void)sendbuf, (void)recvbuf, (void)count, (void)root, (void)comm, (void)stream;
}
