/* landlock-run.c - pl-landlock: runs a command under Landlock, for the class grader's builds
 * where bubblewrap cannot start (the runs themselves are confined by pl-grade).
 *
 *   pl-landlock [--read DIR]... [--hide DIR]... [--write DIR]... -- COMMAND [ARGS...]
 *
 * COMMAND and all it starts may read and execute beneath every --read DIR except beneath
 * each --hide DIR (other submissions, reports, the hidden rubric, solutions), read and write
 * beneath every --write DIR (even inside a hidden one) except the hidden directories below
 * it, and read and write the device files; nothing else. With Landlock
 * ABI 6 it cannot signal a process outside. Exit 125 with one line when Landlock cannot be
 * set up, else COMMAND's status. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "landlock.h"

static void die(const char *msg)
{
    fprintf(stderr, "pl-landlock: %s\n", msg);
    exit(125);
}

int main(int argc, char **argv)
{
    char **read = calloc((size_t)argc, sizeof *read), **hide = calloc((size_t)argc, sizeof *hide),
         **write = calloc((size_t)argc, sizeof *write);
    int n_read = 0, n_hide = 0, n_write = 0, i = 1;
    if (!read || !hide || !write) die("out of memory");
    for (; i < argc && strcmp(argv[i], "--"); i++) {
        char ***list = !strcmp(argv[i], "--read") ? &read : !strcmp(argv[i], "--hide") ? &hide
                                                          : !strcmp(argv[i], "--write") ? &write : NULL;
        int *n = list == &read ? &n_read : list == &hide ? &n_hide : &n_write;
        if (!list) {
            fprintf(stderr, "pl-landlock: unknown option '%s' (usage: pl-landlock [--read|--hide|--write DIR]... -- CMD)\n",
                    argv[i]);
            return 2;
        }
        if (i + 1 >= argc) die("an option needs a directory");
        char *p = realpath(argv[++i], NULL);
        if (p) (*list)[(*n)++] = p;
        else if (list != &hide) {  // a directory to hide that does not exist hides nothing
            fprintf(stderr, "pl-landlock: %s: %s\n", argv[i], strerror(errno));
            return 2;
        }
    }
    if (i + 1 >= argc) die("no command after --");
    int abi = ll_abi();
    if (!abi) die("this kernel has no Landlock (Linux 5.13 or later, lsm=landlock)");
    int rs = ll_create(abi);
    if (rs < 0) die(strerror(errno));
    bool ok = true;
    for (int k = 0; k < n_read; k++) ok &= ll_allow_except(rs, abi, read[k], hide, n_hide, LL_RX);
    ok &= ll_allow(rs, abi, "/dev", LL_FS_READ_FILE | LL_FS_READ_DIR | LL_FS_WRITE_FILE);
    for (int k = 0; k < n_write; k++) {  // the hidden directories inside it stay hidden
        char **inside = calloc((size_t)n_hide + 1, sizeof *inside);
        int n_inside = 0;
        if (!inside) die("out of memory");
        for (int h = 0; h < n_hide; h++)
            if (strcmp(hide[h], write[k]) && ll_under(hide[h], write[k])) inside[n_inside++] = hide[h];
        ok &= ll_allow_except(rs, abi, write[k], inside, n_inside, ll_handled(abi));
        free(inside);
    }
    if (!ok || !ll_enforce(rs)) die(strerror(errno));
    execvp(argv[i + 1], argv + i + 1);
    fprintf(stderr, "pl-landlock: cannot run %s: %s\n", argv[i + 1], strerror(errno));
    return 127;
}
