/* lab06_buckets.c - Lab 6's bucketing rule (in whole bytes, as PyTorch counts them) and its
 * two kinds of cases: the layout ddp_init builds (buckets.*), and the layout after the
 * one rebuild in rank 0's observed order (rebuild.*). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab06.h"

/* ---- the bucketing rule ---------------------------------------------------------------------- */

typedef struct {
    int nbuckets, nparams[DDP_MAX_PARAMS], params[DDP_MAX_PARAMS][DDP_MAX_PARAMS];
} layout;

/* A bucket closes once its size in whole bytes reaches its cap: PyTorch takes the cap as
 * int(cap_mb * 1024 * 1024) bytes, so the comparison is between integers. */
static size_t cap_bytes(double mb) { return (size_t)(mb * 1048576.0); }

static layout expected_layout(const mlp *m, const int *order, double cap_mb, double first_mb) {
    layout L;
    memset(&L, 0, sizeof L);
    size_t bytes = 0;
    for (int k = 0; k < NPARAMS; k++) {
        if (L.nbuckets == 0 || bytes >= cap_bytes(L.nbuckets == 1 ? first_mb : cap_mb)) L.nbuckets++, bytes = 0;
        int b = L.nbuckets - 1;
        L.params[b][L.nparams[b]++] = order[k];
        bytes += m->p[order[k]].numel * sizeof(float);
    }
    return L;
}

/* Does the student's state hold layout L with gradient views? Fails the case if not. */
static void check_layout(drv_case *c, const ddp_state *d, const mlp *m, const layout *L, const char *when) {
    char why[256] = "";
    for (int b = 0; b < L->nbuckets && !why[0] && d->nbuckets == L->nbuckets; b++) {
        const ddp_bucket *bk = &d->buckets[b];
        if (bk->nparams != L->nparams[b]) {
            snprintf(why, sizeof why, "bucket %d holds %d parameter(s), expected %d", b, bk->nparams, L->nparams[b]);
            break;
        }
        size_t off = 0;
        for (int j = 0; j < bk->nparams && !why[0]; j++) {
            int i = L->params[b][j];
            if (bk->params[j] != i)
                snprintf(why, sizeof why, "bucket %d position %d is %s, expected %s", b, j,
                         bk->params[j] >= 0 && bk->params[j] < NPARAMS ? PNAMES[bk->params[j]] : "?", PNAMES[i]);
            else if (bk->offsets[j] != off)
                snprintf(why, sizeof why, "bucket %d: %s at offset %zu, expected %zu", b, PNAMES[i], bk->offsets[j], off);
            else if (!bk->buf || m->p[i].grad != bk->buf + off)
                snprintf(why, sizeof why, "%s's gradient is not a view of bucket %d at offset %zu", PNAMES[i], b, off);
            off += m->p[i].numel;
        }
        if (!why[0] && bk->numel != off)
            snprintf(why, sizeof why, "bucket %d has %zu elements, its parameters %zu", b, bk->numel, off);
    }
    if (d->nbuckets != L->nbuckets) snprintf(why, sizeof why, "%d bucket(s), expected %d", d->nbuckets, L->nbuckets);
    drv_num(c, "buckets", d->nbuckets);
    drv_num(c, "expected_buckets", L->nbuckets);
    if (why[0]) drv_fail(c, "%s%s", when, why);
}

static const int REVERSE[NPARAMS] = {P_B3, P_W3, P_B2, P_W2, P_B1, P_W1};
static const int OBSERVED[NPARAMS] = {P_W3, P_B3, P_W2, P_B2, P_W1, P_B1};

const caps CAPS[] = {{"default", 0, 0, 0}, {"two", 25, 0.01, 0}, {"three", 0.015, 0.001, 0},
                            {"many", 1e-6, 1e-6, 0}, {"boundary", 0, 0, 99}, {"boundary-1", 0, 0, -1},
                            {"boundary+1", 0, 0, 1}, {"boundary+half", 0, 0, 0.5}};

/* Boundary caps: the first bucket exactly b3, the others exactly W3 + b2 (reverse order),
 * or one byte less or more: a cap one byte short still closes the bucket there, one more
 * takes the next parameter too; half a byte more is the same cap in whole bytes (PyTorch
 * truncates), so it closes there too. In MiB, exactly (a power-of-two division). */
static caps cap_for(const caps *c, const mlp *m) {
    caps k = *c;
    if (!c->boundary) return k;
    double first = (double)(m->p[P_B3].numel * 4), other = (double)((m->p[P_W3].numel + m->p[P_B2].numel) * 4);
    k.first = first / 1048576.0;
    k.cap = (other + (c->boundary == 99 ? 0 : c->boundary)) / 1048576.0;
    return k;
}

/* ---- buckets.*: arg[0] = the caps ------------------------------------------------------------- */

typedef struct {
    mlp m;
    ddp_state d;
    caps k;
} bucket_case;

void buckets_run(drv_case *c) {
    bucket_case *s = drv_state(c, sizeof *s);
    mlp_init(&s->m, g_data.dim, g_hidden, g_data.classes, g_batch, g_seed);
    s->k = cap_for(&CAPS[c->arg[0]], &s->m);
    ddp_init(&s->d, s->m.p, NPARAMS, DDP_BUCKETED, s->k.cap, s->k.first, g_comm);
}
void buckets_check(drv_case *c) {
    bucket_case *s = c->state;
    layout L = expected_layout(&s->m, REVERSE, s->k.cap > 0 ? s->k.cap : 25, s->k.first > 0 ? s->k.first : 1);
    check_layout(c, &s->d, &s->m, &L, "");
}
void buckets_teardown(drv_case *c) {
    bucket_case *s = c->state;
    if (!s) return;
    ddp_free(&s->d);
    mlp_reset_grads(&s->m);
    mlp_free(&s->m);
}

/* ---- rebuild.*: ranks other than 0 report b2 before W2 in the first iteration; after it every
 * rank must hold the layout of rank 0's observed order. arg[0] = the caps. ------------------- */

typedef struct {
    mlp m;
    ddp_state d;
    int rows;
    bool bad;
} rebuild_case;

void rebuild_run(drv_case *c) {
    rebuild_case *s = drv_state(c, sizeof *s);
    mlp_init(&s->m, g_data.dim, g_hidden, g_data.classes, g_batch / g_n, g_seed);
    s->m.swap_w2_b2_hooks = g_me != 0;
    const caps *k = &CAPS[c->arg[0]];
    ddp_init(&s->d, s->m.p, NPARAMS, DDP_OVERLAP, k->cap, k->first, g_comm);
    int first, *y;
    float *x;
    batch_rows(0, 0, g_me, g_n, &s->rows, &first);
    load_rows(first, &x, &y);
    mlp_forward(&s->m, x, y, s->rows);
    ddp_backward_begin(&s->d);
    mlp_backward(&s->m, &s->d, s->rows, false);
    ddp_backward_end(&s->d);
    mlp_step(&s->m);
    pl_device_sync();
    s->m.swap_w2_b2_hooks = 0;
    ddp_backward_begin(&s->d); /* the rebuild happens here */
}

void rebuild_check(drv_case *c) {
    rebuild_case *s = c->state;
    const caps *k = &CAPS[c->arg[0]];
    layout L = expected_layout(&s->m, OBSERVED, k->cap, k->first);
    check_layout(c, &s->d, &s->m, &L, "after iteration 1 (expected rank 0's order W3 b3 W2 b2 W1 b1): ");
    s->bad = drv_max(drv_failed(c)) > 0;
}

/* Finish the iteration so every rank leaves the same collectives behind. */
void rebuild_teardown(drv_case *c) {
    rebuild_case *s = c->state;
    mlp_backward(&s->m, &s->d, s->rows, false);
    if (s->bad) ddp_set_sync(&s->d, false);
    ddp_backward_end(&s->d);
    ddp_free(&s->d);
    mlp_reset_grads(&s->m);
    mlp_free(&s->m);
}

void plan_buckets(const drv_test *t, drv_plan *p) {
    for (int k = 0; k < (int)(sizeof CAPS / sizeof CAPS[0]); k++) drv_plan_add(p, t, "buckets.%s", CAPS[k].name)->arg[0] = k;
}
void plan_rebuild(const drv_test *t, drv_plan *p) {
    drv_plan_add(p, t, "rebuild.three")->arg[0] = C_THREE;
    drv_plan_add(p, t, "rebuild.many")->arg[0] = C_MANY;
}

