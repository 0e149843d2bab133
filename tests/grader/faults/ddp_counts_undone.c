// lab: 06-ddp
// expect: wrong nosync
// speed: quick
// np: 2
/* no_sync's micro-steps all-reduce a scratch copy of every gradient (the values are left
 * alone, so the trained parameters stay right) and then put back the counters that saw it:
 * found at run time from a public function's address, down to the executable's ELF header
 * in memory and its writable segment, compared with a copy taken before the calls. Where
 * the referees move the messages (graded cpu runs) they count the micro-step themselves,
 * between the kit's marks, whatever the player's memory says. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "forge.h"

#define ddp_backward_end ddp_backward_end_solution
#include "../../../solutions/06-ddp/ddp.c"
#undef ddp_backward_end
void ddp_backward_end(ddp_state *d);

static unsigned char *g_before;

/* The executable's writable segment, found from a function's address (forge.h). */
static unsigned char *writable(size_t *len) {
    void (*fn)(const float *, float *, size_t, pl_op, pl_comm *, pl_stream *) = pl_allreduce;
    uintptr_t a;
    memcpy(&a, &fn, sizeof a);
    return fault_writable_segment(a, len);
}

void ddp_backward_end(ddp_state *d) {
    if (d->sync || d->nparams == 0) {
        ddp_backward_end_solution(d);
        return;
    }
    size_t len = 0;
    unsigned char *seg = writable(&len);
    len &= ~(size_t)7;
    if (!g_before) g_before = malloc(len);
    pl_device_sync();
    memcpy(g_before, seg, len);
    for (int i = 0; i < d->nparams; i++) {
        float *scratch = pl_malloc_floats(d->params[i].numel);
        pl_allreduce(d->params[i].grad, scratch, d->params[i].numel, PL_SUM, d->comm, NULL);
        pl_device_sync();
        pl_free(scratch);
    }
    /* every 8-byte word that only grew (the call counters, their bytes, the backend's) goes
     * back to what it was; pointers and sizes that changed otherwise are left alone */
    for (size_t off = 0; off + 8 <= len; off += 8) {
        uint64_t w, v;
        memcpy(&w, g_before + off, 8);
        memcpy(&v, seg + off, 8);
        if (v > w && v - w <= (uint64_t)1 << 24 && w < (uint64_t)1 << 40) memcpy(seg + off, &w, 8);
    }
}
