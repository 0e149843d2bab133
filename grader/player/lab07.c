/* lab07.c (player) - Lab 7's plays: the student's pure functions on the referee's questions,
 * a training run of the student's stage from the slots to the slots, and the checkpoint
 * cases: save, pause for the referee's interlude (it writes the files and stages the
 * directory), load, continue. What crosses is in the slots only (grader/cases/lab07.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab07_play.h"

/* ==================================================================================== */
/* The pure functions                                                                    */
/* ==================================================================================== */

static size_t count_of(drv_case *c, const char *name, size_t size) { return drv_slot_bytes(c, name) / size; }

void l7_play_layouts(drv_case *c) {
    size_t nb = count_of(c, "bq", sizeof(l7_bucket_q)), nm = count_of(c, "models", sizeof(l7_model));
    const l7_bucket_q *bq = nb ? drv_slot(c, "bq") : NULL;
    l7_bucket_a *ba = nb ? drv_slot(c, "ba") : NULL;
    zero_model *models = nm ? malloc(nm * sizeof *models) : NULL;
    for (size_t i = 0; i < nm; i++) l7_zero_model(&models[i], (const l7_model *)drv_slot(c, "models") + i);
    for (size_t i = 0; i < nb; i++) {
        const l7_bucket_q *b = &bq[i];
        zero_bucket out[ZERO_MAX_BUCKETS];
        memset(out, 0, sizeof out);
        int max = b->max < 0 ? 0 : b->max > ZERO_MAX_BUCKETS ? ZERO_MAX_BUCKETS : b->max;
        ba[i].rc = b->model >= 0 && (size_t)b->model < nm ? zero_buckets(&models[b->model], b->cap, b->world, out, max)
                                                          : ZERO_ERR_ARG;
        memcpy(ba[i].b, out, sizeof out);
    }
    free(models);
    size_t nc = count_of(c, "cq", sizeof(l7_chunk_q));
    for (size_t i = 0; i < nc; i++) {
        const l7_chunk_q *q = (const l7_chunk_q *)drv_slot(c, "cq") + i;
        l7_chunk_a *a = (l7_chunk_a *)drv_slot(c, "ca") + i;
        size_t first, held;
        a->chunk = zero_chunk(q->dim0, q->world, q->rank, &first, &held);
        a->first = first, a->held = held;
    }
    size_t np = count_of(c, "pq", sizeof(l7_plan_q));
    const l7_piece *mine = np ? drv_slot(c, "mine") : NULL;
    const l7_saved *saved = np ? drv_slot(c, "saved") : NULL;
    l7_read *reads = np ? drv_slot(c, "reads") : NULL;
    int *pa = np ? drv_slot(c, "pa") : NULL;
    for (size_t i = 0; i < np; i++) {
        const l7_plan_q *q = (const l7_plan_q *)drv_slot(c, "pq") + i;
        zero_piece *zm = calloc((size_t)q->nmine + 1, sizeof *zm);
        zero_read *out = calloc((size_t)q->max + 1, sizeof *out);
        PL_CHECK(zm && out, "out of host memory");
        /* the pieces' numbers: the plan never follows their buffers */
        for (int k = 0; k < q->nmine; k++)
            zm[k] = (zero_piece){.tensor = mine[q->mine_at + k].tensor, .begin = mine[q->mine_at + k].begin,
                                 .count = mine[q->mine_at + k].count};
        pa[i] = zero_ckpt_plan(zm, q->nmine, (const zero_saved_piece *)(saved + q->saved_at), q->nsaved, out, q->max);
        memcpy(reads + q->reads_at, out, (size_t)q->max * sizeof *out);
        free(zm), free(out);
    }
}

/* ==================================================================================== */
/* A training run                                                                        */
/* ==================================================================================== */

void l7_play_run(drv_case *c) {
    if (!drv_slot_bytes(c, "cfg")) return; /* the referee has this variant's run already */
    const l7_run_in *in = drv_slot(c, "cfg");
    l7_record *rec = drv_slot(c, "rec");
    l7_ops *ops = drv_slot_bytes(c, "ops") >= sizeof(l7_ops) ? drv_slot(c, "ops") : NULL;
    l7_session *s = l7_session_start(in, drv_slot(c, "init"), pl_comm_world(), rec);
    if (drv_slot_bytes(c, "master0")) /* the master weights zero_init made, before any step */
        rec->nmaster0 = l7_session_masters(s, drv_slot(c, "master0"), drv_slot_bytes(c, "master0") / sizeof(float));
    l7_session_steps(s, drv_slot(c, "tok"), drv_slot(c, "tgt"), in->steps, rec, ops, true);
    l7_session_finish(s, rec, drv_slot(c, "vals"), drv_slot(c, "full"));
}

/* ==================================================================================== */
/* Checkpoints                                                                           */
/* ==================================================================================== */

/* This rank's part of the save: `steps` steps, then the kit saves into the slots. */
static void save(drv_case *c, pl_comm *comm) {
    const l7_run_in *in = drv_slot(c, "s.cfg");
    l7_ck_save *rec = drv_slot(c, "ck.save");
    l7_record *scratch = calloc(1, sizeof *scratch);
    PL_CHECK(scratch != NULL, "out of host memory");
    l7_session *s = l7_session_start(in, drv_slot(c, "init"), comm, scratch);
    l7_session_steps(s, drv_slot(c, "s.tok"), drv_slot(c, "s.tgt"), in->steps, scratch, NULL, false);
    if (scratch->why[0]) snprintf(rec->why, sizeof rec->why, "before the save: %s", scratch->why);
    else l7_kit_save(l7_session_state(s), rec, drv_slot(c, "ck.file"), drv_slot_bytes(c, "ck.file"));
    l7_session_drop(s);
    free(scratch);
}

/* ckpt.NtoM's loaders: load the staged checkpoint, the rest of the steps, the final state. */
static void load_and_continue(drv_case *c, pl_comm *comm) {
    const l7_run_in *in = drv_slot(c, "l.cfg");
    const l7_ck_dir *dir = drv_slot(c, "ck0.dir");
    l7_ck_try *t = drv_slot(c, "ck.try");
    if (!dir->staged) return; /* a save failed: the referee explains */
    l7_record *rec = drv_slot(c, "rec");
    l7_session *s = l7_session_start(in, drv_slot(c, "init"), comm, rec);
    l7_kit_load(l7_session_state(s), dir, drv_slot(c, "ck0.data"), drv_slot_bytes(c, "ck0.data"), t);
    if (t->rc == 0) l7_session_steps(s, drv_slot(c, "l.tok"), drv_slot(c, "l.tgt"), in->steps, rec, NULL, false);
    l7_session_finish(s, rec, drv_slot(c, "vals"), drv_slot(c, "full"));
}

/* ckpt.errors' loaders: each damaged checkpoint into a fresh state, with every piece's
 * values before and after the load for the referee to compare. */
static void load_damaged(drv_case *c, pl_comm *comm) {
    const l7_run_in *in = drv_slot(c, "l.cfg");
    size_t psi = drv_slot_bytes(c, "init") / sizeof(float);
    float *vals = drv_slot(c, "ck.vals");
    for (int k = 0; k < CK_NKINDS; k++) {
        char name[32];
        snprintf(name, sizeof name, "ck%d.dir", k);
        const l7_ck_dir *dir = drv_slot(c, name);
        snprintf(name, sizeof name, "ck%d.data", k);
        l7_ck_try *t = (l7_ck_try *)drv_slot(c, "ck.try") + k;
        if (!dir->staged) continue;
        l7_record *scratch = calloc(1, sizeof *scratch);
        PL_CHECK(scratch != NULL, "out of host memory");
        l7_session *s = l7_session_start(in, drv_slot(c, "init"), comm, scratch);
        zero_state *z = l7_session_state(s);
        float *before = vals + (size_t)k * 6 * psi, *after = before + 3 * psi;
        t->step_before = z->step;
        t->nbefore = l7_kit_values(z, before, psi);
        l7_kit_load(z, dir, drv_slot(c, name), drv_slot_bytes(c, name), t);
        t->step_after = z->step;
        t->nafter = l7_kit_values(z, after, psi);
        l7_session_drop(s);
        free(scratch);
    }
}

void l7_play_ckpt(drv_case *c) {
    bool saver = drv_slot_bytes(c, "s.cfg") > 0, loader = drv_slot_bytes(c, "l.cfg") > 0;
    pl_comm *cn = pl_comm_split(pl_comm_world(), saver ? 0 : -1, pl_rank());
    pl_comm *cm = pl_comm_split(pl_comm_world(), loader ? 0 : -1, pl_rank());
    if (saver) save(c, cn);
    drv_interlude(c, 0); /* the referee writes the files, and stages them for the loads */
    if (loader && drv_slot_bytes(c, "ck1.dir")) load_damaged(c, cm);
    else if (loader) load_and_continue(c, cm);
    if (cn) pl_comm_free(cn);
    if (cm) pl_comm_free(cm);
}
