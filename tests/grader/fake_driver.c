/* fake_driver.c - a lab driver that speaks the driver protocol (version 3, docs/grader.md)
 * and misbehaves on purpose, for tests/grader/test_engine.sh. No MPI: fake_mpirun.sh runs
 * it as one process and passes the world size in FAKE_NP; that one process opens the
 * channel once per rank and says every rank's hello, as the referees would.
 *
 * Its plan: alpha.c0 alpha.c1024 alpha.c1M beta.c0 beta.c1M (groups alpha and beta), after
 * --filter, --start-after and --skip-group. FAKE_MODE picks the misbehaviour, mostly at
 * case alpha.c1024:
 *   pass         every case passes
 *   wrong        alpha.c1024 gives a wrong result (index, expected, got)
 *   forbidden    beta.c0 calls a library collective
 *   crash        alpha.c1024 crashes (harness marker, then SIGSEGV), leaving a directory
 *                /dev/shm/paralab-zero.$PL_RUN_TAG.fake (FAKE_LOG: "shm left: DIR made")
 *   crashloop    like crash, but --start-after is ignored (the restart's plan is wrong)
 *   loop         alpha.c1024 never finishes
 *   junkhang     alpha.c1024 never finishes, and writes junk to stdout/stderr every 0.5 s
 *   betweenhang  the driver hangs after alpha.c1024's result, before the next begin
 *   deadlock     alpha.c1024 deadlocks (watchdog marker, exit 86)
 *   groupdeadlock  every alpha case deadlocks (six of them), beta passes
 *   garbage      megabytes of random bytes on stdout and stderr, then every case passes
 *   stdoutforge  prints forged pass records and a score line on stdout; alpha.c1024 is wrong
 *   halfbytes    alpha sends twice the optimal bytes (bytes_ratio 0.5)
 *   fatal        the harness fails before any case (exit 3)
 *   banner       alpha.c1024 prints an error line and an Open MPI-style banner, exits 5
 *   hangall      every case hangs
 *   forged       while alpha.c1024 runs, a pass result for beta.c0 arrives
 *   duplicate    alpha.c1024's result arrives twice
 *   outoforder   beta.c0 begins right after alpha.c0
 *   unplanned    a case that is not in the plan begins
 *   forgedlast   a forged pass for beta.c1M (the last case), then the driver's own result
 *   wrongkey     the records are signed with another key
 *   unsigned     while alpha.c1024 runs, an unsigned pass record for it arrives (what a
 *                student's code writing into the socket without the key would send)
 *   wronglab     the hello names another lab
 *   secondconn   an extra connection without a hello sends a forged end record
 *   lateconn     a connection after every rank got the key (FAKE_LOG gets "late connect:
 *                ok|refused"); the run goes on
 *   dupehello    two connections say hello as rank 0
 *   nosecret     the hellos answer their challenges under another secret than the run's
 *   stranger     before the hellos, another connection says hello as rank 0 without the
 *                run's secret (over TCP: closed and counted; on a Unix socket: tampering)
 *   abort        while alpha.c1024 runs, rank 1's connection says its referee stopped the
 *                run (a signed abort record naming alpha.c1024)
 *   abortfirst   rank 1's signed abort naming alpha.c1024 arrives while rank 0 is still in
 *                alpha.c0 (its referee went ahead; rank 0's records lag behind)
 *   otherrecord  while alpha.c1024 runs, rank 1's connection sends a signed result
 *   --list [--world N]: the plan's cases, one "name group" per line (the engine's plan)
 *   junkline     a line of junk on the channel
 *   flood        300000 result records
 *   escape       alpha.c1024 is wrong with a message full of escape codes, a line break
 *                followed by "score: 100 / 100", XML-invalid characters and invalid UTF-8
 *   earlyend     the end record comes after alpha.c1M (beta never runs)
 *   orphan       alpha.c1024 forks a child that outlives the run (setsid, sleeps)
 *   rewrite      alpha.c1024 forks a child that rewrites FAKE_OUT/results.json 3 s later
 *   bigfile      alpha.c1024 writes one byte at offset 1.5 GiB (over the file size limit)
 *   parentstop   alpha.c1024 SIGSTOPs every ancestor it can see (only inside the sandbox,
 *                FAKE_SANDBOXED=1; elsewhere it refuses and passes)
 *   forkloop     alpha.c1024 forks until fork fails (only inside the sandbox); its
 *                message says how many children it made
 *   slowstart    the first run sends its plan 3 s after its start (the rubric's timeout is 2)
 *   restartflake like crash, but the first restart fails before its plan (exit 3; the next
 *                try of it runs, FAKE_LOG.once remembers)
 *   restartdead  like crash, but every restart fails before its plan (exit 3)
 *   peek         alpha.c1024's message holds its parent's command line and environment,
 *                and whether HIDDEN reached its own environment; cases pass
 * (Messages, not FAKE_LOG, carry what the sandbox tests look at: /tmp is private there.)
 * With `--seed 13` among its arguments alpha.c1024 is wrong (a hidden run that fails).
 * FAKE_ARGS_LOG=FILE records the command line. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <unistd.h>

#include "../../grader/runner/siphash.h" // defines: siphash_record (every record is signed)
#include "../../grader/runner/handshake.h" // defines: hs_mac, hs_crypt_key, hs_field (protocol 4)

static const char *mode = "pass";
static int chan = -1;                    // rank 0's connection to the channel, -1 by hand
static int other = -1;                   // rank 1's, when there is one
static char sock_path[108], key[64], run_secret[80];
static unsigned char mac_key[SIPHASH_KEY_BYTES];
static unsigned long long seq; /* records sent */
static int results, failed;

static bool is(const char *m) { return !strcmp(mode, m); }

/* One signed record on rank 1's connection (its first: sequence number 0). */
#define ABORT_RECORD "{\"event\":\"abort\",\"rank\":1,\"case\":\"alpha.c1024\",\"why\":\"the player answered 9 to 3\"}"
static void other_record(const char *rec)
{
    char *line = NULL;
    int k = asprintf(&line, "%s\t%016llx\n", rec, (unsigned long long)siphash_record(mac_key, 0, rec, strlen(rec)));
    if (k < 0 || write(other, line, (size_t)k) != k) exit(3);
    free(line);
}

static void emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void emit(const char *fmt, ...)
{
    char *line = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&line, fmt, ap);
    va_end(ap);
    if (n < 0) exit(3);
    if (chan < 0) {
        printf("%s", line);  // a manual run: the same text, on stdout
    } else {
        /* sign it: "JSON<TAB>signature<NL>" (the text given ends with its newline) */
        char *signed_line = NULL;
        int body = n > 0 && line[n - 1] == '\n' ? n - 1 : n;
        n = asprintf(&signed_line, "%.*s\t%016llx\n", body, line,
                     (unsigned long long)siphash_record(mac_key, seq++, line, (size_t)body));
        if (n < 0) exit(3);
        free(line);
        line = signed_line;
        for (int done = 0; done < n;) {
            ssize_t w = write(chan, line + done, (size_t)(n - done));
            if (w <= 0) exit(3);  // the engine stopped listening: nothing left to do
            done += (int)w;
        }
    }
    free(line);
}

static char tcp_addr[128]; /* PL_ENGINE_TCP: "ip:port" (IPv4 here) */

static int connect_channel(void)
{
    if (tcp_addr[0]) {
        char host[128];
        snprintf(host, sizeof host, "%s", tcp_addr);
        char *colon = strrchr(host, ':');
        if (!colon) return -1;
        *colon = '\0';
        struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || inet_pton(AF_INET, host, &in.sin_addr) != 1 || connect(fd, (struct sockaddr *)&in, sizeof in) != 0) {
            if (fd >= 0) close(fd);
            return -1;
        }
        return fd;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock_path);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

static void log_line(const char *text)
{
    const char *path = getenv("FAKE_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (f) {
        fprintf(f, "%s\n", text);
        fclose(f);
    }
}

static bool in_sandbox(void)
{
    // the test says so, and the PID namespace agrees: pid 1 is bwrap
    char comm[32] = "";
    FILE *f = fopen("/proc/1/comm", "r");
    if (f) {
        if (!fgets(comm, sizeof comm, f)) comm[0] = '\0';
        fclose(f);
    }
    return getenv("FAKE_SANDBOXED") && !strncmp(comm, "bwrap", 5);
}

static void hang(bool junk)
{
    for (;;) {
        if (junk) {
            printf("junk line while hung\n");
            fflush(stdout);
            fprintf(stderr, "more junk while hung\n");
        }
        usleep(500 * 1000);
    }
}

/* Misbehaviour inside case alpha.c1024 that happens in a forked child. */
static void fork_child(bool rewrite)
{
    pid_t pid = fork();
    if (pid != 0) return;
    setsid();  // out of mpirun's process group, as an Open MPI rank is
    if (rewrite) {
        sleep(3);
        const char *out = getenv("FAKE_OUT");
        char path[4096];
        snprintf(path, sizeof path, "%s/results.json", out ? out : ".");
        FILE *f = fopen(path, "w");
        if (f) {
            fputs("{\"score\": 100, \"max_score\": 100, \"tests\": []}\n", f);
            fclose(f);
        }
    } else {
        sleep(1000);
    }
    _exit(0);
}

static void stop_ancestors(void)
{
    pid_t pid = getppid();
    for (int depth = 0; pid > 0 && depth < 32; depth++) {
        kill(pid, SIGSTOP);
        kill(pid, SIGKILL);
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "r");
        if (!f) break;
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[got] = '\0';
        char *close_paren = strrchr(buf, ')');
        int ppid = 0;
        char state;
        if (!close_paren || sscanf(close_paren + 1, " %c %d", &state, &ppid) != 2) break;
        pid = ppid;
    }
}

/* What a rank could learn about its parent (the engine, in the default mode) from /proc:
 * a message for the result record (JSON-safe: no quotes, backslashes or control bytes). */
static const char *peek(void)
{
    static char message[1024];
    char path[64], buf[4096];
    size_t len = 0;
    const char *files[] = {"cmdline", "environ"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "/proc/%d/%s", (int)getppid(), files[i]);
        FILE *f = fopen(path, "r");
        size_t got = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f) fclose(f);
        for (size_t k = 0; k < got; k++)
            if ((unsigned char)buf[k] < 0x20 || buf[k] == '"' || buf[k] == '\\') buf[k] = ' ';
        buf[got] = '\0';
        len += (size_t)snprintf(message + len, sizeof message - len, "parent %s: [%.150s] ", files[i], buf);
    }
    snprintf(message + len, sizeof message - len, "%s",
             getenv("HIDDEN") ? "HIDDEN reached the driver" : "no HIDDEN here");
    return message;
}

/* One line from fd, without its newline. */
static void read_line(int fd, char *line, size_t cap)
{
    size_t got = 0;
    while (got + 1 < cap && read(fd, line + got, 1) == 1 && line[got] != '\n') got++;
    line[got] = '\0';
}

/* Every rank's hello on a connection of its own, each answering its challenge under the
 * run's secret (protocol 4, grader/runner/handshake.h), then the key from rank 0's. */
static int handshake(int world)
{
    int fds[64];
    char ne[64][HS_NONCE_HEX + 1], nr[64][HS_NONCE_HEX + 1];
    unsigned char secret[SIPHASH_KEY_BYTES];
    if (siphash_key_from_hex(is("nosecret") ? "000102030405060708090a0b0c0d0e0f" : run_secret, secret) != 0) {
        fprintf(stderr, "error: no PL_ENGINE_SECRET\n");
        return 3;
    }
    if (world > 64) world = 64;
    if (is("stranger")) { /* someone on the network without the secret */
        int fd = connect_channel();
        char line[256];
        if (fd >= 0) {
            read_line(fd, line, sizeof line);
            dprintf(fd, "{\"event\":\"hello\",\"protocol\":%d,\"lab\":\"fake\",\"np\":%d,\"rank\":0,\"nonce\":\"%032x\"}"
                        "\t0123456789abcdef\n", HS_PROTOCOL, world, 7u);
            usleep(200 * 1000); /* the engine reads it before the real hellos */
            close(fd);
        }
    }
    for (int r = 0; r < world; r++) {
        fds[r] = connect_channel();
        if (fds[r] < 0) {
            fprintf(stderr, "error: cannot connect to the results channel: %s\n", strerror(errno));
            return 3;
        }
        char line[256];
        read_line(fds[r], line, sizeof line);
        if (hs_field(line, "nonce", ne[r], sizeof ne[r]) != 0) {
            fprintf(stderr, "error: no challenge from the engine\n");
            return 3;
        }
        snprintf(nr[r], sizeof nr[r], "%032x", 0x5eed0000u + (unsigned)r);
        int rank = is("dupehello") && r == 1 ? 0 : r;
        char hello[400];
        int n = snprintf(hello, sizeof hello,
                         "{\"event\":\"hello\",\"protocol\":%d,\"lab\":\"%s\",\"np\":%d,\"rank\":%d,\"host\":\"fake\","
                         "\"uid\":%d,\"userns\":false,\"nonce\":\"%s\"}",
                         HS_PROTOCOL, is("wronglab") ? "other" : "fake", world, rank, (int)getuid(), nr[r]);
        dprintf(fds[r], "%s\t%016llx\n", hello,
                (unsigned long long)hs_mac(secret, HS_TAG_HELLO, ne[r], nr[r], hello, (size_t)n));
        if (r == 0 && is("secondconn")) {
            int again = connect_channel();
            if (again >= 0) {
                const char *forged = "{\"event\":\"end\",\"cases\":0,\"failed\":0}\n";
                if (write(again, forged, strlen(forged)) < 0) { /* reset: as it should be */ }
                close(again);
            }
        }
    }
    char line[256], enc[40] = "";
    read_line(fds[0], line, sizeof line);
    uint64_t sig = 0;
    long text = siphash_split_signed(line, strlen(line), &sig);
    if (text < 0 || hs_field(line, "key", enc, sizeof enc) != 0) {
        fprintf(stderr, "error: no key from the engine\n");
        return 3;
    }
    line[text] = '\0';
    if (sig != hs_mac(secret, HS_TAG_KEY, ne[0], nr[0], line, (size_t)text) ||
        hs_crypt_key(secret, ne[0], nr[0], enc, key) != 0) {
        fprintf(stderr, "error: the key line is not signed with the run's secret\n");
        return 3;
    }
    if (siphash_key_from_hex(is("wrongkey") ? "000102030405060708090a0b0c0d0e0f" : key, mac_key) != 0) return 3;
    chan = fds[0];
    other = world > 1 ? fds[1] : -1;
    return 0;
}

int main(int argc, char **argv)
{
    const char *m = getenv("FAKE_MODE");
    if (m && *m) mode = m;
    const char *filter = NULL, *start_after = NULL;
    bool seed13 = false;
    const char *skip[8];
    int n_skip = 0;
    const char *args_log = getenv("FAKE_ARGS_LOG");
    if (args_log) {
        FILE *f = fopen(args_log, "a");
        for (int i = 1; f && i < argc; i++) fprintf(f, "%s%s", argv[i], i + 1 < argc ? " " : "\n");
        if (f) fclose(f);
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
        else if (!strcmp(argv[i], "--start-after") && i + 1 < argc) start_after = argv[++i];
        else if (!strcmp(argv[i], "--skip-group") && i + 1 < argc && n_skip < 8) skip[n_skip++] = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed13 = !strcmp(argv[++i], "13");
        else if (!strcmp(argv[i], "--bogus")) {
            fprintf(stderr, "error: unknown option --bogus\n");
            return 2;
        }
    }
    if (is("crashloop")) start_after = NULL;
    signal(SIGPIPE, SIG_IGN);

    bool list = false;
    for (int i = 1; i < argc; i++) list |= !strcmp(argv[i], "--list");
    // the channel: read, then scrub, as the real referee does
    const char *s = getenv("PL_RESULTS_SOCK");
    if (s) {
        snprintf(sock_path, sizeof sock_path, "%s", s);
        unsetenv("PL_RESULTS_SOCK");
    }
    s = getenv("PL_ENGINE_TCP");
    if (s) {
        snprintf(tcp_addr, sizeof tcp_addr, "%s", s);
        snprintf(sock_path, sizeof sock_path, "tcp");
        unsetenv("PL_ENGINE_TCP");
    }
    s = getenv("PL_ENGINE_SECRET");
    if (s) {
        snprintf(run_secret, sizeof run_secret, "%s", s);
        unsetenv("PL_ENGINE_SECRET");
    }
    if (is("fatal") && !list) {
        fprintf(stderr, "[rank 0] fake_driver.c:1: pl_init() -> cannot open the device\n");
        return 3;
    }
    if ((is("restartflake") || is("restartdead")) && start_after && !list) {
        char once[600];
        const char *log = getenv("FAKE_LOG");
        snprintf(once, sizeof once, "%s.once", log ? log : "/tmp/fake");
        if (is("restartdead") || access(once, F_OK) != 0) {
            FILE *f = fopen(once, "w");
            if (f) fclose(f);
            fprintf(stderr, "[rank 0] fake_driver.c:1: pl_init() -> the device is busy\n");
            return 3;
        }
    }
    if (is("slowstart") && !start_after && !list) sleep(3);
    if (is("garbage") && !list) {
        char buf[65536];
        int fd = open("/dev/urandom", O_RDONLY);
        for (int i = 0; fd >= 0 && i < 46; i++) {
            if (read(fd, buf, sizeof buf) != (ssize_t)sizeof buf) break;
            fwrite(buf, 1, sizeof buf, stdout);
            fwrite(buf, 1, sizeof buf, stderr);
        }
        if (fd >= 0) close(fd);
        fflush(stdout);
    }
    const char *np = getenv("FAKE_NP");
    int world = np ? atoi(np) : 1;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--world")) world = atoi(argv[i + 1]);

    const char *all[] = {"alpha.c0", "alpha.c1024", "alpha.c1M", "alpha.c2M", "alpha.c4M", "alpha.c8M",
                         "beta.c0",  "beta.c1M"};
    const char *names[8];
    int n = 0;
    bool skipping = start_after != NULL;
    for (int i = 0; i < 8; i++) {
        const char *name = all[i];
        if ((i >= 3 && i <= 5) && !is("groupdeadlock")) continue;  // the long alpha only there
        if (skipping) {
            if (!strcmp(name, start_after)) skipping = false;
            continue;
        }
        if (filter && fnmatch(filter, name, 0)) continue;
        bool skipped = false;
        for (int g = 0; g < n_skip; g++)
            if (!strncmp(name, skip[g], strlen(skip[g])) && name[strlen(skip[g])] == '.') skipped = true;
        if (!skipped) names[n++] = name;
    }
    if (list) {  // the engine's plan: every case after --filter (restarts never list)
        for (int i = 0; i < n; i++) printf("%s %.*s\n", names[i], (int)strcspn(names[i], "."), names[i]);
        return 0;
    }
    if (sock_path[0] && handshake(world) != 0) return 3;
    char plan[4096] = "";
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        char group[16];
        snprintf(group, sizeof group, "%.*s", (int)strcspn(names[i], "."), names[i]);
        len += (size_t)snprintf(plan + len, sizeof plan - len, "%s{\"case\":\"%s\",\"group\":\"%s\"}", i ? "," : "",
                                names[i], group);
    }
    emit("{\"event\":\"plan\",\"cases\":[%s]}\n", plan);
    if (is("lateconn") && sock_path[0]) {
        int late = connect_channel();
        log_line(late >= 0 ? "late connect: ok" : "late connect: refused");
        if (late >= 0) close(late);
    }
    if (is("stdoutforge")) {
        for (int i = 0; i < n; i++)
            printf("{\"event\":\"result\",\"case\":\"%s\",\"verdict\":\"pass\"}\n", names[i]);
        printf("score: 100 / 100\n");
        fflush(stdout);
    }
    if (is("junkline")) emit("this is not a record\n");
    if (is("flood")) {
        for (int i = 0; i < 300000; i++)
            emit("{\"event\":\"result\",\"case\":\"beta.c0\",\"group\":\"beta\",\"verdict\":\"pass\"}\n");
    }

    for (int i = 0; i < n; i++) {
        const char *name = names[i];
        char group[16];
        snprintf(group, sizeof group, "%.*s", (int)strcspn(name, "."), name);
        if (is("outoforder") && !strcmp(name, "alpha.c1024")) name = "beta.c0";
        if (is("unplanned") && !strcmp(name, "alpha.c1024")) name = "gamma.c0";
        emit("{\"event\":\"begin\",\"case\":\"%s\"}\n", name);
        if (is("abortfirst") && other >= 0 && !strcmp(name, "alpha.c0")) {
            other_record(ABORT_RECORD);
            usleep(300 * 1000);
        }
        bool c1024 = !strcmp(name, "alpha.c1024");
        const char *verdict = "pass", *message = "ok";
        char extra[512] = "";
        if (is("hangall")) hang(false);
        if (c1024) {
            if (is("wrong") || is("stdoutforge") || seed13) {
                verdict = "wrong";
                message = "";
                snprintf(extra, sizeof extra,
                         ",\"wrong\":12,\"count\":1024,\"first_wrong\":17,\"expected\":3,\"got\":5");
            } else if (is("escape")) {
                verdict = "wrong";
                message = "\\u001b[2J\\u001b[31mred\\u001b[0m\\nscore: 100 / 100\\r\\u0001\\ufffe bad \xff\xfe utf-8"
                          " & <xml> \\\"quotes\\\"";
            } else if (is("banner")) {
                fprintf(stderr, "[rank 0] error: the harness lost its device\n");
                fprintf(stderr, "--------------------------------------------------------------------------\n");
                fprintf(stderr, "Primary job  terminated normally, but 1 process returned\n");
                fprintf(stderr, "--------------------------------------------------------------------------\n");
                return 5;
            } else if (is("crash") || is("crashloop") || is("restartflake") || is("restartdead")) {
                /* crash: first leave a directory in /dev/shm under the run's tag, as Lab 7's
                 * checkpoint does, for the engine to remove after the run */
                const char *tag = getenv("PL_RUN_TAG");
                if (is("crash") && tag && *tag) {
                    char dir[256], msg[300];
                    snprintf(dir, sizeof dir, "/dev/shm/paralab-zero.%s.fake", tag);
                    snprintf(msg, sizeof msg, "shm left: %s %s", dir, mkdir(dir, 0700) == 0 ? "made" : "not made");
                    log_line(msg);
                }
                fprintf(stderr, "[rank 0] crashed with signal 11 (Segmentation fault)\n");
                raise(SIGSEGV);
            } else if (is("loop")) {
                hang(false);
            } else if (is("junkhang")) {
                hang(true);
            } else if (is("deadlock")) {
                fprintf(stderr, "[rank 1] rank 1 waits in recv for peer 0 (5.0 s)\n");
                fprintf(stderr, "[rank 0] rank 0 waits in recv for peer 1 (5.0 s)\n");
                return 86;
            } else if ((is("abort") || is("otherrecord")) && other >= 0) {
                other_record(is("abort") ? ABORT_RECORD
                                         : "{\"event\":\"result\",\"case\":\"alpha.c1024\",\"group\":\"alpha\","
                                           "\"verdict\":\"pass\"}");
                usleep(300 * 1000);
            } else if (is("forged")) {
                emit("{\"event\":\"result\",\"case\":\"beta.c0\",\"group\":\"beta\",\"verdict\":\"pass\"}\n");
            } else if (is("unsigned")) {
                const char *forged = "{\"event\":\"result\",\"case\":\"alpha.c1024\",\"group\":\"alpha\","
                                     "\"verdict\":\"pass\"}\n";
                if (write(chan, forged, strlen(forged)) < 0) exit(3);
            } else if (is("orphan") || is("rewrite")) {
                fork_child(is("rewrite"));
            } else if (is("bigfile")) {
                FILE *f = tmpfile();  // unlinked already: nothing is left behind
                if (f && fseek(f, 3L * 512 * 1024 * 1024, SEEK_SET) == 0) fputc('x', f);
                if (f) fclose(f);
                message = f ? "the file write came back" : "no temporary file";
                verdict = "error";
            } else if (is("parentstop")) {
                if (in_sandbox()) stop_ancestors();
                else message = "not in the sandbox: refused to stop anything";
            } else if (is("peek")) {
                message = peek();
            } else if (is("forkloop")) {
                if (in_sandbox()) {
                    int forks = 0;
                    for (; forks < 100000; forks++) {
                        pid_t pid = fork();
                        if (pid == 0) {
                            pause();
                            _exit(0);
                        }
                        if (pid < 0) break;
                    }
                    static char note[64];
                    snprintf(note, sizeof note, "fork failed after %d children", forks);
                    message = note;
                } else {
                    message = "not in the sandbox: refused to fork";
                }
            }
        }
        if (!strcmp(group, "alpha") && is("groupdeadlock")) {
            fprintf(stderr, "[rank 1] rank 1 waits in broadcast for peer 0 (5.0 s)\n");
            return 86;
        }
        if (is("forbidden") && !strcmp(name, "beta.c0")) {
            verdict = "forbidden";
            message = "called pl_allreduce (a library collective)";
        }
        if (is("forgedlast") && !strcmp(name, "beta.c1M"))
            emit("{\"event\":\"result\",\"case\":\"beta.c1M\",\"group\":\"beta\",\"verdict\":\"pass\"}\n");
        double bytes = strstr(name, "c1024") ? 4096 : strstr(name, "c1M") ? 4194304 : 0;
        char metrics[256];
        if (!strcmp(group, "alpha"))
            snprintf(metrics, sizeof metrics,
                     ",\"bytes_ratio\":%s,\"speed_ratio\":0.5,\"busbw\":1.25,\"lib_busbw\":2.5",
                     is("halfbytes") ? "0.5" : "1.0");
        else
            snprintf(metrics, sizeof metrics, ",\"msgs_per_rank\":3,\"msgs_optimal\":3,\"time_us\":12.5");
        emit("{\"event\":\"result\",\"case\":\"%s\",\"group\":\"%s\",\"verdict\":\"%s\",\"message\":\"%s\","
             "\"bytes\":%.0f%s%s}\n",
             name, group, verdict, message, bytes, extra, metrics);
        results++;
        if (strcmp(verdict, "pass")) failed++;
        if (is("duplicate") && c1024)
            emit("{\"event\":\"result\",\"case\":\"%s\",\"group\":\"%s\",\"verdict\":\"pass\"}\n", name, group);
        if (is("betweenhang") && c1024 && !start_after) hang(false);
        if (is("earlyend") && !strcmp(name, "alpha.c1M")) break;
    }
    emit("{\"event\":\"end\",\"cases\":%d,\"failed\":%d}\n", results, failed);
    return failed ? 1 : 0;
}
