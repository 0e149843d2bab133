/* lab07_play.h - what the player files of Lab 7 share (the calling half: device memory, the
 * student's functions; it judges nothing):
 *   lab07.c        the plays: the pure functions on the referee's questions, a training run
 *                  from the slots to the slots, the checkpoint cases around their interlude
 *   lab07_kit.c    the GPT of models/gpt.h on the device, driven unit by unit through the
 *                  hooks, what each step counted and recorded; a run in pieces (sessions)
 *   lab07_ckpt.c   the kit's checkpoint I/O without files: a save into the slots, a load
 *                  from the directory the referee staged, through the student's plan
 *   lab07_modes.c  --run train, memory, bench, and the kit's own DDP they compare with
 */
#ifndef LAB07_PLAY_H
#define LAB07_PLAY_H

#include "lab07.h"
#include "zero.h" // defines: the lab API (zero_*)

/* The referee's types are zero.h's, byte for byte (grader/cases/lab07.h). */
void l7_zero_model(zero_model *out, const l7_model *m);
zero_config l7_zero_config(const l7_cfg *c);

/* ---- lab07_kit.c ---- */
typedef struct l7_kit l7_kit;
l7_kit *l7_kit_new(const gpt_config *mc, const zero_model *m, zero_dtype dtype);
void l7_kit_free(l7_kit *k);
/* One step through hooks (the student's, or the kit's DDP in the modes). */
typedef struct {
    const void *(*pre_forward)(void *z, int u);
    void (*post_forward)(void *z, int u);
    const void *(*pre_backward)(void *z, int u, void **grad);
    void (*post_backward)(void *z, int u);
    void (*step)(void *z);
} l7_hooks;
extern const l7_hooks L7_STUDENT_HOOKS;
/* The step's loss; rec (when not NULL) gets what it counted and recorded; why the first
 * thing refused (a NULL buffer from a hook). */
double l7_kit_step(l7_kit *k, const l7_hooks *h, void *z, const int *tokens, const int *targets, l7_step *rec,
                   char *why, size_t whylen);

/* A training run of the student's stage in pieces: zero_init from `init` (every unit's fp32
 * parameters, unit after unit, host), steps, the final state. */
typedef struct l7_session l7_session;
l7_session *l7_session_start(const l7_run_in *in, const float *init, pl_comm *comm, l7_record *rec);
/* `count` steps on this rank's sequences tok/tgt ([count][T][b]); ops (not NULL): the last
 * step's recorded ops for the referee's replay. */
void l7_session_steps(l7_session *s, const int *tok, const int *tgt, int count, l7_record *rec, l7_ops *ops, bool mark);
zero_state *l7_session_state(l7_session *s);
/* The pieces and their values into rec and vals ([3][psi]: master, m, v), every unit's
 * parameters into full ([psi], unit after unit); then zero_free and the memory after it. */
void l7_session_finish(l7_session *s, l7_record *rec, float *vals, float *full);
/* The master weights of this rank's pieces (zero_pieces' order), into out (at most cap
 * floats); how many. */
size_t l7_session_masters(l7_session *s, float *out, size_t cap);
/* The same without the final state (a session whose state nobody reads). */
void l7_session_drop(l7_session *s);

/* ---- lab07_ckpt.c ---- */
/* Save z's pieces: its rank file's bytes into file (cap bytes), its records into rec. */
void l7_kit_save(zero_state *z, l7_ck_save *rec, unsigned char *file, size_t cap);
/* Load the staged directory into z (collective over z->comm): t->rc 0, or -1 with one line
 * naming the file; on failure nothing of z has changed. */
void l7_kit_load(zero_state *z, const l7_ck_dir *dir, const unsigned char *data, size_t cap, l7_ck_try *t);
/* Every piece's master, m and v, piece after piece (out: [3][cap]); the elements, or -1. */
int64_t l7_kit_values(zero_state *z, float *out, size_t cap);

#endif
