/* lab01.c (referee) - Lab 1's inputs, expected outputs, traffic model, timing and the
 * nccl-tests table.
 *
 * Rank r's input at index i is a function of a seed only the referees know: an integer in
 * [-1023, 1023], so any sum over up to 8192 ranks is exact in float32 (< 2^24) and two
 * ranks' values rarely coincide (a wrong root or a missing term shows even at one
 * element). Every referee can compute every rank's inputs, so each checks its own rank's
 * output against the expected bits without asking anyone. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab01.h"

#define SPOT_CHECKS 4096    /* elements checked after each timed run, over all its sets  */
#define BATCH_BYTES (64u << 10)  /* a timed run's sets take at most this per buffer   */
#define PIPELINE_MIN_BYTES (1u << 20) /* a chain this long must be cut in segments      */

typedef struct {
    lab1_shape s;
    int sets;           /* input/output sets in the slots (drv_batch_sets)        */
    uint64_t *seeds;    /* [set][rank]: every rank's input seed, the current run  */
    size_t bytes;       /* S: the larger buffer                                   */
    double wrong;       /* wrong elements over all ranks (the first call)         */
    double time_us[2], median_us[2], lib_us; /* [out-of-place or in-place]: student */
} lab1_case;

static float input(uint64_t seed, size_t i) {
    uint64_t h = (seed ^ (i * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
    return (float)((int)((h >> 33) % 2047) - 1023);
}

static float sum_over_ranks(const uint64_t *seeds, int world, size_t i) {
    float s = 0;
    for (int r = 0; r < world; r++) s += input(seeds[r], i);
    return s;
}

/* Element i of this rank's expected output in set `set`. */
static float expect(const drv_case *c, const lab1_case *st, int set, size_t i) {
    const lab1_shape *s = &st->s;
    const uint64_t *seeds = st->seeds + (size_t)set * (size_t)c->world;
    switch (s->k->output) {
    case OUT_ROOT_COPY: return input(seeds[s->root], i);
    case OUT_SUM: return sum_over_ranks(seeds, c->world, i);
    case OUT_GATHER: return input(seeds[i / s->block], i % s->block);
    case OUT_SCATTERED_SUM: return sum_over_ranks(seeds, c->world, (size_t)c->rank * s->block + i);
    }
    return NAN;
}

/* Does this rank have a defined output (reduce: the root only)? */
static bool checked(const drv_case *c, const lab1_shape *s) { return !s->k->root_only || c->rank == s->root; }

/* Set `set`'s output (each set is one call's buffers, lab1_shape's strides apart). */
static const float *output(drv_case *c, const lab1_case *st, int set) {
    const lab1_shape *s = &st->s;
    if (!s->in_place) return (const float *)drv_slot_host(c, "recv") + (size_t)set * s->nrecv;
    const float *base = (const float *)drv_slot_host(c, "buf") + (size_t)set * lab1_stride(s);
    return base + (s->k->output == OUT_GATHER ? 0 : s->mine);
}

/* The inputs of run `run` (0: the checked call, set 0 alone) into the slots: `sets` sets,
 * each with seeds of its own. */
static void write_inputs(drv_case *c, lab1_case *st, int run, int sets) {
    const lab1_shape *s = &st->s;
    for (int k = 0; k < sets; k++) {
        uint64_t *seeds = st->seeds + (size_t)k * (size_t)c->world;
        for (int r = 0; r < c->world; r++) seeds[r] = drv_case_seed(c, r, run ? drv_batch_run(c, run, k) : 0);
        uint64_t mine = seeds[c->rank];
        if (!s->in_place) {
            float *send = (float *)drv_slot_host(c, "send") + (size_t)k * s->nsend;
            for (size_t i = 0; i < s->nsend; i++) send[i] = input(mine, i);
            continue;
        }
        /* in place, as NCCL lays it out: all-gather sends from its own block of the output,
         * reduce-scatter receives into its own block of the input; the rest is poison (the
         * broadcast's non-roots hold nothing they may send) */
        float *base = (float *)drv_slot_host(c, "buf") + (size_t)k * lab1_stride(s);
        drv_poison_host(base, lab1_stride(s) * sizeof(float));
        bool gather = s->k->output == OUT_GATHER;
        if (s->k->output == OUT_ROOT_COPY && c->rank != s->root) continue;
        float *in = base + (gather ? s->mine : 0);
        for (size_t i = 0; i < s->nsend; i++) in[i] = input(mine, i);
    }
}

/* The sets a timed case's slots hold: as many calls as fit in BATCH_BYTES per buffer (at
 * most 1024), so that a run of small calls is not mostly the go and the done. */
static int sets_for(const lab1_shape *s, size_t bytes) {
    if (s->k->rooted && s->root != 0) return 1; /* not timed (lab1_perf) */
    if (bytes == 0) return 1;
    size_t k = BATCH_BYTES / bytes;
    return k < 1 ? 1 : k > 1024 ? 1024 : (int)k;
}

void lab1_setup(drv_case *c) {
    lab1_case *st = drv_state(c, sizeof *st);
    st->s = lab1_shape_of(c);
    const lab1_shape *s = &st->s;
    st->bytes = 4 * lab1_stride(s);
    st->sets = sets_for(s, st->bytes);
    drv_batch_sets(c, st->sets);
    st->seeds = calloc((size_t)c->world * (size_t)st->sets, sizeof *st->seeds);
    PL_CHECK(st->seeds != NULL, "out of host memory");
    size_t k = (size_t)st->sets;
    if (!s->in_place) {
        drv_slot_new(c, "send", k * s->nsend * sizeof(float), DRV_IN | DRV_CONST);
        drv_slot_new(c, "recv", k * s->nrecv * sizeof(float), DRV_OUT);
    } else {
        drv_slot_new(c, "buf", k * st->bytes, DRV_INOUT);
        drv_poison_host(drv_slot_host(c, "buf"), k * st->bytes);
    }
    write_inputs(c, st, 0, 1);
}

/* play() makes one call, on set 0: the other sets are beyond its buffers, so what it wrote
 * there is out of bounds (the slot's red zones only guard the last set). */
static void check_other_sets(drv_case *c, const lab1_case *st) {
    const lab1_shape *s = &st->s;
    size_t per = (s->in_place ? lab1_stride(s) : s->nrecv) * sizeof(float);
    const char *name = s->in_place ? "buf" : "recv";
    int64_t past = st->sets > 1 ? drv_slot_unpoisoned(c, name, per) : -1;
    if (past >= 0)
        drv_fail(c, "the call wrote %lld byte(s) past the end of its output '%s' (%zu bytes): out of bounds",
                 (long long)past + 1, name, per);
}

static int ceil_log2(int n) {
    int s = 0;
    while ((1 << s) < n) s++;
    return s;
}

/* lab_allreduce's choice by size (handout section 6): recursive doubling below
 * LAB_ALLREDUCE_SMALL_BYTES, the ring from there on, told apart by the messages the busiest
 * rank sent (at most ceil(log2 n) for recursive doubling and its fold; 2(n-1) for the
 * ring): the referees' count where they move the messages. Decided alike on every rank. */
static void check_choice(drv_case *c, const lab1_case *st) {
    int n = c->world;
    if (strcmp(st->s.k->name, "allreduce") != 0 || n < 2 || st->s.count == 0 || !c->ran) return;
    double msgs = drv_max((double)c->m.msgs_sent), rd = ceil_log2(n);
    bool small = st->bytes < LAB1_ALLREDUCE_SMALL_BYTES;
    if (drv_max(drv_failed(c)) > 0) return; /* a wrong result says more */
    if (small && msgs > rd)
        drv_fail(c, "%zu bytes, under LAB_ALLREDUCE_SMALL_BYTES (%u): lab_allreduce must use recursive doubling "
                    "(at most %.0f messages per rank), the busiest rank sent %.0f (the ring?)",
                 st->bytes, LAB1_ALLREDUCE_SMALL_BYTES, rd, msgs);
    else if (!small && msgs <= rd)
        drv_fail(c, "%zu bytes, not under LAB_ALLREDUCE_SMALL_BYTES (%u): lab_allreduce must use the ring "
                    "(%d messages per rank), the busiest rank sent %.0f (recursive doubling? the switch is on "
                    "bytes, count * 4)",
                 st->bytes, LAB1_ALLREDUCE_SMALL_BYTES, 2 * (n - 1), msgs);
}

/* The broadcast's and the reduce's chain is pipelined (handout section 3): from
 * PIPELINE_MIN_BYTES on, at 3 ranks or more (with 2 there is one link and nothing to
 * overlap), the busiest rank sends the buffer in 2 segments or more, whatever their size;
 * the referees' count where they move the messages. The `rule` item scores it: bytes and
 * outputs are the same either way. */
static void check_pipelined(drv_case *c, const lab1_case *st) {
    const lab1_shape *s = &st->s;
    if (!s->k->rooted || c->world < 3 || st->bytes < PIPELINE_MIN_BYTES || !c->ran) return;
    double msgs = drv_max((double)c->m.msgs_sent);
    if (drv_max(drv_failed(c)) > 0) return; /* a wrong result says more */
    drv_num(c, "rule_kept", msgs >= 2);
    if (msgs < 2) {
        char why[200];
        snprintf(why, sizeof why, "%zu bytes down a chain of %d ranks in %.0f message per link: not pipelined (cut it in "
                 "segments, handout section 3)", st->bytes, c->world, msgs);
        drv_str(c, "rule", why);
    }
}

void lab1_check(drv_case *c) {
    lab1_case *st = c->state;
    const lab1_shape *s = &st->s;
    size_t n = c->ran && checked(c, s) ? s->nrecv : 0;
    float *want = malloc(n * sizeof *want + sizeof *want);
    PL_CHECK(want != NULL, "out of host memory");
    for (size_t i = 0; i < n; i++) want[i] = expect(c, st, 0, i);
    drv_num(c, "count", (double)s->count);
    drv_num(c, "bytes", (double)st->bytes);
    drv_num(c, "wrong", st->wrong = drv_check_floats(c, "the output", n ? output(c, st, 0) : want, want, n, true));
    free(want);
    if (c->ran) check_other_sets(c, st);
    check_choice(c, st);
    check_pipelined(c, st);
}

/* Timed run `run`: fresh inputs from fresh seeds, in each of its c->batch sets. */
void lab1_refresh(drv_case *c, int run) { write_inputs(c, c->state, run, c->batch); }

/* ... and its results: every element of a small run, else SPOT_CHECKS elements chosen
 * after the run, every set in turn (each call is checked). */
void lab1_verify(drv_case *c, int run) {
    lab1_case *st = c->state;
    const lab1_shape *s = &st->s;
    if (!checked(c, s) || !s->nrecv) return;
    size_t sets = (size_t)c->batch, all = sets * s->nrecv;
    size_t n = all <= SPOT_CHECKS ? all : SPOT_CHECKS;
    for (size_t j = 0; j < n; j++) {
        size_t set = j % sets, i = all <= SPOT_CHECKS ? j / sets : (size_t)(drv_unpredictable() % s->nrecv);
        const float *got = output(c, st, (int)set);
        float e = expect(c, st, (int)set, i);
        if (memcmp(&got[i], &e, sizeof e) != 0) {
            if (sets > 1)
                drv_fail(c, "timed run %d, call %zu of %zu: index %zu: expected %g, got %g (a result computed once and "
                            "repeated, or a call skipped?)",
                         run, set + 1, sets, i, e, got[i]);
            else
                drv_fail(c, "timed run %d: index %zu: expected %g, got %g (a result computed once and repeated?)", run,
                         i, e, got[i]);
            return;
        }
    }
}

/* Counted traffic against the optimum of REFERENCE.md; latency-optimal all-reduces by
 * messages (ceil(log2 n) per rank: the fold of a non-power of two is in the ceiling). A
 * collective frees its scratch before it returns. */
void lab1_model(drv_case *c, drv_model *m) {
    lab1_case *st = c->state;
    const lab1_shape *s = &st->s;
    int n = c->world;
    m->no_collectives = true;
    m->no_leak = true;
    bool small = !strcmp(s->k->name, "allreduce") && st->bytes < LAB1_ALLREDUCE_SMALL_BYTES;
    if (s->k->model == TRAFFIC_LOG_STEPS || small) {
        m->msgs_optimal = s->count ? ceil_log2(n) : 0;
        drv_num(c, "msgs_ratio", 1.0); /* replaced when messages were expected */
        return;
    }
    if (n == 1 || s->count == 0 || (s->k->blocked && s->block == 0)) return;
    double moved = s->k->blocked ? 4.0 * (double)s->block * n : (double)st->bytes;
    m->bytes_agg = s->k->model == TRAFFIC_RING ? DRV_BYTES_AVG : DRV_BYTES_MAX;
    m->bytes_optimal = s->k->model == TRAFFIC_RING ? lab1_busbw(s->k, n) * moved : moved;
}

/* ================================================================================== */
/* Timing and the nccl-tests table                                                    */
/* ================================================================================== */

void lab1_perf(drv_case *c) {
    lab1_case *st = c->state;
    const lab1_shape *s = &st->s;
    if (s->k->rooted && s->root != 0) return; /* nccl-tests times root 0 */
    int ip = s->in_place, iters = drv_iters_for(st->bytes);
    /* The grading basis (out of place): median over timed runs of the slowest rank, against
     * the library timed the same way in the same run, their runs interleaved. */
    static const int both[2] = {0, 1};
    pl_timing tm[2];
    drv_time_players(c, both, ip ? 1 : 2, 1, iters, tm);
    pl_timing mine = tm[0];
    st->time_us[ip] = mine.mean_us, st->median_us[ip] = mine.median_us;
    if (ip || drv_failed(c)) return;
    double med = mine.median_us;
    double lib = st->lib_us = tm[1].median_us;
    double algbw = (double)st->bytes / med / 1e3;
    drv_num(c, "time_us", med);
    drv_num(c, "mean_time_us", mine.mean_us);
    drv_num(c, "lib_time_us", lib);
    drv_num(c, "algbw", algbw);
    drv_num(c, "busbw", algbw * lab1_busbw(s->k, c->world));
    drv_num(c, "lib_busbw", (double)st->bytes / lib / 1e3 * lab1_busbw(s->k, c->world));
    drv_num(c, "min_time_us", mine.min_us), drv_num(c, "max_time_us", mine.max_us);
    drv_num(c, "lib_min_time_us", tm[1].min_us), drv_num(c, "lib_max_time_us", tm[1].max_us);
    if (c->world > 1) drv_num(c, "speed_ratio", lib / med); /* one rank has nothing to compare */
    drv_num(c, "calls_per_run", c->batch);
    drv_note(c, "%d runs each of %d call%s, interleaved: %.1f us per call median (%.1f to %.1f), the library's %.1f us "
                "(%.1f to %.1f)%s",
             iters, c->batch, c->batch > 1 ? "s" : "", med, mine.min_us, mine.max_us, lib, tm[1].min_us, tm[1].max_us,
             drv_oversubscribed());
}

/* The table line being filled: one (collective, size, root), out-of-place and in-place. */
static struct {
    const lab1_coll *k;
    size_t count, block, bytes;
    int root;
    bool open;
    double time_us[2], wrong[2], median_us, lib_us;
} g_row;
static double g_busbw_sum;
static int g_busbw_n, g_world;

static void column(char *out, size_t n, int ip) {
    double t = g_row.time_us[ip];
    if (t <= 0) {
        snprintf(out, n, "%9s %8s %8s %6.0f", "-", "-", "-", g_row.wrong[ip]);
        return;
    }
    double algbw = (double)g_row.bytes / t / 1e3, busbw = algbw * lab1_busbw(g_row.k, g_world);
    snprintf(out, n, "%9.1f %8.3f %8.3f %6.0f", t, algbw, busbw, g_row.wrong[ip]);
    g_busbw_sum += busbw;
    g_busbw_n++;
}

/* The count column is nccl-tests' per-rank count for all-gather and reduce-scatter (the
 * block; not rounded down to 4 elements as nccl-tests does: odd blocks are the edge cases
 * a student's chunking must survive, see the handout). */
static void flush_row(void) {
    if (!g_row.open) return;
    char oop[64], ip[64], med[24] = "-", lib[24] = "-", root[8] = "-1";
    column(oop, sizeof oop, 0);
    column(ip, sizeof ip, 1);
    if (g_row.median_us > 0) snprintf(med, sizeof med, "%.1f", g_row.median_us), snprintf(lib, sizeof lib, "%.1f", g_row.lib_us);
    if (g_row.k->rooted) snprintf(root, sizeof root, "%d", g_row.root);
    drv_print("  %-14s %12zu %12zu %6s %5s %5s   %s   %s   %9s %9s\n", g_row.k->name, g_row.bytes,
              g_row.k->blocked ? g_row.block : g_row.count, "float", g_row.k->redop, root, oop, ip, med, lib);
    memset(&g_row, 0, sizeof g_row);
}

void lab1_after_case(const drv_case *c) {
    lab1_case *st = c->state;
    const lab1_shape *s = &st->s;
    if (g_row.open && (g_row.k != s->k || g_row.count != s->count || g_row.root != s->root)) flush_row();
    if (!g_row.open) {
        g_row.k = s->k, g_row.count = s->count, g_row.block = s->block, g_row.root = s->root;
        g_row.bytes = st->bytes, g_row.open = true;
    }
    g_row.wrong[s->in_place] = st->wrong;
    g_row.time_us[s->in_place] = st->time_us[s->in_place];
    if (!s->in_place) g_row.median_us = st->median_us[0], g_row.lib_us = st->lib_us;
}

void lab1_teardown(drv_case *c) {
    lab1_case *st = c->state;
    free(st->seeds);
}

void lab1_finish(void) {
    flush_row();
    drv_print("# Out of bounds values : 0 OK\n");
    drv_print("# Avg bus bandwidth    : %g\n", g_busbw_n ? g_busbw_sum / g_busbw_n : 0.0);
}

void lab1_init(void) {
    g_world = pl_world();
    drv_print("# lab01: %d rank(s), sizes %zu..%zu bytes; every call of a timed run has fresh inputs and is checked;"
              " time = mean and med = median over timed runs of the slowest rank, per call (a run: its calls back to"
              " back from the referee's go to the player's done; med: the grading basis)\n",
              g_world, drv_opts()->min_bytes, drv_opts()->max_bytes);
    drv_print("# %-14s %12s %12s %6s %5s %5s   %-33s   %-33s\n", "", "", "", "", "", "", "out-of-place", "in-place");
    drv_print("# %-14s %12s %12s %6s %5s %5s   %9s %8s %8s %6s   %9s %8s %8s %6s   %9s %9s\n", "collective", "size",
              "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong",
              "med", "lib med");
    drv_print("# %-14s %12s %12s %6s %5s %5s   %9s %8s %8s %6s   %9s %8s %8s %6s   %9s %9s\n", "", "(B)",
              "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)");
}
