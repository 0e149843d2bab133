/* link.c - the referee's two connections, the bottom of its files: the engine's channel
 * (signed records) and the player's control socket (a command and its reply). Everything
 * above - the verdicts, the slots, the relays, the case loop - talks through these, and a
 * player or a channel that breaks the protocol ends the referee here. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "referee.h"

referee_state g_ref = {.engine_fd = -1, .ctl_fd = -1, .region_fd = -1, .arena_fd = -1};

/* One record: the JSON, a tab, its signature (SipHash-2-4 of the record's number and the
 * JSON under the run's key, 16 hex digits), a newline. */
void engine_record(cJSON *o) {
    if (g_ref.engine_fd < 0) return;
    char *s = cJSON_PrintUnformatted(o);
    PL_CHECK(s != NULL, "out of host memory");
    size_t n = strlen(s);
    char *line = malloc(n + SIPHASH_HEX + 3);
    PL_CHECK(line != NULL, "out of host memory");
    int k = snprintf(line, n + SIPHASH_HEX + 3, "%s\t%016llx\n", s,
                     (unsigned long long)siphash_record(g_ref.key, g_ref.engine_seq++, s, n));
    if (!wire_write_full(g_ref.engine_fd, line, (size_t)k))
        pl_fatal(__FILE__, __LINE__, "write(results channel)", strerror(errno));
    free(line);
    free(s);
}

void referee_tampered(const char *fmt, ...) {
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[rank %d] referee: %s%s%s\n", g_ref.rank, why, g_ref.current_case ? " in case " : "",
            g_ref.current_case ? g_ref.current_case : "");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "event", "abort");
    cJSON_AddNumberToObject(o, "rank", g_ref.rank);
    if (g_ref.current_case) cJSON_AddStringToObject(o, "case", g_ref.current_case);
    cJSON_AddStringToObject(o, "why", why);
    engine_record(o);
    cJSON_Delete(o);
    if (g_ref.player > 0) kill(g_ref.player, SIGKILL);
    _exit(PL_EXIT_FATAL);
}

/* The control socket failed: the player is gone (say how: the engine reads the markers,
 * and leave with its code), or it closed or garbled the socket while alive (tampered). */
PL_NORETURN void player_gone(void) {
    int st = 0;
    pid_t r = 0;
    for (int i = 0; i < 200 && r == 0; i++) { /* a dying player's exit follows its EOF */
        r = waitpid(g_ref.player, &st, WNOHANG);
        if (r == 0) usleep(10 * 1000);
    }
    if (r == 0) referee_tampered("the player stopped answering on its control socket but did not exit");
    g_ref.player = 0;
    if (r > 0 && WIFSIGNALED(st)) {
        fprintf(stderr, "[rank %d] the player crashed with signal %d (%s)%s%s\n", g_ref.rank, WTERMSIG(st),
                strsignal(WTERMSIG(st)), g_ref.current_case ? " in case " : "", g_ref.current_case ? g_ref.current_case : "");
        _exit(PL_EXIT_FATAL);
    }
    int code = r > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : PL_EXIT_FATAL;
    if (code == 0 || code == 1) {
        fprintf(stderr, "[rank %d] referee: the player exited (code %d) in the middle of %s\n", g_ref.rank, code,
                g_ref.current_case ? g_ref.current_case : "its start-up");
        code = PL_EXIT_FATAL;
    }
    _exit(code);
}

/* A referee with requests in flight tests them in a loop: MPI's schedules advance only
 * when tested. Spinning is the fastest way while the core is free. Where ranks outnumber
 * cores (a laptop, a class graded two at a time) it is not: the spinning referees hold the
 * cores that the rank they wait for needs, and the wait grows on itself (a slow start could
 * pass for a deadlock). So the loop looks, every SPIN_CHECK_S of spinning, at how long this
 * thread itself waited for its core meanwhile (the kernel's schedstat): a tenth of the time
 * or more means others want the core, and until something moves the loop naps between
 * tests, each nap a twentieth of the wait so far (at most NAP_MAX_S), which stretches the
 * wait by about 5 %. Where schedstat cannot be read, it naps after SPIN_CHECK_S. */
#define SPIN_CHECK_S 250e-6
#define CONTENDED 0.10
#define NAP_SHARE 0.05
#define NAP_MAX_S 1e-3

static double mono_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Seconds this thread has waited for a core since it started; -1 if unknown. */
static double queued_s(void) {
    static int fd = -2;
    if (fd == -2) fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[96];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return -1;
    buf[n] = '\0';
    unsigned long long run_ns, wait_ns;
    if (sscanf(buf, "%llu %llu", &run_ns, &wait_ns) != 2) return -1;
    return 1e-9 * (double)wait_ns;
}

/* One wait of the loop: the state of its spinning and napping. */
typedef struct {
    double still_since; /* when something last moved                      */
    double window_at;   /* the spin window's start, and the queue time then */
    double queued_at;
    bool napping;
} waiting;

static void wait_moved(waiting *w) {
    w->still_since = w->window_at = mono_s();
    w->queued_at = queued_s();
    w->napping = false;
}

/* How long to block on the socket before the next test: 0 while spinning. */
static struct timespec wait_nap(waiting *w) {
    double now = mono_s();
    if (!w->napping && now - w->window_at >= SPIN_CHECK_S) {
        double q = queued_s();
        w->napping = q < 0 || w->queued_at < 0 || q - w->queued_at >= CONTENDED * (now - w->window_at);
        w->window_at = now;
        w->queued_at = q;
    }
    double s = w->napping ? NAP_SHARE * (now - w->still_since) : 0;
    if (s > NAP_MAX_S) s = NAP_MAX_S;
    return (struct timespec){0, (long)(s * 1e9)};
}

/* The referees' transport: while the player computes or waits, its requests are posted and
 * MPI is progressed; with requests in flight the loop tests them as above, with none it
 * sleeps on the socket. */
int player_recv(wire_msg *m, void **payload, uint64_t max) {
    if (!transport_on()) return wire_recv(g_ref.ctl_fd, m, payload, max);
    uint64_t cap = max > sizeof(xfer_req) + WIRE_XFER_INLINE_MAX ? max : sizeof(xfer_req) + WIRE_XFER_INLINE_MAX;
    waiting w;
    wait_moved(&w);
    for (;;) {
        bool busy = transport_busy();
        struct pollfd p = {.fd = g_ref.ctl_fd, .events = POLLIN};
        struct timespec nap = busy ? wait_nap(&w) : (struct timespec){0, 0};
        int r = ppoll(&p, 1, busy ? &nap : NULL, NULL);
        if (r < 0 && errno != EINTR) player_gone();
        if (r > 0) {
            int got = wire_recv(g_ref.ctl_fd, m, payload, cap);
            if (got != 1) return got;
            if (m->cmd != REP_XFER) {
                if (m->len > max) {
                    free(*payload);
                    *payload = NULL;
                    return -1;
                }
                return got;
            }
            int sent = 1;
            const char *why = transport_request(*payload, m->len, &sent);
            free(*payload);
            *payload = NULL;
            if (why) referee_tampered("%s", why);
            if (!sent) player_gone();
            wait_moved(&w);
        }
        bool moved = false;
        if (!transport_progress(&moved)) player_gone();
        if (moved || !busy) wait_moved(&w);
    }
}

void player_command(uint32_t cmd, uint32_t arg) {
    if (!wire_send(g_ref.ctl_fd, cmd, arg, NULL, 0)) player_gone();
    wire_msg m;
    void *payload = NULL;
    int got = player_recv(&m, &payload, 0);
    if (got == 0) player_gone();
    if (got < 0 || m.cmd != REP_DONE)
        referee_tampered("the player answered command %u with something else than its reply", cmd);
}
