/* contain.c - keeps every process of a run in check, in two layers.
 *
 * Always (no privileges needed):
 *  - the engine is a child subreaper, so a process a student forks and leaves behind is
 *    re-parented to the engine instead of init; after every run the engine walks /proc and
 *    SIGKILLs every descendant it still has, and again right before writing its reports,
 *    so nothing of the student's can touch the reports once they exist;
 *  - resource limits in the run's child before exec: CPU seconds, data size, file size,
 *    open files.
 * In the sandbox (--sandbox on, `make grade`): the run is started through bubblewrap in new
 * user, PID, network, IPC, UTS and cgroup namespaces, as uid/gid 65534, with the whole
 * filesystem read-only, private /tmp and /dev/shm, the hidden rubric, --out and the engine's
 * work directory hidden behind empty tmpfs mounts, and only the run's channel directory
 * writable. The engine is outside the PID namespace (it cannot be seen or signalled from
 * inside) and the namespace dies with the run. RLIMIT_NPROC bounds fork loops there: the
 * kernel never applies it to uid 0, so an engine running as root first drops the run to
 * uid 65534. */
#include <dirent.h>        // defines: opendir, readdir
#include <errno.h>
#include <grp.h>           // defines: setgroups
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>     // defines: prctl, PR_SET_CHILD_SUBREAPER
#include <sys/resource.h>  // defines: setrlimit, RLIMIT_*
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>          // defines: nanosleep
#include <unistd.h>

#include "engine.h"
#include "landlock.h"  // defines: LL_SYSTEM_DIRS

#define KILL_PASSES_MAX 500      // each pass kills what it finds; forks in between are found next
#define GRACE_LOOKS 20           // 10 ms apart: what exits by itself within 0.2 s is not killed
#define TMPFS_SIZE "1073741824"  // /tmp and /dev/shm inside the sandbox: 1 GiB each

/* ---------------------------------------------------------------- subreaper */

void contain_init(void)
{
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
        fprintf(stderr, "pl-grade: warning: cannot become a child subreaper (%s); orphans of a run may escape\n",
                strerror(errno));
    /* no process of the same user can read the engine's memory or its /proc files (the
     * hidden rubric, the run keys) */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
        fprintf(stderr, "pl-grade: warning: cannot make itself undumpable (%s)\n", strerror(errno));
}

typedef struct {
    pid_t pid, ppid;
    char state;
} proc_entry;

/* Every process in /proc with its parent (the kernel's view at one moment). */
static proc_entry *list_processes(int *n)
{
    DIR *d = opendir("/proc");
    if (!d) {
        *n = 0;
        return NULL;
    }
    int cap = 256, count = 0;
    proc_entry *v = xmalloc((size_t)cap * sizeof *v);
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0) continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f) continue;  // gone already
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[got] = '\0';
        // "pid (comm) state ppid ...": comm may hold blanks and parentheses
        char *close = strrchr(buf, ')');
        char state;
        int ppid;
        if (!close || sscanf(close + 1, " %c %d", &state, &ppid) != 2) continue;
        if (count == cap) v = xrealloc(v, (size_t)(cap *= 2) * sizeof *v);
        v[count++] = (proc_entry){(pid_t)pid, (pid_t)ppid, state};
    }
    closedir(d);
    *n = count;
    return v;
}

static int by_pid(const void *a, const void *b)
{
    pid_t x = ((const proc_entry *)a)->pid, y = ((const proc_entry *)b)->pid;
    return (x > y) - (x < y);
}

/* mine[i] = 1 when v[i] descends from `root` (v is sorted by pid here). A fork loop can
 * leave tens of thousands of processes: parents are found by binary search and every
 * answer is remembered, so this stays O(n log n). */
static signed char *descendants(proc_entry *v, int n, pid_t root)
{
    qsort(v, (size_t)n, sizeof *v, by_pid);
    signed char *mine = xmalloc((size_t)(n ? n : 1));
    memset(mine, -1, (size_t)(n ? n : 1));  // -1: not known yet
    int *chain = xmalloc((size_t)(n ? n : 1) * sizeof *chain);
    for (int i = 0; i < n; i++) {
        int len = 0, at = i;
        signed char answer = 0;
        while (at >= 0 && mine[at] < 0 && len < n) {
            chain[len++] = at;
            if (v[at].ppid == root) {
                answer = 1;
                at = -1;
                break;
            }
            proc_entry key = {.pid = v[at].ppid};
            proc_entry *parent = v[at].ppid > 0 ? bsearch(&key, v, (size_t)n, sizeof *v, by_pid) : NULL;
            at = parent ? (int)(parent - v) : -1;
        }
        if (at >= 0 && mine[at] >= 0) answer = mine[at];
        for (int k = 0; k < len; k++) mine[chain[k]] = answer;
    }
    free(chain);
    return mine;
}

static void reap_all(void)
{
    while (waitpid(-1, NULL, WNOHANG) > 0) {}
}

static int by_pid_t(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

/* One look at /proc: SIGKILL (when `kill_them`) every live descendant; returns them,
 * sorted (*n of them). */
static pid_t *sweep(bool kill_them, int *n_out)
{
    int n;
    proc_entry *v = list_processes(&n);
    signed char *mine = descendants(v, n, getpid());
    pid_t *alive = xmalloc((size_t)(n ? n : 1) * sizeof *alive);
    int count = 0;
    for (int i = 0; i < n; i++) {
        if (!mine[i] || v[i].state == 'Z' || v[i].state == 'X') continue;
        if (kill_them) kill(v[i].pid, SIGKILL);
        alive[count++] = v[i].pid;  // v is sorted by pid, so alive is too
    }
    free(mine);
    free(v);
    reap_all();
    *n_out = count;
    return alive;
}

static void pause_ms(long ms)
{
    struct timespec t = {0, ms * 1000 * 1000};
    nanosleep(&t, NULL);
}

int contain_kill_descendants(void)
{
    // a run that just ended may still have processes on their way out (a PID namespace
    // being torn down): they are not leftovers
    int n = 0;
    for (int wait = 0; wait < GRACE_LOOKS; wait++) {
        free(sweep(false, &n));
        if (!n) return 0;
        pause_ms(10);
    }
    int killed = 0, seen_n = 0;
    pid_t *seen = NULL;  // counted once each, sorted
    for (int pass = 0; pass < KILL_PASSES_MAX; pass++) {
        pid_t *alive = sweep(true, &n);
        int fresh = 0;
        for (int i = 0; i < n; i++)
            if (!seen_n || !bsearch(&alive[i], seen, (size_t)seen_n, sizeof *seen, by_pid_t)) alive[fresh++] = alive[i];
        if (fresh) {
            seen = xrealloc(seen, (size_t)(seen_n + fresh) * sizeof *seen);
            memcpy(seen + seen_n, alive, (size_t)fresh * sizeof *seen);
            seen_n += fresh;
            qsort(seen, (size_t)seen_n, sizeof *seen, by_pid_t);
            killed += fresh;
        }
        free(alive);
        if (!n) break;
        pause_ms(10);  // let SIGKILL land before looking again; forks in between are found next
    }
    free(seen);
    return killed;
}

/* ---------------------------------------------------------------- the run's child */

static bool set_limit(int resource, double value, double hard_extra)
{
    if (value <= 0) return true;
    struct rlimit old, lim;
    if (getrlimit(resource, &old) != 0) return false;
    lim.rlim_cur = (rlim_t)value;
    lim.rlim_max = (rlim_t)(value + hard_extra);
    // without privileges a limit can only go down: stay within the current hard limit
    if (old.rlim_max != RLIM_INFINITY && lim.rlim_max > old.rlim_max && geteuid() != 0) lim.rlim_max = old.rlim_max;
    if (lim.rlim_cur > lim.rlim_max) lim.rlim_cur = lim.rlim_max;
    return setrlimit(resource, &lim) == 0;
}

bool contain_child_setup(const child_limits *lim, bool drop_root)
{

    if (lim) {
        // CPU: SIGXCPU at the soft limit, SIGKILL 5 s later
        if (!set_limit(RLIMIT_CPU, lim->cpu_s, 5) || !set_limit(RLIMIT_DATA, lim->data_bytes, 0) ||
            !set_limit(RLIMIT_FSIZE, lim->fsize_bytes, 0) || !set_limit(RLIMIT_NOFILE, lim->nofile, 0) ||
            !set_limit(RLIMIT_NPROC, lim->nproc, 0))
            return false;
    }
    if (drop_root) {
        if (setgroups(0, NULL) != 0 || setgid(SANDBOX_UID) != 0 || setuid(SANDBOX_UID) != 0) return false;
        if (getuid() != SANDBOX_UID || geteuid() != SANDBOX_UID) return false;
    }
    // nothing outlives the engine: a run's launcher dies with it (set last: a change of
    // credentials clears it)
    return prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) == 0;
}

int processes_of_user(uid_t uid)
{
    DIR *d = opendir("/proc");
    if (!d) return 0;
    int tasks = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0) continue;
        char path[64], line[256];
        snprintf(path, sizeof path, "/proc/%ld/status", pid);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        long real_uid = -1, threads = 1;
        while (fgets(line, sizeof line, f)) {
            if (!strncmp(line, "Uid:", 4)) real_uid = strtol(line + 4, NULL, 10);
            else if (!strncmp(line, "Threads:", 8)) threads = strtol(line + 8, NULL, 10);
        }
        fclose(f);
        if (real_uid == (long)uid) tasks += (int)threads;  // RLIMIT_NPROC counts threads
    }
    closedir(d);
    return tasks;
}

/* ---------------------------------------------------------------- the sandbox */

static void push_words(strlist *l, const char *const *words)
{
    for (; *words; words++) strlist_push(l, *words);
}

static const char *const SANDBOX_BASE[] = {
    "bwrap", "--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534", "--die-with-parent",
    "--new-session", "--cap-drop", "ALL", "--dev", "/dev", "--proc", "/proc", NULL,
};

/* What every run sees of the machine, read-only: the system's programs, libraries and
 * configuration (Open MPI's included), and the hardware description hwloc reads. Nothing of
 * the home directories or of the kit's tree: the driver's directory and the lab's data are
 * bound one by one (sandbox_init). */
const char *const sandbox_system_dirs[] = LL_SYSTEM_DIRS;
/* A GPU's device files, where they exist (the sandbox's /dev is a minimal one). */
static const char *const SANDBOX_GPU[] = {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                                          "/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia3",
                                          "/dev/nvidia4", "/dev/nvidia5", "/dev/nvidia6", "/dev/nvidia7", NULL};

static void push_system(strlist *out)
{
    for (int i = 0; sandbox_system_dirs[i]; i++) {
        strlist_push(out, "--ro-bind-try");
        strlist_push(out, sandbox_system_dirs[i]);
        strlist_push(out, sandbox_system_dirs[i]);
    }
    for (int i = 0; SANDBOX_GPU[i]; i++) {
        strlist_push(out, "--dev-bind-try");
        strlist_push(out, SANDBOX_GPU[i]);
        strlist_push(out, SANDBOX_GPU[i]);
    }
}

void sandbox_probe_argv(strlist *out, bool with_size)
{
    push_words(out, SANDBOX_BASE);
    push_system(out);
    if (with_size) {
        strlist_push(out, "--size");
        strlist_push(out, TMPFS_SIZE);
    }
    const char *const rest[] = {"--tmpfs", "/tmp", "true", NULL};
    push_words(out, rest);
}

static bool under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    return !strncmp(path, dir, n) && (path[n] == '/' || path[n] == '\0');
}

/* The canonical path of an existing file, or NULL. */
static char *real(const char *path)
{
    return path ? realpath(path, NULL) : NULL;
}

/* Where a command would be found: its own path if it names one, else the first in PATH
 * (malloc'd absolute path), or NULL. */
static char *find_program(const char *cmd, const char *cwd)
{
    if (strchr(cmd, '/')) return cmd[0] == '/' ? xstrdup(cmd) : xasprintf("%s/%s", cwd, cmd);
    const char *path = getenv("PATH");
    char *copy = xstrdup(path ? path : "/usr/bin:/bin"), *save = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        char *p = xasprintf("%s/%s", dir, cmd);
        if (access(p, X_OK) == 0) {
            free(copy);
            return p;
        }
        free(p);
    }
    free(copy);
    return NULL;
}

static void bind_data(sandbox *sb, const char *src, const char *dst)
{
    char *p = real(src);
    if (!p) die_usage("--sandbox: %s: %s", src, strerror(errno));
    strlist_push(&sb->data_src, p);
    strlist_push(&sb->data_dst, dst);
    free(p);
}

void sandbox_init(sandbox *sb, const char *hidden_dir, const char *out_dir, const char *work_dir,
                  const char *driver, const strlist *data, const char *launcher)
{
    const char *maybe[] = {hidden_dir, out_dir, work_dir};
    for (size_t i = 0; i < sizeof maybe / sizeof maybe[0]; i++) {
        char *p = real(maybe[i]);
        if (p && strcmp(p, "/") && !strlist_has(&sb->masks, p)) strlist_push(&sb->masks, p);
        free(p);
    }
    char *drv = real(driver);
    if (!drv) die_usage("driver %s: %s", driver, strerror(errno));
    for (int i = 0; i < sb->masks.count; i++)
        if (under(drv, sb->masks.items[i]))
            die_usage("--sandbox: the driver %s lies in %s, which the sandbox hides", driver, sb->masks.items[i]);
    char *cwd = getcwd(NULL, 0);
    sb->cwd = xstrdup(cwd ? cwd : "/");
    free(cwd);
    // what grading needs and nothing else: the driver's directory (its referee and player)
    // and the lab's data, read-only; the working directory exists (empty unless bound)
    char *drv_dir = xstrdup(drv);
    *strrchr(drv_dir, '/') = '\0';
    strlist_push(&sb->reveal, drv_dir[0] ? drv_dir : "/");
    free(drv_dir);
    free(drv);
    for (int i = 0; data && i < data->count; i++) {  // bound where the run looks for it
        char *at = data->items[i][0] == '/' ? xstrdup(data->items[i]) : xasprintf("%s/%s", sb->cwd, data->items[i]);
        bind_data(sb, data->items[i], at);
        free(at);
    }
    // the launcher, when the system's directories do not hold it (MPI_HOME=..., a wrapper)
    char *prog = launcher ? find_program(launcher, sb->cwd) : NULL;
    if (prog) {
        *strrchr(prog, '/') = '\0';
        bool system = false;
        for (int i = 0; sandbox_system_dirs[i]; i++) system |= under(prog, sandbox_system_dirs[i]);
        if (!system && prog[0]) bind_data(sb, prog, prog);
        free(prog);
    }
}

void sandbox_argv(strlist *out, const sandbox *sb, const char *channel_dir, char *const *argv)
{
    push_words(out, SANDBOX_BASE);
    push_system(out);
    const char *const scratch[] = {"/tmp", "/dev/shm"};
    for (int i = 0; i < 2; i++) {
        if (sb->tmpfs_size) {
            strlist_push(out, "--size");
            strlist_push(out, TMPFS_SIZE);
        }
        strlist_push(out, "--tmpfs");
        strlist_push(out, scratch[i]);
    }
    // order matters: later mounts cover earlier ones, so the masks come after the reveals
    for (int i = 0; i < sb->reveal.count; i++) {
        strlist_push(out, "--ro-bind");
        strlist_push(out, sb->reveal.items[i]);
        strlist_push(out, sb->reveal.items[i]);
    }
    for (int i = 0; i < sb->data_src.count; i++) {
        strlist_push(out, "--ro-bind");
        strlist_push(out, sb->data_src.items[i]);
        strlist_push(out, sb->data_dst.items[i]);
    }
    for (int i = 0; i < sb->masks.count; i++) {
        strlist_push(out, "--tmpfs");
        strlist_push(out, sb->masks.items[i]);
    }
    if (channel_dir) {
        strlist_push(out, "--bind");
        strlist_push(out, channel_dir);
        strlist_push(out, channel_dir);
    }
    strlist_push(out, "--dir");
    strlist_push(out, sb->cwd);
    strlist_push(out, "--chdir");
    strlist_push(out, sb->cwd);
    strlist_push(out, "--");
    for (; *argv; argv++) strlist_push(out, *argv);
}

void sandbox_free(sandbox *sb)
{
    strlist_free(&sb->masks);
    strlist_free(&sb->reveal);
    strlist_free(&sb->data_src);
    strlist_free(&sb->data_dst);
    free(sb->cwd);
    free(sb->scratch);
    *sb = (sandbox){0};
}
