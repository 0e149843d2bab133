/* child.c - runs one child (a build command or mpirun) so that nothing it does can
 * hang or crash the engine:
 *  - it gets its own session (setsid), so a kill(-pgid) reaches mpirun and whatever shares
 *    its group: SIGTERM first, SIGKILL 2 s later (at once when the run is distrusted); what
 *    escapes the group (Open MPI gives each rank its own) is the caller's to kill, through
 *    contain_kill_descendants();
 *  - resource limits, and for a sandboxed run the switch to uid 65534, happen in the child
 *    between fork and exec;
 *  - stdout and stderr are read through non-blocking pipes with poll(); only the first and
 *    the last 32 KiB of each are kept, so megabytes of garbage cost no memory;
 *  - every line of both streams is scanned for the watchdog and crash markers while it
 *    streams past, so a marker is seen even when it falls in the discarded middle; the
 *    streams never decide a verdict or extend a deadline;
 *  - the results channel is polled with the pipes; its lines go to the caller's on_line,
 *    and the caller's deadline (the next valid record is due by then) is the only clock
 *    besides the overall cap. */
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
#define CHANNEL_POLL_MAX 2100  // the listening socket and every connection (2 per rank + 8 at most)

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

/* Calls fn for every line of the capture (cleaned) until it returns true; returns that line. */
static char *find_line(const capture *c, bool last, bool (*fn)(const char *line, const void *arg), const void *arg)
{
    char *text = capture_text(c);
    char *found = NULL;
    for (char *b = text; *b;) {
        char *e = strchr(b, '\n');
        if (!e) e = b + strlen(b);
        char *line = line_copy(b, e);
        if (fn(line, arg)) {
            free(found);
            found = line;
            if (!last) break;
        } else {
            free(line);
        }
        b = *e ? e + 1 : e;
    }
    free(text);
    return found;
}

static bool mentions_error(const char *line, const void *arg)
{
    (void)arg;
    return !banner_line(line) && strcasestr(line, "error") != NULL;
}

static bool not_banner(const char *line, const void *arg)
{
    (void)arg;
    return !banner_line(line) && strspn(line, " \t?") < strlen(line);
}

static bool contains(const char *line, const void *needle)
{
    return strstr(line, needle) != NULL;
}

static bool starts_with(const char *line, const void *prefix)
{
    return !strncmp(line, prefix, strlen(prefix));
}

/* A referee's own diagnosis ("[rank 2 on node2] referee: cannot reach ..."): it names the
 * cause, where the launcher's lines after it name only the exit. */
static bool referee_says(const char *line, const void *arg)
{
    (void)arg;
    return line[0] == '[' && strstr(line, "] referee: ") != NULL;
}

/* The harness's own fatal line in a rank ("[rank 1] common/x.c:42: call -> reason", from
 * pl_fatal): it names what the code did, where the launcher's lines after it name only
 * the exit code. */
static bool harness_says(const char *line, const void *arg)
{
    (void)arg;
    return !strncmp(line, "[rank ", 6) && strstr(line, "] ") != NULL && strstr(line, " -> ") != NULL;
}

char *capture_reason(const capture *c)
{
    char *line = find_line(c, false, referee_says, NULL);
    if (!line) line = find_line(c, false, harness_says, NULL);
    if (!line) line = find_line(c, true, mentions_error, NULL);
    return line ? line : find_line(c, true, not_banner, NULL);
}

/* A launcher's warning about itself ("plm:rsh: Warning: setpgid(...) failed", printed when a
 * forked agent wins a race with its parent): true of the launcher, never the reason it stopped. */
static bool not_banner_nor_warning(const char *line, const void *arg)
{
    return not_banner(line, arg) && !strcasestr(line, "warning");
}

char *capture_first(const capture *c)
{
    char *line = find_line(c, false, not_banner_nor_warning, NULL);
    return line ? line : find_line(c, false, not_banner, NULL);
}

char *capture_find_line(const capture *c, const char *needle)
{
    return find_line(c, false, contains, needle);
}

char *capture_line_starting(const capture *c, const char *prefix)
{
    return find_line(c, false, starts_with, prefix);
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

/* What the child reports back when it cannot run the program. */
typedef struct {
    int stage;  // 0: limits or dropping root, 1: exec
    int err;
} exec_report;

static void child_exec(child_run *r, int out_w, int err_w, int report_w)
{
    setsid();  // own session and process group: one kill(-pid) reaches mpirun's group
    signal(SIGPIPE, SIG_DFL);  // the engine ignores it; an ignored signal survives exec
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    dup2(out_w, STDOUT_FILENO);
    dup2(err_w, STDERR_FILENO);
    exec_report rep = {0, 0};
    if (!contain_child_setup(r->limits, r->drop_root) || (r->landlock && !landlock_confine(r->landlock, r->landlock_chan))) {
        rep.err = errno;
    } else {
        rep.stage = 1;
        if (r->envp) execvpe(r->argv[0], r->argv, r->envp);
        else execvp(r->argv[0], r->argv);
        rep.err = errno;
    }
    if (write(report_w, &rep, sizeof rep) < 0) { /* nothing more we can do */ }
    _exit(127);
}

/* Start killing the child's process group: SIGTERM now and SIGKILL after a grace period,
 * or SIGKILL at once. */
static void start_kill(pid_t pid, bool at_once, bool *killing, bool *hard_killed, double *kill_at)
{
    if (*killing && (*hard_killed || !at_once)) return;
    *killing = true;
    *kill_at = now_seconds();
    if (at_once) *hard_killed = true;
    kill(-pid, at_once ? SIGKILL : SIGTERM);
}

void child_run_exec(child_run *r)
{
    int out_pipe[2], err_pipe[2], report[2];
    if (pipe2(out_pipe, O_CLOEXEC) || pipe2(err_pipe, O_CLOEXEC) || pipe2(report, O_CLOEXEC))
        die_engine("pipe: %s", strerror(errno));
    fflush(NULL);  // nothing buffered may be written twice
    double t0 = now_seconds(), q0 = quiet_seconds();
    pid_t pid = fork();
    if (pid < 0) die_engine("fork: %s", strerror(errno));
    if (pid == 0) child_exec(r, out_pipe[1], r->merge_stderr ? out_pipe[1] : err_pipe[1], report[1]);

    close(out_pipe[1]);
    close(err_pipe[1]);
    close(report[1]);
    exec_report rep;
    if (read(report[0], &rep, sizeof rep) == (ssize_t)sizeof rep) {
        r->exec_failed = true;
        char *msg = rep.stage ? xasprintf("cannot run %s: %s\n", r->argv[0], strerror(rep.err))
                              : xasprintf("cannot set the run's limits%s%s: %s\n",
                                          r->drop_root ? " or switch to uid 65534" : "",
                                          r->landlock ? " or enter the Landlock sandbox" : "", strerror(rep.err));
        capture_feed(&r->err, msg, strlen(msg));
        free(msg);
    }
    close(report[0]);

    stream streams[2] = {{out_pipe[0], &r->out, &r->scan_out}, {err_pipe[0], &r->err, &r->scan_err}};
    if (r->merge_stderr) {
        close(err_pipe[0]);
        streams[1].fd = -1;
    }
    for (int i = 0; i < 2; i++)
        if (streams[i].fd >= 0) fcntl(streams[i].fd, F_SETFL, O_NONBLOCK);

    channel *ch = r->chan;
    double kill_at = 0, reaped_at = 0;
    bool killing = false, hard_killed = false, reaped = false;
    for (;;) {
        struct pollfd fds[2 + CHANNEL_POLL_MAX] = {{streams[0].fd, POLLIN, 0}, {streams[1].fd, POLLIN, 0}};
        int nfds = 2 + (ch ? channel_pollfds(ch, fds + 2, CHANNEL_POLL_MAX) : 0);
        poll(fds, (nfds_t)nfds, POLL_MS);  // negative fds are ignored; EINTR just means look again
        for (int i = 0; i < 2; i++) stream_read(r, &streams[i], !killing);
        if (ch && !r->distrusted) {
            channel_accept(ch);
            if (!channel_read(ch, READ_BUDGET, r->on_line, r->ctx)) {
                r->distrusted = true;
                start_kill(pid, true, &killing, &hard_killed, &kill_at);
            }
        }

        // the engine is a subreaper: orphans of the run are reaped here as they die
        double now = now_seconds(), qnow = quiet_seconds();
        int status;
        pid_t w;
        while ((w = waitpid(-1, &status, WNOHANG)) > 0) {
            if (w != pid) continue;
            reaped = true;
            reaped_at = now;
            if (WIFEXITED(status)) {
                r->exit_code = WEXITSTATUS(status);
            } else {
                r->exit_code = -1;
                r->term_signal = WTERMSIG(status);
            }
        }
        if (reaped) {
            bool open_pipes = streams[0].fd >= 0 || streams[1].fd >= 0;
            if (!open_pipes) break;
            if (now - reaped_at > DRAIN_AFTER_EXIT_S) {
                kill(-pid, SIGKILL);  // grandchildren in the group still hold the pipes
                break;
            }
            continue;
        }
        if (!killing) {
            double due = r->deadline ? r->deadline(r->ctx) : 0;
            if (due > 0 && qnow > due) r->timed_out = true;
            else if (r->total_s > 0 && qnow - q0 > r->total_s) r->hit_cap = true;
            else if (engine_interrupted) r->interrupted = true;
            if (r->timed_out || r->hit_cap || r->interrupted) start_kill(pid, false, &killing, &hard_killed, &kill_at);
        } else if (!hard_killed && now - kill_at > KILL_GRACE_S) {
            start_kill(pid, true, &killing, &hard_killed, &kill_at);
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
    // records written just before the exit are still in the socket
    if (ch && !r->distrusted && !channel_read(ch, PLAN_LINE_MAX + READ_BUDGET, r->on_line, r->ctx))
        r->distrusted = true;
    r->wall_s = now_seconds() - t0;
    r->quiet_s = quiet_seconds() - q0;
}

void child_run_free(child_run *r)
{
    strlist_free(&r->deadlock_lines);
    strlist_free(&r->crash_lines);
}
