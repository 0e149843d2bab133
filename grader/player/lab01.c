/* lab01.c (player) - Lab 1's calls: the student's collective, or the library's for the
 * speed comparison, on the case's slots. */
#include "collectives.h" // defines: the lab API
#include "lab01.h"

_Static_assert(LAB_ALLREDUCE_SMALL_BYTES == LAB1_ALLREDUCE_SMALL_BYTES,
               "the handout's all-reduce threshold and the driver's differ");

typedef struct {
    const float *send;
    float *recv;
} lab1_buffers;

/* The buffers of the set this call uses (play: 0; a timed run: one per call). */
static lab1_buffers buffers(drv_case *c, const lab1_shape *s) {
    size_t k = (size_t)c->batch_index;
    if (!s->in_place) return (lab1_buffers){drv_slot_f(c, "send") + k * s->nsend, drv_slot_f(c, "recv") + k * s->nrecv};
    float *base = drv_slot_f(c, "buf") + k * lab1_stride(s);
    bool gather = s->k->output == OUT_GATHER;
    return (lab1_buffers){base + (gather ? s->mine : 0), base + (gather ? 0 : s->mine)};
}

/* The student's calls are graded on the comm stream (play), the caller's stream the
 * outputs are then read on: a collective that issues its work elsewhere has not delivered
 * by then. The timed runs use the compute stream, as the library's do. */
static void call(drv_case *c, bool library, pl_stream *st) {
    lab1_shape s = lab1_shape_of(c);
    lab1_buffers b = buffers(c, &s);
    pl_comm *w = pl_comm_world();
    switch (c->arg[0]) {
    case 0: (library ? pl_broadcast : lab_broadcast)(b.send, b.recv, s.count, s.root, w, st); break;
    case 1:
        if (library) pl_reduce(b.send, b.recv, s.count, PL_SUM, s.root, w, st);
        else lab_reduce(b.send, b.recv, s.count, s.root, w, st);
        break;
    case 2: (library ? pl_allgather : lab_allgather)(b.send, b.recv, s.block, w, st); break;
    case 3:
        if (library) pl_reduce_scatter(b.send, b.recv, s.block, PL_SUM, w, st);
        else lab_reduce_scatter(b.send, b.recv, s.block, w, st);
        break;
    default: {
        static void (*const student[])(const float *, float *, size_t, pl_comm *, pl_stream *) = {
            lab_allreduce_ring, lab_allreduce_rd, lab_allreduce};
        if (library) pl_allreduce(b.send, b.recv, s.count, PL_SUM, w, st);
        else student[c->arg[0] - 4](b.send, b.recv, s.count, w, st);
    }
    }
}

void lab1_play(drv_case *c) {
    lab1_shape s = lab1_shape_of(c);
    call(c, false, pl_stream_comm());
    drv_consume(c, pl_stream_comm(), s.in_place ? "buf" : "recv", NULL);
}
void lab1_timed(drv_case *c, int which) { call(c, which == 1, NULL); }
