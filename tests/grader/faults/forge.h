/* forge.h - what the hostile student files of the fault suite share: finding the results
 * channel from inside a rank, and writing to any descriptor without calling write() (the
 * build's object checker refuses write, dup, fdopen...): point stdout's FILE at it.
 * Static inline: each fault is one translation unit. */
#ifndef FAULT_FORGE_H
#define FAULT_FORGE_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>  // defines: getpeername
#include <sys/stat.h>    // defines: fstat, S_ISSOCK
#include <sys/un.h>      // defines: sockaddr_un

/* The descriptor connected to the engine's results socket, or -1 (other ranks). */
static inline int fault_channel_fd(void) {
    for (int fd = 3; fd < 1024; fd++) {
        struct stat st;
        if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
        struct sockaddr_un a;
        socklen_t len = sizeof a;
        memset(&a, 0, sizeof a);
        if (getpeername(fd, (struct sockaddr *)&a, &len) == 0 && a.sun_family == AF_UNIX &&
            strstr(a.sun_path, "results"))
            return fd;
    }
    return -1;
}

/* Write text to fd through stdout's FILE (no write() in this object). */
static inline void fault_write_fd(int fd, const char *text) {
    fflush(stdout);
    int saved = stdout->_fileno;
    stdout->_fileno = fd;
    fputs(text, stdout);
    fflush(stdout);
    stdout->_fileno = saved;
}

#endif
