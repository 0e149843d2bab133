/* lab07_player_modes.c - placeholder */
#include "lab07.h"
int l7_mode_train(lab7 *L) { (void)L; return 0; }
int l7_mode_memory(lab7 *L) { (void)L; return 0; }
int l7_mode_bench(lab7 *L) { (void)L; return 0; }
