/* forge.h - what the hostile student files of the fault suite share: the player's
 * descriptors, writing to any descriptor with nothing but the allowed stdio calls (point
 * stdout's FILE at it), and calling the kernel through a "syscall; ret" sequence found in
 * the C library's own code - the two ways past the build's allow-list that need no refused
 * symbol - the kit's wire layout, and the executable's writable segment found in memory.
 * Static inline: each fault is one translation unit. */
#ifndef FAULT_FORGE_H
#define FAULT_FORGE_H

#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* grader/runner/wire.h's layout, as a student reading the kit's source would copy it: a
 * message on the control socket, and a transport request after it. */
typedef struct {
    uint32_t cmd, arg;
    uint64_t len;
} fault_wire_msg;
typedef struct {
    uint64_t id;
    uint32_t kind, dtype;
    int32_t comm, peer, op, key;
    uint64_t count, in_off, out_off;
} fault_xfer_req;
enum { FAULT_REP_XFER = 104, FAULT_XFER_SEND = 1, FAULT_XFER_MARK = 12, FAULT_XFER_F32 = 0 };

/* The executable's writable segment (its data and bss: the harness's counters live there),
 * found from the address of any of its functions with nothing the static scan names: down
 * to the ELF header in memory, page by page, then through its program headers. */
static inline unsigned char *fault_writable_segment(uintptr_t code_address, size_t *len) {
    uintptr_t a = code_address & ~(uintptr_t)4095;
    while (memcmp((const void *)a, ELFMAG, SELFMAG) != 0) a -= 4096;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)a;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(a + eh->e_phoff);
    uintptr_t bias = a; /* the header's segment starts at file offset 0 */
    for (int i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0) bias = a - ph[i].p_vaddr;
    for (int i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_W)) {
            *len = ph[i].p_memsz;
            return (unsigned char *)(bias + ph[i].p_vaddr);
        }
    *len = 0;
    return NULL;
}

#endif
