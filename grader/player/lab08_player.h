/* lab08_player.h - what Lab 8's player files share (grader/player/lab08.c, lab08_modes.c):
 * the kit's grid and a rank's stage around the student's td_train_step. */
#ifndef LAB08_PLAYER_H
#define LAB08_PLAYER_H

#include "lab08.h"
#include "threed.h" // defines: the lab API (td_*)

/* The kit's grid (the rule, with pl_comm_split): the embed, xent and step cases run on
 * it, so that they grade those functions whatever td_grid_build does. */
void l8_kit_grid(td_grid *g, int t, int p);
void l8_kit_grid_free(td_grid *g);

/* A rank's part of a run at (t, p) of this world: the kit's grid and its stage. */
typedef struct {
    l8_cfg cfg;
    td_config tdc;
    l8_layout lay;
    td_segment *seg;
    td_grid grid;
    td_stage st;
    bool open;
} l8_stage_run;
/* Build it around params (device, [lay.count], the initial parameters): the caller's
 * buffer, which the steps update and l8_stage_close leaves alone. */
void l8_stage_open(l8_stage_run *x, const l8_cfg *cfg, float *params);
void l8_stage_close(l8_stage_run *x);

/* Count the trace's point-to-point and collective ops since index `from` into the grid's
 * groups (ops on other communicators go to L8_OTHER, on the world to L8_WORLD). */
void l8_tally_trace(const td_grid *g, size_t from, l8_tally out[L8_NGROUPS]);
/* True when some rank passes true: a host reduction that no counter sees (control flow
 * only, so that the ranks stop a multi-step play together). */
bool l8_anyone(bool mine);

#endif
