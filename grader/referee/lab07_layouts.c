/* lab07_layouts.c (referee) - the questions of Lab 7's pure-function cases and their
 * judgement (host arrays, no student code): zero_buckets over models and caps around unit
 * boundaries, zero_chunk over dim0 and world sizes that do not divide, zero_ckpt_plan from
 * every saved layout to every new one (stages 1 and 3, even and uneven world sizes), and the
 * plans that must fail. Rank 0 asks them (the same on every rank); the questions go to its
 * player's IN slots, the answers come back in OUT slots, and what each answer should be
 * never leaves the referee. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab07_ref.h"

/* A plan question as the referee keeps it: the pieces, and what the answer must be. */
typedef struct {
    l7_piece *mine;
    int nmine;
    l7_saved *saved;
    int nsaved, max;
    int expect;                        /* 0: a valid plan; else the error code expected  */
    char what[96];
} plan_q;

typedef struct {
    int nmodels, nb, nc, np;
    l7_model *models;
    l7_bucket_q *bq;
    l7_chunk_q *cq;
    plan_q *pq;
} layouts;

/* The models the bucket questions use: the graded one and two others. */
static int make_models(const l7_lab *L, l7_model *out) {
    gpt_config g = l7_gpt(L->f, 1);
    l7_describe(&out[0], &g, L->f->layers);
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
static int saved_of(const l7_model *m, int stage, size_t cap, int world, l7_saved *out, int max) {
    l7_piece *p = xcalloc(L7_MAX_PIECES, sizeof *p);
    int n = 0;
    for (int r = 0; r < world; r++) {
        int k = l7_ref_pieces(m, stage, cap, world, r, p, L7_MAX_PIECES);
        for (int i = 0; i < k && n < max; i++) out[n++] = (l7_saved){.rank = r, .tensor = p[i].tensor, .begin = p[i].begin, .count = p[i].count};
    }
    free(p);
    return n;
}

static void add_plan(layouts *q, const l7_model *m, int s1, int n1, int s2, int n2, int r2, size_t cap, int damage) {
    plan_q *p = &q->pq[q->np++];
    p->saved = xcalloc(L7_MAX_PIECES, sizeof *p->saved);
    p->nsaved = saved_of(m, s1, cap, n1, p->saved, L7_MAX_PIECES);
    p->mine = xcalloc(L7_MAX_PIECES, sizeof *p->mine);
    p->nmine = l7_ref_pieces(m, s2, cap, n2, r2, p->mine, L7_MAX_PIECES);
    PL_CHECK(p->nsaved > 0 && p->nmine > 0, "a plan question without pieces");
    p->max = 4 * (p->nmine + p->nsaved) + 16;
    snprintf(p->what, sizeof p->what, "saved by ZeRO-%d at %d rank(s), loaded by ZeRO-%d rank %d of %d", s1, n1, s2, r2, n2);
    if (damage == 1) { /* the saved piece holding this rank's first element stops short of it */
        const l7_piece *f = &p->mine[0];
        for (int i = 0; i < p->nsaved; i++) {
            l7_saved *s = &p->saved[i];
            if (s->tensor != f->tensor || s->begin > f->begin || f->begin >= s->begin + s->count) continue;
            if (s->begin < f->begin) s->count = f->begin - s->begin;
            else s->begin++, s->count--;
            break;
        }
        p->expect = L7_ERR_COVERAGE;
        snprintf(p->what + strlen(p->what), sizeof p->what - strlen(p->what), ", a saved piece one short");
    } else if (damage == 2) { /* a tensor missing from the checkpoint */
        int gone = p->mine[p->nmine / 2].tensor, w = 0;
        for (int i = 0; i < p->nsaved; i++)
            if (p->saved[i].tensor != gone) p->saved[w++] = p->saved[i];
        p->nsaved = w;
        p->expect = L7_ERR_COVERAGE;
        snprintf(p->what + strlen(p->what), sizeof p->what - strlen(p->what), ", one tensor not saved");
    } else if (damage == 3) { /* no room for the reads */
        p->max = p->nmine > 1 ? p->nmine - 1 : 0;
        p->expect = L7_ERR_CAPACITY;
        snprintf(p->what + strlen(p->what), sizeof p->what - strlen(p->what), ", room for %d reads", p->max);
    }
    /* only what is used (the arrays were sized for any layout) */
    p->saved = realloc(p->saved, ((size_t)p->nsaved + 1) * sizeof *p->saved);
    p->mine = realloc(p->mine, ((size_t)p->nmine + 1) * sizeof *p->mine);
    PL_CHECK(p->saved && p->mine, "out of host memory");
}

/* The questions in the referee's memory (as the old single-process driver asked them). */
static void ask(const l7_lab *L, int which, layouts *q) {
    memset(q, 0, sizeof *q);
    q->models = xcalloc(3, sizeof *q->models);
    q->nmodels = make_models(L, q->models);
    if (which == 0) {
        q->bq = xcalloc(4096, sizeof *q->bq);
        for (int mi = 0; mi < q->nmodels; mi++) {
            const l7_model *m = &q->models[mi];
            /* caps on unit boundaries of the backward order and one element around them */
            size_t caps[64];
            int nc = 0;
            caps[nc++] = 1, caps[nc++] = (size_t)L->f->cap, caps[nc++] = m->numel, caps[nc++] = 10 * m->numel;
            size_t acc = 0;
            for (int u = m->nunits - 1; u >= 0 && nc + 3 < 64; u--) {
                acc += m->unit[u].numel;
                caps[nc++] = acc, caps[nc++] = acc + 1, caps[nc++] = acc > 1 ? acc - 1 : 1;
            }
            for (int c = 0; c < nc; c++)
                for (int w = 1; w <= 8; w++)
                    q->bq[q->nb++] = (l7_bucket_q){.model = mi, .cap = caps[c], .world = w, .max = L7_MAX_BUCKETS};
            /* out[] exactly as long as the buckets (they fit), and one shorter (they do not) */
            for (int c = 0; c < nc; c += 3) {
                l7_bucket tmp[L7_MAX_BUCKETS];
                int n = l7_ref_buckets(m, caps[c], 2, tmp, L7_MAX_BUCKETS);
                if (n < 1) continue;
                q->bq[q->nb++] = (l7_bucket_q){.model = mi, .cap = caps[c], .world = 2, .max = n};
                q->bq[q->nb++] = (l7_bucket_q){.model = mi, .cap = caps[c], .world = 2, .max = n - 1};
            }
        }
        /* the errors: world 0, cap 0, no room */
        q->bq[q->nb++] = (l7_bucket_q){.model = 0, .cap = (size_t)L->f->cap, .world = 0, .max = L7_MAX_BUCKETS};
        q->bq[q->nb++] = (l7_bucket_q){.model = 0, .cap = 0, .world = 2, .max = L7_MAX_BUCKETS};
        q->bq[q->nb++] = (l7_bucket_q){.model = 0, .cap = 1, .world = 2, .max = 2};
    } else if (which == 1) {
        static const size_t dims[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 20, 37, 60, 100, 101};
        q->cq = xcalloc(4096, sizeof *q->cq);
        for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
            for (int w = 1; w <= 9; w++)
                for (int r = 0; r < w; r++) q->cq[q->nc++] = (l7_chunk_q){.dim0 = dims[d], .world = w, .rank = r};
        /* the guards: no world (chunk 0, nothing held, no division by it) */
        q->cq[q->nc++] = (l7_chunk_q){.dim0 = 5, .world = 0, .rank = 0};
        q->cq[q->nc++] = (l7_chunk_q){.dim0 = 7, .world = -2, .rank = 0};
    } else {
        static const int worlds[] = {1, 2, 3, 4, 5, 8};
        q->pq = xcalloc(2048, sizeof *q->pq);
        const l7_model *m = &q->models[0];
        size_t cap = which == 2 ? (size_t)L->f->cap : 1500;
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
    }
}

/* ... and into the player's slots, with room for its answers. */
static void pose(drv_case *c, const layouts *q) {
    if (q->nb) {
        memcpy(drv_slot_new(c, "models", (size_t)q->nmodels * sizeof(l7_model), DRV_IN | DRV_CONST | DRV_HOST), q->models,
               (size_t)q->nmodels * sizeof(l7_model));
        memcpy(drv_slot_new(c, "bq", (size_t)q->nb * sizeof(l7_bucket_q), DRV_IN | DRV_CONST | DRV_HOST), q->bq,
               (size_t)q->nb * sizeof(l7_bucket_q));
        drv_slot_new(c, "ba", (size_t)q->nb * sizeof(l7_bucket_a), DRV_OUT | DRV_HOST);
    }
    if (q->nc) {
        memcpy(drv_slot_new(c, "cq", (size_t)q->nc * sizeof(l7_chunk_q), DRV_IN | DRV_CONST | DRV_HOST), q->cq,
               (size_t)q->nc * sizeof(l7_chunk_q));
        drv_slot_new(c, "ca", (size_t)q->nc * sizeof(l7_chunk_a), DRV_OUT | DRV_HOST);
    }
    if (!q->np) return;
    size_t nmine = 0, nsaved = 0, nreads = 0;
    for (int i = 0; i < q->np; i++) nmine += (size_t)q->pq[i].nmine, nsaved += (size_t)q->pq[i].nsaved, nreads += (size_t)q->pq[i].max;
    l7_plan_q *pq = drv_slot_new(c, "pq", (size_t)q->np * sizeof *pq, DRV_IN | DRV_CONST | DRV_HOST);
    l7_piece *mine = drv_slot_new(c, "mine", nmine * sizeof *mine, DRV_IN | DRV_CONST | DRV_HOST);
    l7_saved *saved = drv_slot_new(c, "saved", nsaved * sizeof *saved, DRV_IN | DRV_CONST | DRV_HOST);
    drv_slot_new(c, "pa", (size_t)q->np * sizeof(int), DRV_OUT | DRV_HOST);
    drv_slot_new(c, "reads", nreads * sizeof(l7_read), DRV_OUT | DRV_HOST);
    size_t am = 0, as = 0, ar = 0;
    for (int i = 0; i < q->np; i++) {
        const plan_q *p = &q->pq[i];
        pq[i] = (l7_plan_q){.nmine = p->nmine, .nsaved = p->nsaved, .max = p->max, .mine_at = am, .saved_at = as,
                            .reads_at = ar};
        memcpy(mine + am, p->mine, (size_t)p->nmine * sizeof *mine);
        memcpy(saved + as, p->saved, (size_t)p->nsaved * sizeof *saved);
        am += (size_t)p->nmine, as += (size_t)p->nsaved, ar += (size_t)p->max;
    }
}

void *l7_layouts_make(drv_case *c, const l7_lab *L, int which) {
    layouts *q = xcalloc(1, sizeof *q);
    ask(L, which, q);
    pose(c, q);
    return q;
}

void l7_layouts_free(void *v) {
    layouts *q = v;
    for (int i = 0; i < q->np; i++) free(q->pq[i].mine), free(q->pq[i].saved);
    free(q->models), free(q->bq), free(q->cq), free(q->pq);
    free(q);
}

/* The reads of one answer stay inside their pieces (no sum that wraps around). */
static bool inside(size_t offset, size_t count, size_t size) { return count <= size && offset <= size - count; }

/* A plan is right when every read stays inside its pieces, on the same tensor and the same
 * elements, and every element of every new piece is written exactly once. */
static bool plan_ok(const plan_q *p, int rc, const l7_read *reads, char *why, size_t len) {
    if (rc < 0 || rc > p->max) return snprintf(why, len, "returned %d (%s)", rc, l7_error_string(rc)), false;
    for (int k = 0; k < rc; k++)
        if (reads[k].piece < 0 || reads[k].piece >= p->nmine)
            return snprintf(why, len, "read %d names piece %d of %d", k, reads[k].piece, p->nmine), false;
    for (int i = 0; i < p->nmine; i++) {
        unsigned char *hit = xcalloc(p->mine[i].count, 1);
        for (int k = 0; k < rc; k++) {
            const l7_read *r = &reads[k];
            if (r->piece != i) continue;
            if (r->saved < 0 || r->saved >= p->nsaved || r->count == 0 || !inside(r->dst_offset, r->count, p->mine[i].count) ||
                !inside(r->src_offset, r->count, p->saved[r->saved].count)) {
                snprintf(why, len, "read %d is outside its pieces", k);
                free(hit);
                return false;
            }
            const l7_saved *s = &p->saved[r->saved];
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
    return true;
}

void l7_layouts_judge(drv_case *c, void *v, int which) {
    const layouts none = {0}, *q = v ? v : &none;
    const l7_bucket_a *ba = q->nb ? drv_slot_host(c, "ba") : NULL;
    const l7_chunk_a *ca = q->nc ? drv_slot_host(c, "ca") : NULL;
    const int *pa = q->np ? drv_slot_host(c, "pa") : NULL;
    const l7_read *reads = q->np ? drv_slot_host(c, "reads") : NULL;
    char why[300] = "";
    int bad = 0;
    for (int i = 0; i < q->nb; i++) {
        const l7_bucket_q *b = &q->bq[i];
        l7_bucket want[L7_MAX_BUCKETS];
        int n = l7_ref_buckets(&q->models[b->model], b->cap, b->world, want, b->max);
        bool ok = ba[i].rc == n;
        for (int k = 0; ok && k < n; k++) ok = !memcmp(&ba[i].b[k], &want[k], sizeof want[k]);
        if (ok) continue;
        if (!bad++) {
            if (ba[i].rc != n)
                snprintf(why, sizeof why, "zero_buckets(model %d of %zu elements, cap %zu, world %d, max %d) returned %d, expected %d",
                         b->model, q->models[b->model].numel, b->cap, b->world, b->max, ba[i].rc, n);
            else
                for (int k = 0; k < n; k++)
                    if (memcmp(&ba[i].b[k], &want[k], sizeof want[k])) {
                        const l7_bucket *g = &ba[i].b[k], *w = &want[k];
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
        const l7_chunk_a *g = &ca[i];
        if (g->chunk == w.chunk && g->first == w.first && g->held == w.held) continue;
        if (!bad++)
            snprintf(why, sizeof why, "zero_chunk(dim0 %zu, world %d, rank %d) gave chunk %zu, first %zu, held %zu; expected %zu, %zu, %zu",
                     cq->dim0, cq->world, cq->rank, g->chunk, g->first, g->held, w.chunk, w.first, w.held);
    }
    for (int i = 0; i < q->np; i++) {
        const plan_q *p = &q->pq[i];
        char w[200] = "";
        size_t at = 0;
        for (int k = 0; k < i; k++) at += (size_t)q->pq[k].max;
        bool ok = p->expect ? pa[i] == p->expect : plan_ok(p, pa[i], reads + at, w, sizeof w);
        if (p->expect && !ok) snprintf(w, sizeof w, "returned %d (%s), expected %d (%s)", pa[i],
                                       l7_error_string(pa[i]), p->expect, l7_error_string(p->expect));
        if (!ok && !bad++) snprintf(why, sizeof why, "zero_ckpt_plan, %s: %s", p->what, w);
    }
    int asked = which == 0 ? q->nb : which == 1 ? q->nc : q->np;
    drv_num(c, "questions", asked);
    drv_num(c, "wrong", drv_max(bad));
    if (bad) drv_fail(c, "%s (%d of %d answers wrong)", why, bad, asked);
}
