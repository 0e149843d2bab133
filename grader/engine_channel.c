/* engine_channel.c - the results channel of one driver run.
 *
 * A fresh directory (mkdtemp: mode 0700, a random name) under the engine's work directory
 * holds a listening AF_UNIX socket; its path and a fresh 128-bit key reach the driver
 * through the environment (PL_RESULTS_SOCK, PL_RESULTS_KEY), which the driver reads and
 * scrubs before MPI starts. Rank 0 connects before any student code runs. The engine
 * accepts exactly one connection, then closes and unlinks the listening socket, so nothing
 * started later (student code included) can connect. Lines are framed here, each at most
 * line_max bytes; what they mean is engine_protocol.c's business. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>  // defines: socket, bind, listen, accept4
#include <sys/un.h>      // defines: sockaddr_un
#include <unistd.h>

#include "engine.h"

#define READ_CHUNK 65536

void channel_open(channel *ch, const char *work_dir, int serial, uid_t owner)
{
    *ch = (channel){.listen_fd = -1, .conn_fd = -1, .line_max = LINE_MAX_BYTES};
    ch->dir = xasprintf("%s/run%d.XXXXXX", work_dir, serial);  // a name nobody can guess
    if (!mkdtemp(ch->dir)) die_engine("cannot create %s: %s", ch->dir, strerror(errno));
    ch->path = xasprintf("%s/results.sock", ch->dir);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(ch->path) >= sizeof addr.sun_path)
        die_engine("the socket path %s is too long; set TMPDIR to a shorter directory", ch->path);
    strcpy(addr.sun_path, ch->path);
    random_hex(ch->key, 16);

    ch->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (ch->listen_fd < 0 || bind(ch->listen_fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(ch->listen_fd, 4) != 0)
        die_engine("cannot open the results socket %s: %s", ch->path, strerror(errno));
    // a sandboxed run is another user: it must reach the directory and the socket, nobody else
    if (owner != (uid_t)-1 && (chown(ch->dir, owner, owner) != 0 || chown(ch->path, owner, owner) != 0))
        die_engine("cannot hand %s to uid %d: %s", ch->dir, (int)owner, strerror(errno));
}

void channel_accept(channel *ch)
{
    if (ch->listen_fd < 0) return;
    int fd = accept4(ch->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // EAGAIN: nobody yet
    ch->conn_fd = fd;
    ch->accepted = true;
    close(ch->listen_fd);  // connections queued behind the first are reset
    ch->listen_fd = -1;
    unlink(ch->path);
}

bool channel_read(channel *ch, size_t budget, line_fn fn, void *ctx)
{
    while (ch->conn_fd >= 0 && budget > 0) {
        if (ch->cap - ch->len < READ_CHUNK + 1) {
            ch->cap = ch->cap ? 2 * ch->cap : 4 * READ_CHUNK;
            ch->buf = xrealloc(ch->buf, ch->cap);
        }
        ssize_t got = read(ch->conn_fd, ch->buf + ch->len, READ_CHUNK);
        if (got < 0 && (errno == EAGAIN || errno == EINTR)) return true;
        if (got <= 0) {  // end of file (an unfinished last line is not a record)
            close(ch->conn_fd);
            ch->conn_fd = -1;
            return true;
        }
        size_t old = ch->len;
        ch->len += (size_t)got;
        budget = budget > (size_t)got ? budget - (size_t)got : 0;
        size_t start = 0;
        for (size_t i = old; i < ch->len; i++) {
            if (ch->buf[i] != '\n') continue;
            ch->buf[i] = '\0';
            size_t n = i - start;
            bool ok = n > ch->line_max ? fn(ctx, NULL, 0) : fn(ctx, ch->buf + start, n);
            start = i + 1;
            if (!ok) {
                ch->len = 0;
                return false;
            }
        }
        memmove(ch->buf, ch->buf + start, ch->len - start);
        ch->len -= start;
        if (ch->len > ch->line_max) {  // no newline in sight: over the cap already
            ch->len = 0;
            return fn(ctx, NULL, 0);
        }
    }
    return true;
}

void channel_close(channel *ch)
{
    if (ch->listen_fd >= 0) close(ch->listen_fd);
    if (ch->conn_fd >= 0) close(ch->conn_fd);
    if (ch->path) unlink(ch->path);
    if (ch->dir) rmdir(ch->dir);
    free(ch->dir);
    free(ch->path);
    free(ch->buf);
    *ch = (channel){.listen_fd = -1, .conn_fd = -1};
}
