/* pl_costmodel.c - machine profiles, the alpha-beta + roofline formulas and the replay of
 * recorded operations. docs/cost-model.md states every formula used here. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_costmodel.h"  // defines: the API implemented here
#include "pl_instrument.h" // defines: pl_trace_events, pl_host_allgatherv
#include "pl_runtime.h"    // defines: PL_CHECK

/* ---- profiles --------------------------------------------------------------------------- */

/* key in the file, unit factor to SI, where it goes. Every key is required. */
typedef struct {
    const char *key;
    double to_si;
    size_t offset;
    int is_int;
    int optional; /* may be absent: the field keeps the default plc_profile_parse sets */
} profile_key;

#define PK(k, f, field, i) {k, f, offsetof(plc_profile, field), i, 0}
#define PK_OPT(k, f, field, i) {k, f, offsetof(plc_profile, field), i, 1}
static const profile_key KEYS[] = {
    PK("gpus_per_node", 1, gpus_per_node, 1),
    PK("nodes", 1, nodes, 1),
    PK("peak_tflops", 1e12, peak_flops, 0),
    PK("gemm_efficiency", 1, gemm_eff, 0),
    PK("vector_tflops", 1e12, vector_flops, 0),
    PK("mem_bw_GBps", 1e9, mem_bw, 0),
    PK("launch_us", 1e-6, launch, 0),
    PK("intra_latency_us", 1e-6, intra_alpha, 0),
    PK("intra_bw_GBps", 1e9, intra_beta, 0),
    PK("inter_latency_us", 1e-6, inter_alpha, 0),
    PK("inter_bw_GBps", 1e9, inter_beta, 0),
    /* one-sided puts (symmetric memory); default: the intra-node message figures */
    PK_OPT("put_latency_us", 1e-6, put_alpha, 0),
    PK_OPT("put_bw_GBps", 1e9, put_beta, 0),
    PK_OPT("memory_GB", 1e9, mem_capacity, 0),
    PK_OPT("element_bytes", 1, elem_bytes, 1),
    PK_OPT("sm_count", 1, sm_count, 1),
    PK_OPT("gemm_tile_m", 1, tile_m, 1),
    PK_OPT("gemm_tile_n", 1, tile_n, 1),
};
#define NKEYS (sizeof KEYS / sizeof KEYS[0])

static void set_err(char *err, size_t errlen, const char *fmt, const char *a, int line) {
    if (err && errlen) snprintf(err, errlen, fmt, a, line);
}

int plc_profile_parse(plc_profile *p, const char *text, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    p->elem_bytes = 4;
    int seen[NKEYS] = {0};
    int line_no = 0;
    const char *line = text;
    while (line && *line) {
        line_no++;
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        char buf[512];
        if (len >= sizeof buf) len = sizeof buf - 1;
        memcpy(buf, line, len);
        buf[len] = 0;
        line = eol ? eol + 1 : NULL;
        char *hash = strchr(buf, '#');
        if (hash) *hash = 0;
        char *key = buf;
        while (isspace((unsigned char)*key)) key++;
        if (!*key) continue;
        char *val = key;
        while (*val && !isspace((unsigned char)*val)) val++;
        if (*val) *val++ = 0;
        while (isspace((unsigned char)*val)) val++;
        char *end = val + strlen(val);
        while (end > val && isspace((unsigned char)end[-1])) *--end = 0;
        if (!strcmp(key, "name")) {
            snprintf(p->name, sizeof p->name, "%s", val);
            continue;
        }
        if (!strcmp(key, "description")) {
            snprintf(p->description, sizeof p->description, "%s", val);
            continue;
        }
        size_t k = 0;
        while (k < NKEYS && strcmp(KEYS[k].key, key)) k++;
        if (k == NKEYS) {
            set_err(err, errlen, "unknown key '%s' on line %d", key, line_no);
            return -1;
        }
        errno = 0;
        char *stop;
        double v = strtod(val, &stop);
        if (stop == val || *stop || errno || !(v >= 0) || (KEYS[k].is_int && (v < 1 || v != floor(v)))) {
            set_err(err, errlen, "bad value for '%s' on line %d", key, line_no);
            return -1;
        }
        char *field = (char *)p + KEYS[k].offset;
        if (KEYS[k].is_int) *(int *)field = (int)v;
        else *(double *)field = v * KEYS[k].to_si;
        seen[k] = 1;
    }
    for (size_t k = 0; k < NKEYS; k++)
        if (!seen[k] && !KEYS[k].optional) {
            set_err(err, errlen, "missing key '%s'%.0d", KEYS[k].key, 0);
            return -1;
        }
    for (size_t k = 0; k < NKEYS; k++)
        if (!seen[k] && KEYS[k].optional) {
            if (KEYS[k].offset == offsetof(plc_profile, put_alpha)) p->put_alpha = p->intra_alpha;
            if (KEYS[k].offset == offsetof(plc_profile, put_beta)) p->put_beta = p->intra_beta;
        }
    if (p->peak_flops <= 0 || p->gemm_eff <= 0 || p->vector_flops <= 0 || p->mem_bw <= 0 || p->intra_beta <= 0 || p->inter_beta <= 0) {
        set_err(err, errlen, "%s: peak_tflops, gemm_efficiency, vector_tflops and the bandwidths must be > 0%.0d", "profile", 0);
        return -1;
    }
    if (p->elem_bytes != 2 && p->elem_bytes != 4) {
        set_err(err, errlen, "%s: element_bytes must be 2 (bf16/fp16) or 4 (fp32)%.0d", "profile", 0);
        return -1;
    }
    return 0;
}

int plc_profile_load(plc_profile *p, const char *name, char *err, size_t errlen) {
    char path[1024];
    FILE *f = NULL;
    size_t nl = strlen(name);
    if (strchr(name, '/') || (nl > 8 && !strcmp(name + nl - 8, ".profile"))) {
        snprintf(path, sizeof path, "%s", name);
        f = fopen(path, "r");
    } else {
        const char *dir = getenv("PL_PROFILE_DIR");
        if (dir && *dir) {
            snprintf(path, sizeof path, "%s/%s.profile", dir, name);
            f = fopen(path, "r");
        }
        if (!f) { /* make calibrate's, fitted on this machine, before the shipped one */
            snprintf(path, sizeof path, "build/profiles/%s.profile", name);
            f = fopen(path, "r");
        }
        if (!f) {
            snprintf(path, sizeof path, "common/profiles/%s.profile", name);
            f = fopen(path, "r");
        }
    }
    if (!f) {
        set_err(err, errlen, "no profile '%s' (looked in $PL_PROFILE_DIR, build/profiles/ and common/profiles/)%.0d", name, 0);
        return -1;
    }
    char text[16384];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    char why[256];
    if (plc_profile_parse(p, text, why, sizeof why) != 0) {
        if (err && errlen) snprintf(err, errlen, "%s: %s", path, why);
        return -1;
    }
    if (!p->name[0]) snprintf(p->name, sizeof p->name, "%s", name);
    return 0;
}

int plc_profile_write(const plc_profile *p, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "# %s.profile - a ParaLab cost-model machine profile (docs/cost-model.md)\n", p->name);
    fprintf(f, "name              %s\n", p->name);
    if (p->description[0]) fprintf(f, "description       %s\n", p->description);
    for (size_t k = 0; k < NKEYS; k++) {
        const char *field = (const char *)p + KEYS[k].offset;
        int int_default = KEYS[k].offset == offsetof(plc_profile, elem_bytes) ? 4 : 0;
        if (KEYS[k].optional && (KEYS[k].is_int ? *(const int *)field == int_default : *(const double *)field == 0)) continue;
        if (KEYS[k].is_int) fprintf(f, "%-17s %d\n", KEYS[k].key, *(const int *)field);
        else fprintf(f, "%-17s %.6g\n", KEYS[k].key, *(const double *)field / KEYS[k].to_si);
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* ---- formulas --------------------------------------------------------------------------- */

double plc_gemm_time(const plc_profile *p, double flops, double bytes) {
    double t_compute = flops / (p->peak_flops * p->gemm_eff), t_memory = bytes / p->mem_bw;
    return (t_compute > t_memory ? t_compute : t_memory) + p->launch;
}

double plc_gemm_shape_time(const plc_profile *p, double count, double m, double n, double k, double elem) {
    double flops = count * 2 * m * n * k, bytes = count * elem * (m * k + k * n + m * n);
    if (p->sm_count <= 0 || p->tile_m <= 0 || p->tile_n <= 0) return plc_gemm_time(p, flops, bytes);
    /* each SM computes whole tiles, in waves of sm_count; the library may lay the tile
     * either way round: the orientation with fewer waves */
    double best = 0;
    for (int o = 0; o < 2; o++) {
        double tm = o ? p->tile_n : p->tile_m, tn = o ? p->tile_m : p->tile_n;
        double tiles = count * ceil(m / tm) * ceil(n / tn), waves = ceil(tiles / p->sm_count);
        double work = waves * p->sm_count * 2 * tm * tn * k; /* flops the SMs spend, idle ones too */
        if (o == 0 || work < best) best = work;
    }
    return plc_gemm_time(p, best, bytes); /* the roofline on the flops the waves spend */
}

double plc_kernel_time(const plc_profile *p, double flops, double bytes) {
    double t_compute = flops / p->vector_flops, t_memory = bytes / p->mem_bw;
    return (t_compute > t_memory ? t_compute : t_memory) + p->launch;
}

double plc_p2p_time(const plc_profile *p, int same_node, double bytes) {
    return same_node ? p->intra_alpha + bytes / p->intra_beta : p->inter_alpha + bytes / p->inter_beta;
}

double plc_put_time(const plc_profile *p, int same_node, double bytes) {
    return same_node ? p->put_alpha + bytes / p->put_beta : p->inter_alpha + bytes / p->inter_beta;
}

double plc_coll_time(const plc_profile *p, pl_op_kind kind, int n, int nodes, double S) {
    if (n <= 1) return 0;
    double a = nodes > 1 ? p->inter_alpha : p->intra_alpha, b = nodes > 1 ? p->inter_beta : p->intra_beta;
    double steps = n - 1, frac = (double)(n - 1) / n;
    switch (kind) {
    case PL_OP_ALLREDUCE: return 2 * steps * a + 2 * frac * S / b;
    case PL_OP_ALLGATHER:
    case PL_OP_REDUCE_SCATTER:
    case PL_OP_ALLTOALL: return steps * a + frac * S / b;
    case PL_OP_BROADCAST:
    case PL_OP_REDUCE: return steps * a + S / b;
    case PL_OP_BARRIER: return ceil(log2((double)n)) * a;
    default: return 0;
    }
}

/* ---- replay ----------------------------------------------------------------------------- */

static int is_p2p(pl_op_kind k) { return k == PL_OP_SEND || k == PL_OP_RECV; }
/* One-sided ops have no partner to meet: a put costs its own time, a signal a put of 8
 * bytes, a wait nothing (docs/cost-model.md says what that leaves out). */
static int is_onesided(pl_op_kind k) { return k == PL_OP_PUT || k == PL_OP_SIGNAL || k == PL_OP_WAIT; }
static int is_comm(pl_op_kind k) { return is_p2p(k) || pl_op_is_collective(k) || k == PL_OP_BARRIER || is_onesided(k); }

/* A batch: consecutive ops of one rank and stream that run together (one compute op, one
 * collective, or a run of point-to-point ops issued as a group: each issued before the
 * previous ones completed in the recorded run). */
typedef struct {
    int rank, stream;
    size_t first, count;   /* indices into the rank-sorted op array                  */
    int dep;               /* index of the batch on the other stream it waits for, -1 */
    int done;
    double t_ready, t_end; /* predicted                                               */
    int coll_seq;          /* collectives: k-th collective of (rank, comm_id)         */
} batch;

typedef struct {
    const plc_profile *p;
    plc_op *ops;     /* sorted by rank, stable                          */
    size_t nops;
    int world;
    batch *b;
    size_t nb;
    size_t *op_batch; /* op index -> batch                              */
    long *match;      /* p2p op -> matching op index, -1 none           */
} replay;

/* World rank of member `peer` of the size-m communicator that world rank `rank` is in,
 * when the trace did not record it: communicators as blocks of consecutive ranks. */
static int member(int rank, int m, int peer) { return (rank / m) * m + peer; }
/* The world rank a p2p op talks to. */
static int peer_of(const plc_op *o) { return o->has_peer_world ? o->peer_world : member(o->rank, o->comm_size, o->peer); }

static int node_of(const plc_profile *p, int rank) { return rank / p->gpus_per_node; }

static int nodes_spanned(const plc_profile *p, int rank, int m) {
    int base = (rank / m) * m;
    return node_of(p, base + m - 1) - node_of(p, base) + 1;
}

static double op_cost(const replay *r, const plc_op *o) {
    const plc_profile *p = r->p;
    if (o->kind == PL_OP_GEMM) return plc_gemm_time(p, o->flops, o->bytes);
    if (o->kind == PL_OP_KERNEL) return plc_kernel_time(p, o->flops, o->bytes);
    if (o->kind == PL_OP_WAIT) return 0;
    if (o->kind == PL_OP_PUT || o->kind == PL_OP_SIGNAL) {
        int other = o->peer >= 0 ? o->peer : o->rank; /* puts name world ranks */
        return plc_put_time(p, node_of(p, o->rank) == node_of(p, other), o->kind == PL_OP_SIGNAL ? 8 : o->bytes);
    }
    if (is_p2p(o->kind)) {
        int other = peer_of(o);
        return plc_p2p_time(p, node_of(p, o->rank) == node_of(p, other), o->bytes);
    }
    return plc_coll_time(p, o->kind, o->comm_size, nodes_spanned(p, o->rank, o->comm_size), o->bytes);
}

static void build_batches(replay *r) {
    r->b = calloc(r->nops + 1, sizeof *r->b);
    r->op_batch = calloc(r->nops + 1, sizeof *r->op_batch);
    PL_CHECK(r->b && r->op_batch, "out of host memory in the cost model");
    /* last batch per (rank, stream), to extend p2p runs */
    int last[2] = {-1, -1}, cur_rank = -1;
    for (size_t i = 0; i < r->nops; i++) {
        const plc_op *o = &r->ops[i];
        if (o->rank != cur_rank) {
            cur_rank = o->rank;
            last[0] = last[1] = -1;
        }
        int s = o->stream ? 1 : 0;
        if (is_p2p(o->kind) && last[s] >= 0) {
            batch *lb = &r->b[last[s]];
            const plc_op *prev = &r->ops[lb->first + lb->count - 1];
            double batch_end = prev->t_end;
            for (size_t j = lb->first; j < lb->first + lb->count; j++)
                if (r->ops[j].stream == o->stream && r->ops[j].t_end > batch_end) batch_end = r->ops[j].t_end;
            /* Same stream, previous op in the batch is p2p and the run was still open. */
            if (is_p2p(prev->kind) && prev->stream == o->stream && lb->first + lb->count == i &&
                o->t_start < batch_end) {
                lb->count++;
                r->op_batch[i] = (size_t)last[s];
                continue;
            }
        }
        batch *nb = &r->b[r->nb];
        *nb = (batch){.rank = o->rank, .stream = s, .first = i, .count = 1, .dep = -1, .coll_seq = -1};
        r->op_batch[i] = r->nb;
        last[s] = (int)r->nb++;
    }
    /* Cross-stream dependency. Explicit (from a trace): the batch holding the op named by
     * `after`, the latest over the batch's ops. Inferred (ops by hand): the last batch on
     * the other stream of the same rank that had completed (measured) before this batch
     * was issued. */
    size_t rank_first = 0;
    for (size_t k = 0; k < r->nb; k++) {
        batch *bk = &r->b[k];
        if (k == 0 || r->b[k - 1].rank != bk->rank) rank_first = bk->first;
        if (r->ops[bk->first].explicit_deps) {
            for (size_t q = bk->first; q < bk->first + bk->count; q++) {
                size_t target = rank_first + (size_t)r->ops[q].after - 1;
                if (r->ops[q].after <= 0 || target >= bk->first) continue; /* none, or not earlier */
                if (r->ops[target].rank != bk->rank || !r->ops[target].stream == !r->ops[q].stream) continue;
                int dep = (int)r->op_batch[target];
                if (dep > bk->dep) bk->dep = dep;
            }
            continue;
        }
        double issued = r->ops[bk->first].t_start;
        for (long j = (long)k - 1; j >= 0 && r->b[j].rank == bk->rank; j--) {
            const batch *bj = &r->b[j];
            if (bj->stream == bk->stream) continue;
            double end = 0;
            for (size_t q = bj->first; q < bj->first + bj->count; q++)
                if (r->ops[q].t_end > end) end = r->ops[q].t_end;
            if (end <= issued) {
                bk->dep = (int)j;
                break;
            }
        }
    }
    /* Collective sequence numbers per (rank, comm_id, comm_size). */
    for (size_t k = 0; k < r->nb; k++) {
        const plc_op *o = &r->ops[r->b[k].first];
        if (is_p2p(o->kind) || is_onesided(o->kind) || !is_comm(o->kind)) continue;
        int seq = 0;
        for (long j = (long)k - 1; j >= 0 && r->b[j].rank == r->b[k].rank; j--) {
            const plc_op *q = &r->ops[r->b[j].first];
            if (!is_p2p(q->kind) && !is_onesided(q->kind) && is_comm(q->kind) && q->comm_id == o->comm_id && q->comm_size == o->comm_size) seq++;
        }
        r->b[k].coll_seq = seq;
    }
}

/* Sends matched with receives: the k-th send a->b on a communicator meets the k-th recv
 * at b from a on the same communicator. */
static void match_p2p(replay *r) {
    r->match = malloc((r->nops + 1) * sizeof *r->match);
    PL_CHECK(r->match != NULL, "out of host memory in the cost model");
    for (size_t i = 0; i < r->nops; i++) r->match[i] = -1;
    for (size_t i = 0; i < r->nops; i++) {
        const plc_op *s = &r->ops[i];
        if (s->kind != PL_OP_SEND) continue;
        int dst = peer_of(s);
        /* k = how many earlier sends of s->rank went to dst on this comm */
        int k = 0;
        for (size_t j = 0; j < i; j++) {
            const plc_op *q = &r->ops[j];
            if (q->rank == s->rank && q->kind == PL_OP_SEND && q->comm_id == s->comm_id &&
                peer_of(q) == dst)
                k++;
        }
        for (size_t j = 0; j < r->nops; j++) {
            const plc_op *q = &r->ops[j];
            if (q->rank != dst || q->kind != PL_OP_RECV || q->comm_id != s->comm_id ||
                peer_of(q) != s->rank)
                continue;
            if (k-- == 0) {
                r->match[i] = (long)j;
                r->match[j] = (long)i;
                break;
            }
        }
    }
}

/* Head batch (first not done) of each (rank, stream). */
static long head(const replay *r, int rank, int stream) {
    for (size_t k = 0; k < r->nb; k++)
        if (r->b[k].rank == rank && r->b[k].stream == stream && !r->b[k].done) return (long)k;
    return -1;
}

/* Earliest start of batch k from its own stream and its cross-stream dependency; <0 when
 * the dependency is not scheduled yet. */
static double ready_time(const replay *r, size_t k, const double *stream_free) {
    const batch *bk = &r->b[k];
    double t = stream_free[2 * bk->rank + bk->stream];
    if (bk->dep >= 0) {
        if (!r->b[bk->dep].done) return -1;
        if (r->b[bk->dep].t_end > t) t = r->b[bk->dep].t_end;
    }
    return t;
}

/* After scheduling: the share of communication time (summed over ranks) that ran while
 * the same rank's compute stream was busy. Batches are grouped by rank. */
static double comm_overlap(const replay *r) {
    double comm = 0, hidden = 0;
    for (size_t k = 0; k < r->nb; k++) {
        const batch *c = &r->b[k];
        if (!is_comm(r->ops[c->first].kind) || c->t_end <= c->t_ready) continue;
        comm += c->t_end - c->t_ready;
        size_t j = k;
        while (j > 0 && r->b[j - 1].rank == c->rank) j--;
        for (; j < r->nb && r->b[j].rank == c->rank; j++) {
            const batch *g = &r->b[j];
            if (g->stream == c->stream || is_comm(r->ops[g->first].kind)) continue;
            double lo = g->t_ready > c->t_ready ? g->t_ready : c->t_ready;
            double hi = g->t_end < c->t_end ? g->t_end : c->t_end;
            if (hi > lo) hidden += hi - lo;
        }
    }
    return comm > 0 ? hidden / comm : 0;
}

int plc_replay(const plc_profile *p, const plc_op *ops_in, size_t nops, int world,
               plc_prediction *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    replay r = {.p = p, .nops = 0, .world = world};
    r.ops = malloc((nops + 1) * sizeof *r.ops);
    PL_CHECK(r.ops != NULL, "out of host memory in the cost model");
    for (size_t i = 0; i < nops; i++) /* regions carry no work */
        if (ops_in[i].kind != PL_OP_REGION) r.ops[r.nops++] = ops_in[i];
    {
        /* group by rank, keeping each rank's order (a stable sort) */
        plc_op *sorted = malloc((r.nops + 1) * sizeof *sorted);
        PL_CHECK(sorted != NULL, "out of host memory in the cost model");
        size_t w = 0;
        for (int rk = 0; rk < world; rk++)
            for (size_t i = 0; i < r.nops; i++)
                if (r.ops[i].rank == rk) sorted[w++] = r.ops[i];
        free(r.ops);
        r.ops = sorted;
        r.nops = w;
    }
    build_batches(&r);
    match_p2p(&r);
    double *stream_free = calloc((size_t)world * 2, sizeof *stream_free);
    double *busy_compute = calloc((size_t)world, sizeof *busy_compute);
    double *busy_comm = calloc((size_t)world, sizeof *busy_comm);
    long *set = malloc((r.nb + 1) * sizeof *set);
    PL_CHECK(stream_free && busy_compute && busy_comm && set, "out of host memory in the cost model");
    size_t done = 0;
    int rc = 0;
    while (done < r.nb) {
        int progress = 0;
        for (size_t k = 0; k < r.nb; k++) {
            batch *bk = &r.b[k];
            if (bk->done || head(&r, bk->rank, bk->stream) != (long)k) continue;
            if (ready_time(&r, k, stream_free) < 0) continue;
            const plc_op *o = &r.ops[bk->first];
            /* The set of batches that must start together: this one, and for comm the
             * partners (collective members or the batches holding matched p2p ops). */
            size_t nset = 0;
            set[nset++] = (long)k;
            int ok = 1;
            if (pl_op_is_collective(o->kind) || o->kind == PL_OP_BARRIER) {
                int m = o->comm_size;
                for (int q = 0; q < m && ok; q++) {
                    int wr = member(bk->rank, m, q);
                    if (wr == bk->rank) continue;
                    long found = -1;
                    for (int s = 0; s < 2 && found < 0; s++) {
                        long h = head(&r, wr, s);
                        if (h < 0) continue;
                        const plc_op *ho = &r.ops[r.b[h].first];
                        if (ho->kind == o->kind && ho->comm_id == o->comm_id && r.b[h].coll_seq == bk->coll_seq) found = h;
                    }
                    if (found < 0) ok = 0;
                    else set[nset++] = found;
                }
            } else if (is_p2p(o->kind)) {
                /* closure over matches; every batch in it must be a head */
                for (size_t si = 0; si < nset && ok; si++) {
                    const batch *bs = &r.b[set[si]];
                    for (size_t q = bs->first; q < bs->first + bs->count && ok; q++) {
                        if (r.match[q] < 0) {
                            ok = -1;
                            break;
                        }
                        long mb = (long)r.op_batch[r.match[q]];
                        if (head(&r, r.b[mb].rank, r.b[mb].stream) != mb) {
                            ok = 0;
                            break;
                        }
                        size_t z = 0;
                        while (z < nset && set[z] != mb) z++;
                        if (z == nset) set[nset++] = mb;
                    }
                }
                if (ok < 0) {
                    if (err && errlen) snprintf(err, errlen, "rank %d: a %s of %.0f bytes to/from peer %d has no matching %s",
                                                o->rank, pl_op_kind_name(o->kind), o->bytes, o->peer,
                                                o->kind == PL_OP_SEND ? "recv" : "send");
                    rc = -1;
                    goto out;
                }
            }
            if (!ok) continue;
            double start = 0;
            for (size_t si = 0; si < nset; si++) {
                double t = ready_time(&r, (size_t)set[si], stream_free);
                if (t < 0) { ok = 0; break; }
                if (t > start) start = t;
            }
            if (!ok) continue;
            for (size_t si = 0; si < nset; si++) {
                batch *bs = &r.b[set[si]];
                double dur = 0;
                for (size_t q = bs->first; q < bs->first + bs->count; q++) {
                    double c = op_cost(&r, &r.ops[q]);
                    if (c > dur) dur = c;
                    out->flops += r.ops[q].flops;
                    if (r.ops[q].kind != PL_OP_RECV && is_comm(r.ops[q].kind)) out->comm_bytes += r.ops[q].bytes;
                }
                bs->t_ready = start;
                bs->t_end = start + dur;
                bs->done = 1;
                done++;
                stream_free[2 * bs->rank + bs->stream] = bs->t_end;
                if (is_comm(r.ops[bs->first].kind)) busy_comm[bs->rank] += dur;
                else busy_compute[bs->rank] += dur;
                if (bs->t_end > out->step_time) out->step_time = bs->t_end;
            }
            progress = 1;
        }
        if (!progress) {
            for (size_t k = 0; k < r.nb; k++)
                if (!r.b[k].done) {
                    const plc_op *o = &r.ops[r.b[k].first];
                    if (err && errlen) snprintf(err, errlen, "replay stuck: rank %d waits in %s (peer %d, %.0f bytes) that no rank matches",
                                                o->rank, pl_op_kind_name(o->kind), o->peer, o->bytes);
                    break;
                }
            rc = -1;
            goto out;
        }
    }
    for (int rk = 0; rk < world; rk++) {
        if (busy_compute[rk] > out->compute_time) out->compute_time = busy_compute[rk];
        if (busy_comm[rk] > out->comm_time) out->comm_time = busy_comm[rk];
    }
    out->comm_fraction = out->step_time > 0 ? 1.0 - out->compute_time / out->step_time : 0;
    if (out->comm_fraction < 0) out->comm_fraction = 0;
    out->comm_overlap = comm_overlap(&r);
    out->ops = r.nops;
out:
    free(stream_free);
    free(busy_compute);
    free(busy_comm);
    free(set);
    free(r.ops);
    free(r.b);
    free(r.op_batch);
    free(r.match);
    return rc;
}

size_t plc_ops_from_trace(size_t first, int rank, plc_op *out, size_t cap) {
    const pl_trace_event *ev = pl_trace_events();
    size_t n = pl_trace_count(), w = 0;
    /* trace index -> 1 + op index (0: a region, or before `first`) */
    size_t span = n > first ? n - first : 0;
    int *op_of = calloc(span + 1, sizeof *op_of);
    PL_CHECK(op_of != NULL, "out of host memory in the cost model");
    for (size_t i = first; i < n && w < cap; i++) {
        const pl_trace_event *e = &ev[i];
        if (e->kind == PL_OP_REGION) continue;
        int after = 0;
        if (e->after >= (int64_t)first && e->after < (int64_t)i) after = op_of[e->after - (int64_t)first];
        out[w] = (plc_op){.rank = rank, .kind = e->kind, .stream = e->stream, .comm_id = e->comm_id,
                          .comm_size = e->comm_size > 0 ? e->comm_size : 1, .peer = e->peer,
                          .has_peer_world = e->has_peer_world, .peer_world = e->peer_world,
                          .bytes = (double)e->bytes, .flops = e->flops, .t_start = e->t_start,
                          .t_end = e->t_end >= 0 ? e->t_end : e->t_start, .explicit_deps = 1, .after = after};
        op_of[i - first] = (int)++w;
    }
    free(op_of);
    return w;
}

int plc_replay_trace(const plc_profile *p, size_t first, pl_comm *world, plc_prediction *out,
                     char *err, size_t errlen) {
    size_t avail = pl_trace_count() > first ? pl_trace_count() - first : 0;
    plc_op *mine = malloc((avail + 1) * sizeof *mine);
    PL_CHECK(mine != NULL, "out of host memory in the cost model");
    size_t n = plc_ops_from_trace(first, pl_comm_rank(world), mine, avail), total = 0;
    size_t *counts = calloc((size_t)pl_comm_size(world), sizeof *counts);
    PL_CHECK(counts != NULL, "out of host memory in the cost model");
    /* The comm layer gathers every rank's ops (a host collective: not counted traffic). */
    plc_op *all = pl_host_allgatherv(mine, n * sizeof *mine, counts, world);
    for (int r = 0; r < pl_comm_size(world); r++) total += counts[r];
    int rc = plc_replay(p, all, total / sizeof(plc_op), pl_comm_size(world), out, err, errlen);
    free(mine);
    free(counts);
    free(all);
    return rc;
}

/* ---- hand-written op lists -------------------------------------------------------------- */

void plc_list_rank(plc_list *l, int rank, int comm_id, int comm_size) {
    l->rank = rank;
    l->comm_id = comm_id;
    l->comm_size = comm_size;
}

void plc_list_op(plc_list *l, pl_op_kind kind, double flops, double bytes) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->ops = realloc(l->ops, l->cap * sizeof *l->ops);
        PL_CHECK(l->ops != NULL, "out of host memory in the cost model");
    }
    double t = (double)l->n;
    l->ops[l->n++] = (plc_op){.rank = l->rank, .kind = kind, .comm_id = l->comm_id, .comm_size = l->comm_size,
                              .peer = -1, .flops = flops, .bytes = bytes, .t_start = t, .t_end = t + 0.5};
}

void plc_list_gemm(plc_list *l, double m, double n, double k) {
    plc_list_op(l, PL_OP_GEMM, 2 * m * n * k, 4 * (m * k + k * n + m * n));
}

void plc_list_free(plc_list *l) {
    free(l->ops);
    *l = (plc_list){0};
}
