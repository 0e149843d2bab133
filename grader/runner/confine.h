/* confine.h - the seccomp filters around a player (grader/runner/confine.c). */
#ifndef PL_CONFINE_H
#define PL_CONFINE_H

#include <stdbool.h>
#include <sys/types.h>

/* In the referee's forked child, right before exec(exec_path): the start-up filter.
 * exec_path must be the very pointer passed to execve. */
bool confine_startup(pid_t self, const char *exec_path);
/* In the player, once MPI and the device are up, before any student code: the play
 * filter. device_files: the cuda device (ioctl and open stay allowed); own_mpi: the player
 * runs MPI itself (sockets, System V segments and unlinkat allowed for it), false where its
 * referee moves every message. */
bool confine_play(pid_t self, bool device_files, bool own_mpi);

#endif
