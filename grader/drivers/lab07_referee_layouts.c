/* lab07_referee_layouts.c - the questions of Lab 7's pure-function cases and their
 * judgement (host arrays, no student code): zero_buckets over models and caps around unit
 * boundaries, zero_chunk over dim0 and world sizes that do not divide, zero_ckpt_plan from
 * every saved layout to every new one (stages 1 and 3, even and uneven world sizes), and the
 * plans that must fail. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab07.h"

/* The models the bucket questions use: the graded one and two others. */
static int make_models(const lab7 *L, zero_model *out) {
    gpt_config g = l7_model_config(L, 1);
    l7_describe(&out[0], &g, L->layers);
    gpt_config small = {.seq = 3, .batch = 1, .hidden = 8, .heads = 2, .ffn = 12, .vocab = 5, .max_pos = 3};
    l7_describe(&out[1], &small, 1);
    gpt_config wide = {.seq = 4, .batch = 1, .hidden = 12, .heads = 3, .ffn = 40, .vocab = 50, .max_pos = 4};
    l7_describe(&out[2], &wide, 5);
    return 3;
}

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n + 1, size);
    PL_CHECK(p != NULL, "out of host memory");
    return p;
}

/* A checkpoint's saved pieces: every rank's, in rank order. */
static int saved_of(const zero_model *m, int stage, size_t cap, int world, zero_saved_piece *out, int max) {
    zero_piece *p = xcalloc(L7_MAX_PIECES, sizeof *p);
    int n = 0;
    for (int r = 0; r < world; r++) {
        int k = l7_ref_pieces(m, stage, cap, world, r, p, L7_MAX_PIECES);
        for (int i = 0; i < k && n < max; i++) out[n++] = (zero_saved_piece){r, p[i].tensor, p[i].begin, p[i].count};
    }
    free(p);
    return n;
}

static void add_plan(l7_layouts *q, const zero_model *m, int s1, int n1, int s2, int n2, int r2, size_t cap, int damage) {
    l7_plan_q *p = &q->pq[q->np++];
    p->saved = xcalloc(L7_MAX_PIECES, sizeof *p->saved);
    p->nsaved = saved_of(m, s1, cap, n1, p->saved, L7_MAX_PIECES);
    p->mine = xcalloc(L7_MAX_PIECES, sizeof *p->mine);
    p->nmine = l7_ref_pieces(m, s2, cap, n2, r2, p->mine, L7_MAX_PIECES);
    p->max = 4 * (p->nmine + p->nsaved) + 16;
    snprintf(p->what, sizeof p->what, "saved by ZeRO-%d at %d rank(s), loaded by ZeRO-%d rank %d of %d", s1, n1, s2, r2, n2);
    if (damage == 1) { /* the saved piece holding this rank's first element stops short of it */
        const zero_piece *f = &p->mine[0];
        for (int i = 0; i < p->nsaved; i++) {
            zero_saved_piece *s = &p->saved[i];
            if (s->tensor != f->tensor || s->begin > f->begin || f->begin >= s->begin + s->count) continue;
            if (s->begin < f->begin) s->count = f->begin - s->begin;
            else s->begin++, s->count--;
            break;
        }
        p->expect = ZERO_ERR_COVERAGE;
        snprintf(p->what + strlen(p->what), sizeof p->what - strlen(p->what), ", a saved piece one short");
    } else if (damage == 2) { /* a tensor missing from the checkpoint */
        int gone = p->mine[p->nmine / 2].tensor, w = 0;
        for (int i = 0; i < p->nsaved; i++)
            if (p->saved[i].tensor != gone) p->saved[w++] = p->saved[i];
        p->nsaved = w;
        p->expect = ZERO_ERR_COVERAGE;
        snprintf(p->what + strlen(p->what), sizeof p->what - strlen(p->what), ", one tensor not saved");
    } else if (damage == 3) { /* no room for the reads */
        p->max = p->nmine > 1 ? p->nmine - 1 : 0;
        p->expect = ZERO_ERR_CAPACITY;
        snprintf(p->what + strlen(p->what), sizeof p->what - strlen(p->what), ", room for %d reads", p->max);
    }
}

void l7_layouts_make(const lab7 *L, int which, l7_layouts *q) {
    memset(q, 0, sizeof *q);
    q->models = xcalloc(3, sizeof *q->models);
    q->nmodels = make_models(L, q->models);
    if (which == 0) {
        q->bq = xcalloc(4096, sizeof *q->bq);
        for (int mi = 0; mi < q->nmodels; mi++) {
            const zero_model *m = &q->models[mi];
            /* caps on unit boundaries of the backward order and one element around them */
            size_t caps[64];
            int nc = 0;
            caps[nc++] = 1, caps[nc++] = L->cap, caps[nc++] = m->numel, caps[nc++] = 10 * m->numel;
            size_t acc = 0;
            for (int u = m->nunits - 1; u >= 0 && nc + 3 < 64; u--) {
                acc += m->unit[u].numel;
                caps[nc++] = acc, caps[nc++] = acc + 1, caps[nc++] = acc > 1 ? acc - 1 : 1;
            }
            for (int c = 0; c < nc; c++)
                for (int w = 1; w <= 8; w++) q->bq[q->nb++] = (l7_bucket_q){mi, caps[c], w, ZERO_MAX_BUCKETS};
        }
        /* the errors: world 0, cap 0, no room */
        q->bq[q->nb++] = (l7_bucket_q){0, L->cap, 0, ZERO_MAX_BUCKETS};
        q->bq[q->nb++] = (l7_bucket_q){0, 0, 2, ZERO_MAX_BUCKETS};
        q->bq[q->nb++] = (l7_bucket_q){0, 1, 2, 2};
        q->ba = xcalloc((size_t)q->nb, sizeof *q->ba);
    } else if (which == 1) {
        static const size_t dims[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 20, 37, 60, 100, 101};
        q->cq = xcalloc(4096, sizeof *q->cq);
        for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
            for (int w = 1; w <= 9; w++)
                for (int r = 0; r < w; r++) q->cq[q->nc++] = (l7_chunk_q){dims[d], w, r};
        q->ca = xcalloc((size_t)q->nc, sizeof *q->ca);
    } else {
        static const int worlds[] = {1, 2, 3, 4, 5, 8};
        q->pq = xcalloc(2048, sizeof *q->pq);
        const zero_model *m = &q->models[0];
        size_t cap = which == 2 ? L->cap : 1500;
        for (int a = 0; a < 6; a++)
            for (int b = 0; b < 6; b++)
                for (int s1 = 1; s1 <= 3; s1 += 2)
                    for (int s2 = 1; s2 <= 3; s2 += 2) {
                        int n1 = worlds[a], n2 = worlds[b];
                        if (which == 2) {
                            for (int r = 0; r < n2; r++) add_plan(q, m, s1, n1, s2, n2, r, cap, 0);
                        } else if ((a + b + s1) % 5 == 0) {
                            for (int dmg = 1; dmg <= 3; dmg++) add_plan(q, m, s1, n1, s2, n2, n2 - 1, cap, dmg);
                        }
                    }
        q->pa = xcalloc((size_t)q->np, sizeof *q->pa);
        for (int i = 0; i < q->np; i++) q->pa[i].reads = xcalloc((size_t)q->pq[i].max, sizeof(zero_read));
    }
}

void l7_layouts_free(l7_layouts *q) {
    for (int i = 0; i < q->np; i++) free(q->pq[i].mine), free(q->pq[i].saved), free(q->pa[i].reads);
    free(q->models), free(q->bq), free(q->cq), free(q->pq), free(q->ba), free(q->ca), free(q->pa);
    memset(q, 0, sizeof *q);
}

/* A plan is right when every read stays inside its pieces, on the same tensor and the same
 * elements, and every element of every new piece is written exactly once. */
static bool plan_ok(const l7_plan_q *p, const l7_plan_a *a, char *why, size_t len) {
    if (a->rc < 0 || a->rc > p->max) return snprintf(why, len, "returned %d (%s)", a->rc, zero_error_string(a->rc)), false;
    for (int i = 0; i < p->nmine; i++) {
        unsigned char *hit = xcalloc(p->mine[i].count, 1);
        for (int k = 0; k < a->rc; k++) {
            const zero_read *r = &a->reads[k];
            if (r->piece != i) continue;
            if (r->saved < 0 || r->saved >= p->nsaved || r->count == 0 || r->dst_offset + r->count > p->mine[i].count ||
                r->src_offset + r->count > p->saved[r->saved].count) {
                snprintf(why, len, "read %d is outside its pieces", k);
                free(hit);
                return false;
            }
            const zero_saved_piece *s = &p->saved[r->saved];
            if (s->tensor != p->mine[i].tensor || s->begin + r->src_offset != p->mine[i].begin + r->dst_offset) {
                snprintf(why, len, "read %d takes element %zu of tensor %d for element %zu of tensor %d", k,
                         s->begin + r->src_offset, s->tensor, p->mine[i].begin + r->dst_offset, p->mine[i].tensor);
                free(hit);
                return false;
            }
            for (size_t e = 0; e < r->count; e++) hit[r->dst_offset + e]++;
        }
        for (size_t e = 0; e < p->mine[i].count; e++)
            if (hit[e] != 1) {
                snprintf(why, len, "element %zu of tensor %d is written %d times", p->mine[i].begin + e, p->mine[i].tensor, hit[e]);
                free(hit);
                return false;
            }
        free(hit);
    }
    for (int k = 0; k < a->rc; k++)
        if (a->reads[k].piece < 0 || a->reads[k].piece >= p->nmine)
            return snprintf(why, len, "read %d names piece %d of %d", k, a->reads[k].piece, p->nmine), false;
    return true;
}

void l7_layouts_check(drv_case *c, const l7_layouts *q, int which) {
    char why[300] = "";
    int bad = 0;
    for (int i = 0; i < q->nb; i++) {
        const l7_bucket_q *b = &q->bq[i];
        zero_bucket want[ZERO_MAX_BUCKETS];
        int n = l7_ref_buckets(&q->models[b->model], b->cap, b->world, want, b->max);
        bool ok = q->ba[i].rc == n;
        for (int k = 0; ok && k < n; k++) ok = !memcmp(&q->ba[i].b[k], &want[k], sizeof want[k]);
        if (ok) continue;
        if (!bad++) {
            if (q->ba[i].rc != n)
                snprintf(why, sizeof why, "zero_buckets(model %d of %zu elements, cap %zu, world %d, max %d) returned %d, expected %d",
                         b->model, q->models[b->model].numel, b->cap, b->world, b->max, q->ba[i].rc, n);
            else
                for (int k = 0; k < n; k++)
                    if (memcmp(&q->ba[i].b[k], &want[k], sizeof want[k])) {
                        const zero_bucket *g = &q->ba[i].b[k], *w = &want[k];
                        snprintf(why, sizeof why,
                                 "zero_buckets(model %d, cap %zu, world %d): bucket %d is {first_unit %d, nunits %d, numel %zu, "
                                 "padded %zu, shard %zu, offset %zu}, expected {%d, %d, %zu, %zu, %zu, %zu}",
                                 b->model, b->cap, b->world, k, g->first_unit, g->nunits, g->numel, g->padded, g->shard,
                                 g->offset, w->first_unit, w->nunits, w->numel, w->padded, w->shard, w->offset);
                        break;
                    }
        }
    }
    for (int i = 0; i < q->nc; i++) {
        const l7_chunk_q *cq = &q->cq[i];
        l7_chunk_a w;
        w.chunk = l7_ref_chunk(cq->dim0, cq->world, cq->rank, &w.first, &w.held);
        const l7_chunk_a *g = &q->ca[i];
        if (g->chunk == w.chunk && g->first == w.first && g->held == w.held) continue;
        if (!bad++)
            snprintf(why, sizeof why, "zero_chunk(dim0 %zu, world %d, rank %d) gave chunk %zu, first %zu, held %zu; expected %zu, %zu, %zu",
                     cq->dim0, cq->world, cq->rank, g->chunk, g->first, g->held, w.chunk, w.first, w.held);
    }
    for (int i = 0; i < q->np; i++) {
        const l7_plan_q *p = &q->pq[i];
        char w[200] = "";
        bool ok = p->expect ? q->pa[i].rc == p->expect : plan_ok(p, &q->pa[i], w, sizeof w);
        if (p->expect && !ok) snprintf(w, sizeof w, "returned %d (%s), expected %d (%s)", q->pa[i].rc,
                                       zero_error_string(q->pa[i].rc), p->expect, zero_error_string(p->expect));
        if (!ok && !bad++) snprintf(why, sizeof why, "zero_ckpt_plan, %s: %s", p->what, w);
    }
    int asked = which == 0 ? q->nb : which == 1 ? q->nc : q->np;
    drv_num(c, "questions", asked);
    drv_num(c, "wrong", drv_max(bad));
    if (bad) drv_fail(c, "%s (%d of %d answers wrong)", why, bad, asked);
}
