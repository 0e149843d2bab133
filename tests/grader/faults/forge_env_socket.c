// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
/* Issue item 1: the broadcast does nothing and connects to the results socket itself, with
 * the path and key from its environment (or /proc/self/environ), to send a whole run of
 * pass records. The object checker refuses socket() and connect(); and had they run, the
 * variables are scrubbed before MPI starts and the socket accepts one connection only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    (void)sendbuf, (void)recvbuf, (void)count, (void)root, (void)comm, (void)stream;
    const char *path = getenv("PL_RESULTS_SOCK"), *key = getenv("PL_RESULTS_KEY");
    if (!path || !key) return;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        char hello[256];
        snprintf(hello, sizeof hello, "{\"event\":\"hello\",\"key\":\"%s\",\"protocol\":2}\n", key);
        send(fd, hello, strlen(hello), 0);
    }
}
