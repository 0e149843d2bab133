/* lab04_sched.c (referee) - Lab 4's own schedules and the rules a list must keep.
 *
 * The referee derives each order a different way from the formulas the student codes: as
 * a policy that decides, one action at a time, from what is in flight. 1F1B runs a forward
 * while fewer than p - s micro-batches are stashed, else a backward; interleaved does the
 * same with the limit w + 1 over Megatron's table, built as nested loops over groups,
 * chunks and micro-batches; ZB-H1 adds a weight pass whenever more than s backwards wait
 * for theirs. Two derivations agreeing is what the exact-list check proves.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab04_ref.h"

static int imin(int a, int b) { return a < b ? a : b; }

int ref_warmup(int k, int p, int s, int m, int v) {
    switch (k) {
    case L4_GPIPE: return m;
    case L4_INTERLEAVED: return imin(2 * (p - s - 1) + (v - 1) * p, m * v);
    default: return imin(p - s - 1, m);
    }
}

int ref_peak(int k, int p, int s, int m, int v) {
    switch (k) {
    case L4_GPIPE: return m;
    case L4_1F1B: return imin(p - s, m);
    case L4_INTERLEAVED: return imin(ref_warmup(k, p, s, m, v) + 1, m * v);
    default: return imin(p, m); /* ZB-H1: p - s - 1 warm-up + 1 + s deferred W's */
    }
}

/* Megatron's forward table: groups of p micro-batches, each through chunk 0, 1, ... */
static void interleaved_table(int p, int m, int v, lab4_action *fwd) {
    int n = 0;
    for (int g = 0; g < m / p; g++)
        for (int c = 0; c < v; c++)
            for (int j = 0; j < p; j++) fwd[n++] = (lab4_action){L4_F, g * p + j, c};
}

int ref_schedule(int k, int p, int s, int m, int v, lab4_action *out) {
    int n = 0, total = k == L4_INTERLEAVED ? m * v : m;
    lab4_action *fwd = calloc((size_t)total, sizeof *fwd);
    PL_CHECK(fwd != NULL, "out of host memory");
    if (k == L4_INTERLEAVED) interleaved_table(p, m, v, fwd);
    else
        for (int i = 0; i < m; i++) fwd[i] = (lab4_action){L4_F, i, 0};
    /* the in-flight limit: how many forwards may be ahead of the backwards */
    int limit = k == L4_GPIPE ? total : ref_warmup(k, p, s, m, v) + 1;
    int nf = 0, nb = 0, nw = 0;
    while (nb < total) {
        if (nf < total && nf - nb < limit) {
            out[n++] = fwd[nf++];
        } else {
            lab4_action b = fwd[nb++];
            b.kind = L4_B;
            if (k == L4_INTERLEAVED) b.chunk = v - 1 - b.chunk;
            out[n++] = b;
            if (k == L4_ZBH1 && nb - nw > s) out[n++] = (lab4_action){L4_W, nw++, 0};
        }
    }
    while (k == L4_ZBH1 && nw < m) out[n++] = (lab4_action){L4_W, nw++, 0};
    free(fwd);
    return n;
}

void ref_plan(lab4_plan *pl, int k, int p, int m, int v) {
    memset(pl, 0, sizeof *pl);
    pl->stages = p;
    for (int s = 0; s < p; s++) {
        lab4_action *a = calloc((size_t)lab4_schedule_length(k, m, v), sizeof *a);
        PL_CHECK(a != NULL, "out of host memory");
        pl->count[s] = ref_schedule(k, p, s, m, v, a);
        pl->acts[s] = a;
    }
}

void plan_free(lab4_plan *pl) {
    for (int s = 0; s < pl->stages; s++) free((void *)pl->acts[s]);
    memset(pl, 0, sizeof *pl);
}

/* ==================================================================================== */
/* The rules of one list                                                                  */
/* ==================================================================================== */

bool list_rules(int k, int p, int s, int m, int v, const lab4_action *a, int n, char *why, size_t len) {
    int want = lab4_schedule_length(k, m, v), chunks = k == L4_INTERLEAVED ? v : 1;
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
        lab4_action_name(a[i], v, nm, sizeof nm);
        if (a[i].kind < L4_F || a[i].kind > L4_W || a[i].mb < 0 || a[i].mb >= m || a[i].chunk < 0 || a[i].chunk >= chunks) {
            snprintf(why, len, "action %d (kind %d, mb %d, chunk %d) is out of range", i, (int)a[i].kind, a[i].mb, a[i].chunk);
            goto out;
        }
        if (a[i].kind == L4_W && k != L4_ZBH1) {
            snprintf(why, len, "action %d is %s: only zero bubble has W actions", i, nm);
            goto out;
        }
        size_t key = (size_t)a[i].chunk * m + (size_t)a[i].mb;
        if (seen[3 * key + a[i].kind]) {
            snprintf(why, len, "action %d: %s appears twice", i, nm);
            goto out;
        }
        if (a[i].kind == L4_B && !seen[3 * key + L4_F]) {
            snprintf(why, len, "action %d: %s before its forward", i, nm);
            goto out;
        }
        if (a[i].kind == L4_W && !seen[3 * key + L4_B]) {
            snprintf(why, len, "action %d: %s before its B", i, nm);
            goto out;
        }
        seen[3 * key + a[i].kind] = 1;
        if (a[i].kind == L4_B && first_b < 0) first_b = i;
        if (a[i].kind == L4_F && first_b < 0) forwards_before++;
    }
    int w = ref_warmup(k, p, s, m, v);
    /* the warm-up ends with the first B: w forwards, then (unless all are warm-up) the
     * steady state's first forward */
    int expect = k == L4_GPIPE || w >= (k == L4_INTERLEAVED ? m * v : m) ? w : w + 1;
    if (forwards_before != expect) {
        snprintf(why, len, "%d forwards before the first backward, expected %d (a warm-up of %d)", forwards_before, expect, w);
        goto out;
    }
    ok = true;
out:
    free(seen);
    return ok;
}

