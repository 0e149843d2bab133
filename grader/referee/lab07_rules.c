/* lab07_rules.c (referee) - Lab 7's rules, written from the handout and not from the
 * student's file: ZeRO-1/2 buckets, ZeRO-3 chunks, the pieces a rank owns, ZeRO's memory and traffic
 * formulas; and the checks of a training run's outputs against them and against the
 * single-rank reference. Host arrays only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab07_ref.h"

/* ==================================================================================== */
/* Layouts                                                                               */
/* ==================================================================================== */

int l7_ref_buckets(const l7_model *m, size_t cap, int world, l7_bucket *out, int max) {
    if (world < 1 || cap == 0 || m->nunits < 1) return L7_ERR_ARG;
    int n = 0;
    size_t held = 0;
    /* a bucket is a run of units, in backward order, that closes at the first unit that
     * brings it to the cap */
    for (int u = m->nunits - 1; u >= 0; u--) {
        if (n == 0 || held >= cap) {
            if (n == max) return L7_ERR_CAPACITY;
            out[n] = (l7_bucket){.first_unit = u};
            held = 0;
            n++;
        }
        out[n - 1].nunits++;
        held += m->unit[u].numel;
        out[n - 1].numel = held;
    }
    size_t at = 0;
    for (int b = 0; b < n; b++) {
        size_t w = (size_t)world;
        out[b].padded = out[b].numel % w ? out[b].numel + w - out[b].numel % w : out[b].numel;
        out[b].shard = out[b].padded / w;
        out[b].offset = at;
        at += out[b].padded;
    }
    return n;
}

size_t l7_ref_chunk(size_t dim0, int world, int rank, size_t *first, size_t *held) {
    *first = *held = 0;
    if (dim0 == 0 || world < 1) return 0;
    size_t chunk = dim0 / (size_t)world + (dim0 % (size_t)world != 0);
    /* torch.chunk: every chunk but possibly the last holds `chunk` rows; past the end, empty */
    size_t lo = (size_t)rank * chunk;
    if (lo >= dim0) {
        *first = dim0;
        return chunk;
    }
    *first = lo;
    *held = lo + chunk <= dim0 ? chunk : dim0 - lo;
    return chunk;
}

size_t l7_unit_shard(const l7_model *m, int u, int world) {
    size_t S = 0, first, held;
    for (int t = m->unit[u].first; t < m->unit[u].first + m->unit[u].count; t++)
        S += l7_ref_chunk(m->tensor[t].dim0, world, 0, &first, &held) * m->tensor[t].row;
    return S;
}

int l7_ref_pieces(const l7_model *m, int stage, size_t cap, int world, int rank, l7_piece *out, int max) {
    int n = 0;
    if (stage == 3) {
        for (int t = 0; t < m->ntensors; t++) {
            size_t first, held;
            l7_ref_chunk(m->tensor[t].dim0, world, rank, &first, &held);
            if (!held) continue;
            if (n == max) return L7_ERR_CAPACITY;
            out[n++] = (l7_piece){.tensor = t, .begin = first * m->tensor[t].row, .count = held * m->tensor[t].row};
        }
        return n;
    }
    l7_bucket bk[L7_MAX_BUCKETS];
    int nb = l7_ref_buckets(m, cap, world, bk, L7_MAX_BUCKETS);
    if (nb < 0) return nb;
    for (int b = 0; b < nb; b++) {
        size_t lo = bk[b].offset + (size_t)rank * bk[b].shard, hi = lo + bk[b].shard, at = bk[b].offset;
        for (int k = 0; k < bk[b].nunits; k++) {
            const l7_unit *un = &m->unit[bk[b].first_unit - k];
            for (int t = un->first; t < un->first + un->count; t++) {
                size_t a = at + m->tensor[t].offset, e = a + m->tensor[t].numel;
                size_t s = a > lo ? a : lo, f = e < hi ? e : hi;
                if (s >= f) continue;
                if (n == max) return L7_ERR_CAPACITY;
                out[n++] = (l7_piece){.tensor = t, .begin = s - a, .count = f - s};
            }
            at += un->numel;
        }
    }
    return n;
}

/* ==================================================================================== */
/* ZeRO's formulas                                                                       */
/* ==================================================================================== */

l7_memory l7_memory_formula(const l7_model *m, const l7_cfg *c, int world) {
    l7_memory f = {0};
    double p = c->param == L7_BF16 ? 2 : 4, r = c->param == L7_BF16 && c->reduce == L7_BF16 ? 2 : 4;
    double K = c->param == L7_BF16 ? 12 : 8, N = world; /* fp32 master + m + v, or m + v */
    if (c->stage == 3) {
        double S = 0, ws_max = 0, numel_max = 0, numel_all = 0;
        for (int u = 0; u < m->nunits; u++) {
            double s = (double)l7_unit_shard(m, u, world);
            S += s;
            ws_max = fmax(ws_max, N * s);
            numel_max = fmax(numel_max, (double)m->unit[u].numel);
            numel_all += (double)m->unit[u].numel;
        }
        f.psi_padded = N * S;
        f.params = p * S, f.grads = p * S, f.optim = K * S;
        /* at most two units gathered: each as gathered ([world][S_u]) and copied out
         * (numel_u); without resharding every unit's full buffer lives until its backward */
        f.gather_bound = c->reshard ? 2 * p * (ws_max + numel_max) : 2 * p * ws_max + p * numel_all;
        /* a unit's gradient as the kit writes it, and two units packed for the reduce (and
         * their fp32 outputs when bf16 gradients are reduced in fp32) */
        f.reduce_bound = p * numel_max + 2 * r * ws_max + (p != r ? 2 * 4 * ws_max / N : 0);
        return f;
    }
    l7_bucket bk[L7_MAX_BUCKETS];
    int nb = l7_ref_buckets(m, c->cap, world, bk, L7_MAX_BUCKETS);
    double padded = 0, pmax = 0;
    for (int b = 0; b < nb; b++) padded += (double)bk[b].padded, pmax = fmax(pmax, (double)bk[b].padded);
    f.psi_padded = padded;
    f.params = p * padded;
    f.grads = c->stage == 1 ? p * padded : p * padded / N;
    f.optim = K * padded / N;
    f.gather_bound = 0;
    /* ZeRO-2: two buckets in flight (one filling, one reducing), plus their fp32 copies
     * when bf16 gradients are reduced in fp32; ZeRO-1: the fp32 copy of one bucket */
    f.reduce_bound = c->stage == 2 ? 2 * p * pmax + (p != r ? 2 * 4 * pmax : 0) : (p != r ? 4 * pmax : 0);
    return f;
}

l7_traffic l7_traffic_formula(const l7_model *m, const l7_cfg *c, int world) {
    l7_traffic t = {{0}, {0}};
    uint64_t p = c->param == L7_BF16 ? 2 : 4, r = c->param == L7_BF16 && c->reduce == L7_BF16 ? 2 : 4;
    t.calls[PL_OP_ALLREDUCE] = 1, t.bytes[PL_OP_ALLREDUCE] = 4; /* the squared norm */
    if (c->stage == 3) {
        uint64_t gathers = c->reshard ? 2 : 1;
        for (int u = 0; u < m->nunits; u++) {
            uint64_t S = (uint64_t)world * l7_unit_shard(m, u, world);
            t.calls[PL_OP_ALLGATHER] += gathers, t.bytes[PL_OP_ALLGATHER] += gathers * p * S;
            t.calls[PL_OP_REDUCE_SCATTER]++, t.bytes[PL_OP_REDUCE_SCATTER] += r * S;
        }
        return t;
    }
    l7_bucket bk[L7_MAX_BUCKETS];
    int nb = l7_ref_buckets(m, c->cap, world, bk, L7_MAX_BUCKETS);
    for (int b = 0; b < nb; b++) {
        t.calls[PL_OP_ALLGATHER]++, t.bytes[PL_OP_ALLGATHER] += p * bk[b].padded;
        t.calls[PL_OP_REDUCE_SCATTER]++, t.bytes[PL_OP_REDUCE_SCATTER] += r * bk[b].padded;
    }
    return t;
}

uint64_t l7_hash(const void *p, size_t bytes, uint64_t h) {
    const unsigned char *b = p;
    for (size_t i = 0; i < bytes; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* ==================================================================================== */
/* Checks of a run                                                                       */
/* ==================================================================================== */

/* Did the kit refuse something (a NULL buffer, a failed step)? Then nothing else is judged. */
bool l7_run_ok(drv_case *c, const l7_out *o) {
    return drv_check_all(c, o->idle || o->rec.why[0] == 0, "%s",
                         o->rec.why[0] ? o->rec.why : "the run failed on another rank");
}

void l7_check_layout(drv_case *c, const l7_lab *L, const l7_out *o, const l7_cfg *cfg) {
    int world = L->np, rank = L->rank;
    if (!l7_run_ok(c, o)) return;
    const l7_model *m = &L->model;
    char why[300] = "";
    if (cfg->stage != 3) {
        l7_bucket want[L7_MAX_BUCKETS];
        int nb = l7_ref_buckets(m, cfg->cap, world, want, L7_MAX_BUCKETS);
        if (o->rec.nbuckets != nb) snprintf(why, sizeof why, "z->nbuckets is %d, the buckets are %d", o->rec.nbuckets, nb);
        for (int b = 0; !why[0] && b < nb; b++) {
            const l7_bucket *g = &o->rec.bucket[b], *w = &want[b];
            if (g->first_unit != w->first_unit || g->nunits != w->nunits || g->numel != w->numel ||
                g->padded != w->padded || g->shard != w->shard || g->offset != w->offset)
                snprintf(why, sizeof why,
                         "bucket %d is {first_unit %d, nunits %d, numel %zu, padded %zu, shard %zu, offset %zu}, "
                         "expected {%d, %d, %zu, %zu, %zu, %zu}",
                         b, g->first_unit, g->nunits, g->numel, g->padded, g->shard, g->offset, w->first_unit,
                         w->nunits, w->numel, w->padded, w->shard, w->offset);
        }
    }
    /* the pieces: exactly the elements this rank owns, each once */
    l7_piece *want = malloc(L7_MAX_PIECES * sizeof *want);
    PL_CHECK(want != NULL, "out of host memory");
    int nw = l7_ref_pieces(m, cfg->stage, cfg->cap, world, rank, want, L7_MAX_PIECES);
    if (!why[0] && o->rec.npieces < 0) snprintf(why, sizeof why, "zero_pieces returned %d (%s)", o->rec.npieces, l7_error_string(o->rec.npieces));
    for (int i = 0; !why[0] && i < nw; i++) {
        size_t covered = 0;
        for (int j = 0; j < o->rec.npieces; j++) {
            const l7_piece *g = &o->rec.piece[j];
            if (g->tensor != want[i].tensor) continue;
            size_t a = g->begin > want[i].begin ? g->begin : want[i].begin;
            size_t e = g->begin + g->count < want[i].begin + want[i].count ? g->begin + g->count : want[i].begin + want[i].count;
            if (e > a) covered += e - a;
        }
        if (covered != want[i].count)
            snprintf(why, sizeof why, "this rank owns elements [%zu, %zu) of %s; its pieces hold %zu of them%s",
                     want[i].begin, want[i].begin + want[i].count, m->tensor[want[i].tensor].name, covered,
                     covered > want[i].count ? " (some twice)" : "");
    }
    size_t total_w = 0, total_g = 0;
    for (int i = 0; i < nw; i++) total_w += want[i].count;
    for (int j = 0; j < o->rec.npieces; j++) total_g += o->rec.piece[j].count;
    if (!why[0] && total_g != total_w)
        snprintf(why, sizeof why, "the pieces hold %zu elements, this rank owns %zu", total_g, total_w);
    free(want);
    if (why[0]) drv_fail(c, "%s", why);
    drv_num(c, "pieces", drv_sum(o->rec.npieces));
}

/* After the run: every rank's full parameters against the reference (relative Frobenius,
 * the worst tensor named); the master weights and moments of the pieces, summed over the
 * ranks; and, exactly, that the parameters a rank computes with are its own master
 * weights (rounded to nearest even in bf16 runs) wherever it owns them. */
bool l7_check_master0(drv_case *c, const l7_lab *L, const l7_out *o) {
    if (!l7_run_ok(c, o)) return false;
    const l7_model *m = &L->model;
    gpt_config g = l7_gpt(L->f, L->f->batch);
    char why[300] = "";
    size_t at = 0;
    for (int j = 0; !o->idle && j < o->rec.npieces && !why[0]; j++) {
        const l7_piece *p = &o->rec.piece[j];
        if (p->tensor < 0 || p->tensor >= m->ntensors || p->count > m->tensor[p->tensor].numel ||
            p->begin > m->tensor[p->tensor].numel - p->count)
            break; /* the pieces case explains */
        const l7_tensor *tt = &m->tensor[p->tensor];
        if (p->count > o->rec.nmaster0 - at) {
            snprintf(why, sizeof why, "zero_pieces right after zero_init gave %llu master values, the pieces hold more",
                     (unsigned long long)o->rec.nmaster0);
            break;
        }
        float *init = l7_init_unit(m, &g, L->seed, tt->unit);
        for (size_t i = 0; i < p->count && !why[0]; i++, at++) {
            float want = init[tt->offset + p->begin + i], got = o->master0[at];
            if (memcmp(&got, &want, sizeof got) != 0)
                snprintf(why, sizeof why, "the master weights after zero_init: tensor %d element %zu is %.9g, the initial "
                         "parameter is %.9g (the master is the fp32 initial value itself, never a rounded copy)",
                         p->tensor, p->begin + i, got, want);
        }
        free(init);
    }
    return drv_check_all(c, !why[0], "%s", why);
}

bool l7_check_params(drv_case *c, const l7_lab *L, const l7_out *o, const l7_ref *ref, double tol, const char *what) {
    if (!l7_run_ok(c, o)) return false;
    const l7_model *m = &L->model;
    bool bf16 = ref->dtype == L7_BF16;
    double num = 0, den = 0, worst = 0, reach = l7_adam_reach(L, ref), far = 0;
    int worst_t = -1;
    size_t uat[L7_MAX_UNITS];
    for (int u = 0; u < m->nunits; u++) uat[u] = l7_unit_at(m, u);
    for (int t = 0; !o->idle && t < m->ntensors; t++) {
        const l7_tensor *tt = &m->tensor[t];
        const float *got = o->full + uat[tt->unit] + tt->offset, *want = ref->param[tt->unit] + tt->offset;
        const unsigned char *loose = ref->loose[tt->unit] + tt->offset;
        double tn = 0, td = 0;
        for (size_t i = 0; i < tt->numel; i++) {
            double d = (double)got[i] - want[i];
            if (loose[i]) far += !(fabs(d) <= reach);
            else tn += isfinite(d) ? d * d : 1e30, td += (double)want[i] * want[i];
        }
        num += tn, den += td;
        double e = sqrt(tn / (td > 0 ? td : 1));
        if (!(e <= worst)) worst = e, worst_t = t;
    }
    double full_err = o->idle ? 0 : sqrt(num / den);
    double sums[4] = {0, 0, 0, 0}; /* master error and size, moments error and size */
    size_t at = 0, mismatch = 0, first_bad = 0;
    int bad_t = -1;
    for (int j = 0; !o->idle && j < o->rec.npieces; j++) {
        const l7_piece *p = &o->rec.piece[j];
        if (p->tensor < 0 || p->tensor >= m->ntensors || p->count > m->tensor[p->tensor].numel ||
            p->begin > m->tensor[p->tensor].numel - p->count || p->count > o->rec.nvalues - at) {
            sums[0] = INFINITY;
            break;
        }
        const l7_tensor *tt = &m->tensor[p->tensor];
        for (size_t i = 0; i < p->count; i++, at++) {
            size_t k = tt->offset + p->begin + i;
            float mw = o->master[at], rw = ref->master[tt->unit][k];
            double d = (double)mw - rw, dm = (double)o->m[at] - ref->m[tt->unit][k], dv = (double)o->v[at] - ref->v[tt->unit][k];
            if (ref->loose[tt->unit][k]) far += !(fabs(d) <= reach);
            else sums[0] += isfinite(d) ? d * d : 1e30, sums[1] += (double)rw * rw;
            sums[2] += (isfinite(dm) ? dm * dm : 1e30) + (isfinite(dv) ? dv * dv : 1e30);
            sums[3] += (double)ref->m[tt->unit][k] * ref->m[tt->unit][k] + (double)ref->v[tt->unit][k] * ref->v[tt->unit][k];
            float should = bf16 ? pl_bf16_to_float(pl_bf16_from_float(mw)) : mw;
            if (memcmp(&should, &o->full[uat[tt->unit] + k], sizeof should) && !mismatch++) first_bad = p->begin + i, bad_t = p->tensor;
        }
    }
    for (int k = 0; k < 4; k++) sums[k] = drv_sum(sums[k]);
    double master_err = sqrt(sums[0] / (sums[1] > 0 ? sums[1] : 1)), mom_err = sqrt(sums[2] / (sums[3] > 0 ? sums[3] : 1));
    drv_num(c, "owned_params_not_master", drv_sum((double)mismatch));
    drv_num(c, "rel_err_master", master_err);
    drv_num(c, "rel_err_moments", mom_err);
    if (mismatch)
        drv_fail(c, "%s: %zu parameter(s) this rank owns are not %s its master weight (first: element %zu of %s)", what,
                 mismatch, bf16 ? "the bf16 rounding (to nearest even) of" : "equal to", first_bad, m->tensor[bad_t].name);
    char w[200];
    snprintf(w, sizeof w, "%s: every unit's parameters after %d steps (worst tensor here %s, %.2e)", what, o->rec.zstep,
             worst_t >= 0 ? m->tensor[worst_t].name : "?", worst);
    double e_full = drv_check_error(c, w, full_err, tol);
    drv_check_adam_reach(c, what, far, L->f->lr, ref->steps);
    snprintf(w, sizeof w, "%s: the master weights of the pieces", what);
    drv_check_error(c, w, master_err, tol);
    snprintf(w, sizeof w, "%s: the AdamW moments of the pieces", what);
    drv_check_error(c, w, mom_err, 10 * tol);
    drv_num(c, "rel_err", e_full), drv_num(c, "tolerance", tol); /* the full parameters' (the moments' is 10x) */
    /* every rank took the same number of optimizer steps */
    double zmax = drv_max(o->idle ? -1 : o->rec.zstep), zmin = -drv_max(o->idle ? -1e9 : -(double)o->rec.zstep);
    if (zmax != zmin) drv_fail(c, "z->step differs between ranks (%.0f to %.0f)", zmin, zmax);
    return drv_min(!drv_failed(c)) > 0;
}

void l7_check_losses(drv_case *c, const l7_out *o, const l7_ref *ref, int first, int nsteps, int world, double tol) {
    if (!l7_run_ok(c, o)) return;
    double loss[L7_MAX_STEPS];
    for (int s = 0; s < nsteps && s < L7_MAX_STEPS; s++)
        loss[s] = drv_sum(!o->idle && s < o->rec.nsteps ? o->rec.step[s].loss : 0) / world;
    double worst = drv_check_steps(c, "the loss (mean over the ranks)", loss, ref->loss + first, nsteps, first + 1, tol, tol);
    drv_num(c, "loss_rel_err", worst);
}

static const char *kind_name(int k) {
    return k == PL_OP_ALLGATHER ? "all-gather" : k == PL_OP_REDUCE_SCATTER ? "reduce-scatter" : k == PL_OP_ALLREDUCE ? "all-reduce" : pl_op_kind_name((pl_op_kind)k);
}

void l7_check_memory(drv_case *c, const l7_lab *L, const l7_out *o, const l7_cfg *cfg) {
    int world = L->np;
    if (!l7_run_ok(c, o)) return;
    l7_memory f = l7_memory_formula(&L->model, cfg, world);
    double got[3] = {(double)o->rec.mem_init[PL_MEM_PARAMS], (double)o->rec.mem_init[PL_MEM_GRADS], (double)o->rec.mem_init[PL_MEM_OPTIM]};
    double want[3] = {f.params, f.grads, f.optim};
    static const char *const names[3] = {"parameters", "gradients", "optimizer state"};
    double gpeak = 0, rpeak = 0;
    for (int s = 0; s < o->rec.nsteps; s++) {
        gpeak = fmax(gpeak, (double)o->rec.step[s].peak[PL_MEM_GATHER]);
        rpeak = fmax(rpeak, (double)o->rec.step[s].peak[PL_MEM_REDUCE]);
        for (int k = 0; k < 3; k++) /* the persistent categories stay what init made them */
            got[k] = fmax(got[k], (double)o->rec.step[s].peak[PL_MEM_PARAMS + k]);
    }
    double psi = (double)L->model.numel;
    drv_num(c, "params_bytes", got[0]);
    drv_num(c, "grads_bytes", got[1]);
    drv_num(c, "optim_bytes", got[2]);
    drv_num(c, "bytes_per_param", (got[0] + got[1] + got[2]) / psi);
    drv_num(c, "gather_peak", gpeak);
    drv_num(c, "reduce_peak", rpeak);
    double formula = want[0] + want[1] + want[2], measured = drv_max(got[0] + got[1] + got[2]);
    drv_num(c, "memory_ratio", measured > 0 ? fmin(1.0, formula / measured) : 0);
    double leftover = drv_max((double)(o->rec.mem_end[PL_MEM_PARAMS] + o->rec.mem_end[PL_MEM_GRADS] + o->rec.mem_end[PL_MEM_OPTIM] +
                                       o->rec.mem_end[PL_MEM_GATHER] + o->rec.mem_end[PL_MEM_REDUCE]));
    int k = 0;
    while (k < 3 && got[k] == want[k]) k++;
    if (k < 3)
        drv_fail(c, "%s: %.0f bytes on this rank, ZeRO-%d's formula gives %.0f (padded Ψ = %.0f, world %d)", names[k],
                 got[k], cfg->stage, want[k], f.psi_padded, world);
    else if (o->rec.untagged_init > 4096)
        drv_fail(c, "zero_init kept %zu bytes without a category (pl_malloc): tag them (at most 4 KiB of scalars)", o->rec.untagged_init);
    else if (cfg->stage == 3 && gpeak > f.gather_bound)
        drv_fail(c, "gathered parameters peaked at %.0f bytes; %s allow %.0f", gpeak,
                 cfg->reshard ? "two units at a time" : "every unit's full buffer and two gathers", f.gather_bound);
    else if (cfg->stage != 3 && gpeak > 0)
        drv_fail(c, "%.0f bytes of gathered parameters: ZeRO-%d keeps the full parameters (PL_MEM_PARAMS)", gpeak, cfg->stage);
    else if (rpeak > f.reduce_bound)
        drv_fail(c, "transient gradients peaked at %.0f bytes; ZeRO-%d allows %.0f (%s)", rpeak, cfg->stage, f.reduce_bound,
                 cfg->stage == 2 ? "two buckets: the full gradient must never exist" : cfg->stage == 3 ? "one unit's gradient and two packed units" : "one bucket widened to fp32");
    else if (leftover > 0)
        drv_fail(c, "zero_free left %.0f tagged bytes allocated", leftover);
}

void l7_check_traffic(drv_case *c, const l7_lab *L, const l7_out *o, const l7_cfg *cfg) {
    int world = L->np;
    if (!l7_run_ok(c, o)) return;
    l7_traffic want = l7_traffic_formula(&L->model, cfg, world);
    static const int kinds[] = {PL_OP_ALLGATHER, PL_OP_REDUCE_SCATTER, PL_OP_ALLREDUCE, PL_OP_BROADCAST, PL_OP_REDUCE,
                                PL_OP_ALLTOALL, PL_OP_SEND, PL_OP_RECV};
    char why[300] = "";
    double moved = 0, optimum = 0;
    int nsteps = o->counted ? o->counted : o->rec.nsteps; /* the referees': every step asked for */
    for (int s = 0; s < nsteps && !why[0]; s++) {
        const l7_step *st = &o->rec.step[s];
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0] && !why[0]; i++) {
            int k = kinds[i];
            if (st->calls[k] != want.calls[k] || st->bytes[k] != want.bytes[k])
                snprintf(why, sizeof why, "step %d: %llu %s call(s) of %llu bytes in all, expected %llu of %llu (%+lld calls, %+lld bytes)",
                         s, (unsigned long long)st->calls[k], kind_name(k), (unsigned long long)st->bytes[k],
                         (unsigned long long)want.calls[k], (unsigned long long)want.bytes[k],
                         (long long)st->calls[k] - (long long)want.calls[k], (long long)st->bytes[k] - (long long)want.bytes[k]);
        }
        uint64_t calls = 0, bytes = 0;
        for (int k = PL_OP_ALLREDUCE; k <= PL_OP_ALLTOALL; k++) calls += st->calls[k], bytes += st->bytes[k];
        if (!why[0] && (st->wire_calls != calls || st->wire_bytes != bytes))
            snprintf(why, sizeof why, "step %d: the comm backend handed %llu collective(s) of %llu bytes to MPI/NCCL, the harness counted %llu of %llu",
                     s, (unsigned long long)st->wire_calls, (unsigned long long)st->wire_bytes, (unsigned long long)calls,
                     (unsigned long long)bytes);
        moved += (double)(st->bytes[PL_OP_ALLGATHER] + st->bytes[PL_OP_REDUCE_SCATTER]);
        optimum += (double)(want.bytes[PL_OP_ALLGATHER] + want.bytes[PL_OP_REDUCE_SCATTER]);
    }
    /* in ZeRO's units: S of a reduce-scatter or all-gather of Ψ counts Ψ; DDP moves 2Ψ */
    double pb = cfg->param == L7_BF16 ? 2 : 4, per_step = nsteps ? moved / nsteps : 0;
    drv_num(c, "traffic_psi", per_step / pb / (double)L->model.numel);
    if (!o->counted) drv_traffic_from_player(c); /* the steps' records the player kept */
    drv_num(c, "traffic_ratio", moved > 0 ? fmin(1.0, optimum / moved) : 0);
    if (why[0]) drv_fail(c, "%s", why);
}

/* The reduce-scatters of a step issued while backward was still running (ZeRO-2, ZeRO-3). */
void l7_check_overlap(drv_case *c, const l7_lab *L, const l7_out *o, const l7_cfg *cfg) {
    int world = L->np;
    if (!l7_run_ok(c, o)) return;
    const l7_model *m = &L->model;
    char why[300] = "";
    int late = 0;
    for (int s = 0; s < o->rec.nsteps && !why[0]; s++) {
        const l7_step *st = &o->rec.step[s];
        if (cfg->stage == 3) {
            /* unit u's (the k-th in backward order) before unit u-1's backward compute */
            for (int k = 0; k + 1 < m->nunits && k < st->nrs; k++) {
                int u = m->nunits - 1 - k;
                if (st->rs_at[k] > st->bwd_start[u - 1]) {
                    late++;
                    if (!why[0]) snprintf(why, sizeof why, "step %d: unit %d's reduce-scatter was issued after unit %d's backward began", s, u, u - 1);
                }
            }
        } else {
            l7_bucket bk[L7_MAX_BUCKETS];
            int nb = l7_ref_buckets(m, cfg->cap, world, bk, L7_MAX_BUCKETS);
            for (int b = 0; b + 1 < nb && b < st->nrs; b++) {
                int next = bk[b].first_unit - bk[b].nunits; /* the unit whose backward follows the bucket */
                if (st->rs_at[b] > st->bwd_start[next]) {
                    late++;
                    if (!why[0]) snprintf(why, sizeof why, "step %d: bucket %d's reduce-scatter was issued after unit %d's backward began (it was complete before)", s, b, next);
                }
            }
        }
        if (!why[0] && st->nrs > 0 && st->rs_at[st->nrs - 1] > st->bwd_end)
            snprintf(why, sizeof why, "step %d: a reduce-scatter was issued after the backward, in zero_step", s);
        /* issued in time is not yet beside backward: the comm stream, and no wait at issue */
        if (!why[0] && st->rs_off_comm > 0)
            snprintf(why, sizeof why, "step %d: %d reduce-scatter(s) issued on the compute stream: the next units' backward "
                     "queues behind them; issue them on pl_stream_comm(), after an event recorded on the compute stream",
                     s, (int)st->rs_off_comm);
        if (!why[0] && st->rs_waited > 0)
            snprintf(why, sizeof why, "step %d: backward's compute waited for a reduce-scatter as soon as it was issued (a "
                     "pl_stream_sync or event wait in zero_post_backward), so nothing ran beside it: wait for a reduce "
                     "only where its buffer is reused, and for the last ones in zero_step", s);
    }
    drv_num(c, "late_reduces", drv_max(late));
    if (why[0]) drv_fail(c, "%s", why);
}

/* ZeRO-3: unit u+1's all-gather issued before unit u's forward compute (u-1's before u's
 * backward when resharded); the replay with and without prefetch. */
void l7_check_prefetch(drv_case *c, const l7_lab *L, const l7_out *o, const l7_cfg *cfg) {
    int world = L->np;
    if (!l7_run_ok(c, o)) return;
    const l7_model *m = &L->model;
    int U = m->nunits;
    char why[300] = "";
    for (int s = 0; s < o->rec.nsteps && !why[0]; s++) {
        const l7_step *st = &o->rec.step[s];
        int nf = 0;
        while (nf < st->nag && st->ag_at[nf] < st->fwd_end) nf++;
        if (nf != U) {
            snprintf(why, sizeof why, "step %d: %d all-gather(s) during the forward, expected one per unit (%d)", s, nf, U);
            break;
        }
        for (int u = 0; u + 1 < U && !why[0]; u++)
            if (st->ag_at[u + 1] > st->fwd_start[u])
                snprintf(why, sizeof why, "step %d: unit %d's all-gather was issued after unit %d's forward began (no prefetch)", s, u + 1, u);
        if (!cfg->reshard || why[0]) continue;
        /* backward: the k-th gather is unit U-1-k's */
        for (int k = 1; k < U && nf + k < st->nag && !why[0]; k++) {
            int u = U - 1 - k;
            if (st->ag_at[nf + k] > st->bwd_start[u + 1])
                snprintf(why, sizeof why, "step %d: unit %d's backward all-gather was issued after unit %d's backward began (no prefetch)", s, u, u + 1);
        }
    }
    const l7_step *last = &o->rec.step[o->rec.nsteps > 0 ? o->rec.nsteps - 1 : 0];
    double ov = drv_sum(last->ag_overlap) / world, pred = 0, nopre = 0;
    drv_num(c, "gather_overlap_measured", ov);
    l7_replay(L, o, &pred, &nopre);
    if (pred < 0 && !why[0]) snprintf(why, sizeof why, "the recorded ops of the last step are malformed: no trace gives them");
    if (pred > 0) {
        double ratio = nopre / pred;
        drv_num(c, "pred_step_us", pred);
        drv_num(c, "pred_noprefetch_us", nopre);
        drv_num(c, "speed_ratio", ratio);
        drv_note(c, "all-gather time beside compute here %.0f%%; %s replay: %.1f us a step, %.1f us without prefetch (%.2fx)",
                 100 * ov, L->prof.name, pred, nopre, ratio);
        if (!why[0] && world > 1 && !(ratio > 1.0 + 1e-9))
            snprintf(why, sizeof why, "the %s replay of the step hides nothing: %.1f us with prefetch, %.1f us without (does a hook wait for the whole device?)",
                     L->prof.name, pred, nopre);
    }
    if (why[0]) drv_fail(c, "%s", why);
}
