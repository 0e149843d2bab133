/* landlock-run.c - pl-landlock: runs a command under Landlock, for the class grader's builds
 * where bubblewrap cannot start (the runs themselves are confined by pl-grade), and for the
 * launcher's daemons on the other nodes of a run across hosts (pl-grade makes it Open MPI's
 * launch agent there).
 *
 *   pl-landlock [--system] [--private-tmp] [--write-tmpdir] [--write-slurm-step] [--read DIR]...
 *               [--hide DIR]... [--write DIR]... -- COMMAND [ARGS...]
 *
 * COMMAND and all it starts may read and execute beneath every --read DIR except beneath
 * each --hide DIR (other submissions, reports, the hidden rubric, solutions), read and write
 * beneath every --write DIR (even inside a hidden one) except the hidden directories below
 * it, and read and write the device files; nothing else. --system adds the system's
 * directories (read and execute) and /proc (read). --private-tmp makes a directory of its
 * own under $TMPDIR (or /tmp, where $TMPDIR is no directory here), writable and COMMAND's
 * TMPDIR, runs COMMAND as a child and removes that directory when it ends (signals to
 * pl-landlock go to COMMAND). --write-tmpdir makes the $TMPDIR it inherits writable (none,
 * or not an absolute directory: nothing). --write-slurm-step, for a task srun started, makes
 * the directories Slurm's PMIx plugin keeps for this job step writable, as an MPI process
 * needs them: the server's ($PMIX_SERVER_TMPDIR) and the application's (spmix_appdir_UID_JOB.STEP,
 * or spmix_appdir_JOB.STEP as older Slurm names it, in Slurm's TmpFS: /tmp, or $SLURM_TMPFS
 * where the site exports another one); those that exist. With Landlock
 * ABI 6 it cannot signal a process outside. Exit 125 with one line when Landlock cannot be
 * set up, else COMMAND's status. */
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "landlock.h"

static void die(const char *msg)
{
    fprintf(stderr, "pl-landlock: %s\n", msg);
    exit(125);
}

static const char *const SYSTEM_DIRS[] = LL_SYSTEM_DIRS;

static pid_t g_child;
static void forward(int sig)
{
    if (g_child > 0) kill(g_child, sig);
}

static int unlink_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* --private-tmp: COMMAND as a child under the ruleset; this process stays outside it only
 * to remove the directory afterwards. Returns COMMAND's status as a shell would. */
static int run_private(int rs, const char *tmp, char **cmd)
{
    static const int SIGS[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};
    struct sigaction sa = {.sa_handler = forward};
    sigemptyset(&sa.sa_mask);
    for (size_t k = 0; k < sizeof SIGS / sizeof SIGS[0]; k++) sigaction(SIGS[k], &sa, NULL);
    g_child = fork();
    if (g_child < 0) die(strerror(errno));
    if (g_child == 0) {
        for (size_t k = 0; k < sizeof SIGS / sizeof SIGS[0]; k++) signal(SIGS[k], SIG_DFL);
        if (!ll_enforce(rs)) die(strerror(errno));
        execvp(cmd[0], cmd);
        fprintf(stderr, "pl-landlock: cannot run %s: %s\n", cmd[0], strerror(errno));
        _exit(127);
    }
    close(rs);
    int status = 0;
    while (waitpid(g_child, &status, 0) < 0 && errno == EINTR) {}
    nftw(tmp, unlink_one, 16, FTW_DEPTH | FTW_PHYS);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* --write-slurm-step: the existing directories of Slurm's PMIx plugin for this job step, into
 * out (at most SLURM_STEP_DIRS); how many. */
enum { SLURM_STEP_DIRS = 5 };
static int slurm_step_dirs(char **out)
{
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID"), *srv = getenv("PMIX_SERVER_TMPDIR");
    const char *bases[] = {getenv("SLURM_TMPFS"), "/tmp"};
    char path[4096];
    int n = 0;
    struct stat st;
    if (srv && srv[0] == '/' && (out[n] = realpath(srv, NULL))) n++;
    for (size_t b = 0; job && step && b < sizeof bases / sizeof bases[0]; b++) {
        if (!bases[b] || bases[b][0] != '/' || (b == 1 && bases[0] && !strcmp(bases[0], "/tmp"))) continue;
        for (int form = 0; form < 2; form++) {
            if (form == 0) snprintf(path, sizeof path, "%s/spmix_appdir_%u_%s.%s", bases[b], (unsigned)getuid(), job, step);
            else snprintf(path, sizeof path, "%s/spmix_appdir_%s.%s", bases[b], job, step);
            if (stat(path, &st) == 0 && S_ISDIR(st.st_mode) && (out[n] = realpath(path, NULL))) n++;
        }
    }
    return n;
}

int main(int argc, char **argv)
{
    char **read = calloc((size_t)argc, sizeof *read), **hide = calloc((size_t)argc, sizeof *hide),
         **write = calloc((size_t)argc + SLURM_STEP_DIRS, sizeof *write);
    int n_read = 0, n_hide = 0, n_write = 0, i = 1;
    bool system_dirs = false, slurm_step = false;
    char *tmp = NULL;
    if (!read || !hide || !write) die("out of memory");
    for (; i < argc && strcmp(argv[i], "--"); i++) {
        if (!strcmp(argv[i], "--system")) {
            system_dirs = true;
            continue;
        }
        if (!strcmp(argv[i], "--write-tmpdir")) {
            const char *t = getenv("TMPDIR");
            char *p = t && t[0] == '/' ? realpath(t, NULL) : NULL;
            if (p && strcmp(p, "/")) write[n_write++] = p;
            else free(p);
            continue;
        }
        if (!strcmp(argv[i], "--write-slurm-step")) {
            if (!slurm_step) n_write += slurm_step_dirs(write + n_write);
            slurm_step = true;
            continue;
        }
        if (!strcmp(argv[i], "--private-tmp")) {
            if (tmp) continue;
            const char *base = getenv("TMPDIR");  // another host's, where the launcher forwarded it: /tmp
            struct stat st;
            if (!base || base[0] != '/' || stat(base, &st) != 0 || !S_ISDIR(st.st_mode)) base = "/tmp";
            size_t len = strlen(base) + 20;
            if (!(tmp = malloc(len))) die("out of memory");
            snprintf(tmp, len, "%s/pl-node.XXXXXX", base);
            if (!mkdtemp(tmp)) {
                fprintf(stderr, "pl-landlock: --private-tmp: cannot create %s: %s\n", tmp, strerror(errno));
                return 125;
            }
            continue;
        }
        char ***list = !strcmp(argv[i], "--read") ? &read : !strcmp(argv[i], "--hide") ? &hide
                                                          : !strcmp(argv[i], "--write") ? &write : NULL;
        int *n = list == &read ? &n_read : list == &hide ? &n_hide : &n_write;
        if (!list) {
            fprintf(stderr, "pl-landlock: unknown option '%s' (usage: pl-landlock [--system] [--private-tmp] [--write-tmpdir] [--write-slurm-step] [--read|--hide|--write DIR]... -- CMD)\n",
                    argv[i]);
            return 2;
        }
        if (i + 1 >= argc) die("an option needs a directory");
        char *p = realpath(argv[++i], NULL);
        if (p) (*list)[(*n)++] = p;
        else if (list != &hide) {  // a directory to hide that does not exist hides nothing
            fprintf(stderr, "pl-landlock: %s: %s\n", argv[i], strerror(errno));
            return 2;
        }
    }
    if (i + 1 >= argc) die("no command after --");
    int abi = ll_abi();
    if (!abi) {
        if (tmp) rmdir(tmp);
        die("this kernel has no Landlock (Linux 5.13 or later, lsm=landlock)");
    }
    int rs = ll_create(abi);
    if (rs < 0) die(strerror(errno));
    bool ok = true;
    for (int k = 0; system_dirs && SYSTEM_DIRS[k]; k++) ok &= ll_allow(rs, abi, SYSTEM_DIRS[k], LL_RX);
    if (system_dirs) ok &= ll_allow(rs, abi, "/proc", LL_FS_READ_FILE | LL_FS_READ_DIR);
    if (tmp) {
        ok &= ll_allow(rs, abi, tmp, ll_handled(abi));
        setenv("TMPDIR", tmp, 1);
    }
    for (int k = 0; k < n_read; k++) ok &= ll_allow_except(rs, abi, read[k], hide, n_hide, LL_RX);
    ok &= ll_allow(rs, abi, "/dev", LL_FS_READ_FILE | LL_FS_READ_DIR | LL_FS_WRITE_FILE);
    for (int k = 0; k < n_write; k++) {  // the hidden directories inside it stay hidden
        char **inside = calloc((size_t)n_hide + 1, sizeof *inside);
        int n_inside = 0;
        if (!inside) die("out of memory");
        for (int h = 0; h < n_hide; h++)
            if (strcmp(hide[h], write[k]) && ll_under(hide[h], write[k])) inside[n_inside++] = hide[h];
        ok &= ll_allow_except(rs, abi, write[k], inside, n_inside, ll_handled(abi));
        free(inside);
    }
    if (!ok) {
        if (tmp) rmdir(tmp);
        die(strerror(errno));
    }
    if (tmp) return run_private(rs, tmp, argv + i + 1);
    if (!ll_enforce(rs)) die(strerror(errno));
    execvp(argv[i + 1], argv + i + 1);
    fprintf(stderr, "pl-landlock: cannot run %s: %s\n", argv[i + 1], strerror(errno));
    return 127;
}
