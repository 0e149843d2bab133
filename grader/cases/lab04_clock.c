/* lab04_clock.c - Lab 4's logical clock, the closed forms of the schedules, the stash
 * bound and the grid: pure functions of a plan and the flags, which the referee judges with
 * and the player's modes print (sweep, bench). Nothing here calls the student. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab04.h"

static int imax(int a, int b) { return a > b ? a : b; }

void lab4_theory(int k, int p, int m, int v, int *makespan, int *idle) {
    if (k == L4_ZBH1) {
        *idle = (p - 1) + imax(0, p - m);
        *makespan = 3 * m + *idle;
    } else {
        int work = k == L4_INTERLEAVED ? v * m : m; /* in chunk ticks */
        *idle = 3 * (p - 1);
        *makespan = 3 * (work + p - 1);
    }
}

double lab4_bubble(int k, int p, int m, int v) {
    int T, idle;
    lab4_theory(k, p, m, v, &T, &idle);
    return (double)idle / T;
}

void lab4_action_name(lab4_action a, int v, char *out, size_t len) {
    const char *K = a.kind == L4_F ? "F" : a.kind == L4_B ? "B" : a.kind == L4_W ? "W" : "?";
    if (v > 1) snprintf(out, len, "%s(%d,c%d)", K, a.mb, a.chunk);
    else snprintf(out, len, "%s(%d)", K, a.mb);
}

/* ==================================================================================== */
/* The logical clock                                                                      */
/* ==================================================================================== */

/* Tick by tick: a stage that is free starts its next action once every action it depends
 * on has ended (F(vs) on F(vs - 1); B(vs) on its F and on B(vs + 1); W on its B). */
bool lab4_clock_run(const lab4_plan *pl, int v, lab4_clock *c) {
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
            split |= pl->acts[r][i].kind == L4_W;
        }
    }
    int *done = malloc(sizeof(int) * 3 * (size_t)V * (size_t)imax(m, 1)); /* end tick, -1 = not yet */
    PL_CHECK(done != NULL, "out of host memory");
    for (size_t i = 0; i < 3 * (size_t)V * (size_t)imax(m, 1); i++) done[i] = -1;
#define DONE(kind, vs, mb) done[((size_t)(kind) * V + (size_t)(vs)) * m + (size_t)(mb)]
    int pos[LAB4_MAX_STAGES] = {0}, free_at[LAB4_MAX_STAGES] = {0}, started = 0;
    for (int t = 0; started < total; t++) {
        int busy_later = 0, began = 0;
        for (int r = 0; r < p; r++) {
            if (free_at[r] > t) {
                busy_later = 1;
                continue;
            }
            if (pos[r] >= pl->count[r]) continue;
            lab4_action a = pl->acts[r][pos[r]];
            int vs = a.chunk * p + r;
            if (a.chunk < 0 || a.chunk >= v || a.mb < 0 || a.mb >= m || a.kind < L4_F || a.kind > L4_W) {
                snprintf(c->why, sizeof c->why, "stage %d action %d is out of range", r, pos[r]);
                c->stuck = true;
                goto out;
            }
            int need[2][3], nn = 0; /* (kind, vs) pairs this action waits for */
            if (a.kind == L4_F && vs > 0) need[nn][0] = L4_F, need[nn][1] = vs - 1, nn++;
            if (a.kind == L4_B) {
                need[nn][0] = L4_F, need[nn][1] = vs, nn++;
                if (vs < V - 1) need[nn][0] = L4_B, need[nn][1] = vs + 1, nn++;
            }
            if (a.kind == L4_W) need[nn][0] = L4_B, need[nn][1] = vs, nn++;
            bool ready = true;
            for (int d = 0; d < nn; d++) {
                int e = DONE(need[d][0], need[d][1], a.mb);
                if (e < 0 || e > t) ready = false;
            }
            if (!ready) continue;
            int cost = split || a.kind == L4_F ? 1 : 2;
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
            lab4_action_name(pl->acts[r][pos[r]], v, nm, sizeof nm);
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

void lab4_clock_free(lab4_clock *c) {
    for (int r = 0; r < c->p; r++) free(c->start[r]), free(c->end[r]);
    memset(c, 0, sizeof *c);
}

/* Rank x time, one cell per tick: "F3" (chunk 1 of interleaving: "f3"), "B3", "W3", ". ".
 * A two-tick backward fills two cells. */
void lab4_print_grid(const lab4_plan *pl, const lab4_clock *c) {
    int width = c->makespan, cell = 4;
    char *line = malloc((size_t)width * cell + 16);
    PL_CHECK(line != NULL, "out of host memory");
    for (int r = 0; r < pl->stages; r++) {
        for (int t = 0; t < width * cell; t++) line[t] = ' ';
        for (int t = 0; t < width; t++) line[t * cell] = '.';
        for (int i = 0; i < pl->count[r]; i++) {
            lab4_action a = pl->acts[r][i];
            char lab[8];
            char K = a.kind == L4_F ? 'F' : a.kind == L4_B ? 'B' : 'W';
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

/* ==================================================================================== */
/* The stash bound                                                                        */
/* ==================================================================================== */

/* Replaying stage s's list: an F holds one record per block of its chunk (and the head's
 * on the last virtual stage) until its B frees them (W, when the backward is split; the
 * head's with B). Records hold their B gradients for W. */
double lab4_stash_bound(const gpt_config *mc, const lab4_config *cfg, int s, const lab4_action *a, int n, bool split) {
    double rec = (double)gpt_acts_bytes(mc, cfg->recompute) + (split ? (double)gpt_acts_wstash_bytes(mc) : 0);
    int p = cfg->stages, V = p * cfg->chunks, blocks = 0, heads = 0, peak_blocks = 0, peak_heads = 0;
    for (int i = 0; i < n; i++) {
        int first, vs = a[i].chunk * p + s, h = vs == V - 1;
        int b = lab4_layers(p, cfg->chunks, cfg->layers, s, a[i].chunk, &first);
        if (a[i].kind == L4_F) blocks += b, heads += h;
        if (a[i].kind == L4_B) heads -= h, blocks -= split ? 0 : b;
        if (a[i].kind == L4_W) blocks -= b;
        if (blocks > peak_blocks) peak_blocks = blocks;
        if (heads > peak_heads) peak_heads = heads;
    }
    return peak_blocks * rec + peak_heads * (double)gpt_head_acts_bytes(mc);
}
