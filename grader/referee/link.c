/* link.c - the referee's two connections, the bottom of its files: the engine's channel
 * (signed records) and the player's control socket (a command and its reply). Everything
 * above - the verdicts, the slots, the relays, the case loop - talks through these, and a
 * player or a channel that breaks the protocol ends the referee here. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pl_internal.h" // defines: pl_progress_tick (through pl_instrument.h)
#include "referee.h"

#define PLAYER_EXIT_WAIT_MS 15000 /* after its control socket closed, the player must exit within this */

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
    /* A dying player's exit follows its EOF, within moments on a quiet machine; a loaded one
     * may hold the exit back for seconds, and a player that is slow to die is no tamperer. */
    for (int i = 0; i < PLAYER_EXIT_WAIT_MS / 10 && r == 0; i++) {
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

/* The referees' transport: while the player computes or waits, its requests are posted and
 * MPI is progressed; with requests in flight the loop spins (yielding the core now and then,
 * as MPI's own waits do), with none it sleeps on the socket.
 *
 * On the node's progress board a referee is busy while it waits here with none of its
 * player's messages in flight: its player starts, or computes. While it spins on them, its
 * player waits for the others (or computes beside its own collectives): not busy, and the
 * referee copies the board into the arena's head, where the player's watchdog reads it (in
 * a host collective too: host_wait, transport.c).
 * Outside this wait (its player done with the case) it is not busy either. A wait is the
 * student's deadlock only when no message moved on the node and no other player was doing
 * anything but waiting: not when the others are slow to start, or on a loaded machine. */
int player_recv(wire_msg *m, void **payload, uint64_t max) {
    if (!transport_on()) return wire_recv(g_ref.ctl_fd, m, payload, max);
    uint64_t cap = max > sizeof(xfer_req) + WIRE_XFER_INLINE_MAX ? max : sizeof(xfer_req) + WIRE_XFER_INLINE_MAX;
    unsigned idle = 0;
    for (;;) {
        bool busy = transport_busy();
        transport_player_works(!busy);
        if (busy && idle % 16 == 0) transport_show_node();
        struct pollfd p = {.fd = g_ref.ctl_fd, .events = POLLIN};
        int r = poll(&p, 1, busy ? 0 : -1); /* MPI's schedules advance only when tested */
        if (r < 0 && errno != EINTR) player_gone();
        if (r > 0) {
            int got = wire_recv(g_ref.ctl_fd, m, payload, cap);
            if (got != 1 || m->cmd != REP_XFER) transport_player_works(false);
            if (got != 1) return got;
            if (m->cmd != REP_XFER) {
                if (m->len > max) {
                    free(*payload);
                    *payload = NULL;
                    return -1;
                }
                return got;
            }
            pl_progress_tick();
            int sent = 1;
            const char *why = transport_request(*payload, m->len, &sent);
            free(*payload);
            *payload = NULL;
            if (why) referee_tampered("%s", why);
            if (!sent) player_gone();
            idle = 0;
        }
        if (!transport_progress()) player_gone();
        if (busy && ++idle % 16 == 0) sched_yield();
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
