/* lab08_ref.h - what Lab 8's referee files share (grader/referee/lab08.c, lab08_train.c):
 * the group rule, the traffic formulas, comparisons. Host arrays only. */
#ifndef LAB08_REF_H
#define LAB08_REF_H

#include "lab08.h"

/* The inputs every rank of a group shares (positions, gradients, targets): the seed of no
 * rank (r = -1) of case c, which every referee derives and no player is given. */
uint64_t l8_shared_seed(const drv_case *c, int run);

/* The group rule: the world ranks of this rank's `group` (L8_TENSOR, L8_PIPE, L8_DATA,
 * L8_EMBED) in the order of their ranks in it; returns how many (0: no group). */
int l8_members(int rank, int t, int p, int d, int group, int *out);
/* What one step sends on each group, for this rank (the formulas of the handout). */
void l8_expected_traffic(const l8_cfg *c, const l8_layout *lay, int world, l8_tally want[L8_NGROUPS]);
/* Every group's counted traffic against want, group by group (drv_check_traffic); true
 * when every rank's agrees. */
/* Where the referees move the messages: what they moved in the marked phase, group by group
 * of the grid (t, p) by each communicator's members (true); false elsewhere, out untouched. */
bool l8_tally_moved(int phase, int t, int p, int world, int rank, l8_tally out[L8_NGROUPS]);
bool l8_check_groups(drv_case *c, const char *what, const l8_tally got[L8_NGROUPS], const l8_tally want[L8_NGROUPS]);

#endif
