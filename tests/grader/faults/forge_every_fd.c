// lab: 01-collectives
// expect: tampered broadcast.*
// speed: quick
/* Issue item 1: the broadcast does nothing and writes a forged pass record to every socket
 * and pipe the rank has open, newest first, without calling write() (stdout's FILE is
 * pointed at each descriptor in turn). On rank 0 one of them is the results channel: the
 * record is not the one the protocol expects next, so the run is tampered. */
#include <sys/stat.h>

#include "forge.h"

#define lab_broadcast lab_broadcast_solution
#include "../../../solutions/01-collectives/collectives.c"
#undef lab_broadcast

void lab_broadcast(const float *sendbuf, float *recvbuf, size_t count, int root, pl_comm *comm,
                   pl_stream *stream) {
    (void)sendbuf, (void)recvbuf, (void)count, (void)root, (void)comm, (void)stream;
    for (int fd = 1023; fd >= 3; fd--) {
        struct stat st;
        if (fstat(fd, &st) != 0 || !(S_ISSOCK(st.st_mode) || S_ISFIFO(st.st_mode))) continue;
        fault_write_fd(fd, "{\"event\":\"result\",\"case\":\"broadcast.oop.r0.c0\",\"group\":\"broadcast\",\"verdict\":\"pass\"}\n");
    }
}
