/* lab04.c (referee) - Lab 4's flags, and the verdicts of the cases that need no
 * communication: the student's lists of every shape (schedule.<s>) against the rules and
 * the referee's own generator, the same lists on the logical clock (clock.<s>), and the
 * error codes of pp_config_check and of the generators (errors.*). The player only calls
 * the generators and leaves what they wrote in its slots (grader/player/lab04.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab04_ref.h"
#include "pl_costmodel.h" // defines: plc_profile_load

typedef struct {
    lab4_shape shapes[LAB4_SHAPES];
    int nshapes;
} lists_case;

/* The cost-model profiles' names, for the notes of order.<s> (the player replays them). */
static struct {
    char name[2][64];
} g_prof4;

const char *lab4_profile_name(int i) { return g_prof4.name[i]; }

void lab4_init(void) {
    const lab4_flags *o = lab4_opts();
    int n = pl_world();
    if (o->L < n) pl_usage_error("--layers %d is fewer than the %d stages: every stage needs a block", o->L, n);
    if (o->C % o->H) pl_usage_error("--hidden %d is not a multiple of --heads %d", o->C, o->H);
    const char *names[2] = {o->profile, "pcie-4gpu"};
    for (int i = 0; i < 2; i++) {
        plc_profile prof;
        char err[300];
        if (plc_profile_load(&prof, names[i], err, sizeof err) == 0) snprintf(g_prof4.name[i], sizeof g_prof4.name[i], "%s", prof.name);
        else if (i == 0 && strcmp(o->profile, "dgx-h100")) pl_usage_error("--profile: %s", err);
        else snprintf(g_prof4.name[i], sizeof g_prof4.name[i], "%s", names[i]);
    }
    drv_print("# lab04: %d stage(s); graded steps: GPT T=%d b=%d C=%d H=%d F=%d V=%d, %d blocks, "
              "m = 2p+1 (interleaved: m = 2p, v = %d)\n",
              n, o->T, o->b, o->C, o->H, o->F, o->V, o->L, o->v * n <= o->L ? o->v : o->L / n);
}

/* ==================================================================================== */
/* Inputs: none but the slots the player fills                                            */
/* ==================================================================================== */

void lab4_setup(drv_case *c) {
    switch ((lab4_kind)c->arg[1]) {
    case K_LISTS: {
        lists_case *st = drv_state(c, sizeof *st);
        int k = (int)c->arg[0];
        st->nshapes = lab4_shapes(k, st->shapes);
        size_t calls = (size_t)lab4_rc_at(k, st->shapes, st->nshapes, 0);
        drv_slot_new(c, "lists", lab4_list_total(k, st->shapes, st->nshapes) * sizeof(lab4_action), DRV_OUT | DRV_HOST);
        drv_slot_new(c, "rc", calls * sizeof(int32_t), DRV_OUT | DRV_HOST);
        break;
    }
    case K_CONFIG: drv_slot_new(c, "rc", LAB4_NCONFIGS * sizeof(int32_t), DRV_OUT | DRV_HOST); break;
    case K_SCHED_ERR:
        drv_slot_new(c, "rc", LAB4_NBAD * sizeof(int32_t), DRV_OUT | DRV_HOST);
        for (int i = 0; i < LAB4_NBAD; i++) {
            char name[8];
            snprintf(name, sizeof name, "a%d", i);
            /* one slot per call: its red zones catch a write past the array */
            drv_slot_new(c, name, (size_t)LAB4_BAD[i].cap * sizeof(lab4_action), DRV_OUT | DRV_HOST);
        }
        break;
    default: break;
    }
}

void lab4_teardown(drv_case *c) { (void)c; }

/* ==================================================================================== */
/* The student's lists, as the player left them                                           */
/* ==================================================================================== */

static bool is_poison(const lab4_action *a) {
    uint32_t w[3];
    memcpy(w, a, sizeof w);
    return w[0] == 0x7FC0DEADu && w[1] == 0x7FC0DEADu && w[2] == 0x7FC0DEADu;
}

/* Every stage's list of shape i from the slots into pl (pointers into the slot); false
 * with why on an error code, a count that does not fit, or a write past the count. */
static bool student_plan(drv_case *c, const lists_case *st, int i, lab4_plan *pl, char *why, size_t len) {
    int k = (int)c->arg[0];
    lab4_shape sh = st->shapes[i];
    const lab4_action *lists = drv_slot_host(c, "lists");
    const int32_t *rc = drv_slot_host(c, "rc");
    int cap = lab4_list_cap(k, sh);
    memset(pl, 0, sizeof *pl);
    pl->stages = sh.p;
    for (int s = 0; s < sh.p; s++) {
        const lab4_action *a = lists + lab4_list_at(k, st->shapes, i, s);
        int n = rc[lab4_rc_at(k, st->shapes, i, s)];
        pl->acts[s] = a;
        pl->count[s] = n > 0 ? (n > cap ? cap : n) : 0;
        if (n < 0) {
            snprintf(why, len, "p=%d m=%d v=%d stage %d: pp_schedule_%s returned %d (%s)", sh.p, sh.m, sh.v, s, LAB4_SCHED[k],
                     n, lab4_error_string(n));
            return false;
        }
        bool past = n > cap;
        for (int j = n; !past && j < cap + LAB4_GUARD; j++) past = !is_poison(&a[j]);
        if (past) {
            snprintf(why, len, "p=%d m=%d v=%d stage %d: returned %d but wrote past it", sh.p, sh.m, sh.v, s, n);
            return false;
        }
    }
    return true;
}

/* One shape: the DIVIDE error where m is not a multiple of p, else every stage's list
 * against the rules, the reference and the clock. False with why. */
static bool shape_lists(drv_case *c, const lists_case *st, int i, char *why, size_t len) {
    int k = (int)c->arg[0];
    lab4_shape sh = st->shapes[i];
    if (lab4_list_calls(k, sh) < sh.p) {
        int rc = ((const int32_t *)drv_slot_host(c, "rc"))[lab4_rc_at(k, st->shapes, i, 0)];
        if (rc != L4_ERR_DIVIDE)
            snprintf(why, len, "p=%d m=%d v=%d: returned %d, expected PP_ERR_DIVIDE (m is not a multiple of p)", sh.p, sh.m,
                     sh.v, rc);
        return rc == L4_ERR_DIVIDE;
    }
    lab4_action *ref = malloc((size_t)lab4_schedule_length(k, sh.m, sh.v) * sizeof *ref);
    PL_CHECK(ref != NULL, "out of host memory");
    lab4_plan pl;
    lab4_clock ck = {0};
    bool ok = student_plan(c, st, i, &pl, why, len);
    for (int s = 0; ok && s < sh.p; s++) {
        char rule[200];
        if (!list_rules(k, sh.p, s, sh.m, sh.v, pl.acts[s], pl.count[s], rule, sizeof rule)) {
            snprintf(why, len, "p=%d m=%d v=%d stage %d: %s", sh.p, sh.m, sh.v, s, rule);
            ok = false;
        }
        int nr = ref_schedule(k, sh.p, s, sh.m, sh.v, ref);
        for (int j = 0; ok && j < nr; j++)
            if (memcmp(&ref[j], &pl.acts[s][j], sizeof ref[j])) {
                char got[32], want[32];
                lab4_action_name(pl.acts[s][j], sh.v, got, sizeof got);
                lab4_action_name(ref[j], sh.v, want, sizeof want);
                snprintf(why, len, "p=%d m=%d v=%d stage %d: action %d is %s, expected %s", sh.p, sh.m, sh.v, s, j, got, want);
                ok = false;
            }
    }
    if (ok && !lab4_clock_run(&pl, sh.v, &ck))
        snprintf(why, len, "p=%d m=%d v=%d: %s", sh.p, sh.m, sh.v, ck.why), ok = false;
    lab4_clock_free(&ck);
    free(ref);
    return ok;
}

void lab4_schedule_check(drv_case *c) {
    if (!c->ran) return;
    const lists_case *st = c->state;
    int k = (int)c->arg[0], lists = 0;
    char why[300] = "";
    for (int i = 0; i < st->nshapes && shape_lists(c, st, i, why, sizeof why); i++)
        lists += lab4_list_calls(k, st->shapes[i]) < st->shapes[i].p ? 0 : st->shapes[i].p;
    drv_num(c, "lists", lists);
    if (why[0]) drv_fail(c, "%s", why);
    else drv_note(c, "%d stage lists (p 1..8, %d shapes) keep the rules and equal the reference", lists, st->nshapes);
}

/* ==================================================================================== */
/* clock.<s>                                                                              */
/* ==================================================================================== */

/* Stashed micro-batches at most, in list order: a forward adds one, the pass that frees
 * its activations (B, or W in zero bubble) removes it. */
static int list_peak(const lab4_action *a, int n) {
    int cur = 0, peak = 0;
    bool split = false;
    for (int i = 0; i < n; i++) split |= a[i].kind == L4_W;
    for (int i = 0; i < n; i++) {
        if (a[i].kind == L4_F && ++cur > peak) peak = cur;
        if (a[i].kind == (split ? L4_W : L4_B)) cur--;
    }
    return peak;
}

/* One shape on the clock: makespan, idle ticks and peak stash of every stage against the
 * closed forms. False with why; *ratio = theory / clock bubble; at p = 4, m = 8 the
 * worked example into worked[160] (unless NULL). */
static bool shape_clock(drv_case *c, const lists_case *st, int i, double *ratio, char *worked, char *why, size_t len) {
    int k = (int)c->arg[0];
    lab4_shape sh = st->shapes[i];
    lab4_plan pl;
    lab4_clock ck = {0};
    size_t wlen = 160;
    bool ok = student_plan(c, st, i, &pl, why, len);
    int T, idle;
    lab4_theory(k, sh.p, sh.m, sh.v, &T, &idle);
    if (ok && !lab4_clock_run(&pl, sh.v, &ck))
        snprintf(why, len, "p=%d m=%d v=%d: %s", sh.p, sh.m, sh.v, ck.why), ok = false;
    else if (ok) {
        double theory = (double)idle / T, got = (double)(ck.makespan - ck.busy[0]) / ck.makespan;
        *ratio = got > 0 ? theory / got : theory > 0 ? 0 : 1;
        if (ck.makespan != T)
            snprintf(why, len, "p=%d m=%d v=%d: the clock ends at tick %d, the schedule's length is %d", sh.p, sh.m, sh.v,
                     ck.makespan, T);
        for (int s = 0; s < sh.p && !why[0]; s++) {
            int want = ref_peak(k, sh.p, s, sh.m, sh.v), peak = list_peak(pl.acts[s], pl.count[s]);
            if (ck.makespan - ck.busy[s] != idle)
                snprintf(why, len, "p=%d m=%d v=%d stage %d: idle %d of %d ticks, expected %d", sh.p, sh.m, sh.v, s,
                         ck.makespan - ck.busy[s], ck.makespan, idle);
            else if (peak != want)
                snprintf(why, len, "p=%d m=%d v=%d stage %d: %d micro-batches stashed at most, expected %d", sh.p, sh.m,
                         sh.v, s, peak, want);
        }
        ok = !why[0];
        if (ok && worked && sh.p == 4 && sh.m == 8) {
            int w = snprintf(worked, wlen, "p=4 m=8%s: %d ticks, bubble %d/%d, peak stash [", sh.v > 1 ? " v=2" : "",
                             ck.makespan, ck.makespan - ck.busy[0], ck.makespan);
            for (int s = 0; s < 4; s++)
                w += snprintf(worked + w, wlen - (size_t)w, "%s%d", s ? "," : "", list_peak(pl.acts[s], pl.count[s]));
            snprintf(worked + w, wlen - (size_t)w, "]");
        }
    }
    lab4_clock_free(&ck);
    return ok;
}

void lab4_clock_check(drv_case *c) {
    if (!c->ran) return;
    const lists_case *st = c->state;
    int k = (int)c->arg[0], checked = 0;
    double worst = 1.0;
    char why[300] = "", worked[160] = "";
    for (int i = 0; i < st->nshapes && !why[0]; i++) {
        double ratio = 1;
        if (lab4_list_calls(k, st->shapes[i]) < st->shapes[i].p) continue;
        checked += shape_clock(c, st, i, &ratio, st->shapes[i].v == (k == L4_INTERLEAVED ? 2 : 1) ? worked : NULL, why,
                               sizeof why);
        if (ratio < worst) worst = ratio;
    }
    drv_num(c, "bubble_ratio", why[0] ? 0 : worst);
    drv_num(c, "shapes", checked);
    int T, idle;
    lab4_theory(L4_1F1B, 4, 8, 1, &T, &idle); /* zero bubble's yardstick, on its own clock */
    if (why[0]) drv_fail(c, "%s", why);
    else if (k == L4_ZBH1)
        drv_note(c, "%d shapes as the formulas; %s; 1F1B on the same clock (its backward B + W = 2 ticks): %d ticks, %d idle, "
                    "peak %d: a third of the bubble for the same peak",
                 checked, worked, T, idle, ref_peak(L4_1F1B, 4, 0, 8, 1));
    else drv_note(c, "%d shapes: makespan, idle ticks and peak stash as the formulas; %s", checked, worked);
}

/* ==================================================================================== */
/* errors.*                                                                               */
/* ==================================================================================== */

void lab4_config_check(drv_case *c) {
    if (!c->ran) return;
    static const int want[LAB4_NCONFIGS] = {L4_OK,          L4_OK,         L4_ERR_STAGES, L4_ERR_STAGES, L4_ERR_MICRO,
                                            L4_ERR_DIVIDE,  L4_ERR_CHUNKS, L4_ERR_CHUNKS, L4_ERR_CHUNKS, L4_ERR_STAGES,
                                            L4_ERR_STAGES,  L4_ERR_MICRO,  L4_ERR_CHUNKS, L4_ERR_CHUNKS};
    const int32_t *rc = drv_slot_host(c, "rc");
    for (int i = 0; i < LAB4_NCONFIGS; i++) {
        char what[96];
        snprintf(what, sizeof what, "pp_config_check(%s)", LAB4_CONFIG_WHAT[i]);
        if (!drv_check_code(c, rc[i], want[i], what, lab4_error_string)) return;
    }
    drv_note(c, "%d configurations: the right code for each", LAB4_NCONFIGS);
}

void lab4_sched_err_check(drv_case *c) {
    if (!c->ran) return;
    static const int want[LAB4_NBAD] = {L4_ERR_MICRO,  L4_ERR_STAGES, L4_ERR_STAGES,   L4_ERR_STAGES,   L4_ERR_MICRO,
                                        L4_ERR_DIVIDE, L4_ERR_CHUNKS, L4_ERR_CAPACITY, L4_ERR_CAPACITY, L4_ERR_CAPACITY,
                                        L4_ERR_CHUNKS};
    const int32_t *rc = drv_slot_host(c, "rc");
    for (int i = 0; i < LAB4_NBAD; i++)
        if (!drv_check_code(c, rc[i], want[i], LAB4_BAD[i].what, lab4_error_string)) return;
    drv_note(c, "%d bad calls: the right code for each, nothing written past the array", LAB4_NBAD);
}
