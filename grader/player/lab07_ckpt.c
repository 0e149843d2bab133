/* lab07_ckpt.c (player) - sharded checkpoints, the kit's I/O without files (a player opens
 * none: the play filter). A save leaves this rank's file - "PLZ7", rank, piece count, then
 * per piece its master, m and v - and the record of every piece (which elements of which
 * tensor, at which byte) in the slots; the referee writes the files and rank 0's metadata
 * (grader/referee/lab07_ckpt.c has the format). A load reads the directory the referee
 * staged: it validates every file first (the metadata against the model, every piece inside
 * its tensor, every rank file there with the size the metadata gives it), asks the
 * student's zero_ckpt_plan which slices of which saved pieces make up each piece of this
 * rank, checks that plan, and only then reads - only those slices, counted - and writes. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab07_play.h"

static void say(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
}

/* ==================================================================================== */
/* Save                                                                                  */
/* ==================================================================================== */

void l7_kit_save(zero_state *z, l7_ck_save *rec, unsigned char *file, size_t cap) {
    const zero_model *m = z->model;
    zero_piece *pc = malloc(L7_MAX_PIECES * sizeof *pc);
    PL_CHECK(pc != NULL, "out of host memory");
    rec->saved = 0;
    int n = zero_pieces(z, pc, L7_MAX_PIECES);
    if (n < 0) {
        say(rec->why, sizeof rec->why, "zero_pieces returned %d (%s)", n, zero_error_string(n));
        free(pc);
        return;
    }
    int32_t head[3] = {0x375a4c50, z->rank, n}; /* "PLZ7" */
    memcpy(file, head, sizeof head);
    size_t at = L7_CK_HEADER;
    for (int j = 0; j < n; j++) {
        const zero_piece *p = &pc[j];
        if (p->tensor < 0 || p->tensor >= m->ntensors || p->count > m->tensor[p->tensor].numel ||
            p->begin > m->tensor[p->tensor].numel - p->count || !p->master || !p->m || !p->v) {
            say(rec->why, sizeof rec->why, "zero_pieces: piece %d is not a slice of a tensor with three buffers", j);
            free(pc);
            return;
        }
        if (p->count > (cap - at) / 12) {
            say(rec->why, sizeof rec->why, "zero_pieces: the pieces hold more elements than the model has (%zu)", m->numel);
            free(pc);
            return;
        }
        rec->piece[j] = (l7_ck_piece){p->tensor, (int64_t)p->begin, (int64_t)p->count, (int64_t)at};
        const float *src[3] = {p->master, p->m, p->v};
        for (int a = 0; a < 3; a++) pl_download(file + at + 4 * (size_t)a * p->count, src[a], p->count * 4);
        at += 12 * p->count;
    }
    rec->npieces = n, rec->step = z->step, rec->file_bytes = (int64_t)at, rec->saved = 1;
    free(pc);
}

/* ==================================================================================== */
/* The staged directory                                                                  */
/* ==================================================================================== */

typedef struct {
    const l7_ck_dir *dir;
    const unsigned char *data;
    size_t cap;
    l7_ck_try *t;
} staged;

/* A file of the directory (NULL: not there), its bytes inside what was staged. */
static const l7_ck_file *find(const staged *s, const char *name) {
    int n = s->dir->nfiles < 0 ? 0 : s->dir->nfiles > L7_MAX_FILES ? L7_MAX_FILES : s->dir->nfiles;
    for (int i = 0; i < n; i++) {
        const l7_ck_file *f = &s->dir->file[i];
        if (strncmp(f->name, name, sizeof f->name) == 0 && f->offset >= 0 && f->size >= 0 &&
            (uint64_t)f->offset <= s->cap && (uint64_t)f->size <= s->cap - (uint64_t)f->offset)
            return f;
    }
    return NULL;
}

/* n bytes at `off` of file f, counted as the kit's reads. */
static bool read_at(const staged *s, const l7_ck_file *f, size_t off, size_t n, void *out, bool meta) {
    if (off > (size_t)f->size || n > (size_t)f->size - off) return false;
    memcpy(out, s->data + f->offset + off, n);
    if (meta) s->t->meta_read += (int64_t)n;
    else s->t->rank_read += (int64_t)n;
    return true;
}

static void rank_name(char *out, size_t len, int r) { snprintf(out, len, "rank-%05d.bin", r); }

/* Every rank's verdict: 0 if all are 0; otherwise -1 everywhere, with the reason of the
 * lowest failing rank (ranks see different parts of a checkpoint). Host values only. */
static int agree(int rc, pl_comm *comm, char *why, size_t len) {
    double who = rc ? pl_comm_rank(comm) : 1e9;
    pl_host_allreduce(&who, 1, PL_HOST_MIN, comm);
    if (who >= 1e9) return 0;
    char msg[400];
    snprintf(msg, sizeof msg, "%s", rc ? why : "");
    pl_host_bcast(msg, sizeof msg, (int)who, comm);
    if (!rc) snprintf(why, len, "rank %d: %.280s", (int)who, msg);
    return -1;
}

/* ==================================================================================== */
/* Load                                                                                  */
/* ==================================================================================== */

typedef struct {
    int world, step, npieces, ntensors;
    zero_saved_piece *saved;
    int64_t *at;
} meta;

/* Parse and check DIR/.metadata against the model: 0, or -1 with why naming the file. */
static int read_meta(const staged *s, const zero_model *m, meta *md, char *why, size_t len) {
    char path[300], name[64];
    snprintf(path, sizeof path, "%s/.metadata", s->dir->dir);
    memset(md, 0, sizeof *md);
    const l7_ck_file *f = find(s, ".metadata");
    if (!f) return say(why, len, "%s: No such file or directory", path), -1;
    char *text = malloc((size_t)f->size + 1);
    PL_CHECK(text != NULL, "out of host memory");
    read_at(s, f, 0, (size_t)f->size, text, true);
    text[f->size] = '\0';
    const char *cur = text;
    int version = 0, rc = -1, used = 0;
    if (sscanf(cur, "paralab-zero-checkpoint %d world %d step %d pieces %d tensors %d%n", &version, &md->world, &md->step,
               &md->npieces, &md->ntensors, &used) != 5 || version != 1 || md->world < 1 || md->step < 0 ||
        md->npieces < 0 || md->npieces > 1 << 24) {
        say(why, len, "%s: not a checkpoint's metadata (bad header)", path);
        goto done;
    }
    cur += used;
    if (md->ntensors != m->ntensors) {
        say(why, len, "%s: a checkpoint of another model (%d tensors, this model has %d)", path, md->ntensors, m->ntensors);
        goto done;
    }
    for (int t = 0; t < md->ntensors; t++) {
        int i;
        size_t d0, row;
        if (sscanf(cur, " tensor %d %63s %zu %zu%n", &i, name, &d0, &row, &used) != 4 || i != t) {
            say(why, len, "%s: tensor record %d is malformed", path, t);
            goto done;
        }
        cur += used;
        const zero_tensor *tt = &m->tensor[t];
        if (strcmp(name, tt->name) || d0 != tt->dim0 || row != tt->row) {
            say(why, len, "%s: a checkpoint of another model (tensor %d is %s [%zu, %zu] there, %s [%zu, %zu] here)", path,
                t, name, d0, row, tt->name, tt->dim0, tt->row);
            goto done;
        }
    }
    md->saved = calloc((size_t)md->npieces + 1, sizeof *md->saved);
    md->at = calloc((size_t)md->npieces + 1, sizeof *md->at);
    PL_CHECK(md->saved && md->at, "out of host memory");
    for (int i = 0; i < md->npieces; i++) {
        long long b, c, at;
        zero_saved_piece *sp = &md->saved[i];
        if (sscanf(cur, " piece %d %d %lld %lld %lld%n", &sp->rank, &sp->tensor, &b, &c, &at, &used) != 5) {
            say(why, len, "%s: piece record %d is malformed", path, i);
            goto done;
        }
        cur += used;
        if (sp->rank < 0 || sp->rank >= md->world || sp->tensor < 0 || sp->tensor >= m->ntensors || b < 0 || c <= 0 ||
            (size_t)c > m->tensor[sp->tensor].numel || (size_t)b > m->tensor[sp->tensor].numel - (size_t)c ||
            at < L7_CK_HEADER) {
            say(why, len, "%s: piece %d (rank %d, tensor %d, [%lld, %lld)) does not match the model", path, i, sp->rank,
                sp->tensor, b, b + c);
            goto done;
        }
        sp->begin = (size_t)b, sp->count = (size_t)c, md->at[i] = at;
    }
    rc = 0;
done:
    free(text);
    return rc;
}

/* Every rank file there, with the size the metadata gives it. */
static int check_files(const staged *s, const meta *md, char *why, size_t len) {
    for (int r = 0; r < md->world; r++) {
        char name[32], path[300];
        rank_name(name, sizeof name, r);
        snprintf(path, sizeof path, "%s/%s", s->dir->dir, name);
        long long want = L7_CK_HEADER;
        for (int i = 0; i < md->npieces; i++)
            if (md->saved[i].rank == r) {
                if (md->at[i] != want)
                    return say(why, len, "%s: piece %d at byte %lld, expected %lld", path, i, (long long)md->at[i], want), -1;
                want += 12 * (long long)md->saved[i].count;
            }
        const l7_ck_file *f = find(s, name);
        if (!f) return say(why, len, "%s: missing (No such file or directory)", path), -1;
        if ((long long)f->size != want)
            return say(why, len, "%s: %lld bytes, the metadata says %lld (truncated?)", path, (long long)f->size, want), -1;
    }
    return 0;
}

/* The student's plan, checked: every read within its pieces, on the same tensor and the
 * same elements, and every element of every piece of this rank written exactly once. */
static int check_plan(const zero_piece *mine, int nmine, const meta *md, const zero_read *rd, int nr, char *why,
                      size_t len) {
    size_t *written = calloc((size_t)nmine + 1, sizeof *written);
    PL_CHECK(written != NULL, "out of host memory");
    int rc = 0;
    for (int k = 0; k < nr && !rc; k++) {
        const zero_read *r = &rd[k];
        if (r->piece < 0 || r->piece >= nmine || r->saved < 0 || r->saved >= md->npieces) {
            rc = -1, say(why, len, "zero_ckpt_plan: read %d names piece %d / saved piece %d", k, r->piece, r->saved);
            break;
        }
        const zero_piece *p = &mine[r->piece];
        const zero_saved_piece *s = &md->saved[r->saved];
        if (r->count == 0 || r->count > p->count || r->dst_offset > p->count - r->count || r->count > s->count ||
            r->src_offset > s->count - r->count || p->tensor != s->tensor ||
            p->begin + r->dst_offset != s->begin + r->src_offset)
            rc = -1, say(why, len, "zero_ckpt_plan: read %d puts elements [%zu, %zu) of tensor %d into elements [%zu, %zu) of tensor %d",
                         k, s->begin + r->src_offset, s->begin + r->src_offset + r->count, s->tensor,
                         p->begin + r->dst_offset, p->begin + r->dst_offset + r->count, p->tensor);
        else written[r->piece] += r->count;
    }
    for (int i = 0; i < nmine && !rc; i++)
        if (written[i] != mine[i].count)
            rc = -1, say(why, len, "zero_ckpt_plan writes %zu elements into piece %d, which holds %zu", written[i], i, mine[i].count);
    /* equal totals and no read leaving its piece: overlaps are what is left to rule out */
    for (int i = 0; i < nmine && !rc; i++)
        for (int a = 0; a < nr && !rc; a++)
            for (int b = a + 1; b < nr && !rc; b++)
                if (rd[a].piece == i && rd[b].piece == i && rd[a].dst_offset < rd[b].dst_offset + rd[b].count &&
                    rd[b].dst_offset < rd[a].dst_offset + rd[a].count)
                    rc = -1, say(why, len, "zero_ckpt_plan: reads %d and %d both write element %zu of piece %d", a, b,
                                 rd[a].dst_offset > rd[b].dst_offset ? rd[a].dst_offset : rd[b].dst_offset, i);
    free(written);
    return rc;
}

void l7_kit_load(zero_state *z, const l7_ck_dir *dir, const unsigned char *data, size_t cap, l7_ck_try *t) {
    staged s = {dir, data, cap, t};
    char *why = t->why;
    size_t len = sizeof t->why;
    meta md;
    zero_piece *mine = malloc(L7_MAX_PIECES * sizeof *mine);
    zero_read *rd = NULL;
    PL_CHECK(mine != NULL, "out of host memory");
    t->tried = 1;
    int rc = read_meta(&s, z->model, &md, why, len), nmine = 0, nr = 0;
    if (!rc) rc = check_files(&s, &md, why, len);
    if (!rc) {
        nmine = zero_pieces(z, mine, L7_MAX_PIECES);
        if (nmine < 0) rc = -1, say(why, len, "zero_pieces returned %d (%s)", nmine, zero_error_string(nmine));
    }
    if (!rc) {
        int room = 4 * (nmine + md.npieces) + 16;
        rd = malloc((size_t)room * sizeof *rd);
        PL_CHECK(rd != NULL, "out of host memory");
        nr = zero_ckpt_plan(mine, nmine, md.saved, md.npieces, rd, room);
        if (nr < 0)
            rc = -1, say(why, len, "%s/.metadata: zero_ckpt_plan returned %d (%s)", dir->dir, nr, zero_error_string(nr));
        else if (nr > room) rc = -1, say(why, len, "zero_ckpt_plan returned %d reads, room for %d", nr, room);
        else rc = check_plan(mine, nmine, &md, rd, nr, why, len);
    }
    if (agree(rc, z->comm, why, len) == 0) {
        /* every rank agrees that everything is in order: now read and write */
        for (int k = 0; k < nr; k++) {
            const zero_read *r = &rd[k];
            const zero_saved_piece *sp = &md.saved[r->saved];
            const zero_piece *p = &mine[r->piece];
            char name[32];
            rank_name(name, sizeof name, sp->rank);
            const l7_ck_file *f = find(&s, name);
            float *h = malloc(r->count * 4 + 4);
            PL_CHECK(f != NULL && h != NULL, "a checkpoint file vanished during the load");
            float *dst[3] = {p->master, p->m, p->v};
            for (int a = 0; a < 3; a++) {
                size_t off = (size_t)md.at[r->saved] + 4 * ((size_t)a * sp->count + r->src_offset);
                PL_CHECK(read_at(&s, f, off, r->count * 4, h, false), "checkpoint read failed");
                pl_upload(dst[a] + r->dst_offset, h, r->count * 4);
            }
            free(h);
        }
        z->step = md.step;
        zero_ckpt_loaded(z);
        pl_device_sync();
        t->rc = 0;
    } else {
        t->rc = -1;
    }
    free(md.saved), free(md.at), free(mine), free(rd);
}

int64_t l7_kit_values(zero_state *z, float *out, size_t cap) {
    zero_piece *pc = malloc(L7_MAX_PIECES * sizeof *pc);
    PL_CHECK(pc != NULL, "out of host memory");
    int n = zero_pieces(z, pc, L7_MAX_PIECES);
    int64_t at = n < 0 ? -1 : 0;
    for (int j = 0; j < n; j++) {
        if (!pc[j].master || !pc[j].m || !pc[j].v || pc[j].count > cap - (size_t)at) {
            at = -1;
            break;
        }
        const float *src[3] = {pc[j].master, pc[j].m, pc[j].v};
        for (int a = 0; a < 3; a++) pl_download(out + (size_t)a * cap + (size_t)at, src[a], pc[j].count * 4);
        at += (int64_t)pc[j].count;
    }
    free(pc);
    return at;
}
