/* forge.h - what the hostile student files of the fault suite share: the player's
 * descriptors, writing to any descriptor with nothing but the allowed stdio calls (point
 * stdout's FILE at it), and calling the kernel through a "syscall; ret" sequence found in
 * the C library's own code - the two ways past the build's allow-list that need no refused
 * symbol. Static inline: each fault is one translation unit. */
#ifndef FAULT_FORGE_H
#define FAULT_FORGE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The player's control socket to its referee (grader/runner/wire.h): its only socket. */
#define FAULT_CONTROL_FD 3

/* Write text to fd through stdout's FILE (no write() in this object). */
static inline void fault_write_fd(int fd, const char *text) {
    fflush(stdout);
    int saved = stdout->_fileno;
    stdout->_fileno = fd;
    fputs(text, stdout);
    fflush(stdout);
    stdout->_fileno = saved;
}

/* The address of a "syscall; ret" sequence in the C library's code, found by reading the
 * code after qsort (an allowed function). With it, a variadic call sets %al to the number
 * of floating-point arguments, which the kernel reads as the system call number: 0 read,
 * 1 write, 2 open... (x86-64 only; NULL elsewhere). */
static inline const void *fault_gadget(void) {
#if defined(__x86_64__)
    const unsigned char *p = (const unsigned char *)(uintptr_t)&qsort;
    for (long i = 0; i < 1000000; i++)
        if (p[i] == 0x0f && p[i + 1] == 0x05 && p[i + 2] == 0xc3) return p + i;
#endif
    return NULL;
}

/* open(path, O_RDONLY) and write(fd, buf, n) through the gadget: the kernel's answer (a
 * descriptor or a byte count, or -errno). */
static inline long fault_open(const char *path) {
    const void *g = fault_gadget();
    if (!g) return -1;
    long (*sys)(const char *, long, long, ...) = (long (*)(const char *, long, long, ...))(uintptr_t)g;
    return sys(path, 0, 0, 0.0, 0.0); /* two doubles: %al = 2, open */
}
static inline long fault_write(long fd, const void *buf, long n) {
    const void *g = fault_gadget();
    if (!g) return -1;
    long (*sys)(long, const void *, long, ...) = (long (*)(long, const void *, long, ...))(uintptr_t)g;
    return sys(fd, buf, n, 0.0); /* one double: %al = 1, write */
}

#endif
