/* lab03.c (player) - Lab 3's calls on the slots: mg_config_check, mg_params_init from the
 * seed it is given (copied out), the referee's shards in its place, the block's forward and
 * backward (each measured as a phase for the comm case), mg_acts_alloc's device memory, and
 * a stack's forward, the driver's loss gradient, backward and one SGD step. The referee
 * (grader/referee/lab03*.c) judges everything from the slots.
 */
#include <stdlib.h>
#include <string.h>

#include "lab03.h"
#include "megatron.h" // defines: the lab API

_Static_assert((int)MG_OK == (int)LAB3_OK && (int)MG_ERR_HEADS == (int)LAB3_ERR_HEADS &&
                   (int)MG_ERR_SEQ == (int)LAB3_ERR_SEQ && (int)MG_ERR_SHAPE == (int)LAB3_ERR_SHAPE,
               "megatron.h and the driver's case table disagree on the codes");
_Static_assert((int)MG_QKV_W == (int)LAB3_QKV_W && (int)MG_FC2_B == (int)LAB3_FC2_B &&
                   (int)MG_NTENSORS == (int)LAB3_NTENSORS,
               "megatron.h and the driver's case table disagree on the master tensors");

enum { FORWARD = 0, BACKWARD = 1, COMM = 2 };

static mg_config cfg_of(const lab3_cfg *k) {
    return (mg_config){k->seq, k->batch, k->hidden, k->heads, k->ffn, k->sp, pl_comm_world()};
}

/* What a case keeps between play(), timed() and release(). */
typedef struct {
    mg_config k;
    int L;
    mg_params *p, *g;
    mg_acts **a;
    float *dy, *dx; /* the stack's: the player's own buffers */
    size_t count;
    lab3_piece pc[LAB3_NTENSORS];
} lab3_play;

/* L blocks of parameters and gradients in mg_params_alloc's layout, which must be the case
 * table's (the referee writes and reads shards by it), and their activations. */
static void blocks_alloc(lab3_play *q, int L) {
    const lab3_flags *f = lab3_opts();
    q->L = L;
    q->count = lab3_layout(f->C, f->F, pl_world(), pl_rank(), q->pc);
    q->p = calloc((size_t)L, sizeof *q->p), q->g = calloc((size_t)L, sizeof *q->g), q->a = calloc((size_t)L, sizeof *q->a);
    PL_CHECK(q->p && q->g && q->a, "out of host memory");
    for (int l = 0; l < L; l++) {
        mg_params_alloc(&q->p[l], &q->k);
        mg_params_alloc(&q->g[l], &q->k);
        const mg_params *p = &q->p[l];
        float *at[LAB3_NTENSORS] = {p->ln1_w, p->ln1_b, p->qkv_w, p->qkv_b, p->proj_w, p->proj_b,
                                    p->ln2_w, p->ln2_b, p->fc1_w, p->fc1_b, p->fc2_w, p->fc2_b};
        for (int w = 0; w < LAB3_NTENSORS; w++)
            if (at[w] - p->base != q->pc[w].off)
                pl_fatal(__FILE__, __LINE__, LAB3_TNAME[w], "mg_params_alloc's layout is not the case table's");
        if (p->count != q->count) pl_fatal(__FILE__, __LINE__, "mg_params", "its size is not the case table's");
    }
}

/* mg_params_init from the given seed, copied out; then the referee's shards in its place. */
static void params_in(drv_case *c, lab3_play *q) {
    uint64_t seed = 0;
    size_t bytes = q->count * sizeof(float);
    pl_download(&seed, drv_slot(c, "iseed"), sizeof seed);
    for (int l = 0; l < q->L; l++) {
        mg_params_init(&q->p[l], &q->k, l, seed);
        pl_copy((char *)drv_slot(c, "init") + (size_t)l * bytes, q->p[l].base, bytes, NULL);
        pl_copy(q->p[l].base, (char *)drv_slot(c, "p") + (size_t)l * bytes, bytes, NULL);
    }
}

static void put_status(drv_case *c, const lab3_status *st) {
    pl_upload(drv_slot(c, "status"), st, sizeof *st);
    pl_device_sync();
}

/* ---- config.errors -------------------------------------------------------------------------- */

void lab3_errors_play(drv_case *c) {
    lab3_cfg k[LAB3_MAX_ERROR_CONFIGS];
    int32_t rc[LAB3_MAX_ERROR_CONFIGS] = {0};
    int n = lab3_error_configs(pl_world(), k, NULL, NULL);
    for (int i = 0; i < n; i++) {
        mg_config m = cfg_of(&k[i]);
        rc[i] = mg_config_check(&m);
    }
    pl_upload(drv_slot(c, "rc"), rc, sizeof rc);
}

/* ---- the block cases ----------------------------------------------------------------------- */

typedef struct {
    lab3_play *q;
    float *x, *y, *dy, *dx;
    pl_stream *st; /* the stream the calls are given (drv_stream) */
} block_args;

static void block_fwd(void *arg) {
    block_args *b = arg;
    mg_block_forward(&b->q->k, &b->q->p[0], b->q->a[0], b->y, b->x, b->st);
}
static void block_bwd(void *arg) {
    block_args *b = arg;
    mg_block_backward(&b->q->k, &b->q->p[0], &b->q->g[0], b->q->a[0], b->dx, b->dy, b->st);
}
static void block_sync(void *arg) {
    block_args *b = arg;
    mg_sync_sp_grads(&b->q->k, &b->q->g[0], b->st);
}
static block_args block_slots(drv_case *c, lab3_play *q, bool bwd) {
    return (block_args){q, drv_slot_f(c, "x"), drv_slot_f(c, "y"), bwd ? drv_slot_f(c, "dy") : NULL,
                        bwd ? drv_slot_f(c, "dx") : NULL, drv_stream(c)};
}

void lab3_block_play(drv_case *c) {
    int what = *(const int *)c->inst->test->data;
    bool sp = c->arg[0] != 0;
    lab3_play *q = drv_state(c, sizeof *q);
    lab3_cfg kc = lab3_config(sp, lab3_seq_for(sp, pl_world()));
    lab3_status st = {0};
    q->k = cfg_of(&kc);
    st.config_rc = mg_config_check(&q->k);
    if (!drv_everyone(st.config_rc == MG_OK)) goto out;
    blocks_alloc(q, 1);
    params_in(c, q);
    if (what == FORWARD) pl_fill(q->g[0].base, 0, q->count, NULL);
    else pl_copy(q->g[0].base, drv_slot(c, "g"), q->count * sizeof(float), NULL);
    q->a[0] = mg_acts_alloc(&q->k);
    pl_device_sync(); /* the copies above are done before the calls */
    block_args b = block_slots(c, q, what != FORWARD);
    if (what == COMM) {
        drv_measure_slot(c, "cf", block_fwd, &b);
        drv_measure_slot(c, "cb", block_bwd, &b);
        drv_measure_slot(c, "cs", block_sync, &b);
    } else { /* the outputs read on the calls' stream as they return (drv_consume) */
        block_fwd(&b);
        if (what == FORWARD) drv_consume(c, drv_stream(c), "y", NULL);
        if (what == BACKWARD) { /* a second step into the same gradients, then the sync */
            block_bwd(&b);
            drv_consume(c, drv_stream(c), "dx", NULL);
            block_args b2 = {q, drv_slot_f(c, "x.2"), b.y, drv_slot_f(c, "dy.2"), drv_slot_f(c, "dx.2"), b.st};
            block_fwd(&b2);
            block_bwd(&b2);
            block_sync(&b);
            drv_consume(c, drv_stream(c), "y", "dx.2", NULL);
        }
    }
    if (what != FORWARD) /* the gradients, read on the calls' stream too */
        pl_copy(drv_slot(c, "g"), q->g[0].base, q->count * sizeof(float), drv_stream(c));
    st.called = 1;
out:
    put_status(c, &st);
}

/* comm's timed run: forward + backward on the refreshed slots, and the seconds this rank's
 * trace shows inside collectives (reported, not graded). */
void lab3_block_timed(drv_case *c, int which) {
    (void)which;
    lab3_play *q = c->state;
    block_args b = block_slots(c, q, true);
    size_t first = pl_trace_count();
    block_fwd(&b);
    block_bwd(&b);
    pl_device_sync();
    double comm = 0;
    const pl_trace_event *ev = pl_trace_events();
    for (size_t i = first; i < pl_trace_count(); i++)
        if (pl_op_is_collective(ev[i].kind)) comm += ev[i].t_end - ev[i].t_start;
    pl_upload(drv_slot(c, "comm_s"), &comm, sizeof comm);
}

/* ---- memory.sp ---------------------------------------------------------------------------- */

typedef struct {
    mg_config k;
    mg_acts *a;
} acts_args;
static void acts_alloc(void *arg) {
    acts_args *a = arg;
    a->a = mg_acts_alloc(&a->k);
}

void lab3_memory_play(drv_case *c) {
    int tp = pl_world();
    lab3_cfg k0 = lab3_config(false, lab3_seq_for(true, tp)), k1 = lab3_config(true, lab3_seq_for(true, tp));
    acts_args a0 = {cfg_of(&k0), NULL}, a1 = {cfg_of(&k1), NULL};
    drv_measure_slot(c, "m0", acts_alloc, &a0);
    mg_acts_free(a0.a);
    drv_measure_slot(c, "m1", acts_alloc, &a1);
    mg_acts_free(a1.a);
}

/* ---- train.nosp / train.sp ------------------------------------------------------------------ */

void lab3_train_play(drv_case *c) {
    bool sp = c->arg[0] != 0;
    int tp = pl_world();
    const lab3_flags *f = lab3_opts();
    lab3_play *q = drv_state(c, sizeof *q);
    lab3_cfg kc = lab3_config(sp, lab3_seq_for(sp, tp));
    lab3_status st = {0};
    q->k = cfg_of(&kc);
    int L = f->L, N = kc.seq * kc.batch;
    size_t NlC = (size_t)lab3_local_rows(&kc, tp) * (size_t)f->C, NC = (size_t)N * (size_t)f->C;
    blocks_alloc(q, L);
    params_in(c, q);
    for (int l = 0; l < L; l++) {
        pl_fill(q->g[l].base, 0, q->count, NULL);
        q->a[l] = mg_acts_alloc(&q->k);
    }
    float *y = drv_slot_f(c, "y");
    q->dx = pl_malloc_floats(NlC), q->dy = pl_malloc_floats(NlC);
    pl_device_sync(); /* the copies above are done before the calls */
    mg_stack_forward(&q->k, L, q->p, q->a, y, drv_slot_f(c, "x"), drv_stream(c));
    drv_consume(c, drv_stream(c), "y", NULL);
    pl_device_sync();
    /* the driver's loss 0.5 mean((y - target)^2): its gradient (y - target) / (N C) */
    float *got = malloc(NlC * sizeof(float) + 4), *tgt = malloc(NlC * sizeof(float) + 4);
    PL_CHECK(got && tgt, "out of host memory");
    pl_download(got, y, NlC * sizeof(float));
    pl_download(tgt, drv_slot(c, "target"), NlC * sizeof(float));
    for (size_t i = 0; i < NlC; i++) got[i] = (float)(((double)got[i] - tgt[i]) / (double)NC);
    pl_upload(q->dy, got, NlC * sizeof(float));
    free(got), free(tgt);
    pl_device_sync(); /* dy, uploaded */
    mg_stack_backward(&q->k, L, q->p, q->g, q->a, q->dx, q->dy, drv_stream(c));
    mg_sgd_step(&q->k, L, q->p, q->g, LAB3_LR, drv_stream(c));
    size_t bytes = q->count * sizeof(float);
    /* the new parameters, read on the calls' stream as the step returns */
    for (int l = 0; l < L; l++)
        pl_copy((char *)drv_slot(c, "p_new") + (size_t)l * bytes, q->p[l].base, bytes, drv_stream(c));
    st.called = 1;
    put_status(c, &st);
}

void lab3_release(drv_case *c) {
    lab3_play *q = c->state;
    if (!q) return;
    for (int l = 0; l < q->L; l++) {
        if (q->a[l]) mg_acts_free(q->a[l]);
        mg_params_free(&q->p[l]);
        mg_params_free(&q->g[l]);
    }
    free(q->p), free(q->g), free(q->a);
    pl_free(q->dx), pl_free(q->dy);
}
