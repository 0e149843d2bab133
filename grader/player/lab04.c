/* lab04.c (player) - Lab 4's calls that need no communication: the student's generators on
 * every shape of the schedule cases (straight into the "lists" slot, whose poison shows
 * what was written), the bad calls of errors.schedule (each into its own slot, whose red
 * zones show a write past the array) and pp_config_check on errors.config's
 * configurations. The return codes go to the "rc" slot; the referee judges. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab04_play.h"

/* The referee reads the lab's types through its mirror in grader/cases/lab04.h. */
_Static_assert(PP_MAX_STAGES == LAB4_MAX_STAGES && PP_MAX_CHUNKS == LAB4_MAX_CHUNKS, "pipeline.h's limits differ");
_Static_assert((int)PP_GPIPE == L4_GPIPE && (int)PP_1F1B == L4_1F1B && (int)PP_INTERLEAVED == L4_INTERLEAVED &&
                   (int)PP_ZB_H1 == L4_ZBH1 && (int)PP_NSCHEDULES == L4_NSCHED,
               "pipeline.h's schedules differ");
_Static_assert((int)PP_F == L4_F && (int)PP_B == L4_B && (int)PP_W == L4_W, "pipeline.h's actions differ");
_Static_assert((int)PP_OK == L4_OK && (int)PP_ERR_STAGES == L4_ERR_STAGES && (int)PP_ERR_MICRO == L4_ERR_MICRO &&
                   (int)PP_ERR_DIVIDE == L4_ERR_DIVIDE && (int)PP_ERR_CHUNKS == L4_ERR_CHUNKS &&
                   (int)PP_ERR_CAPACITY == L4_ERR_CAPACITY && (int)PP_ERR_PLAN == L4_ERR_PLAN &&
                   (int)PP_ERR_TODO == L4_ERR_TODO,
               "pipeline.h's error codes differ");
_Static_assert(sizeof(pp_action) == sizeof(lab4_action) && offsetof(pp_action, mb) == offsetof(lab4_action, mb) &&
                   offsetof(pp_action, chunk) == offsetof(lab4_action, chunk) && sizeof(pp_kind) == sizeof(int32_t),
               "pp_action and its mirror differ");
_Static_assert(sizeof(pp_config) == sizeof(lab4_config) && offsetof(pp_config, schedule) == offsetof(lab4_config, schedule) &&
                   offsetof(pp_config, recompute) == offsetof(lab4_config, recompute) &&
                   sizeof(pp_schedule_kind) == sizeof(int32_t),
               "pp_config and its mirror differ");

int lab4_student_schedule(int k, int p, int s, int m, int v, pp_action *out, int cap) {
    switch (k) {
    case PP_GPIPE: return pp_schedule_gpipe(p, s, m, out, cap);
    case PP_1F1B: return pp_schedule_1f1b(p, s, m, out, cap);
    case PP_INTERLEAVED: return pp_schedule_interleaved(p, s, m, v, out, cap);
    default: return pp_schedule_zbh1(p, s, m, out, cap);
    }
}

/* schedule.<s>, clock.<s>: every stage's list of every shape. */
void lab4_play_lists(drv_case *c) {
    int k = (int)c->arg[0];
    lab4_shape sh[LAB4_SHAPES];
    int n = lab4_shapes(k, sh);
    pp_action *lists = drv_slot(c, "lists");
    int32_t *rc = drv_slot(c, "rc");
    for (int i = 0; i < n; i++)
        for (int s = 0; s < lab4_list_calls(k, sh[i]); s++)
            rc[lab4_rc_at(k, sh, i, s)] = lab4_student_schedule(k, sh[i].p, s, sh[i].m, sh[i].v,
                                                                lists + lab4_list_at(k, sh, i, s), lab4_list_cap(k, sh[i]));
}

void lab4_play_config(drv_case *c) {
    int32_t *rc = drv_slot(c, "rc");
    for (int i = 0; i < LAB4_NCONFIGS; i++) rc[i] = pp_config_check((const pp_config *)&LAB4_CONFIGS[i]);
}

void lab4_play_sched_err(drv_case *c) {
    int32_t *rc = drv_slot(c, "rc");
    for (int i = 0; i < LAB4_NBAD; i++) {
        char name[8];
        snprintf(name, sizeof name, "a%d", i);
        const lab4_bad_call *b = &LAB4_BAD[i];
        rc[i] = lab4_student_schedule(b->k, b->p, b->s, b->m, b->v, drv_slot(c, name), b->cap);
    }
}

/* ==================================================================================== */
/* The modes' plans                                                                       */
/* ==================================================================================== */

bool lab4_student_plan(int k, int p, int m, int v, pp_plan *pl, char *why, size_t len) {
    int need = lab4_schedule_length(k, m, v), cap = need + 4;
    memset(pl, 0, sizeof *pl);
    pl->stages = p;
    for (int s = 0; s < p; s++) {
        pp_action *a = malloc((size_t)cap * sizeof *a);
        PL_CHECK(a != NULL, "out of host memory");
        for (int i = 0; i < cap; i++) a[i] = (pp_action){(pp_kind)-1, -7, -7};
        pl->acts[s] = a;
        int n = lab4_student_schedule(k, p, s, m, v, a, cap);
        pl->count[s] = n > 0 ? n : 0;
        if (n < 0) {
            snprintf(why, len, "p=%d m=%d v=%d stage %d: pp_schedule_%s returned %d (%s)", p, m, v, s, LAB4_SCHED[k], n,
                     pp_error_string(n));
            return false;
        }
        if (n > cap || (n < cap && a[n].mb != -7)) {
            snprintf(why, len, "p=%d m=%d v=%d stage %d: returned %d but wrote past it", p, m, v, s, n);
            pl->count[s] = n > cap ? cap : n;
            return false;
        }
    }
    return true;
}

void lab4_plan_release(pp_plan *pl) {
    for (int s = 0; s < pl->stages; s++) free((void *)pl->acts[s]);
    memset(pl, 0, sizeof *pl);
}

lab4_plan lab4_plan_view(const pp_plan *pl) {
    lab4_plan v = {.stages = pl->stages};
    for (int s = 0; s < pl->stages; s++) v.acts[s] = (const lab4_action *)pl->acts[s], v.count[s] = pl->count[s];
    return v;
}
