// lab: 01-collectives
// expect: forbidden allgather.*
// speed: quick
// np: 2 3
/* The all-gather calls the library's collective (right answers for free) and then undoes
 * the counters that saw it, found at run time with nothing the static scan looks for: from
 * the address of a public function, down to the executable's ELF header in memory, to its
 * writable segment; a copy of that segment taken before the call shows the words that moved
 * by one call and its bytes, and they are put back. Where the referees move the messages
 * (graded cpu runs) the call is theirs to count, whatever the player's memory says. */
#include <stdint.h>
#include <string.h>

#include "forge.h"

#define lab_allgather lab_allgather_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_allgather
void lab_allgather(const float *sendbuf, float *recvbuf, size_t sendcount, pl_comm *comm, pl_stream *stream);

static unsigned char g_before[1 << 22];

/* The executable's writable segment, found from a function's address (forge.h). */
static unsigned char *writable(size_t *len) {
    void (*fn)(const float *, float *, size_t, pl_comm *, pl_stream *) = pl_allgather;
    uintptr_t a;
    memcpy(&a, &fn, sizeof a);
    unsigned char *seg = fault_writable_segment(a, len);
    if (*len > sizeof g_before) *len = sizeof g_before;
    return seg;
}

void lab_allgather(const float *sendbuf, float *recvbuf, size_t sendcount, pl_comm *comm, pl_stream *stream) {
    size_t len = 0;
    unsigned char *seg = writable(&len);
    len &= ~(size_t)7;
    memcpy(g_before, seg, len);
    uint64_t bytes = (uint64_t)sendcount * sizeof(float) * (uint64_t)pl_comm_size(comm);
    pl_allgather(sendbuf, recvbuf, sendcount, comm, stream);
    pl_stream_sync(stream);
    /* the harness's counters: a call count and the all-collectives count 104 bytes apart
     * (its pl_metrics), and the backend's call count with its bytes right after (pl_wire) */
    for (size_t off = 0; off + 112 <= len; off += 8) {
        uint64_t w[15], v[15];
        memcpy(w, g_before + off, sizeof w < len - off ? sizeof w : len - off);
        memcpy(v, seg + off, sizeof v < len - off ? sizeof v : len - off);
        if (v[0] == w[0] + 1 && v[13] == w[13] + 1 && v[12] == w[12] + bytes) { /* coll_calls[k], _bytes, _total */
            uint64_t back[14];
            memcpy(back, g_before + off, sizeof back);
            memcpy(seg + off, back, sizeof back);
        }
        if (v[0] == w[0] + 1 && v[1] == w[1] + bytes && off >= 32 && !memcmp(seg + off - 32, g_before + off - 32, 32))
            memcpy(seg + off, g_before + off, 16); /* pl_wire's coll_calls, coll_bytes */
    }
}
