/* lab07_ckpt.c (referee) - the sharded checkpoint on disk. The players' kit cannot open
 * files (the play filter): when a checkpoint case pauses, every saver's referee writes its
 * player's file (what the kit saved through the student's zero_pieces, byte for byte) and
 * rank 0's referee the metadata from every saver's records, in a fresh directory under
 * /dev/shm; for ckpt.errors rank 0 makes the damaged copies (a truncated rank file, a piece
 * shifted in the metadata, a missing rank file) and another model's checkpoint. Each
 * loader's referee then stages the directory as it finds it - every file's name, size and
 * bytes - into its player's slots, which the kit's reads serve from. The format
 * (docs/zero.md):
 *
 *   DIR/.metadata           text, one record per line:
 *       paralab-zero-checkpoint 1
 *       world N step T pieces P tensors K
 *       tensor I NAME DIM0 ROW             K lines: the model it was saved from
 *       piece RANK TENSOR BEGIN COUNT AT    P lines: elements [BEGIN, BEGIN + COUNT) of
 *                                           TENSOR, at byte AT of RANK's file
 *   DIR/rank-RRRRR.bin      "PLZ7", rank and piece count (int32 each), then per piece its
 *                           master, m and v (COUNT float32 each)
 * /dev/shm is the one directory every rank of a node may write under every confinement (the
 * sandbox's own, and the Landlock domains of mpirun's agents and of srun's ranks, whose
 * TMPDIRs are each rank's or each daemon's); it is not shared between nodes, so these cases
 * need every rank on one node (docs/setup.md, Several nodes).
 * A directory outlives its run only when rank 0's referee dies first. The engine removes
 * those of its own host after the run (their names carry the run's tag); on any other host
 * the next run's rank 0 removes them (sweep_stale): each live directory is held by its
 * maker's lock, which the kernel lets go when that process dies.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lab07_ref.h"

struct l7_ckdir {
    char path[200];
    int lock; /* rank 0: the directory, open and locked while it lives (-1 elsewhere) */
};

#define STALE_AGE_S 60 /* a directory this old, that nobody holds, is a dead run's */

#define META_HEAD 128 /* the two header lines */
#define META_LINE 96  /* a tensor or piece line, at most */

size_t l7_ckdir_capacity(const l7_model *m, int world) {
    size_t meta = META_HEAD + (size_t)m->ntensors * META_LINE + (size_t)world * L7_MAX_PIECES * META_LINE;
    return meta + (size_t)world * (L7_CK_HEADER + 12 * m->numel);
}

static void rank_file(char *out, size_t len, const char *dir, int r) { snprintf(out, len, "%s/rank-%05d.bin", dir, r); }

static void remove_dir(const char *path) {
    DIR *dir = opendir(path);
    if (dir) {
        for (struct dirent *de; (de = readdir(dir));) {
            if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2]))) continue;
            char file[512];
            snprintf(file, sizeof file, "%s/%s", path, de->d_name);
            unlink(file);
        }
        closedir(dir);
    }
    rmdir(path);
}

/* The checkpoint directories under base that a dead run left: this user's, older than
 * STALE_AGE_S (one just made may not be locked yet), and not locked by a live maker. */
static void sweep_stale(const char *base) {
    DIR *dir = opendir(base);
    if (!dir) return;
    time_t now = time(NULL);
    for (struct dirent *de; (de = readdir(dir));) {
        if (strncmp(de->d_name, "paralab-zero.", 13) != 0) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", base, de->d_name);
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat st;
        bool stale = fstat(fd, &st) == 0 && st.st_uid == geteuid() && now - st.st_mtime > STALE_AGE_S &&
                     flock(fd, LOCK_EX | LOCK_NB) == 0;
        if (stale) remove_dir(path);
        close(fd);
    }
    closedir(dir);
}

/* A fresh directory, made by rank 0's referee, its path on every rank. */
static l7_ckdir *make_dir(drv_case *c) {
    l7_ckdir *d = calloc(1, sizeof *d);
    PL_CHECK(d != NULL, "out of host memory");
    d->lock = -1;
    if (c->rank == 0) {
        sweep_stale("/dev/shm");
        /* /dev/shm, or $TMPDIR and then /tmp where it cannot be written */
        const char *tmp = getenv("TMPDIR"), *tag = getenv("PL_RUN_TAG");
        const char *bases[] = {"/dev/shm", tmp && *tmp ? tmp : "/tmp", "/tmp"};
        /* the run's tag in the name, so that the engine removes the directory after the run
         * even when this referee is killed first (its own, /dev/shm only) */
        bool tagged = tag && *tag && strlen(tag) < 40 && strspn(tag, "0123456789abcdef-") == strlen(tag);
        bool made = false;
        for (size_t b = 0; b < sizeof bases / sizeof bases[0] && !made; b++) {
            snprintf(d->path, sizeof d->path, "%s/paralab-zero.%s%sXXXXXX", bases[b], tagged ? tag : "", tagged ? "." : "");
            made = mkdtemp(d->path) != NULL;
        }
        if (!made) pl_fatal(__FILE__, __LINE__, "mkdtemp (the checkpoint's directory)", strerror(errno));
        d->lock = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d->lock >= 0 && flock(d->lock, LOCK_EX | LOCK_NB) != 0) {
            close(d->lock);
            d->lock = -1;
        }
    }
    char *all = malloc(sizeof d->path * (size_t)c->world);
    PL_CHECK(all != NULL, "out of host memory");
    drv_allgather(d->path, sizeof d->path, all);
    memcpy(d->path, all, sizeof d->path);
    d->path[sizeof d->path - 1] = '\0';
    free(all);
    return d;
}

static void write_file(const char *path, const void *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(bytes, 1, n, f) != n || fclose(f) != 0)
        pl_fatal(__FILE__, __LINE__, path, "cannot write a checkpoint file");
}

/* The metadata of a checkpoint of model m at `world` ranks: recs[r] holds rank r's pieces. */
typedef struct {
    int32_t npieces, step;
    l7_ck_piece piece[L7_MAX_PIECES];
} saver_recs;

static void write_meta(const char *dir, const l7_model *m, int world, int step, const saver_recs *recs) {
    char path[256];
    snprintf(path, sizeof path, "%s/.metadata", dir);
    FILE *f = fopen(path, "w");
    if (!f) pl_fatal(__FILE__, __LINE__, path, strerror(errno));
    size_t total = 0;
    for (int r = 0; r < world; r++) total += (size_t)recs[r].npieces;
    fprintf(f, "paralab-zero-checkpoint 1\nworld %d step %d pieces %zu tensors %d\n", world, step, total, m->ntensors);
    for (int t = 0; t < m->ntensors; t++)
        fprintf(f, "tensor %d %s %zu %zu\n", t, m->tensor[t].name, m->tensor[t].dim0, m->tensor[t].row);
    for (int r = 0; r < world; r++)
        for (int i = 0; i < recs[r].npieces; i++) {
            const l7_ck_piece *p = &recs[r].piece[i];
            fprintf(f, "piece %d %d %lld %lld %lld\n", r, p->tensor, (long long)p->begin, (long long)p->count,
                    (long long)p->at);
        }
    if (fclose(f) != 0) pl_fatal(__FILE__, __LINE__, path, "cannot write the metadata");
}

l7_ckdir *l7_ckdir_write(drv_case *c, bool saver, const l7_model *m, int saved_world, char *why, size_t len) {
    saver_recs *mine = calloc(1, sizeof *mine);
    PL_CHECK(mine != NULL, "out of host memory");
    l7_ck_save *s = NULL;
    bool ok = true;
    if (saver) { /* the player's account of its save */
        s = malloc(sizeof *s);
        PL_CHECK(s != NULL, "out of host memory");
        memcpy(s, drv_slot_host(c, "ck.save"), sizeof *s);
        s->why[sizeof s->why - 1] = '\0';
        size_t cap = drv_slot_bytes(c, "ck.file");
        ok = s->saved == 1;
        if (ok && (s->npieces < 0 || s->npieces > L7_MAX_PIECES || s->file_bytes < L7_CK_HEADER ||
                   (uint64_t)s->file_bytes > cap))
            ok = false, snprintf(s->why, sizeof s->why, "the kit's record of the save is malformed");
        if (!ok && !s->why[0]) snprintf(s->why, sizeof s->why, "the kit did not save");
        if (ok) {
            mine->npieces = s->npieces, mine->step = s->step;
            memcpy(mine->piece, s->piece, (size_t)s->npieces * sizeof *mine->piece);
        }
    }
    /* every rank's verdict; the lowest failing rank's reason is everyone's */
    double who = drv_min(ok ? 1e9 : c->rank);
    if (who < 1e9) {
        char msg[300] = "", *all = malloc(sizeof msg * (size_t)c->world);
        PL_CHECK(all != NULL, "out of host memory");
        if (!ok) snprintf(msg, sizeof msg, "%s", s->why);
        drv_allgather(msg, sizeof msg, all);
        if (!ok) snprintf(why, len, "%s", s->why);
        else snprintf(why, len, "rank %d: %.290s", (int)who, all + (size_t)who * sizeof msg);
        free(all), free(s), free(mine);
        return NULL;
    }
    l7_ckdir *d = make_dir(c);
    if (saver) {
        char path[256];
        rank_file(path, sizeof path, d->path, c->rank);
        write_file(path, drv_slot_host(c, "ck.file"), (size_t)s->file_bytes);
    }
    saver_recs *all = malloc(sizeof *all * (size_t)c->world);
    PL_CHECK(all != NULL, "out of host memory");
    drv_allgather(mine, sizeof *mine, all);
    if (c->rank == 0) write_meta(d->path, m, saved_world, all[0].step, all);
    (void)drv_max(0); /* every file is written before anyone reads the directory */
    free(all), free(s), free(mine);
    return d;
}

/* ==================================================================================== */
/* Another model's checkpoint, and the damaged copies                                    */
/* ==================================================================================== */

l7_ckdir *l7_ckdir_other_model(drv_case *c, const l7_lab *L) {
    l7_ckdir *d = make_dir(c);
    if (c->rank == 0) {
        /* one more head's width: every tensor of the blocks and the embedding changes shape */
        gpt_config g = l7_gpt(L->f, L->f->batch);
        g.hidden += g.heads;
        l7_model *om = malloc(sizeof *om);
        saver_recs *recs = calloc(2, sizeof *recs);
        l7_piece *pc = malloc(L7_MAX_PIECES * sizeof *pc);
        PL_CHECK(om && recs && pc, "out of host memory");
        l7_describe(om, &g, L->f->layers);
        float *init[L7_MAX_UNITS];
        for (int u = 0; u < om->nunits; u++) init[u] = l7_init_unit(om, &g, L->seed, u);
        /* as a fresh ZeRO-3 run of it at 2 ranks saves itself: its chunks, the moments 0 */
        for (int r = 0; r < 2; r++) {
            int n = l7_ref_pieces(om, 3, (size_t)L->f->cap, 2, r, pc, L7_MAX_PIECES);
            size_t bytes = L7_CK_HEADER;
            for (int i = 0; i < n; i++) bytes += 12 * pc[i].count;
            unsigned char *buf = calloc(1, bytes);
            PL_CHECK(buf != NULL, "out of host memory");
            int32_t head[3] = {0x375a4c50, r, n}; /* "PLZ7" */
            memcpy(buf, head, sizeof head);
            size_t at = L7_CK_HEADER;
            for (int i = 0; i < n; i++) {
                const l7_tensor *t = &om->tensor[pc[i].tensor];
                recs[r].piece[i] = (l7_ck_piece){pc[i].tensor, (int64_t)pc[i].begin, (int64_t)pc[i].count, (int64_t)at};
                memcpy(buf + at, init[t->unit] + t->offset + pc[i].begin, 4 * pc[i].count); /* master; m, v stay 0 */
                at += 12 * pc[i].count;
            }
            recs[r].npieces = n;
            char path[256];
            rank_file(path, sizeof path, d->path, r);
            write_file(path, buf, bytes);
            free(buf);
        }
        write_meta(d->path, om, 2, 0, recs);
        for (int u = 0; u < om->nunits; u++) free(init[u]);
        free(om), free(recs), free(pc);
    }
    (void)drv_max(0);
    return d;
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return NULL;
    }
    unsigned char *buf = malloc((size_t)st.st_size + 1);
    PL_CHECK(buf != NULL, "out of host memory");
    *n = fread(buf, 1, (size_t)st.st_size, f);
    fclose(f);
    buf[*n] = 0;
    return buf;
}

/* Shift one piece by one element, keeping its size: the files still agree with the
 * metadata, but that piece's first element is now in no saved piece. The first piece that
 * starts a tensor which has other pieces. Returns false when there is none. */
static bool shift_a_piece(const char *path) {
    size_t n = 0;
    char *text = (char *)slurp(path, &n);
    if (!text) return false;
    char *out = malloc(n + 64);
    PL_CHECK(out != NULL, "out of host memory");
    int np_ = 0, cap = 1 << 16, *pt = calloc((size_t)cap, sizeof *pt), pick_tensor = -1;
    long long *pb = calloc((size_t)cap, sizeof *pb);
    PL_CHECK(pt && pb, "out of host memory");
    for (char *l = text; *l && np_ < cap;) {
        int r;
        long long cnt, at;
        if (sscanf(l, "piece %d %d %lld %lld %lld", &r, &pt[np_], &pb[np_], &cnt, &at) == 5) np_++;
        char *nl = strchr(l, '\n');
        l = nl ? nl + 1 : l + strlen(l);
    }
    for (int i = 0; i < np_ && pick_tensor < 0; i++)
        for (int j = 0; j < np_ && pick_tensor < 0; j++)
            if (j != i && pb[i] == 0 && pt[j] == pt[i]) pick_tensor = pt[i];
    free(pt), free(pb);
    bool done = false;
    if (pick_tensor >= 0) {
        char *line = text, *w = out;
        while (*line) {
            char *nl = strchr(line, '\n');
            size_t l = nl ? (size_t)(nl - line + 1) : strlen(line);
            int r, t;
            long long b, cnt, at;
            if (!done && sscanf(line, "piece %d %d %lld %lld %lld", &r, &t, &b, &cnt, &at) == 5 && t == pick_tensor && b == 0) {
                w += sprintf(w, "piece %d %d %lld %lld %lld\n", r, t, b + 1, cnt, at);
                done = true;
            } else {
                memcpy(w, line, l), w += l;
            }
            line += l;
        }
        write_file(path, out, (size_t)(w - out));
    }
    free(text), free(out);
    return done;
}

l7_ckdir *l7_ckdir_damaged(drv_case *c, const l7_ckdir *d, l7_damage kind, char *expect, size_t len) {
    l7_ckdir *e = make_dir(c);
    int last = 1; /* ckpt.errors saves at 2 ranks: the last rank's file is damaged */
    if (kind == CK_TRUNCATED || kind == CK_MISSING) snprintf(expect, len, "rank-%05d.bin", last);
    else snprintf(expect, len, ".metadata");
    bool ok = true;
    if (c->rank == 0) {
        /* a copy of every file of d */
        DIR *dir = opendir(d->path);
        if (!dir) pl_fatal(__FILE__, __LINE__, d->path, strerror(errno));
        for (struct dirent *de; (de = readdir(dir));) {
            if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2]))) continue;
            char from[512], to[512];
            snprintf(from, sizeof from, "%s/%s", d->path, de->d_name);
            snprintf(to, sizeof to, "%s/%s", e->path, de->d_name);
            size_t n = 0;
            unsigned char *buf = slurp(from, &n);
            if (!buf) pl_fatal(__FILE__, __LINE__, from, "cannot read a checkpoint file");
            write_file(to, buf, n);
            free(buf);
        }
        closedir(dir);
        char path[512];
        if (kind == CK_TRUNCATED || kind == CK_MISSING) {
            rank_file(path, sizeof path, e->path, last);
            struct stat st;
            if (kind == CK_MISSING) ok = unlink(path) == 0;
            else ok = stat(path, &st) == 0 && st.st_size > 16 && truncate(path, st.st_size - 8) == 0;
        } else {
            snprintf(path, sizeof path, "%s/.metadata", e->path);
            ok = shift_a_piece(path);
        }
    }
    drv_check_all(c, ok, "the saved checkpoint cannot be damaged as a %s one (its rank files or pieces are not what a "
                    "save at 2 ranks writes)", L7_DAMAGE_NAMES[kind]);
    return e;
}

/* ==================================================================================== */
/* Staging, removing                                                                     */
/* ==================================================================================== */

static int by_name(const void *a, const void *b) {
    return strcmp(((const l7_ck_file *)a)->name, ((const l7_ck_file *)b)->name);
}

void l7_ckdir_stage(drv_case *c, const l7_ckdir *d, int k, bool loader) {
    if (!loader) return;
    char name[32];
    snprintf(name, sizeof name, "ck%d.dir", k);
    l7_ck_dir *ix = drv_slot_host(c, name);
    snprintf(name, sizeof name, "ck%d.data", k);
    unsigned char *data = drv_slot_host(c, name);
    size_t cap = drv_slot_bytes(c, name), at = 0;
    memset(ix, 0, sizeof *ix);
    if (!d) return; /* no checkpoint: the kit loads nothing */
    ix->staged = 1;
    snprintf(ix->dir, sizeof ix->dir, "%s", d->path);
    DIR *dir = opendir(d->path);
    if (!dir) pl_fatal(__FILE__, __LINE__, d->path, strerror(errno));
    for (struct dirent *de; (de = readdir(dir));) {
        if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2]))) continue;
        if (ix->nfiles == L7_MAX_FILES || strlen(de->d_name) >= sizeof ix->file[0].name) {
            drv_fail(c, "the checkpoint directory holds more files than a save at 8 ranks writes");
            break;
        }
        char path[512];
        snprintf(path, sizeof path, "%s/%s", d->path, de->d_name);
        size_t n = 0;
        unsigned char *buf = slurp(path, &n);
        if (!buf) pl_fatal(__FILE__, __LINE__, path, "cannot read a checkpoint file");
        if (n > cap - at) {
            drv_fail(c, "%s: %zu bytes, more than this model's checkpoint can hold", path, n);
            free(buf);
            break;
        }
        l7_ck_file *f = &ix->file[ix->nfiles++];
        snprintf(f->name, sizeof f->name, "%s", de->d_name);
        f->offset = (int64_t)at, f->size = (int64_t)n;
        memcpy(data + at, buf, n);
        at += n;
        free(buf);
    }
    closedir(dir);
    qsort(ix->file, (size_t)ix->nfiles, sizeof ix->file[0], by_name);
}

void l7_ckdir_remove(drv_case *c, l7_ckdir *d) {
    if (!d) return;
    (void)drv_max(0); /* every loader's referee has staged it */
    if (c->rank == 0) remove_dir(d->path);
    if (d->lock >= 0) close(d->lock);
    free(d);
}
