// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
// sandbox: both
/* The C library exports its system calls under other names too (__kill, __fork, __open,
 * __write...): a refusal by name would let them through. The build's list of what a lab
 * may call is an allow-list, so these are refused like the plain names. */
#include <stddef.h>
#include <sys/types.h>

#include "../../../solutions/01-collectives/collectives.c"

extern pid_t __fork(void);
extern int __open(const char *path, int flags, ...);
extern long __write(int fd, const void *buf, size_t n);

void lab_poke(void);
void lab_poke(void) {
    if (__fork() == 0) __write(1, "child\n", 6);
    __open("/proc/self/environ", 0);
}
