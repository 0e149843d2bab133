/* lab04_sched.c - Lab 4's own schedules, their rules and the logical clock.
 *
 * The driver derives each order a different way from the formulas the student codes:
 * as a policy that decides, one action at a time, from what is in flight. 1F1B runs a
 * forward while fewer than p - s micro-batches are stashed, else a backward; interleaved
 * does the same with the limit w + 1 over Megatron's table, built as nested loops over
 * groups, chunks and micro-batches; ZB-H1 adds a weight pass whenever more than s
 * backwards wait for theirs. Two derivations agreeing is what the exact-list check proves.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab04.h"

const char *SCHED_NAMES[PP_NSCHEDULES] = {"gpipe", "1f1b", "interleaved", "zbh1"};

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

int ref_warmup(pp_schedule_kind k, int p, int s, int m, int v) {
    switch (k) {
    case PP_GPIPE: return m;
    case PP_INTERLEAVED: return imin(2 * (p - s - 1) + (v - 1) * p, m * v);
    default: return imin(p - s - 1, m);
    }
}

int ref_peak(pp_schedule_kind k, int p, int s, int m, int v) {
    switch (k) {
    case PP_GPIPE: return m;
    case PP_1F1B: return imin(p - s, m);
    case PP_INTERLEAVED: return imin(ref_warmup(k, p, s, m, v) + 1, m * v);
    default: return imin(p, m); /* ZB-H1: p - s - 1 warm-up + 1 + s deferred W's */
    }
}

void ref_theory(pp_schedule_kind k, int p, int m, int v, int *makespan, int *idle) {
    if (k == PP_ZB_H1) {
        *idle = (p - 1) + imax(0, p - m);
        *makespan = 3 * m + *idle;
    } else {
        int work = k == PP_INTERLEAVED ? v * m : m; /* in chunk ticks */
        *idle = 3 * (p - 1);
        *makespan = 3 * (work + p - 1);
    }
}

double ref_bubble(pp_schedule_kind k, int p, int m, int v) {
    int T, idle;
    ref_theory(k, p, m, v, &T, &idle);
    return (double)idle / T;
}

/* Megatron's forward table: groups of p micro-batches, each through chunk 0, 1, ... */
static void interleaved_table(int p, int m, int v, pp_action *fwd) {
    int n = 0;
    for (int g = 0; g < m / p; g++)
        for (int c = 0; c < v; c++)
            for (int j = 0; j < p; j++) fwd[n++] = (pp_action){PP_F, g * p + j, c};
}

int ref_schedule(pp_schedule_kind k, int p, int s, int m, int v, pp_action *out) {
    int n = 0, total = k == PP_INTERLEAVED ? m * v : m;
    pp_action *fwd = calloc((size_t)total, sizeof *fwd);
    PL_CHECK(fwd != NULL, "out of host memory");
    if (k == PP_INTERLEAVED) interleaved_table(p, m, v, fwd);
    else
        for (int i = 0; i < m; i++) fwd[i] = (pp_action){PP_F, i, 0};
    /* the in-flight limit: how many forwards may be ahead of the backwards */
    int limit = k == PP_GPIPE ? total : ref_warmup(k, p, s, m, v) + 1;
    int nf = 0, nb = 0, nw = 0;
    while (nb < total) {
        if (nf < total && nf - nb < limit) {
            out[n++] = fwd[nf++];
        } else {
            pp_action b = fwd[nb++];
            b.kind = PP_B;
            if (k == PP_INTERLEAVED) b.chunk = v - 1 - b.chunk;
            out[n++] = b;
            if (k == PP_ZB_H1 && nb - nw > s) out[n++] = (pp_action){PP_W, nw++, 0};
        }
    }
    while (k == PP_ZB_H1 && nw < m) out[n++] = (pp_action){PP_W, nw++, 0};
    free(fwd);
    return n;
}

void ref_plan(pp_plan *pl, pp_schedule_kind k, int p, int m, int v) {
    memset(pl, 0, sizeof *pl);
    pl->stages = p;
    for (int s = 0; s < p; s++) {
        pp_action *a = calloc((size_t)pp_schedule_length(k, m, v), sizeof *a);
        PL_CHECK(a != NULL, "out of host memory");
        pl->count[s] = ref_schedule(k, p, s, m, v, a);
        pl->acts[s] = a;
    }
}

void plan_free(pp_plan *pl) {
    for (int s = 0; s < pl->stages; s++) free((void *)pl->acts[s]);
    memset(pl, 0, sizeof *pl);
}

void action_name(pp_action a, int v, char *out, size_t len) {
    const char *K = a.kind == PP_F ? "F" : a.kind == PP_B ? "B" : a.kind == PP_W ? "W" : "?";
    if (v > 1) snprintf(out, len, "%s(%d,c%d)", K, a.mb, a.chunk);
    else snprintf(out, len, "%s(%d)", K, a.mb);
}

/* ==================================================================================== */
/* The rules of one list                                                                  */
/* ==================================================================================== */

bool list_rules(pp_schedule_kind k, int p, int s, int m, int v, const pp_action *a, int n, char *why, size_t len) {
    int want = pp_schedule_length(k, m, v), chunks = k == PP_INTERLEAVED ? v : 1;
    char *seen = calloc((size_t)3 * chunks * m, 1);
    PL_CHECK(seen != NULL, "out of host memory");
    bool ok = false;
    int first_b = -1, forwards_before = 0;
    if (n != want) {
        snprintf(why, len, "%d actions, expected %d", n, want);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        char nm[32];
        action_name(a[i], v, nm, sizeof nm);
        if (a[i].kind < PP_F || a[i].kind > PP_W || a[i].mb < 0 || a[i].mb >= m || a[i].chunk < 0 || a[i].chunk >= chunks) {
            snprintf(why, len, "action %d (kind %d, mb %d, chunk %d) is out of range", i, (int)a[i].kind, a[i].mb, a[i].chunk);
            goto out;
        }
        if (a[i].kind == PP_W && k != PP_ZB_H1) {
            snprintf(why, len, "action %d is %s: only zero bubble has W actions", i, nm);
            goto out;
        }
        size_t key = (size_t)a[i].chunk * m + (size_t)a[i].mb;
        if (seen[3 * key + a[i].kind]) {
            snprintf(why, len, "action %d: %s appears twice", i, nm);
            goto out;
        }
        if (a[i].kind == PP_B && !seen[3 * key + PP_F]) {
            snprintf(why, len, "action %d: %s before its forward", i, nm);
            goto out;
        }
        if (a[i].kind == PP_W && !seen[3 * key + PP_B]) {
            snprintf(why, len, "action %d: %s before its B", i, nm);
            goto out;
        }
        seen[3 * key + a[i].kind] = 1;
        if (a[i].kind == PP_B && first_b < 0) first_b = i;
        if (a[i].kind == PP_F && first_b < 0) forwards_before++;
    }
    int w = ref_warmup(k, p, s, m, v);
    /* the warm-up ends with the first B: w forwards, then (unless all are warm-up) the
     * steady state's first forward */
    int expect = k == PP_GPIPE || w >= (k == PP_INTERLEAVED ? m * v : m) ? w : w + 1;
    if (forwards_before != expect) {
        snprintf(why, len, "%d forwards before the first backward, expected %d (a warm-up of %d)", forwards_before, expect, w);
        goto out;
    }
    ok = true;
out:
    free(seen);
    return ok;
}

/* ==================================================================================== */
/* The logical clock                                                                      */
/* ==================================================================================== */

/* Tick by tick: a stage that is free starts its next action once every action it depends
 * on has ended (F(vs) on F(vs - 1); B(vs) on its F and on B(vs + 1); W on its B). */
bool clock_run(const pp_plan *pl, int v, pp_clock *c) {
    memset(c, 0, sizeof *c);
    int p = pl->stages, V = v * p, m = 0, total = 0;
    bool split = false;
    c->p = p, c->v = v;
    for (int r = 0; r < p; r++) {
        c->start[r] = calloc((size_t)pl->count[r] + 1, sizeof(int));
        c->end[r] = calloc((size_t)pl->count[r] + 1, sizeof(int));
        PL_CHECK(c->start[r] && c->end[r], "out of host memory");
        total += pl->count[r];
        for (int i = 0; i < pl->count[r]; i++) {
            m = imax(m, pl->acts[r][i].mb + 1);
            split |= pl->acts[r][i].kind == PP_W;
        }
    }
    int *done = malloc(sizeof(int) * 3 * (size_t)V * (size_t)imax(m, 1)); /* end tick, -1 = not yet */
    PL_CHECK(done != NULL, "out of host memory");
    for (size_t i = 0; i < 3 * (size_t)V * (size_t)imax(m, 1); i++) done[i] = -1;
#define DONE(kind, vs, mb) done[((size_t)(kind) * V + (size_t)(vs)) * m + (size_t)(mb)]
    int pos[PP_MAX_STAGES] = {0}, free_at[PP_MAX_STAGES] = {0}, started = 0;
    for (int t = 0; started < total; t++) {
        int busy_later = 0, began = 0;
        for (int r = 0; r < p; r++) {
            if (free_at[r] > t) {
                busy_later = 1;
                continue;
            }
            if (pos[r] >= pl->count[r]) continue;
            pp_action a = pl->acts[r][pos[r]];
            int vs = a.chunk * p + r;
            if (a.chunk < 0 || a.chunk >= v || a.mb < 0 || a.mb >= m || a.kind < PP_F || a.kind > PP_W) {
                snprintf(c->why, sizeof c->why, "stage %d action %d is out of range", r, pos[r]);
                c->stuck = true;
                goto out;
            }
            int need[2][3], nn = 0; /* (kind, vs) pairs this action waits for */
            if (a.kind == PP_F && vs > 0) need[nn][0] = PP_F, need[nn][1] = vs - 1, nn++;
            if (a.kind == PP_B) {
                need[nn][0] = PP_F, need[nn][1] = vs, nn++;
                if (vs < V - 1) need[nn][0] = PP_B, need[nn][1] = vs + 1, nn++;
            }
            if (a.kind == PP_W) need[nn][0] = PP_B, need[nn][1] = vs, nn++;
            bool ready = true;
            for (int d = 0; d < nn; d++) {
                int e = DONE(need[d][0], need[d][1], a.mb);
                if (e < 0 || e > t) ready = false;
            }
            if (!ready) continue;
            int cost = split || a.kind == PP_F ? 1 : 2;
            c->start[r][pos[r]] = t;
            c->end[r][pos[r]] = t + cost;
            DONE(a.kind, vs, a.mb) = t + cost;
            free_at[r] = t + cost;
            c->busy[r] += cost;
            pos[r]++, started++, began = 1;
            busy_later |= cost > 1;
        }
        if (!began && !busy_later) {
            int r = 0;
            while (r < p && pos[r] >= pl->count[r]) r++;
            char nm[32];
            action_name(pl->acts[r][pos[r]], v, nm, sizeof nm);
            snprintf(c->why, sizeof c->why, "stage %d waits forever at action %d, %s: what it needs never happens", r,
                     pos[r], nm);
            c->stuck = true;
            goto out;
        }
    }
    for (int r = 0; r < p; r++) {
        int n = pl->count[r];
        c->first[r] = n ? c->start[r][0] : 0;
        c->last[r] = n ? c->end[r][n - 1] : 0;
        c->makespan = imax(c->makespan, c->last[r]);
    }
out:
#undef DONE
    free(done);
    return !c->stuck;
}

void clock_free(pp_clock *c) {
    for (int r = 0; r < c->p; r++) free(c->start[r]), free(c->end[r]);
    memset(c, 0, sizeof *c);
}

/* Rank x time, one cell per tick: "F3" (chunk 1 of interleaving: "f3"), "B3", "W3", ". ".
 * A two-tick backward fills two cells. */
void print_grid(const pp_plan *pl, const pp_clock *c) {
    int width = c->makespan, cell = 4;
    char *line = malloc((size_t)width * cell + 16);
    PL_CHECK(line != NULL, "out of host memory");
    for (int r = 0; r < pl->stages; r++) {
        for (int t = 0; t < width * cell; t++) line[t] = ' ';
        for (int t = 0; t < width; t++) line[t * cell] = '.';
        for (int i = 0; i < pl->count[r]; i++) {
            pp_action a = pl->acts[r][i];
            char lab[8];
            char K = a.kind == PP_F ? 'F' : a.kind == PP_B ? 'B' : 'W';
            if (a.chunk % 2) K = (char)(K - 'A' + 'a'); /* odd chunks in lower case */
            snprintf(lab, sizeof lab, "%c%d", K, a.mb);
            for (int t = c->start[r][i]; t < c->end[r][i] && t < width; t++) {
                size_t L = strlen(lab) < (size_t)cell - 1 ? strlen(lab) : (size_t)cell - 1;
                memcpy(line + t * cell, lab, L);
            }
        }
        int end = width * cell;
        while (end > 0 && line[end - 1] == ' ') end--;
        line[end] = '\0';
        drv_print("#   stage %d | %s\n", r, line);
    }
    free(line);
}
