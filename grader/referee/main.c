/* main.c - the referee: one per rank, started by mpirun; it links no student code.
 *
 * It takes the engine's channel and the run's secret from its environment (and wipes them),
 * makes itself undumpable (no process of the same user can read its memory or its /proc
 * files), learns the run's key from the engine once every rank's referee has said hello (no
 * player exists before that), then forks and execs its player confined, and runs the lab's cases: inputs
 * and references here, the student's calls there, verdicts and times here. Records go to
 * the engine from rank 0's referee, signed; any referee that sees the player break the
 * protocol or a relay altered says so on its own connection and stops. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netdb.h>  // defines: getaddrinfo
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine.h"
#include "handshake.h"  // defines: hs_mac, hs_crypt_key, hs_field, HS_*
#include "pl_internal.h" // defines: pl_init_local (the harness without MPI)
#include "referee.h"

static int g_cases_run, g_cases_failed;
static char **g_player_argv; /* the player's command line (its --device decides the transport) */
static char g_player_backends[64] = "device ?, comm ?";

/* ================================================================================== */
/* The engine's channel                                                               */
/* ================================================================================== */

extern char **environ;

static void take_env(const char *name, char *out, size_t cap) {
    size_t n = strlen(name);
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, name, n) != 0 || (*e)[n] != '=') continue;
        snprintf(out, cap, "%s", *e + n + 1);
        memset(*e + n + 1, 0, strlen(*e + n + 1)); /* the bytes /proc shows, too */
    }
    unsetenv(name);
}

static void chan_event(const char *event, const char *name) {
    if (g_ref.rank != 0) return;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "event", event);
    if (name) cJSON_AddStringToObject(o, "case", name);
    engine_record(o);
    cJSON_Delete(o);
}

/* Where this referee runs, for its messages and its hello. */
static const char *host_name(void) {
    static char h[128];
    if (!h[0] && gethostname(h, sizeof h - 1) != 0) snprintf(h, sizeof h, "?");
    return h;
}

/* The channel cannot be reached or spoke garbage: one line, naming the address and the fix. */
PL_NORETURN static void channel_fail(const char *where, const char *what, const char *fix) {
    fprintf(stderr, "[rank %d on %s] referee: %s the grading engine at %s%s%s\n", g_ref.rank, host_name(), what, where,
            fix ? ": " : "", fix ? fix : "");
    _exit(PL_EXIT_FATAL);
}

/* One line from the engine (without its newline), waiting at most timeout_ms (-1: for ever). */
static void read_line(int fd, char *line, size_t cap, int timeout_ms, const char *where, const char *what) {
    size_t got = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, timeout_ms);
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) channel_fail(where, what, "no answer (is the engine's host reachable from this node?)");
        ssize_t n = read(fd, line + got, 1);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) channel_fail(where, what, "the engine closed the connection");
        if (line[got] == '\n') break;
        if (++got + 1 >= cap) channel_fail(where, what, "an overlong line (is that address the engine's?)");
    }
    line[got] = '\0';
}

/* A TCP connection to "ip:port" or "[v6]:port", in at most 15 s. */
static int connect_tcp(const char *where) {
    char host[128] = "";
    const char *colon = strrchr(where, ':');
    if (!colon || (size_t)(colon - where) >= sizeof host)
        channel_fail(where, "cannot parse the address of", "PL_ENGINE_TCP is malformed");
    memcpy(host, where[0] == '[' ? where + 1 : where, (size_t)(colon - where) - (where[0] == '[' ? 2 : 0));
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV}, *res = NULL;
    if (getaddrinfo(host, colon + 1, &hints, &res) != 0 || !res)
        channel_fail(where, "cannot parse the address of", "PL_ENGINE_TCP is malformed");
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) channel_fail(where, "cannot make a socket to reach", strerror(errno));
    int rc = connect(fd, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    int err = rc == 0 ? 0 : errno;
    if (rc != 0 && errno == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int r;
        do r = poll(&p, 1, 15000); while (r < 0 && errno == EINTR);
        socklen_t len = sizeof err;
        if (r == 0) err = ETIMEDOUT;
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    }
    if (err) {
        char fix[256];
        snprintf(fix, sizeof fix, "%s (a firewall between this node and the engine's host lets nothing through on "
                 "that port, or the address is not one this node can reach: set PL_ENGINE_ADDR= to one that is)",
                 strerror(err));
        channel_fail(where, "cannot reach", fix);
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

/* Every referee connects, answers the engine's challenge with the run's secret and says
 * hello; the engine answers with the run's key once all ranks have, and takes no connection
 * after that (handshake.h). */
static void engine_connect(const char *sock, const char *tcp, const char *secret_hex) {
    char where[160];
    snprintf(where, sizeof where, "%s%s", tcp[0] ? "" : "unix:", tcp[0] ? tcp : sock);
    unsigned char secret[SIPHASH_KEY_BYTES];
    if (strlen(secret_hex) != 2 * SIPHASH_KEY_BYTES || siphash_key_from_hex(secret_hex, secret) != 0)
        channel_fail(where, "has no secret for",
                     "PL_ENGINE_SECRET did not reach this rank (a launcher that drops the environment: with "
                     "Open MPI it is named in OMPI_MCA_mca_base_env_list, which the engine sets)");
    int fd = -1;
    if (tcp[0]) {
        fd = connect_tcp(tcp);
    } else {
        struct sockaddr_un addr = {.sun_family = AF_UNIX};
        snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
            char fix[256];
            snprintf(fix, sizeof fix, "%s%s", strerror(errno),
                     errno == ENOENT ? " (this rank runs on another host than the engine: set PL_ENGINE_ADDR= to "
                                       "an address of the engine's host that the nodes reach)" : "");
            channel_fail(where, "cannot reach", fix);
        }
    }
    char line[256], ne[HS_NONCE_HEX + 1], nr[HS_NONCE_HEX + 1];
    read_line(fd, line, sizeof line, 60000, where, "no challenge from");
    if (!strstr(line, "\"event\":\"challenge\"") || hs_field(line, "nonce", ne, sizeof ne) != 0 ||
        strlen(ne) != HS_NONCE_HEX)
        channel_fail(where, "no challenge from", "is that address this run's engine? (rebuild: make clean, then make)");
    unsigned char raw[16];
    ref_random_bytes(raw, sizeof raw);
    for (int i = 0; i < 16; i++) snprintf(nr + 2 * i, 3, "%02x", raw[i]);
    /* how this referee runs: its uid, and whether a sandbox's user namespace holds it (its
     * uid map is not the whole identity one); its player gets its filters either way */
    char map[128] = "";
    FILE *um = fopen("/proc/self/uid_map", "r");
    if (um) {
        if (!fgets(map, sizeof map, um)) map[0] = '\0';
        fclose(um);
    }
    unsigned long a = 0, b = 0, len = 0;
    bool userns = sscanf(map, "%lu %lu %lu", &a, &b, &len) == 3 && !(a == 0 && b == 0 && len == 4294967295ul);
    char hello[512];
    int n = snprintf(hello, sizeof hello,
                     "{\"event\":\"hello\",\"protocol\":%d,\"lab\":\"%s\",\"np\":%d,\"rank\":%d,\"host\":\"%.64s\","
                     "\"uid\":%d,\"userns\":%s,\"nonce\":\"%s\"}",
                     HS_PROTOCOL, g_lab->name, g_ref.world, g_ref.rank, host_name(), (int)getuid(),
                     userns ? "true" : "false", nr);
    for (char *c = hello + n - 1; c > hello; c--) /* a host name is letters, digits, - and . */
        if (*c == '\\' || *c == '\t') *c = '_';
    uint64_t mac = hs_mac(secret, HS_TAG_HELLO, ne, nr, hello, (size_t)n);
    n += snprintf(hello + n, sizeof hello - (size_t)n, "\t%016llx\n", (unsigned long long)mac);
    if (!wire_write_full(fd, hello, (size_t)n)) channel_fail(where, "cannot write to", strerror(errno));
    read_line(fd, line, sizeof line, -1, where, "no key from"); /* once every rank has said hello */
    char enc[2 * SIPHASH_KEY_BYTES + 1], hex[2 * SIPHASH_KEY_BYTES + 1];
    uint64_t sig = 0;
    long text = siphash_split_signed(line, strlen(line), &sig);
    bool ok = text >= 0;
    if (ok) {
        line[text] = '\0';
        ok = sig == hs_mac(secret, HS_TAG_KEY, ne, nr, line, (size_t)text) && hs_field(line, "key", enc, sizeof enc) == 0 &&
             hs_crypt_key(secret, ne, nr, enc, hex) == 0 && siphash_key_from_hex(hex, g_ref.key) == 0;
    }
    memset(line, 0, sizeof line);
    memset(hex, 0, sizeof hex);
    memset(secret, 0, sizeof secret);
    if (!ok) channel_fail(where, "no valid key from", "the answer is not signed with this run's secret");
    g_ref.engine_fd = fd;
    g_ref.graded = true;
}

/* ================================================================================== */
/* The player                                                                         */
/* ================================================================================== */

/* The player is this binary's name with ".player": built beside it from the same case
 * tables, with the student's object. */
static char *player_path(void) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 8);
    if (n <= 0) pl_fatal(__FILE__, __LINE__, "readlink(/proc/self/exe)", strerror(errno));
    self[n] = '\0';
    char *p = malloc((size_t)n + 8);
    PL_CHECK(p != NULL, "out of host memory");
    snprintf(p, (size_t)n + 8, "%s.player", self);
    return p;
}

/* The player's environment: ours, without the engine's channel or the seed, and with Open
 * MPI's single-copy transport off (it reads other ranks' memory with process_vm_readv,
 * which the player may not call) and its shared-memory segments made with System V calls
 * (a segment made while the student's code runs, an MPI_Win_allocate_shared of pl_sym_malloc,
 * would otherwise be a file to open in /dev/shm: the play filter allows private System V
 * segments instead, grader/runner/confine.c). A graded run also turns on the harness's
 * checks (docs/harness.md): deferred streams on the cpu device, so that a missing wait or a
 * wrong stream gives a wrong result as it would on a GPU, and red zones around every
 * pl_malloc. */
/* Where the referees move the messages, the player gets no launcher at all: nothing of Open
 * MPI's, PMIx's or the PMI's environment (it could not reach the launcher's services even
 * with it: its filter allows no socket), its place in PL_PLACE, and the cpu device. */
static bool launcher_var(const char *e) {
    static const char *const prefixes[] = {"OMPI_", "PMIX_", "PMI_", "OPAL_", "PRTE_", "ORTE_", "SLURM_", "HYDRA_", NULL};
    for (const char *const *p = prefixes; *p; p++)
        if (!strncmp(e, *p, strlen(*p))) return true;
    return false;
}

static char g_place[96];

static char **player_env(void) {
    size_t n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + 8, sizeof *env);
    PL_CHECK(env != NULL, "out of host memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (g_ref.transport && (launcher_var(environ[i]) || !strncmp(environ[i], "PL_DEVICE=", 10) ||
                                !strncmp(environ[i], "PL_COMM=", 8) || !strncmp(environ[i], "PL_TRANSPORT=", 13) ||
                                !strncmp(environ[i], "PL_PLACE=", 9)))
            continue;
        if (!strncmp(environ[i], "PL_RESULTS_", 11) || !strncmp(environ[i], "PL_SEED=", 8) ||
            !strncmp(environ[i], "PL_RUN_TAG=", 11) ||
            (g_ref.graded && !strncmp(environ[i], "PL_NO_SECCOMP=", 14)) ||
            !strncmp(environ[i], "OMPI_MCA_btl_vader_single_copy_mechanism=", 41) ||
            !strncmp(environ[i], "OMPI_MCA_shmem=", 15) ||
            (g_ref.graded && (!strncmp(environ[i], "PL_STREAMS=", 11) || !strncmp(environ[i], "PL_CHECKED=", 11))))
            continue;
        env[k++] = environ[i];
    }
    if (g_ref.transport) {
        env[k++] = "PL_TRANSPORT=referee";
        env[k++] = "PL_DEVICE=cpu";
        env[k++] = g_place;
    } else {
        env[k++] = "OMPI_MCA_btl_vader_single_copy_mechanism=none";
        env[k++] = "OMPI_MCA_shmem=sysv";
    }
    if (g_ref.graded) {
        env[k++] = "PL_STREAMS=deferred";
        env[k++] = "PL_CHECKED=1";
    }
    env[k] = NULL;
    return env;
}

/* What the lab's init() added to the player's command line (drv_player_arg). */
#define PLAYER_ARGS_MAX 8
static char *g_player_extra[PLAYER_ARGS_MAX];
static int g_player_nextra;

void drv_player_arg(const char *arg) {
    PL_CHECK(g_player_nextra < PLAYER_ARGS_MAX, "more than 8 arguments added to the player's command line");
    g_player_extra[g_player_nextra] = strdup(arg);
    PL_CHECK(g_player_extra[g_player_nextra] != NULL, "out of host memory");
    g_player_nextra++;
}

/* args (NULL-terminated) followed by the lab's additions; args itself is kept. */
static char **with_extra_args(char **args) {
    int n = 0;
    while (args[n]) n++;
    char **all = calloc((size_t)n + g_player_nextra + 1, sizeof *all);
    PL_CHECK(all != NULL, "out of host memory");
    memcpy(all, args, (size_t)n * sizeof *all);
    for (int i = 0; i < g_player_nextra; i++) all[n + i] = g_player_extra[i];
    return all;
}

static void spawn_player(char **args) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        pl_fatal(__FILE__, __LINE__, "socketpair", strerror(errno));
    char *path = player_path();
    args = with_extra_args(args);
    args[0] = path;
    char **env = player_env();
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) pl_fatal(__FILE__, __LINE__, "fork(player)", strerror(errno));
    if (pid == 0) {
        /* the player dies with its referee, and sees only stdio, the control socket (3),
         * the region (4) and, where the referees move its messages, the arena (5) */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        /* out of the way first: either may sit on 3 or 4 already */
        int ctl = fcntl(sv[1], F_DUPFD, 16), shm = fcntl(g_ref.region_fd, F_DUPFD, 16);
        int arena = g_ref.arena_fd >= 0 ? fcntl(g_ref.arena_fd, F_DUPFD, 16) : -1;
        if (ctl < 0 || shm < 0 || dup2(ctl, WIRE_FD_CTL) < 0 || dup2(shm, WIRE_FD_SHM) < 0) _exit(127);
        if (g_ref.arena_fd >= 0 && (arena < 0 || dup2(arena, WIRE_FD_ARENA) < 0)) _exit(127);
        for (int fd = g_ref.arena_fd >= 0 ? WIRE_FD_ARENA + 1 : WIRE_FD_SHM + 1; fd < 1024; fd++) close(fd);
        if (!confine_startup(getpid(), path)) {
            fprintf(stderr, "[rank %d] referee: cannot confine the player: %s\n", g_ref.rank, strerror(errno));
            _exit(PL_EXIT_FATAL);
        }
        execve(path, args, env);
        fprintf(stderr, "[rank %d] referee: cannot start the player %s: %s\n", g_ref.rank, path, strerror(errno));
        _exit(PL_EXIT_FATAL);
    }
    free(env);
    free(args); /* the array with_extra_args made */
    close(sv[1]);
    g_ref.ctl_fd = sv[0];
    g_ref.player = pid;
}

/* play() on the player, and the interludes it pauses for: each one's slots checked as
 * after the call, then the test's interlude(), then the slots published again (the IN
 * slots it wrote hashed anew) and the player resumed. */
static void play(drv_case *c) {
    if (!wire_send(g_ref.ctl_fd, CMD_PLAY, 0, NULL, 0)) player_gone();
    for (;;) {
        wire_msg m;
        void *payload = NULL;
        int got = player_recv(&m, &payload, 0);
        if (got == 0) player_gone();
        if (got > 0 && m.cmd == REP_DONE) return;
        if (got < 0 || m.cmd != REP_INTERLUDE || !c->inst->test->interlude)
            referee_tampered("the player answered command %u with something else than its reply", CMD_PLAY);
        slots_verify(c, "the call (before its interlude)");
        c->inst->test->interlude(c, (int)m.arg);
        slots_publish(c, -1);
        if (!wire_send(g_ref.ctl_fd, CMD_RESUME, 0, NULL, 0)) player_gone();
    }
}

static void player_ready(void) {
    wire_msg m;
    void *payload = NULL;
    int got = player_recv(&m, &payload, sizeof(wire_ready));
    if (got == 0) player_gone();
    if (got < 0) referee_tampered("the player did not start as a player");
    wire_ready r;
    if (m.cmd != REP_READY || m.len != sizeof r) referee_tampered("the player did not start as a player");
    memcpy(&r, payload, sizeof r);
    free(payload);
    if (r.rank != g_ref.rank || r.world != g_ref.world)
        pl_fatal(__FILE__, __LINE__, "the player's MPI world",
                 "its rank or size differs from the launcher's (start the referee under mpirun, not the player)");
    g_ref.player_cuda = r.device == PL_DEVICE_CUDA;
    g_ref.player_device = r.device;
    g_ref.player_comm = r.comm;
    g_ref.player_nodes = r.nodes;
    snprintf(g_player_backends, sizeof g_player_backends, "device %s, comm %s", pl_device_name((pl_device_kind)r.device),
             pl_comm_name((pl_comm_kind)r.comm));
}

static int player_exit(void) {
    if (!wire_send(g_ref.ctl_fd, CMD_EXIT, 0, NULL, 0)) player_gone();
    /* its finalize may still need the referees' transport (a trace gathered to rank 0):
     * served until it closes the socket */
    for (int got = 1; transport_on() && got != 0;) {
        wire_msg m;
        void *payload = NULL;
        got = player_recv(&m, &payload, 0);
        free(payload);
        if (got > 0) referee_tampered("the player sent a reply after its exit command");
    }
    int st = 0;
    pid_t r;
    do r = waitpid(g_ref.player, &st, 0);
    while (r < 0 && errno == EINTR);
    g_ref.player = 0;
    if (r > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    if (r > 0 && WIFSIGNALED(st))
        fprintf(stderr, "[rank %d] the player crashed with signal %d (%s) at exit\n", g_ref.rank, WTERMSIG(st),
                strsignal(WTERMSIG(st)));
    return PL_EXIT_FATAL;
}

void drv_player_column(void) {
    pl_fatal(__FILE__, __LINE__, "a player column", "called in the referee: the case table mixes the sides");
}

/* ================================================================================== */
/* Cases                                                                              */
/* ================================================================================== */

static void emit(drv_case *c) {
    g_cases_run++;
    if (c->verdict != DRV_PASS) g_cases_failed++;
    if (c->rank != 0) return;
    cJSON *o = c->fields;
    cJSON_AddStringToObject(o, "event", "result");
    cJSON_AddStringToObject(o, "case", c->name);
    cJSON_AddStringToObject(o, "group", c->inst->group);
    cJSON_AddNumberToObject(o, "np", c->world);
    cJSON_AddStringToObject(o, "verdict", verdict_name(c->verdict));
    if (g_ref.transport && c->ran && !c->players_word) cJSON_AddNumberToObject(o, "counted_by_referee", 1);
    const char *msg = c->verdict != DRV_PASS ? c->msg : c->note;
    if (msg[0]) cJSON_AddStringToObject(o, "message", msg);
    engine_record(o);
    if (c->verdict != DRV_PASS) /* failures even when quiet */
        drv_say("%-9s %s%s%s\n", verdict_name(c->verdict), c->name, msg[0] ? "  " : "", msg);
    else if (!g_lab->after_case)
        drv_print("%-9s %s%s%s\n", verdict_name(c->verdict), c->name, msg[0] ? "  " : "", msg);
}

static void moved_during(drv_case *c, const transport_counts *k0);

static void run_case(const drv_instance *in, int index) {
    const drv_test *t = in->test;
    drv_case c = {.inst = in, .name = in->name, .arg = in->arg, .rank = g_ref.rank, .world = g_ref.world, .batch = 1};
    g_ref.current_case = in->name;
    case_begin(&c);
    slots_reset(&c);
    chan_event("begin", c.name);
    if (t->setup) t->setup(&c);
    drv_model md;
    memset(&md, 0, sizeof md);
    /* play() only when setup went well on every rank: a player that skipped it alone
     * would leave the others waiting in its collectives */
    if (t->play && drv_max(drv_failed(&c)) == 0) {
        slots_publish(&c, index);
        c.ran = true; /* no slot is declared from here on, not even in an interlude */
        transport_counts k0;
        transport_counted(&k0);
        transport_marks_clear();
        play(&c);
        slots_read_report(&c);
        if (g_ref.transport) moved_during(&c, &k0);
        slots_verify(&c, "the call");
        check_guards(&c, "the call");
    }
    if (t->check) t->check(&c);
    if (t->model) {
        t->model(&c, &md);
        apply_model(&c, &md);
    }
    gather_verdict(&c);
    if (t->perf && c.verdict == DRV_PASS) {
        t->perf(&c);
        gather_verdict(&c);
    }
    if (c.ran) {
        player_command(CMD_RELEASE, 0);
        wire_report r;
        memcpy(&r, &((const wire_header *)g_ref.region)->report, sizeof r);
        c.mem_after = r.mem_after;
        r.leaks[sizeof r.leaks - 1] = '\0';
        bool guards_bad = check_guards(&c, "the case's free/teardown calls");
        if (drv_max(md.no_leak) > 0) check_leak(&c, r.leaks);
        if (drv_max(guards_bad) > 0) gather_verdict(&c);
    }
    emit(&c);
    if (g_lab->after_case) g_lab->after_case(&c);
    if (t->teardown) t->teardown(&c);
    slots_done(&c);
    free(c.state);
    free(c.slots);
    case_end(&c);
    g_ref.current_case = NULL;
}

/* ================================================================================== */
/* The process                                                                        */
/* ================================================================================== */

/* Rank and world size from the launcher (Open MPI, PMIx, Slurm, MPICH's PMI), before any
 * MPI exists in this process: the referee never calls MPI. */
static int env_int(const char *const *names, int dflt) {
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v) return atoi(v);
    }
    return dflt;
}

static void send_plan(const drv_plan *plan) {
    if (!g_ref.graded || g_ref.rank != 0) return;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "event", "plan");
    cJSON *cases = cJSON_AddArrayToObject(o, "cases");
    for (size_t i = 0; i < plan->n; i++) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "case", plan->v[i].name);
        cJSON_AddStringToObject(c, "group", plan->v[i].group);
        cJSON_AddItemToArray(cases, c);
    }
    engine_record(o);
    cJSON_Delete(o);
}

static int finish(int rc) {
    if (g_ref.graded && g_ref.rank == 0) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "event", "end");
        cJSON_AddNumberToObject(o, "cases", g_cases_run);
        cJSON_AddNumberToObject(o, "failed", g_cases_failed);
        engine_record(o);
        cJSON_Delete(o);
    }
    if (g_ref.engine_fd >= 0) close(g_ref.engine_fd);
    g_ref.engine_fd = -1;
    return rc;
}

/* srun's tasks on this node: SLURM_STEP_TASKS_PER_NODE lists the nodes in order as "N" or
 * "N(xK)" (K nodes of N tasks), SLURM_NODEID is this node's place; -1 when not under srun. */
static int slurm_local_tasks(void) {
    const char *list = getenv("SLURM_STEP_TASKS_PER_NODE"), *id = getenv("SLURM_NODEID");
    if (!list || !id) return -1;
    long node = atol(id);
    for (const char *p = list; *p;) {
        char *end;
        long n = strtol(p, &end, 10), k = 1;
        if (end == p || n <= 0) return -1;
        if (!strncmp(end, "(x", 2)) {
            k = strtol(end + 2, &end, 10);
            if (*end != ')' || k <= 0) return -1;
            end++;
        }
        if (node < k) return (int)n;
        node -= k;
        p = *end == ',' ? end + 1 : end;
    }
    return -1;
}

/* The ranks on this host, as the launcher says (the world when it says nothing). */
int referee_local_world(void) {
    static const char *const ls[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", NULL};
    int n = env_int(ls, slurm_local_tasks());
    return n > 0 ? n : g_ref.world;
}

/* The referees move the player's messages (transport.c) on the cpu device, unless the lab
 * needs the player's own MPI or PL_TRANSPORT=mpi asks for the old way (for comparing). The
 * device is the cpu when asked for, or when `auto` finds no NVIDIA device on this host. */
static bool referee_moves_messages(const drv_lab *lab) {
    const char *t = getenv("PL_TRANSPORT");
    if (lab->player_mpi || (t && !strcmp(t, "mpi"))) return false;
    if (t && *t && strcmp(t, "referee") != 0) pl_usage_error("PL_TRANSPORT=%s: use referee or mpi", t);
    const char *dev = NULL;
    for (char **a = g_player_argv; a && *a; a++) {
        if (!strcmp(*a, "--device") && a[1]) dev = a[1];
        else if (!strncmp(*a, "--device=", 9)) dev = *a + 9;
    }
    if (!dev) dev = getenv("PL_DEVICE");
    bool cpu = dev && !strcmp(dev, "cpu");
    if (!cpu && (!dev || !*dev || !strcmp(dev, "auto"))) cpu = access("/dev/nvidiactl", F_OK) != 0;
    if (!cpu) return false;
    static const char *const lr[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", NULL};
    static const char *const nn[] = {"OMPI_MCA_orte_num_nodes", "SLURM_STEP_NUM_NODES", "SLURM_NNODES", NULL};
    int local_rank = env_int(lr, g_ref.rank), local_world = referee_local_world();
    int nodes = env_int(nn, (g_ref.world + local_world - 1) / local_world); /* the launcher's count, or a guess */
    snprintf(g_place, sizeof g_place, "PL_PLACE=%d,%d,%d,%d,%d", g_ref.rank, g_ref.world, local_rank, local_world, nodes);
    return true;
}

/* The case's traffic as the referee moved it, in place of what the player says it did. */
static void moved_during(drv_case *c, const transport_counts *k0) {
    transport_counts k, d;
    transport_counted(&k);
    transport_since(k0, &k, &d);
    transport_overwrite(&c->m, &c->wire, &d);
}

/* The player's command line: ours, without what only the referee reads (the seed). */
static char **player_args(int argc, char **argv) {
    char **a = calloc((size_t)argc + 1, sizeof *a);
    PL_CHECK(a != NULL, "out of host memory");
    int k = 0;
    a[k++] = argv[0];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            i++;
            continue;
        }
        if (!strncmp(argv[i], "--seed=", 7)) continue;
        a[k++] = argv[i];
    }
    a[k] = NULL;
    return a;
}

int drv_main(const drv_lab *lab, int argc, char **argv) {
    g_lab = lab;
    if (lab->defaults) g_opt = *lab->defaults;
    prctl(PR_SET_DUMPABLE, 0); /* no process of ours can read our memory or /proc files */
    char sock[108] = "", tcp[128] = "", secret[80] = "";
    take_env("PL_RESULTS_SOCK", sock, sizeof sock);
    take_env("PL_ENGINE_TCP", tcp, sizeof tcp);
    take_env("PL_ENGINE_SECRET", secret, sizeof secret);
    take_env("PL_RESULTS_KEY", (char[80]){0}, 80); /* protocol 2's; never used now */
    static const char *const rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", NULL};
    static const char *const size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", NULL};
    g_ref.rank = env_int(rank_vars, -1);
    g_ref.world = env_int(size_vars, -1);
    bool launched = g_ref.rank >= 0 && g_ref.world >= 1;
    if (!launched) g_ref.rank = 0, g_ref.world = 1;
    char **args = player_args(argc, argv); /* before the harness takes its flags */
    g_player_argv = args;
    pl_init_local(g_ref.rank, g_ref.world, &argc, &argv);
    parse_flags(argc, argv);
    if (g_flags.help) {
        print_usage();
        return 0;
    }
    if (g_flags.list_modes) {
        print_modes();
        return 0;
    }
    if (g_flags.run_mode && strcmp(g_flags.run_mode, "cases") != 0) {
        /* a mode is the student's own program: the player runs it alone, unrefereed */
        bool known = false;
        for (const drv_mode *m = lab->modes; m && m->name; m++) known |= !strcmp(m->name, g_flags.run_mode);
        if (!known) pl_usage_error("--run: this lab has no mode '%s' (try --modes)", g_flags.run_mode);
        args[0] = player_path();
        execv(args[0], args);
        pl_fatal(__FILE__, __LINE__, "execv(player)", strerror(errno));
    }
    if (g_flags.list && g_flags.list_world) g_ref.world = g_flags.list_world;
    pl_set_world_local(g_ref.rank, g_ref.world);
    if (lab->init) lab->init();
    drv_plan plan = make_plan();
    if (g_flags.list) {
        for (size_t i = 0; i < plan.n; i++) drv_say("%s %s\n", plan.v[i].name, plan.v[i].group);
        free(plan.v);
        return 0;
    }
    if (!launched)
        pl_usage_error("start the driver under a launcher: mpirun -np N %s (or srun); its players are MPI ranks",
                       argv[0]);
    if (sock[0] || tcp[0]) engine_connect(sock, tcp, secret);
    memset(sock, 0, sizeof sock);
    memset(secret, 0, sizeof secret);
    region_open();
    g_ref.transport = referee_moves_messages(lab);
    if (g_ref.transport) arena_open();
    spawn_player(args);
    if (g_ref.transport) transport_start(g_ref.arena, g_ref.arena_bytes, g_ref.ctl_fd);
    player_ready();
    send_plan(&plan);
    for (size_t i = 0; i < plan.n; i++) run_case(&plan.v[i], (int)i);
    free(plan.v);
    if (lab->finish) lab->finish();
    drv_say("# %s: %d case(s), %d failed (%d rank(s), %s)\n", lab->name, g_cases_run, g_cases_failed, g_ref.world,
            g_player_backends);
    int rc = finish(g_cases_failed ? PL_EXIT_CHECK_FAILED : PL_EXIT_OK);
    /* no referee leaves before rank 0's end record is out: mpirun ends the whole job when a
     * rank exits non-zero, and would cut it off */
    (void)drv_max(0);
    int prc = player_exit();
    transport_stop();
    return prc ? prc : rc;
}
