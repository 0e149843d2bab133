/* engine_child.c - runs one child (a build command or mpirun) so that nothing it does can
 * hang or crash the engine:
 *  - it gets its own session (setsid), so a timeout kills mpirun AND every rank it started
 *    with one kill(-pgid): SIGTERM first, SIGKILL 2 s later;
 *  - stdout and stderr are read through non-blocking pipes with poll(); only the first and
 *    the last 32 KiB of each are kept, so megabytes of garbage cost no memory;
 *  - every line of both streams is scanned for the watchdog and crash markers while it
 *    streams past, so a marker is seen even when it falls in the discarded middle;
 *  - the driver's JSON-lines file is read as it grows, and every new line counts as
 *    progress: the per-case timeout is "no new line for N seconds". */
#include <errno.h>
#include <fcntl.h>     // defines: open, fcntl, O_NONBLOCK, O_CLOEXEC
#include <poll.h>      // defines: poll
#include <signal.h>    // defines: kill, signal
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>  // defines: waitpid, WIFEXITED...
#include <unistd.h>    // defines: fork, setsid, pipe2, dup2, execvp

#include "engine.h"

volatile int engine_interrupted;

#define POLL_MS 100
#define KILL_GRACE_S 2.0       // SIGTERM, then SIGKILL this much later
#define DRAIN_AFTER_EXIT_S 1.0 // how long leftover grandchildren may keep the pipes open
#define READ_BUDGET (1 << 20)  // bytes per stream per poll round, so no stream starves others
#define JSON_LINE_MAX (1 << 20)

/* ---------------------------------------------------------------- capture */

static void capture_feed(capture *c, const char *p, size_t n)
{
    c->total += n;
    size_t h = CAPTURE_HALF - c->head_len;
    if (h > n) h = n;
    memcpy(c->head + c->head_len, p, h);
    c->head_len += h;
    p += h;
    n -= h;
    if (n > CAPTURE_HALF) {  // only the last CAPTURE_HALF bytes can survive
        p += n - CAPTURE_HALF;
        n = CAPTURE_HALF;
    }
    while (n) {
        size_t k = CAPTURE_HALF - c->tail_pos;
        if (k > n) k = n;
        memcpy(c->tail + c->tail_pos, p, k);
        c->tail_pos = (c->tail_pos + k) % CAPTURE_HALF;
        c->tail_len = c->tail_len + k > CAPTURE_HALF ? CAPTURE_HALF : c->tail_len + k;
        p += k;
        n -= k;
    }
}

char *capture_text(const capture *c)
{
    size_t omitted = c->total - c->head_len - c->tail_len;
    char note[96] = "";
    if (omitted) snprintf(note, sizeof note, "\n[... %zu bytes omitted ...]\n", omitted);
    char *s = xmalloc(c->head_len + strlen(note) + c->tail_len + 1);
    size_t n = 0;
    memcpy(s, c->head, c->head_len);
    n += c->head_len;
    memcpy(s + n, note, strlen(note));
    n += strlen(note);
    size_t start = c->tail_len < CAPTURE_HALF ? 0 : c->tail_pos;  // oldest byte of the ring
    for (size_t i = 0; i < c->tail_len; i++) s[n++] = c->tail[(start + i) % CAPTURE_HALF];
    s[n] = '\0';
    // a NUL written by the child would cut the text short; it is garbage anyway
    for (size_t i = 0; i < n; i++)
        if (s[i] == '\0') s[i] = '?';
    return s;
}

/* Copy one line [b, e) with the trailing CR dropped, cleaned. */
static char *line_copy(const char *b, const char *e)
{
    if (e > b && e[-1] == '\r') e--;
    char *s = xmalloc((size_t)(e - b) + 1);
    memcpy(s, b, (size_t)(e - b));
    s[e - b] = '\0';
    clean_text(s);
    return s;
}

char *capture_last_line(const capture *c)
{
    char *text = capture_text(c);
    char *found = NULL;
    char *end = text + strlen(text);
    while (end > text && !found) {
        char *b = end;
        while (b > text && b[-1] != '\n') b--;
        char *line = line_copy(b, end);
        if (strspn(line, " \t?") < strlen(line)) found = line;  // not blank
        else free(line);
        end = b > text ? b - 1 : text;
    }
    free(text);
    return found;
}

char *capture_find_line(const capture *c, const char *needle)
{
    char *text = capture_text(c);
    char *found = NULL;
    for (char *b = text; *b && !found;) {
        char *e = strchr(b, '\n');
        if (!e) e = b + strlen(b);
        char *line = line_copy(b, e);
        if (strstr(line, needle)) found = line;
        else free(line);
        b = *e ? e + 1 : e;
    }
    free(text);
    return found;
}

/* ---------------------------------------------------------------- markers */

/* Keep a marker line unless it is already there (every rank may print the same one). */
static void keep_marker(strlist *l, const char *line)
{
    if (l->count >= MARKER_LINES_MAX) return;
    for (int i = 0; i < l->count; i++)
        if (!strcmp(l->items[i], line)) return;
    strlist_push(l, line);
}

static void scan_line(child_run *r, char *line)
{
    size_t n = strlen(line);
    if (n && line[n - 1] == '\r') line[n - 1] = '\0';
    clean_text(line);
    if (strstr(line, "waits in")) {
        keep_marker(&r->deadlock_lines, line);
    } else if (strstr(line, "crashed with signal") || strstr(line, "exited on signal")) {
        keep_marker(&r->crash_lines, line);
    }
}

static void scanner_feed(child_run *r, line_scanner *s, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n') {
            s->buf[s->len] = '\0';
            scan_line(r, s->buf);
            s->len = 0;
            s->overflow = false;
        } else if (s->len + 1 < sizeof s->buf) {
            s->buf[s->len++] = p[i] ? p[i] : '?';
        } else {
            s->overflow = true;  // the rest of an overlong line is ignored for markers
        }
    }
}

/* ---------------------------------------------------------------- the JSON-lines file */

typedef struct {
    int fd;
    char *buf;
    size_t len, cap;
    bool skipping;  // inside a line longer than JSON_LINE_MAX: drop until its newline
} json_reader;

/* Read what the driver appended since last time; returns the number of complete lines. */
static int json_drain(json_reader *j, child_run *r)
{
    int lines = 0;
    if (j->fd < 0) return 0;
    for (;;) {
        if (j->cap - j->len < 65536) {
            j->cap = j->cap ? 2 * j->cap : 131072;
            j->buf = xrealloc(j->buf, j->cap);
        }
        ssize_t got = read(j->fd, j->buf + j->len, j->cap - j->len - 1);
        if (got <= 0) break;  // end of what is written so far (a regular file never blocks)
        j->len += (size_t)got;
        size_t start = 0;
        for (size_t i = j->len - (size_t)got; i < j->len; i++) {
            if (j->buf[i] != '\n') continue;
            j->buf[i] = '\0';
            if (!j->skipping && i > start) {
                lines++;
                if (r->on_line) r->on_line(r->ctx, j->buf + start);
            }
            j->skipping = false;
            start = i + 1;
        }
        memmove(j->buf, j->buf + start, j->len - start);
        j->len -= start;
        if (j->len > JSON_LINE_MAX) {
            j->len = 0;
            j->skipping = true;
        }
    }
    return lines;
}

/* ---------------------------------------------------------------- running */

typedef struct {
    int fd;
    capture *cap;
    line_scanner *scan;
} stream;

/* Read what is available on one stream; closes it at end of file. */
static void stream_read(child_run *r, stream *s, bool scan)
{
    static char chunk[65536];
    size_t budget = READ_BUDGET;
    while (s->fd >= 0 && budget) {
        ssize_t got = read(s->fd, chunk, sizeof chunk);
        if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (got <= 0) {
            close(s->fd);
            s->fd = -1;
            return;
        }
        capture_feed(s->cap, chunk, (size_t)got);
        if (scan) scanner_feed(r, s->scan, chunk, (size_t)got);
        budget = budget > (size_t)got ? budget - (size_t)got : 0;
    }
}

static void child_exec(child_run *r, int out_w, int err_w, int report_w)
{
    setsid();  // own session and process group: one kill(-pid) reaches every rank
    signal(SIGPIPE, SIG_DFL);  // the engine ignores it; an ignored signal survives exec
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    dup2(out_w, STDOUT_FILENO);
    dup2(err_w, STDERR_FILENO);
    execvp(r->argv[0], r->argv);
    int e = errno;
    if (write(report_w, &e, sizeof e) < 0) { /* nothing more we can do */ }
    _exit(127);
}

void child_run_exec(child_run *r)
{
    int out_pipe[2], err_pipe[2], report[2];
    if (pipe2(out_pipe, O_CLOEXEC) || pipe2(err_pipe, O_CLOEXEC) || pipe2(report, O_CLOEXEC)) {
        perror("pl-grade: pipe");
        exit(3);
    }
    double t0 = now_seconds();
    pid_t pid = fork();
    if (pid < 0) {
        perror("pl-grade: fork");
        exit(3);
    }
    if (pid == 0) child_exec(r, out_pipe[1], r->merge_stderr ? out_pipe[1] : err_pipe[1], report[1]);

    close(out_pipe[1]);
    close(err_pipe[1]);
    close(report[1]);
    int exec_errno = 0;
    if (read(report[0], &exec_errno, sizeof exec_errno) == (ssize_t)sizeof exec_errno) r->exec_failed = true;
    close(report[0]);
    if (r->exec_failed) {
        char *msg = xasprintf("cannot run %s: %s\n", r->argv[0], strerror(exec_errno));
        capture_feed(&r->err, msg, strlen(msg));
        free(msg);
    }

    stream streams[2] = {{out_pipe[0], &r->out, &r->scan_out}, {err_pipe[0], &r->err, &r->scan_err}};
    if (r->merge_stderr) {
        close(err_pipe[0]);
        streams[1].fd = -1;
    }
    for (int i = 0; i < 2; i++)
        if (streams[i].fd >= 0) fcntl(streams[i].fd, F_SETFL, O_NONBLOCK);
    json_reader json = {.fd = r->json_path ? open(r->json_path, O_RDONLY | O_CLOEXEC) : -1};

    double last_progress = t0, kill_at = 0, reaped_at = 0;
    bool killing = false, hard_killed = false, reaped = false;
    for (;;) {
        struct pollfd fds[2] = {{streams[0].fd, POLLIN, 0}, {streams[1].fd, POLLIN, 0}};
        poll(fds, 2, POLL_MS);  // negative fds are ignored; EINTR just means look again
        for (int i = 0; i < 2; i++) stream_read(r, &streams[i], !killing);
        if (json_drain(&json, r)) last_progress = now_seconds();

        double now = now_seconds();
        if (!reaped) {
            int status;
            if (waitpid(pid, &status, WNOHANG) == pid) {
                reaped = true;
                reaped_at = now;
                if (WIFEXITED(status)) {
                    r->exit_code = WEXITSTATUS(status);
                } else {
                    r->exit_code = -1;
                    r->term_signal = WTERMSIG(status);
                }
            }
        }
        if (reaped) {
            bool open_pipes = streams[0].fd >= 0 || streams[1].fd >= 0;
            if (!open_pipes) break;
            if (now - reaped_at > DRAIN_AFTER_EXIT_S) {
                // grandchildren still hold the pipes; the group id stays valid while they live
                kill(-pid, SIGKILL);
                break;
            }
            continue;
        }
        if (!killing) {
            if (r->no_progress_s > 0 && now - last_progress > r->no_progress_s) r->timed_out = true;
            else if (r->total_s > 0 && now - t0 > r->total_s) r->hit_cap = true;
            else if (engine_interrupted) r->interrupted = true;
            if (r->timed_out || r->hit_cap || r->interrupted) {
                killing = true;
                kill_at = now;
                kill(-pid, SIGTERM);
            }
        } else if (!hard_killed && now - kill_at > KILL_GRACE_S) {
            hard_killed = true;
            kill(-pid, SIGKILL);
        }
    }
    for (int i = 0; i < 2; i++)
        if (streams[i].fd >= 0) close(streams[i].fd);
    // a marker on a last line without a newline still counts
    line_scanner *scanners[2] = {&r->scan_out, &r->scan_err};
    for (int i = 0; i < 2; i++) {
        if (!killing && scanners[i]->len) {
            scanners[i]->buf[scanners[i]->len] = '\0';
            scan_line(r, scanners[i]->buf);
        }
        scanners[i]->len = 0;
    }
    json_drain(&json, r);  // lines written just before the exit
    if (json.fd >= 0) close(json.fd);
    free(json.buf);
    r->wall_s = now_seconds() - t0;
}

void child_run_free(child_run *r)
{
    strlist_free(&r->deadlock_lines);
    strlist_free(&r->crash_lines);
}
