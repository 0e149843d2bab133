/* lab05_player.h - what the player files of Lab 5 share: the kit the student calls (the
 * model the player mapped at start-up, the bytes ls_load delivered) and the host
 * reductions the modes use to say which rank failed. */
#ifndef LAB05_PLAYER_H
#define LAB05_PLAYER_H

#include "lab05.h"
#include "llama_split.h" // defines: the lab API (ls_*)

/* The player's kit: its model, mapped in lab5_player_init (before the play filter). */
typedef struct {
    lab5_model model;
    uint64_t loaded; /* bytes ls_load has delivered on this rank since the last reset */
} lab5_kit;
lab5_kit *lab5_kit_state(void);

/* The lowest rank that passes true (world size when none), and its message broadcast into
 * msg (cap bytes) on every rank: the modes' one line on what failed. */
int lab5_first_failing(bool failed, char *msg, size_t cap);
ls_params lab5_ls_params(const lab5_params *p, float *split);

#endif
