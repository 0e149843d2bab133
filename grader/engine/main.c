/* main.c - pl-grade, the ParaLab grading engine: command line and the order of the steps
 * (build, run every world size, score, report). See docs/grader.md for the whole story.
 *
 *   pl-grade --lab NAME --rubric FILE --driver PATH [--build "SHELL CMD"] [--np "1 2 4"]
 *            [--filter GLOB] [--device D] [--comm C] [--mpirun "mpirun --oversubscribe"]
 *            [--out DIR] [--hidden DIR] [--sandbox on|off|auto] [--build-timeout SEC]
 *            [--quiet] [--test-scale] [--brief] [--report FILE] [--rerun "make lab-1"]
 *
 * Exit status: 0 full marks, 1 anything less (a build error included), 2 usage or rubric
 * error, 3 the engine itself failed (cannot write its reports, out of memory),
 * 130 interrupted. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine.h"

extern char **environ;

typedef struct {
    const char *lab, *rubric, *driver, *build, *np, *filter, *device, *comm, *mpirun, *out, *hidden, *sandbox,
        *build_timeout, *report, *rerun, *engine_addr;
    bool quiet, test_scale, brief, sandbox_given;
    strlist data;  // --data DIR (repeatable): what a sandboxed run may read besides the driver
} options;

static void usage(FILE *f)
{
    fputs("usage: pl-grade --lab NAME --rubric FILE --driver PATH [--build \"SHELL CMD\"]\n"
          "                [--np \"1 2 4\"] [--filter GLOB] [--device D] [--comm C]\n"
          "                [--mpirun \"mpirun --oversubscribe\"] [--out DIR] [--hidden DIR]\n"
          "                [--sandbox on|off|auto] [--data DIR]... [--build-timeout SEC] [--quiet] [--test-scale]\n"
          "                [--brief] [--report FILE] [--rerun \"make lab-1\"] [--engine-addr HOST[:PORT]]\n"
          "Builds, runs the lab driver under mpirun for each world size, scores it with the\n"
          "rubric and prints a report; exit 0 only with full marks. See docs/grader.md.\n"
          "--engine-addr (default: $PL_ENGINE_ADDR): ranks on other hosts report to this address\n"
          "of this host over TCP instead of a Unix socket (docs/setup.md, Several nodes).\n",
          f);
}

/* The option values are copied: the command line itself is wiped right after (see main). */
static options parse_options(int argc, char **argv)
{
    options o = {.mpirun = "mpirun", .sandbox = "off"};
    const char *sandbox_default = o.sandbox;
    struct {
        const char *flag;
        const char **value;
    } valued[] = {
        {"--lab", &o.lab},       {"--rubric", &o.rubric}, {"--driver", &o.driver},   {"--build", &o.build},
        {"--np", &o.np},         {"--filter", &o.filter}, {"--device", &o.device},   {"--comm", &o.comm},
        {"--mpirun", &o.mpirun}, {"--out", &o.out},       {"--hidden", &o.hidden},   {"--sandbox", &o.sandbox},
        {"--build-timeout", &o.build_timeout}, {"--report", &o.report}, {"--rerun", &o.rerun},
        {"--engine-addr", &o.engine_addr},
    };
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(arg, "--quiet")) {
            o.quiet = true;
            continue;
        }
        if (!strcmp(arg, "--test-scale")) {
            o.test_scale = true;
            continue;
        }
        if (!strcmp(arg, "--data") || !strncmp(arg, "--data=", 7)) {
            if (arg[6] == '=') strlist_push(&o.data, arg + 7);
            else if (i + 1 < argc) strlist_push(&o.data, argv[++i]);
            else die_usage("--data needs a value");
            continue;
        }
        if (!strcmp(arg, "--brief")) {
            o.brief = true;
            continue;
        }
        bool known = false;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0] && !known; k++) {
            size_t n = strlen(valued[k].flag);
            if (strncmp(arg, valued[k].flag, n)) continue;
            if (arg[n] == '=') {  // --flag=value
                *valued[k].value = xstrdup(arg + n + 1);
                known = true;
            } else if (arg[n] == '\0') {
                if (i + 1 >= argc) die_usage("%s needs a value", arg);
                *valued[k].value = xstrdup(argv[++i]);
                known = true;
            }
        }
        if (!known) die_usage("unknown option '%s' (try --help)", arg);
    }
    if (!o.lab || !o.rubric || !o.driver) die_usage("--lab, --rubric and --driver are required (try --help)");
    o.sandbox_given = o.sandbox != sandbox_default;
    if (!o.engine_addr && getenv("PL_ENGINE_ADDR")) o.engine_addr = xstrdup(getenv("PL_ENGINE_ADDR"));
    if (o.engine_addr && !o.engine_addr[0]) o.engine_addr = NULL;
    if (strcmp(o.sandbox, "on") && strcmp(o.sandbox, "off") && strcmp(o.sandbox, "auto"))
        die_usage("--sandbox must be on, off or auto, not '%s'", o.sandbox);
    return o;
}

/* A student's process can read the engine's /proc/<pid>/cmdline and environ (same user,
 * default mode): wipe both in place, so --hidden DIR and the paths given do not show. The
 * environment lives on in heap copies. */
static void wipe_command_line(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) memset(argv[i], 0, strlen(argv[i]));
    int n = 0;
    while (environ[n]) n++;
    char **copy = xmalloc((size_t)(n + 1) * sizeof *copy);
    for (int i = 0; i < n; i++) {
        copy[i] = xstrdup(environ[i]);
        memset(environ[i], 0, strlen(environ[i]));
    }
    copy[n] = NULL;
    environ = copy;
}

/* "PL-LANDLOCK --system TMP-FLAG [FLAG] --read PL-LANDLOCK --read DRIVER-DIR [--read DATA]...
 * --write /dev/shm -- [TAIL]" (a confined daemon starts each rank through the agent itself),
 * or NULL where a word would hold a blank (Open MPI splits these values on blanks). */
static char *landlock_words(const char *tool, const char *tmp_flag, const char *flag, const char *driver_dir,
                            const strlist *data, const char *tail)
{
    strlist words = {0};
    const char *head[] = {tool, "--system", tmp_flag, "--read", tool, "--read", driver_dir};  // a daemon runs the agent
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++) {
        strlist_push(&words, head[i]);
        if (i == 2 && flag) strlist_push(&words, flag);
    }
    for (int i = 0; i < data->count; i++) {
        char *d = realpath(data->items[i], NULL);
        if (!d) continue;
        strlist_push(&words, "--read");
        strlist_push(&words, d);
        free(d);
    }
    strlist_push(&words, "--write");
    strlist_push(&words, "/dev/shm");
    strlist_push(&words, "--");
    if (tail) strlist_push(&words, tail);
    bool blank = false;
    for (int i = 0; i < words.count; i++) blank |= strpbrk(words.items[i], " \t\n") != NULL;
    char *joined = blank ? NULL : strlist_join(&words, " ");
    strlist_free(&words);
    return joined;
}

/* Across hosts, Open MPI's mpirun starts a daemon (orted) on every other node through ssh,
 * and mpirun and the daemons start the ranks - and whatever a rank asks them to start
 * (PMIx_Spawn, which a player that runs MPI itself can find in memory). The engine makes
 * pl-landlock the launch agent of the daemons (each with a private TMPDIR of its own) and
 * the fork agent of every process they or mpirun start (with the TMPDIR they inherit: a
 * fresh one per run on this host, run_world): able to read only the system's directories,
 * the driver's directory and the lab's data, and to write only that TMPDIR and /dev/shm -
 * what the engine's Landlock sandbox allows on one host. Set in the environment mpirun
 * inherits; an instructor's own setting of either agent is kept. Daemons launched in a
 * tree would need ssh's keys, which Landlock hides: the tree is turned off; and each daemon
 * stays attached to its ssh session (no --daemonize), so that pl-landlock removes its TMPDIR
 * when it ends. Slurm's srun starts every rank through slurmd, which the kit cannot make
 * start anything else: there srun starts pl-landlock (a private TMPDIR per rank) with the
 * driver as its command, `*rank_wrapper` (words, for build_argv). Returns what was done,
 * for the run's note. */
static char *confine_node_daemons(const options *opt, const strlist *mpirun, bool *own_tmpdir, strlist *rank_wrapper)
{
    *own_tmpdir = false;
    const char *cmd = mpirun->count ? strrchr(mpirun->items[0], '/') : NULL;
    cmd = cmd ? cmd + 1 : mpirun->count ? mpirun->items[0] : "";
    bool srun = !strcmp(cmd, "srun");
    if (!srun && strcmp(cmd, "mpirun") && strcmp(cmd, "mpiexec") && strcmp(cmd, "orterun"))
        return xasprintf("the launcher %s starts the ranks on the other nodes itself (only Open MPI's mpirun "
                         "and Slurm's srun get confined ranks there)", cmd);
    if (!srun && (getenv("OMPI_MCA_orte_launch_agent") || getenv("OMPI_MCA_orte_fork_agent")))
        return xstrdup("OMPI_MCA_orte_launch_agent or OMPI_MCA_orte_fork_agent is set, so the launcher's daemons "
                       "and ranks run as it says (unset it to run them under Landlock)");
    char self[PATH_MAX], *driver = realpath(opt->driver, NULL);
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 16);
    if (n <= 0 || !driver) {
        free(driver);
        return xstrdup("the daemons and ranks are not confined (the engine's or the driver's path is unknown)");
    }
    self[n] = '\0';
    strcpy(strrchr(self, '/') + 1, "pl-landlock");
    *strrchr(driver, '/') = '\0';
    if (srun) {
        char *words = landlock_words(self, "--private-tmp", "--write-slurm-step", driver, &opt->data, NULL), *out;
        if (!words || access(self, X_OK) != 0) {
            out = xasprintf("the ranks are not confined (%s is missing, or a path holds a blank)", self);
        } else {
            strlist_split(rank_wrapper, words);
            out = xasprintf("srun starts every rank under Landlock (%s around the driver: the system's files, the "
                            "driver's directory and the lab's data readable, only a TMPDIR of the rank's own, "
                            "/dev/shm and Slurm's PMIx directories of the job step writable; a node without "
                            "Landlock cannot start them); Slurm's own daemons are not confined", self);
        }
        free(words);
        free(driver);
        return out;
    }
    char *agent = landlock_words(self, "--private-tmp", NULL, driver, &opt->data, "orted"),
         *fork_agent = landlock_words(self, "--write-tmpdir", NULL, driver, &opt->data, NULL), *out;
    if (!agent || !fork_agent || access(self, X_OK) != 0) {
        out = xasprintf("the daemons and ranks are not confined (%s is missing, or a path holds a blank)", self);
    } else {
        setenv("OMPI_MCA_orte_launch_agent", agent, 1);
        setenv("OMPI_MCA_orte_fork_agent", fork_agent, 1);
        setenv("OMPI_MCA_plm_rsh_no_tree_spawn", "1", 1);
        setenv("OMPI_MCA_orte_leave_session_attached", "1", 1);  // no --daemonize: pl-landlock outlives it
        *own_tmpdir = true;
        out = xasprintf("the launcher's daemons on the other nodes, every rank on every node and anything a rank "
                        "asks the launcher to spawn run under Landlock (%s: the system's files, the driver's "
                        "directory and the lab's data readable, only a TMPDIR of the run's own and /dev/shm "
                        "writable; a node without Landlock cannot start them: set OMPI_MCA_orte_launch_agent=orted "
                        "to run them unconfined)", self);
    }
    free(agent);
    free(fork_agent);
    free(driver);
    return out;
}

/* The environment of the build and the runs: the engine's, without any PL_RESULTS_* it
 * inherited (each run gets its own) and without anything that names the hidden directory
 * (make passes HIDDEN=... along, also inside MAKEFLAGS). A sandboxed run gets /tmp as its
 * TMPDIR: the outer one may be hidden or read-only there. */
static char **child_environment(const char *hidden, bool sandboxed, bool bwrap)
{
    char *hidden_real = hidden ? realpath(hidden, NULL) : NULL;
    strlist env = {0};
    for (char **e = environ; *e; e++) {
        if (!strncmp(*e, "PL_RESULTS_", 11) || !strncmp(*e, "PL_ENGINE_", 10)) continue;
        if (hidden && (strstr(*e, hidden) || (hidden_real && strstr(*e, hidden_real)))) continue;
        if (sandboxed && !strncmp(*e, "TMPDIR=", 7)) continue;
        strlist_push(&env, *e);
    }
    if (bwrap) strlist_push(&env, "TMPDIR=/tmp");  // Landlock's runs get theirs in run_world
    free(hidden_real);
    return env.items;  // lives as long as the engine
}

/* --np "1 2 4": integers from 1 to WORLD_SIZE_MAX, digits only. */
static int parse_world_sizes(const char *text, int **np)
{
    strlist words = {0};
    strlist_split(&words, text);
    if (!words.count) die_usage("--np needs at least one world size");
    *np = xmalloc((size_t)words.count * sizeof **np);
    for (int i = 0; i < words.count; i++) {
        const char *w = words.items[i];
        long v = strspn(w, "0123456789") == strlen(w) && strlen(w) <= 5 ? strtol(w, NULL, 10) : 0;
        if (v < 1 || v > WORLD_SIZE_MAX)
            die_usage("--np: '%s' is not a world size (an integer from 1 to %d)", w, WORLD_SIZE_MAX);
        (*np)[i] = (int)v;
    }
    int n = words.count;
    strlist_free(&words);
    return n;
}

static void load_hidden(rubric *r, const char *dir, const char *lab, console *con)
{
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) die_usage("--hidden %s: not a directory", dir);
    char *path = xasprintf("%s/%s.rubric", dir, lab);
    if (stat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode)) die_usage("hidden rubric %s is not a regular file", path);
        rubric_load(r, path, true);
        console_note(con, "hidden rubric: %s", path);
    } else if (errno == ENOENT) {
        console_note(con, "no hidden rubric for lab %s in %s", lab, dir);
    } else {
        die_usage("hidden rubric %s: %s", path, strerror(errno));
    }
    free(path);
}

/* Runs the build command; returns NULL on success, else the "(build)" stand-in case:
 * `forbidden` when the build's object checker refused something (a line "forbidden: ..."),
 * else `build error`. */
static case_result *run_build(const char *cmd, double timeout_s, char **envp, console *con)
{
    char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
    child_run ch = {.argv = argv, .envp = envp, .merge_stderr = true, .total_s = timeout_s};
    console_note(con, "build: %s", cmd);
    child_run_exec(&ch);
    int killed = contain_kill_descendants();
    if (killed) console_note(con, "note: killed %d leftover process(es) after the build", killed);
    case_result *build = NULL;
    if (ch.exit_code != 0 || ch.term_signal || ch.hit_cap || ch.exec_failed || ch.interrupted) {
        classification cls = CL_BUILD_ERROR;
        char *first = capture_line_starting(&ch.out, "forbidden: ");
        if (first) {
            cls = CL_FORBIDDEN;
            memmove(first, first + 11, strlen(first + 11) + 1);
        }
        if (!first) first = capture_find_line(&ch.out, "error");
        if (!first) first = capture_find_line(&ch.out, "Error");
        if (!first && ch.hit_cap) first = xasprintf("the build took longer than %g s (build-timeout)", timeout_s);
        if (!first) first = capture_reason(&ch.out);
        if (!first) first = xasprintf("the build command failed with exit code %d", ch.exit_code);
        build = xmalloc(sizeof *build);
        *build = (case_result){.id = xstrdup("(build)"), .name = xstrdup("(build)"), .cls = cls, .detail = first,
                               .whole_run = true};
        char *text = capture_text(&ch.out);
        clean_text_keep_lines(text);
        console_build_failure(con, build, text);
        free(text);
    }
    child_run_free(&ch);
    return build;
}

/* Runs a short command (a probe) and says whether it exited 0. */
static bool probe(char **argv, bool drop_root, const sandbox *landlock, char **why)
{
    child_run ch = {.argv = argv, .drop_root = drop_root, .landlock = landlock, .total_s = 20};
    child_run_exec(&ch);
    contain_kill_descendants();
    bool ok = ch.exit_code == 0 && !ch.term_signal && !ch.hit_cap && !ch.exec_failed;
    if (!ok && why) {
        *why = capture_reason(&ch.err);
        if (!*why) *why = xasprintf("exit code %d", ch.exit_code);
    }
    child_run_free(&ch);
    return ok;
}

/* --sandbox: on (required), auto (when one can start), off. bubblewrap first; where it cannot
 * start (no user namespaces: Gradescope's containers, many CI runners), Landlock. */
static bool sandbox_wanted(const char *mode, bool drop_root, sandbox *sb, console *con)
{
    bool *tmpfs_size = &sb->tmpfs_size;
    if (!strcmp(mode, "off")) return false;
    strlist argv = {0};
    sandbox_probe_argv(&argv, true);
    char *why = NULL;
    bool ok = probe(argv.items, drop_root, NULL, NULL);
    *tmpfs_size = ok;
    if (!ok) {  // an older bwrap without --size still makes a sandbox
        strlist_free(&argv);
        sandbox_probe_argv(&argv, false);
        ok = probe(argv.items, drop_root, NULL, &why);
    }
    strlist_free(&argv);
    if (ok) {
        sb->kind = SANDBOX_BWRAP;
        free(why);
        return true;
    }
    sb->landlock_abi = landlock_abi();
    if (sb->landlock_abi > 0) {
        sb->kind = SANDBOX_LANDLOCK;
        free(why);
        return true;
    }
    if (!strcmp(mode, "on"))
        die_usage("--sandbox on: no sandbox can start here: bubblewrap cannot (%s) and the kernel has no "
                  "Landlock (Linux 5.13 or later, lsm=landlock); install bubblewrap (scripts/install-deps.sh) "
                  "and allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1), or "
                  "grade unconfined with --sandbox off (the student's code then runs as this user, root "
                  "included, and can read and write what it can)",
                  why ? why : "bwrap failed");
    console_note(con, "note: --sandbox auto: no sandbox (bubblewrap: %s; no Landlock in this kernel); runs are "
                 "contained without it", why ? why : "bwrap failed");
    free(why);
    return false;
}

/* Before the first sandboxed run: what it must not see, and a check that the driver can be
 * run in there at all (as uid 65534 its files must be readable by others). NULL when it
 * can, else why not (malloc'd). */
static char *sandbox_ready(sandbox *sb, const options *opt, const char *work)
{
    // uid 65534 must pass through to its channel directory (nothing else: no read bit)
    if (sb->drop_root && chmod(work, 0711) != 0) die_engine("chmod %s: %s", work, strerror(errno));
    if (sb->kind == SANDBOX_LANDLOCK) {  // the runs' TMPDIR, the one directory they write besides the channel
        sb->scratch = xasprintf("%s/tmp", work);
        if (mkdir(sb->scratch, 0700) != 0) die_engine("mkdir %s: %s", sb->scratch, strerror(errno));
        if (sb->drop_root && chown(sb->scratch, SANDBOX_UID, SANDBOX_UID) != 0)
            die_engine("chown %s: %s", sb->scratch, strerror(errno));
    }
    strlist words = {0};
    strlist_split(&words, opt->mpirun);
    sandbox_init(sb, opt->hidden, opt->out, work, opt->driver, &opt->data, words.count ? words.items[0] : NULL);
    strlist_free(&words);
    strlist check = {0}, cmd = {0};
    const char *const test[] = {"/bin/sh", "-c", "test -r \"$0\" && test -x \"$0\"", opt->driver, NULL};
    for (int i = 0; test[i]; i++) strlist_push(&cmd, test[i]);
    bool landlock = sb->kind == SANDBOX_LANDLOCK;
    if (!landlock) sandbox_argv(&check, sb, NULL, cmd.items);
    char *why = NULL, *problem = NULL;
    if (!probe(landlock ? cmd.items : check.items, sb->drop_root, landlock ? sb : NULL, &why))
        problem = xasprintf("the driver %s cannot be read and run as uid %d inside the sandbox (%s); make it and "
                            "its directories readable by others (chmod o+rX)",
                            opt->driver, SANDBOX_UID, why ? why : "test -x failed");
    strlist_free(&check);
    strlist_free(&cmd);
    free(why);
    return problem;
}

static void on_signal(int sig)
{
    (void)sig;
    engine_interrupted = 1;
}

static void install_signals(void)
{
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);  // a closed stdout (e.g. `| head`) must not kill us mid-run
}

static void report_case(void *ctx, const case_result *c, const classification *before)
{
    console_case(ctx, c, before);
}

static void report_note(void *ctx, const char *text)
{
    console_note(ctx, "%s", text);
}

int main(int argc, char **argv)
{
    options opt = parse_options(argc, argv);
    wipe_command_line(argc, argv);
    for (char **e = environ; *e;) {  // the runs get their own channel variables, never these
        if (!strncmp(*e, "PL_RESULTS_", 11)) {
            char *name = xstrdup(*e);
            name[strcspn(name, "=")] = '\0';
            unsetenv(name);
            free(name);
        } else {
            e++;
        }
    }
    install_signals();
    contain_init();

    console con;
    console_init(&con, opt.quiet);
    con.brief = opt.brief;
    con.rerun = opt.rerun;
    con.filter = opt.filter;
    char *out_report = opt.out ? xasprintf("%s/report.txt", opt.out) : NULL;
    con.report_path = opt.report ? opt.report : out_report;
    rubric rub = {0};
    rubric_load(&rub, opt.rubric, false);
    if (rub.lab && strcmp(rub.lab, opt.lab))
        die_usage("%s is the rubric of lab '%s', not '%s'", opt.rubric, rub.lab, opt.lab);
    if (opt.hidden) load_hidden(&rub, opt.hidden, opt.lab, &con);
    rubric_check(&rub, opt.rubric);
    con.rub = &rub;
    if (opt.build_timeout) {
        double v;
        if (!parse_number(opt.build_timeout, &v) || v <= 0 || v > 7 * 24 * 3600.0)
            die_usage("--build-timeout wants a positive number of seconds, not '%s'", opt.build_timeout);
        rub.build_timeout_s = v;
    }

    int *np = rub.np, n_np = rub.n_np;
    bool np_given = opt.np != NULL;
    if (np_given) n_np = parse_world_sizes(opt.np, &np);
    if (!n_np) die_usage("%s has no 'np' line and --np was not given", opt.rubric);

    if (opt.out) {  // now: a symlinked --out is refused before anything runs
        char *why = make_out_dir(opt.out);
        if (why) die_usage("--out %s: %s", opt.out, why);
    }
    bool drop_root = geteuid() == 0;
    sandbox sb = {.drop_root = drop_root};
    bool own_tmpdir = false;  // across hosts, confined: each run gets a TMPDIR of its own
    strlist rank_wrapper = {0};  // across hosts under srun: pl-landlock's words before the driver
    /* Across hosts the launcher reaches the other nodes with this user's credentials (ssh
     * keys, Slurm's munge socket), which a sandbox on this host would hide; each referee
     * still confines its own player, wherever it runs. */
    if (opt.engine_addr && !strcmp(opt.sandbox, "on"))
        die_usage("--sandbox on confines the whole run on this host; with --engine-addr (PL_ENGINE_ADDR) the ranks "
                  "run on other hosts: use --sandbox auto or off (every player stays under its referee's filter)");
    if (opt.engine_addr && !strcmp(opt.sandbox, "auto")) {
        strlist launcher = {0};
        strlist_split(&launcher, opt.mpirun);
        char *why = confine_node_daemons(&opt, &launcher, &own_tmpdir, &rank_wrapper);
        strlist_free(&launcher);
        console_note(&con, "note: across hosts (--engine-addr %s): no sandbox around the launcher on this host; every "
                     "player is confined by its referee's filter on its own host; %s", opt.engine_addr, why);
        free(why);
        opt.sandbox = "off";
        opt.sandbox_given = false;
    }
    sb.on = sandbox_wanted(opt.sandbox, drop_root, &sb, &con);
    char **envp = child_environment(opt.hidden, sb.on, sb.on && sb.kind == SANDBOX_BWRAP);
    if (!strcmp(opt.sandbox, "off") && opt.sandbox_given)
        console_note(&con, "note: --sandbox off: the student's code runs unconfined, as %s, and can read and write "
                     "whatever this user can", drop_root ? "root" : "this user");

    run_config cfg = {.rub = &rub, .driver = opt.driver, .filter = opt.filter, .device = opt.device,
                      .comm = opt.comm, .test_scale = opt.test_scale, .envp = envp,
                      .limits = {.data_bytes = rub.memory_limit},
                      .report = {.on_case = report_case, .on_note = report_note, .ctx = &con}};
    strlist_split(&cfg.mpirun, opt.mpirun);
    if (!cfg.mpirun.count) die_usage("--mpirun is empty");
    if (opt.test_scale && !rub.have_test_args)
        console_note(&con, "note: %s has no test-args; --test-scale uses its args", opt.rubric);

    // --np narrows the extra run lines too: only those at a requested world size run
    const rubric_run **extra = xmalloc((size_t)(rub.n_runs + 1) * sizeof *extra);
    int n_extra = 0;
    for (int i = 0; i < rub.n_runs; i++) {
        bool selected = !np_given;
        for (int k = 0; k < n_np && !selected; k++) selected = np[k] == rub.runs[i].np;
        if (selected) extra[n_extra++] = &rub.runs[i];
    }
    console_header(&con, opt.lab, opt.driver, np, n_np, n_extra);

    case_list cases = {0};
    case_result *build = opt.build ? run_build(opt.build, rub.build_timeout_s, envp, &con) : NULL;
    if (build) cases = (case_list){.v = build, .count = 1, .cap = 1};  // junit.xml and cases.json say why
    if (!build && !engine_interrupted) {
        if (strchr(opt.driver, '/') && access(opt.driver, X_OK) != 0)
            die_usage("driver %s: %s (was it built?)", opt.driver, strerror(errno));
        const char *tmp = getenv("TMPDIR");
        char *work = xasprintf("%s/pl-grade.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
        if (!mkdtemp(work)) die_engine("cannot create a work directory %s: %s", work, strerror(errno));
        char *problem = sb.on ? sandbox_ready(&sb, &opt, work) : NULL;
        if (problem && !strcmp(opt.sandbox, "on")) {
            rmdir(work);
            die_usage("--sandbox on: %s, or grade with --sandbox off", problem);
        }
        if (problem) {
            console_note(&con, "note: --sandbox auto: no sandbox: %s", problem);
        } else if (sb.on) {
            cfg.sandbox = &sb;
            if (sb.kind == SANDBOX_BWRAP)
                console_note(&con, "sandbox: bubblewrap, uid %d, no network, read-only files, private /proc and /tmp%s",
                             SANDBOX_UID, drop_root ? " (dropped from root)" : "");
            else
                console_note(&con, "sandbox: Landlock ABI %d (bubblewrap cannot start here), uid %d%s, only the "
                             "system's files, the driver and the lab's data readable, only the run's own "
                             "directories writable%s",
                             sb.landlock_abi, drop_root ? SANDBOX_UID : (int)getuid(), drop_root ? " (dropped from root)" : "",
                             sb.landlock_abi >= 6 ? ", no signal out of the run" : "");
        }
        if (problem && sb.scratch) {  // the sandbox is off after all: its scratch directory goes
            rmdir(sb.scratch);
            free(sb.scratch);
            sb.scratch = NULL;
        }
        free(problem);
        cfg.work_dir = work;
        cfg.engine_addr = opt.engine_addr;
        cfg.own_tmpdir = own_tmpdir;
        cfg.rank_wrapper = rank_wrapper;
        for (int i = 0; i < n_np && !engine_interrupted; i++) run_world(&cfg, np[i], NULL, &cases);
        for (int i = 0; i < n_extra && !engine_interrupted; i++) run_world(&cfg, extra[i]->np, extra[i], &cases);
        if (sb.scratch) remove_tree(sb.scratch);
        rmdir(work);
        free(work);
    }
    // nothing a run left behind may still be alive when the reports are written
    int killed = contain_kill_descendants();
    if (killed) console_note(&con, "note: killed %d leftover process(es) before the reports", killed);
    if (engine_interrupted) {
        fputs("pl-grade: interrupted\n", stderr);
        return 130;
    }

    grade g;
    grade_compute(&g, &rub, &cases, build);
    console_summary(&con, &g, opt.lab);
    int status = g.score == g.max_score ? 0 : 1;
    if (opt.out && !write_outputs(opt.out, opt.lab, &g, &cases)) status = 3;
    if (opt.out && !write_report(out_report, con.full)) status = 3;
    if (opt.report && !write_report(opt.report, con.full)) status = 3;

    grade_free(&g);
    case_list_free(&cases);
    free(extra);
    strlist_free(&cfg.mpirun);
    strlist_free(&rank_wrapper);
    sandbox_free(&sb);
    if (np != rub.np) free(np);
    console_free(&con);
    free(out_report);
    rubric_free(&rub);
    return status;
}
