/* lab07_player_ckpt.c - sharded checkpoints, the kit's file I/O (a student's code cannot
 * open files): every rank writes the pieces it owns, rank 0 the metadata that maps each
 * saved piece to its global slice; a load at any world size and stage validates every file
 * first, asks the student's zero_ckpt_plan which slices of which saved pieces make up each
 * new piece, checks that plan, and only then reads and writes. The format:
 *
 *   DIR/.metadata           text, one record per line:
 *       paralab-zero-checkpoint 1
 *       world N step T pieces P tensors K
 *       tensor I NAME DIM0 ROW             K lines: the model it was saved from
 *       piece RANK TENSOR BEGIN COUNT AT    P lines: elements [BEGIN, BEGIN + COUNT) of
 *                                           TENSOR, at byte AT of RANK's file
 *   DIR/rank-RRRRR.bin      "PLZ7", rank and piece count (int32 each), then per piece its
 *                           master, m and v (COUNT float32 each)
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lab07.h"

#define HEADER_BYTES 12

const char *L7_DAMAGE_NAMES[CK_NKINDS] = {"truncated", "metadata", "missing", "other_model"};

static void say(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
}

static void rank_file(char *out, size_t len, const char *dir, int r) { snprintf(out, len, "%s/rank-%05d.bin", dir, r); }

/* Every rank's verdict: 0 if all are 0; otherwise -1 everywhere, with the reason of the
 * lowest failing rank (ranks see different parts of a checkpoint). */
static int agree(int rc, pl_comm *comm, char *why, size_t len) {
    double who = rc ? pl_comm_rank(comm) : 1e9;
    pl_host_allreduce(&who, 1, PL_HOST_MIN, comm);
    if (who >= 1e9) return 0;
    char msg[400];
    snprintf(msg, sizeof msg, "%s", rc ? why : "");
    pl_host_bcast(msg, sizeof msg, (int)who, comm);
    if (!rc) snprintf(why, len, "rank %d: %s", (int)who, msg);
    return -1;
}

/* ==================================================================================== */
/* Save                                                                                  */
/* ==================================================================================== */

typedef struct {
    int32_t rank, tensor;
    int64_t begin, count, at;
} rec;

int l7_ckpt_save(zero_state *z, const char *dir, char *why, size_t len) {
    const zero_model *m = z->model;
    zero_piece *pc = malloc(L7_MAX_PIECES * sizeof *pc);
    PL_CHECK(pc != NULL, "out of host memory");
    int n = zero_pieces(z, pc, L7_MAX_PIECES), rc = 0;
    if (n < 0) rc = -1, say(why, len, "zero_pieces returned %d (%s)", n, zero_error_string(n));
    rec *mine = calloc((size_t)(n > 0 ? n : 0) + 1, sizeof *mine);
    char path[512];
    rank_file(path, sizeof path, dir, z->rank);
    FILE *f = rc ? NULL : fopen(path, "wb");
    if (!rc && !f) rc = -1, say(why, len, "%s: %s", path, strerror(errno));
    int32_t head[3] = {0x375a4c50, z->rank, n}; /* "PLZ7" */
    if (f && fwrite(head, 4, 3, f) != 3) rc = -1;
    long at = HEADER_BYTES;
    for (int j = 0; f && !rc && j < n; j++) {
        const zero_piece *p = &pc[j];
        if (p->tensor < 0 || p->tensor >= m->ntensors || p->count > m->tensor[p->tensor].numel ||
            p->begin > m->tensor[p->tensor].numel - p->count) {
            rc = -1, say(why, len, "zero_pieces: piece %d is not a slice of a tensor", j);
            break;
        }
        mine[j] = (rec){z->rank, p->tensor, (int64_t)p->begin, (int64_t)p->count, at};
        float *h = malloc(p->count * 4 + 4);
        PL_CHECK(h != NULL, "out of host memory");
        const float *src[3] = {p->master, p->m, p->v};
        for (int a = 0; a < 3 && !rc; a++) {
            pl_download(h, src[a], p->count * 4);
            if (fwrite(h, 4, p->count, f) != p->count) rc = -1, say(why, len, "%s: write failed", path);
        }
        free(h);
        at += (long)(12 * p->count);
    }
    if (f && fclose(f) != 0 && !rc) rc = -1, say(why, len, "%s: write failed", path);
    if (agree(rc, z->comm, why, len)) {
        free(pc), free(mine);
        return -1;
    }
    /* rank 0 writes the metadata: every rank's pieces */
    size_t *counts = calloc((size_t)z->world, sizeof *counts);
    rec *all = pl_host_gatherv(mine, (size_t)n * sizeof *mine, counts, 0, z->comm);
    if (z->rank == 0) {
        size_t total = 0;
        for (int r = 0; r < z->world; r++) total += counts[r] / sizeof(rec);
        snprintf(path, sizeof path, "%s/.metadata", dir);
        FILE *mf = fopen(path, "w");
        if (!mf) rc = -1, say(why, len, "%s: %s", path, strerror(errno));
        if (mf) {
            fprintf(mf, "paralab-zero-checkpoint 1\nworld %d step %d pieces %zu tensors %d\n", z->world, z->step, total,
                    m->ntensors);
            for (int t = 0; t < m->ntensors; t++)
                fprintf(mf, "tensor %d %s %zu %zu\n", t, m->tensor[t].name, m->tensor[t].dim0, m->tensor[t].row);
            for (size_t i = 0; i < total; i++)
                fprintf(mf, "piece %d %d %lld %lld %lld\n", all[i].rank, all[i].tensor, (long long)all[i].begin,
                        (long long)all[i].count, (long long)all[i].at);
            if (fclose(mf) != 0) rc = -1, say(why, len, "%s: write failed", path);
        }
    }
    free(all), free(counts), free(pc), free(mine);
    return agree(rc, z->comm, why, len);
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
static int read_meta(const char *dir, const zero_model *m, meta *md, char *why, size_t len) {
    char path[512], name[64];
    snprintf(path, sizeof path, "%s/.metadata", dir);
    memset(md, 0, sizeof *md);
    FILE *f = fopen(path, "r");
    if (!f) return say(why, len, "%s: %s", path, strerror(errno)), -1;
    int version = 0, rc = -1;
    if (fscanf(f, "paralab-zero-checkpoint %d world %d step %d pieces %d tensors %d", &version, &md->world, &md->step,
               &md->npieces, &md->ntensors) != 5 || version != 1 || md->world < 1 || md->step < 0 || md->npieces < 0 ||
        md->npieces > 1 << 24) {
        say(why, len, "%s: not a checkpoint's metadata (bad header)", path);
        goto done;
    }
    if (md->ntensors != m->ntensors) {
        say(why, len, "%s: a checkpoint of another model (%d tensors, this model has %d)", path, md->ntensors, m->ntensors);
        goto done;
    }
    for (int t = 0; t < md->ntensors; t++) {
        int i;
        size_t d0, row;
        if (fscanf(f, " tensor %d %63s %zu %zu", &i, name, &d0, &row) != 4 || i != t) {
            say(why, len, "%s: tensor record %d is malformed", path, t);
            goto done;
        }
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
        zero_saved_piece *s = &md->saved[i];
        if (fscanf(f, " piece %d %d %lld %lld %lld", &s->rank, &s->tensor, &b, &c, &at) != 5) {
            say(why, len, "%s: piece record %d is malformed", path, i);
            goto done;
        }
        if (s->rank < 0 || s->rank >= md->world || s->tensor < 0 || s->tensor >= m->ntensors || b < 0 || c <= 0 ||
            (size_t)(b + c) > m->tensor[s->tensor].numel || at < HEADER_BYTES) {
            say(why, len, "%s: piece %d (rank %d, tensor %d, [%lld, %lld)) does not match the model", path, i, s->rank,
                s->tensor, b, b + c);
            goto done;
        }
        s->begin = (size_t)b, s->count = (size_t)c, md->at[i] = at;
    }
    rc = 0;
done:
    fclose(f);
    return rc;
}

/* Every rank file there, with the size the metadata gives it. */
static int check_files(const char *dir, const meta *md, char *why, size_t len) {
    for (int r = 0; r < md->world; r++) {
        char path[512];
        rank_file(path, sizeof path, dir, r);
        long long want = HEADER_BYTES;
        for (int i = 0; i < md->npieces; i++)
            if (md->saved[i].rank == r) {
                if (md->at[i] != want) return say(why, len, "%s: piece %d at byte %lld, expected %lld", path, i, (long long)md->at[i], want), -1;
                want += 12 * (long long)md->saved[i].count;
            }
        struct stat st;
        if (stat(path, &st) != 0) return say(why, len, "%s: missing (%s)", path, strerror(errno)), -1;
        if ((long long)st.st_size != want)
            return say(why, len, "%s: %lld bytes, the metadata says %lld (truncated?)", path, (long long)st.st_size, want), -1;
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
        if (r->count == 0 || r->dst_offset + r->count > p->count || r->src_offset + r->count > s->count ||
            p->tensor != s->tensor || p->begin + r->dst_offset != s->begin + r->src_offset)
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

int l7_ckpt_load(zero_state *z, const char *dir, char *why, size_t len) {
    meta md;
    zero_piece *mine = malloc(L7_MAX_PIECES * sizeof *mine);
    zero_read *rd = NULL;
    PL_CHECK(mine != NULL, "out of host memory");
    int rc = read_meta(dir, z->model, &md, why, len), nmine = 0, nr = 0;
    if (!rc) rc = check_files(dir, &md, why, len);
    if (!rc) {
        nmine = zero_pieces(z, mine, L7_MAX_PIECES);
        if (nmine < 0) rc = -1, say(why, len, "zero_pieces returned %d (%s)", nmine, zero_error_string(nmine));
    }
    if (!rc) {
        int cap = 4 * (nmine + md.npieces) + 16;
        rd = malloc((size_t)cap * sizeof *rd);
        PL_CHECK(rd != NULL, "out of host memory");
        nr = zero_ckpt_plan(mine, nmine, md.saved, md.npieces, rd, cap);
        if (nr < 0) rc = -1, say(why, len, "%s/.metadata: zero_ckpt_plan returned %d (%s)", dir, nr, zero_error_string(nr));
        else rc = check_plan(mine, nmine, &md, rd, nr, why, len);
    }
    if (agree(rc, z->comm, why, len) == 0) {
        /* every rank agrees that everything is in order: now read and write */
        for (int k = 0; k < nr; k++) {
            const zero_read *r = &rd[k];
            const zero_saved_piece *s = &md.saved[r->saved];
            const zero_piece *p = &mine[r->piece];
            char path[512];
            rank_file(path, sizeof path, dir, s->rank);
            FILE *f = fopen(path, "rb");
            PL_CHECK(f != NULL, "a checkpoint file vanished during the load");
            float *h = malloc(r->count * 4 + 4);
            PL_CHECK(h != NULL, "out of host memory");
            float *dst[3] = {p->master, p->m, p->v};
            for (int a = 0; a < 3; a++) {
                long off = (long)(md.at[r->saved] + 4 * ((long long)a * (long long)s->count + (long long)r->src_offset));
                PL_CHECK(fseek(f, off, SEEK_SET) == 0 && fread(h, 4, r->count, f) == r->count, "checkpoint read failed");
                pl_upload(dst[a] + r->dst_offset, h, r->count * 4);
            }
            free(h);
            fclose(f);
        }
        z->step = md.step;
        zero_ckpt_loaded(z);
        pl_device_sync();
        rc = 0;
    } else {
        rc = -1;
    }
    free(md.saved), free(md.at), free(mine), free(rd);
    return rc;
}

/* ==================================================================================== */
/* Directories, damage, hashes                                                           */
/* ==================================================================================== */

void l7_ckpt_mkdir(pl_comm *comm, char *dir, size_t len) {
    memset(dir, 0, len);
    if (pl_comm_rank(comm) == 0) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, len, "%s/paralab-zero.XXXXXX", tmp && *tmp ? tmp : "/tmp");
        PL_CHECK(mkdtemp(dir) != NULL, "cannot make a directory for the checkpoint");
    }
    pl_host_bcast(dir, len, 0, comm);
}

void l7_ckpt_rmdir(pl_comm *comm, const char *dir) {
    double v = 0;
    pl_host_allreduce(&v, 1, PL_HOST_SUM, comm); /* everyone is done with it */
    if (pl_comm_rank(comm) != 0) return;
    char path[600];
    snprintf(path, sizeof path, "%s/.metadata", dir);
    unlink(path);
    for (int r = 0; r < 1024; r++) {
        rank_file(path, sizeof path, dir, r);
        if (unlink(path) != 0 && errno == ENOENT && r > 64) break;
    }
    rmdir(dir);
}

void l7_ckpt_damage(const char *dir, l7_damage kind, int saved_world, char *expect_file, size_t len) {
    char path[512];
    int last = saved_world - 1;
    if (kind == CK_TRUNCATED || kind == CK_MISSING) {
        rank_file(path, sizeof path, dir, last);
        snprintf(expect_file, len, "rank-%05d.bin", last);
        if (kind == CK_MISSING) {
            PL_CHECK(unlink(path) == 0, "cannot remove a checkpoint file");
            return;
        }
        struct stat st;
        PL_CHECK(stat(path, &st) == 0 && st.st_size > 16, "nothing to truncate");
        PL_CHECK(truncate(path, st.st_size - 8) == 0, "cannot truncate a checkpoint file");
        return;
    }
    snprintf(expect_file, len, ".metadata");
    if (kind == CK_OTHER_MODEL) return; /* the case saved another model's checkpoint itself */
    /* shift one piece by one element, keeping its size: the files still agree with the
     * metadata, but that piece's first element is now in no saved piece */
    snprintf(path, sizeof path, "%s/.metadata", dir);
    FILE *f = fopen(path, "r");
    PL_CHECK(f != NULL, "cannot read the metadata to damage it");
    size_t cap = 1 << 22;
    char *text = calloc(cap, 1), *out = calloc(cap + 64, 1);
    PL_CHECK(text && out, "out of host memory");
    size_t n = fread(text, 1, cap - 1, f);
    fclose(f);
    text[n] = 0;
    /* the first piece that starts a tensor which has other pieces */
    int np_ = 0, *pt = calloc(1 << 16, sizeof *pt), pick_tensor = -1;
    long long *pb = calloc(1 << 16, sizeof *pb);
    PL_CHECK(pt && pb, "out of host memory");
    for (char *l = text; *l && np_ < (1 << 16);) {
        int r;
        long long c, at;
        if (sscanf(l, "piece %d %d %lld %lld %lld", &r, &pt[np_], &pb[np_], &c, &at) == 5) np_++;
        char *nl = strchr(l, '\n');
        l = nl ? nl + 1 : l + strlen(l);
    }
    for (int i = 0; i < np_ && pick_tensor < 0; i++)
        for (int j = 0; j < np_ && pick_tensor < 0; j++)
            if (j != i && pb[i] == 0 && pt[j] == pt[i]) pick_tensor = pt[i];
    free(pt), free(pb);
    PL_CHECK(pick_tensor >= 0, "no piece to shift in the metadata");
    char *line = text, *w = out;
    bool done = false;
    while (*line) {
        char *nl = strchr(line, '\n');
        size_t l = nl ? (size_t)(nl - line + 1) : strlen(line);
        int r, t;
        long long b, c, at;
        if (!done && sscanf(line, "piece %d %d %lld %lld %lld", &r, &t, &b, &c, &at) == 5 && t == pick_tensor && b == 0) {
            w += sprintf(w, "piece %d %d %lld %lld %lld\n", r, t, b + 1, c, at);
            done = true;
        } else {
            memcpy(w, line, l), w += l;
        }
        line += l;
    }
    f = fopen(path, "w");
    PL_CHECK(f != NULL && fputs(out, f) >= 0 && fclose(f) == 0, "cannot write the damaged metadata");
    free(text), free(out);
}

uint64_t l7_state_hash(zero_state *z) {
    zero_piece *pc = malloc(L7_MAX_PIECES * sizeof *pc);
    PL_CHECK(pc != NULL, "out of host memory");
    int n = zero_pieces(z, pc, L7_MAX_PIECES);
    uint64_t h = l7_hash(&z->step, sizeof z->step, 1469598103934665603ull);
    for (int j = 0; j < n; j++) {
        float *buf = malloc(pc[j].count * 4 + 4);
        PL_CHECK(buf != NULL, "out of host memory");
        const float *src[3] = {pc[j].master, pc[j].m, pc[j].v};
        for (int a = 0; a < 3; a++) {
            pl_download(buf, src[a], pc[j].count * 4);
            h = l7_hash(buf, pc[j].count * 4, h);
        }
        free(buf);
    }
    free(pc);
    return h;
}
