/* jobs.c - grading the class, k submissions at a time.
 *
 * Each submission is graded by `pl-grade` exactly as `make grade` grades one (--sandbox on,
 * the rubric, the hidden rubric), with four more walls around it:
 *
 *   - its own build tree: the lab's files are copied into OUT/work/<key>/src, the driver is
 *     built into OUT/work/<key>/, and the build itself runs in bubblewrap: read-only files,
 *     no network, and the other submissions, OUT, the hidden rubric, solutions/ and tests/
 *     behind empty mounts (a student's #include cannot reach them);
 *   - its own user: run as root, pl-class gives job slot i the unused uid BASE+i, so the
 *     sandbox's process limit (RLIMIT_NPROC, which the kernel counts per user) of one job
 *     counts only that job's processes: a fork bomb fills its own quota, never another's;
 *   - its own time limit (--limit), after which its process group is stopped (SIGTERM, then
 *     SIGKILL): status "timed out". The limit is kept on the quiet clock of loadclock.h
 *     (time as a machine grading alone would spend it), and a job starts only while other
 *     work leaves a core free (at most --jobs at once): beside other work the class takes
 *     longer, and grades the same;
 *   - its own output directory, written under a temporary name and renamed into place with
 *     a grade.json holding the content hash: the commit point that lets a killed run
 *     continue, and a rerun skip what it has already graded.
 *
 * The job's processes die with pl-class (PR_SET_PDEATHSIG), so a killed run leaves nothing
 * behind that could write into OUT while a new run starts. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "class.h"
#include "loadclock.h" // defines: load_clock, lc_now, lc_free_cores

extern char **environ;

#define UID_BASE_DEFAULT 60100
#define TERM_GRACE_S 10.0  // after SIGTERM, the engine kills its runs and exits
#define POLL_S 0.05

volatile sig_atomic_t class_interrupted;

/* A shell word: single-quoted, with any quote in it closed and escaped. */
static void sh_quote(text *t, const char *s)
{
    text_add(t, "'", 1);
    for (const char *p = s; *p; p++) {
        if (*p == '\'') text_add(t, "'\\''", 4);
        else text_add(t, p, 1);
    }
    text_add(t, "' ", 2);
}

/* ---------------------------------------------------------------- users */

static uid_t uid_base(void)
{
    const char *e = getenv("PL_CLASS_UID_BASE");
    long v = e ? strtol(e, NULL, 10) : UID_BASE_DEFAULT;
    return v >= 1000 && v < 4000000000L ? (uid_t)v : UID_BASE_DEFAULT;
}

/* The uid of job slot `slot`: unused by any account, so no process but the job's has it. */
static uid_t slot_uid(int slot)
{
    uid_t u = uid_base();
    for (int found = -1;; u++) {
        if (getpwuid(u) || getgrgid(u)) continue;
        if (++found == slot) return u;
    }
}

/* Can `uid` open `path` for reading? (a child that becomes uid and tries) */
static bool readable_as(uid_t uid, const char *path)
{
    pid_t pid = fork();
    if (pid < 0) die("fork: %s", strerror(errno));
    if (pid == 0) {
        if (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0) _exit(3);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        _exit(fd >= 0 ? 0 : 1);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Can bubblewrap start a sandbox here, as the jobs' user? (root may make namespaces where the
 * jobs' users may not) */
bool bwrap_works(const class_run *cr)
{
    pid_t pid = fork();
    if (pid < 0) die("fork: %s", strerror(errno));
    if (pid == 0) {
        uid_t uid = slot_uid(0);
        if (cr->as_root && (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0))
            _exit(3);
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) dup2(null, 1), dup2(null, 2);
        execlp("bwrap", "bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc",
               "/proc", "true", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* ---------------------------------------------------------------- one job */

typedef struct {
    pid_t pid;
    int sub;
    int slot;
    double start, term_at;    // wall clock
    double qstart;            // the quiet clock (the limit's)
    bool timed_out;
} job;

/* The limits' clock: seconds as a machine grading alone would spend them (loadclock.h). */
static load_clock g_quiet;

static char *build_command(const class_run *cr, const submission *s, const char *work)
{
    text t = {0};
    if (cr->build_sandbox) {
        text_printf(&t, "bwrap --unshare-all --die-with-parent --new-session --ro-bind / / --dev /dev --proc /proc "
                        "--tmpfs /tmp ");
        if (!strncmp(cr->root, "/tmp/", 5)) {  // a kit under /tmp comes back, read-only
            text_add(&t, "--ro-bind ", 10);
            sh_quote(&t, cr->root);
            sh_quote(&t, cr->root);
        }
        // what a build must not read: the other submissions, every report, the hidden rubric,
        // and whatever holds a solution (solutions/, the tests' broken copies, their builds)
        const char *masks[] = {cr->out, cr->submissions, cr->hidden, "solutions", "tests", "build/cpu/solutions",
                               "build/cuda/solutions", "build/cpu/selftest", "build/cpu/faults"};
        for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) {
            if (!masks[i]) continue;
            char *p = masks[i][0] == '/' ? realpath(masks[i], NULL) : xasprintf("%s/%s", cr->root, masks[i]);
            struct stat st;
            if (p && stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
                text_add(&t, "--tmpfs ", 8);
                sh_quote(&t, p);
            }
            free(p);
        }
        text_add(&t, "--bind ", 7);
        sh_quote(&t, work);
        sh_quote(&t, work);
        text_add(&t, "-- ", 3);
    } else if (cr->build_landlock) {
        // the same view under Landlock: the machine readable but for the same directories,
        // only the job's own tree writable (its TMPDIR inside it; the job's copy of the hidden
        // rubric lies beside it, in OUT)
        text_add(&t, "mkdir -p ", 9);
        char *tmp = xasprintf("%s/tmp", work), *tool = xasprintf("%s/build/tools/pl-landlock", cr->root);
        sh_quote(&t, tmp);
        text_add(&t, "&& TMPDIR=", 10);
        sh_quote(&t, tmp);
        sh_quote(&t, tool);
        text_add(&t, "--read / ", 9);
        const char *masks[] = {cr->out, cr->submissions, cr->hidden, "solutions", "tests", "build/cpu/solutions",
                               "build/cuda/solutions", "build/cpu/selftest", "build/cpu/faults"};
        for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) {
            if (!masks[i]) continue;
            char *p = masks[i][0] == '/' ? xstrdup(masks[i]) : xasprintf("%s/%s", cr->root, masks[i]);
            text_add(&t, "--hide ", 7);
            sh_quote(&t, p);
            free(p);
        }
        text_add(&t, "--write ", 8);
        sh_quote(&t, work);
        text_add(&t, "-- ", 3);
        free(tmp);
        free(tool);
    }
    text_printf(&t, "%s --no-print-directory -s -C ", cr->make);
    sh_quote(&t, cr->root);
    text_printf(&t, "driver LAB=%s FLAVOR=%s ", cr->lab, cr->flavor);
    text_add(&t, "SRCFILES=", 9);
    text srcs = {0};
    for (int i = 0; i < s->files.count; i++)
        text_printf(&srcs, "%s%s/src/%s", i ? " " : "", work, cr->lab_files.items[i]);
    sh_quote(&t, srcs.s);
    text_free(&srcs);
    char *bin = xasprintf("%s/driver", work);
    text_add(&t, "BIN=", 4);
    sh_quote(&t, bin);
    free(bin);
    return t.s;
}

/* The environment of a job: ours, less what make passed down (its flags would override
 * the inner build's LAB=...) and anything naming the hidden directory. */
static char **job_environment(const class_run *cr, const char *home)
{
    slist env = {0};
    static const char *const drop[] = {"MAKEFLAGS=", "MFLAGS=", "MAKELEVEL=", "MAKEOVERRIDES=", "HOME=", "HIDDEN=",
                                       "PL_HIDDEN=", "PL_T=", "PL_NP=", "PL_RUN=", "PL_ARGS=", "TMPDIR="};
    char *hidden_real = cr->hidden ? realpath(cr->hidden, NULL) : NULL;
    for (char **e = environ; *e; e++) {
        bool keep = true;
        for (size_t i = 0; i < sizeof drop / sizeof drop[0] && keep; i++) keep = strncmp(*e, drop[i], strlen(drop[i])) != 0;
        if (keep && cr->hidden && strstr(*e, cr->hidden)) keep = false;
        if (keep && hidden_real && strstr(*e, hidden_real)) keep = false;
        if (keep) slist_push(&env, *e);
    }
    free(hidden_real);
    slist_push_own(&env, xasprintf("HOME=%s", home));
    return env.items;
}

static bool copy_file(const char *from, const char *to)
{
    size_t len = 0;
    char *data = read_file(from, &len);
    if (!data) return false;
    bool ok = write_file_atomic(to, data, len);
    free(data);
    return ok;
}

/* The submission's build tree: its key with '%' (the escape of a name that is not UTF-8)
 * spelled '+', because make reads a '%' in a target as a pattern. */
static char *work_dir(const class_run *cr, const submission *s)
{
    char *w = xasprintf("%s/work/%s", cr->out, s->key);
    for (char *p = w + strlen(cr->out); *p; p++)
        if (*p == '%') *p = '+';
    return w;
}

static pid_t start_job(const class_run *cr, const submission *s, int slot)
{
    char *work = work_dir(cr, s);
    char *partial = xasprintf("%s/students/.%s.partial", cr->out, s->key);
    remove_tree(work);
    remove_tree(partial);
    char *src = xasprintf("%s/src", work);
    if (!make_dirs(src, 0755) || !make_dirs(partial, 0755)) die("cannot create %s or %s: %s", src, partial, strerror(errno));
    for (int i = 0; i < s->files.count; i++) {
        char *to = xasprintf("%s/%s", src, cr->lab_files.items[i]);
        if (!copy_file(s->files.items[i], to)) die("cannot copy %s to %s", s->files.items[i], to);
        free(to);
    }
    // As root, the job's user reads a private copy of the hidden rubric (the original is
    // checked to be out of its reach); otherwise the original, which the engine then masks.
    char *hidden_copy = NULL;
    if (cr->hidden && cr->as_root) {
        hidden_copy = xasprintf("%s.hidden", work);  // beside the build tree, never in it
        remove_tree(hidden_copy);
        char *from = xasprintf("%s/%s.rubric", cr->hidden, cr->lab), *to = xasprintf("%s/%s.rubric", hidden_copy, cr->lab);
        if (!make_dirs(hidden_copy, 0700)) die("cannot create %s", hidden_copy);
        if (access(from, F_OK) == 0 && !copy_file(from, to)) die("cannot copy the hidden rubric %s", from);
        free(from);
        free(to);
    }
    uid_t uid = cr->as_root ? slot_uid(slot) : getuid();
    if (cr->as_root) {
        chown_tree(work, uid, uid);
        chown_tree(partial, uid, uid);
        if (hidden_copy) chown_tree(hidden_copy, uid, uid);
    }

    slist argv = {0};
    const char *engine_args[] = {cr->engine, "--lab", cr->lab, "--rubric", cr->rubric, "--mpirun", cr->mpirun,
                                 "--sandbox", cr->sandbox, "--brief", "--out", partial};
    for (size_t i = 0; i < sizeof engine_args / sizeof engine_args[0]; i++) slist_push(&argv, engine_args[i]);
    slist_push(&argv, "--driver");
    slist_push_own(&argv, xasprintf("%s/driver", work));
    slist_push(&argv, "--build");
    slist_push_own(&argv, build_command(cr, s, work));
    if (cr->np) slist_push(&argv, "--np"), slist_push(&argv, cr->np);
    if (cr->test_scale) slist_push(&argv, "--test-scale");
    if (cr->hidden) slist_push(&argv, "--hidden"), slist_push(&argv, hidden_copy ? hidden_copy : cr->hidden);
    /* what a sandboxed run reads besides its driver, as make lab-N passes it: the cost-model
     * profiles, and the model files where they were fetched (the job runs in the kit's root) */
    static const char *const data_dirs[] = {"common/profiles", "datasets/cache"};
    for (size_t i = 0; i < sizeof data_dirs / sizeof data_dirs[0]; i++) {
        char *at = xasprintf("%s/%s", cr->root, data_dirs[i]);
        if (access(at, R_OK | X_OK) == 0) slist_push(&argv, "--data"), slist_push(&argv, data_dirs[i]);
        free(at);
    }
    char **envp = job_environment(cr, work);
    char *console = xasprintf("%s/console.txt", partial);
    pid_t parent = getpid();

    pid_t pid = fork();
    if (pid < 0) die("fork: %s", strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);
        if (cr->as_root && (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0))
            _exit(125);
        // set after the uid change, which clears it; then make sure the parent still lives
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(125);
        int fd = open(console, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || chdir(cr->root) != 0) _exit(125);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, STDIN_FILENO);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execve(cr->engine, argv.items, envp);
        _exit(126);
    }
    setpgid(pid, pid);  // both sides, so the group exists before either acts on it
    free(console);
    for (char **e = envp; *e; e++) free(*e);
    free(envp);
    slist_free(&argv);
    free(hidden_copy);
    free(src);
    free(work);
    free(partial);
    return pid;
}

/* ---------------------------------------------------------------- results */

static const char *const class_order[] = {"wrong",  "forbidden", "error",   "crash",      "timeout",
                                          "deadlock", "tampered", "missing", "build error"};

/* grade.json from what pl-grade left in the partial directory. */
static cJSON *grade_record(const class_run *cr, submission *s, const char *dir, int exit_code, bool timed_out,
                           double wall)
{
    char *path = xasprintf("%s/results.json", dir);
    cJSON *results = read_json(path);
    free(path);
    path = xasprintf("%s/cases.json", dir);
    cJSON *cases = read_json(path);
    free(path);

    sub_status st = ST_GRADED;
    char *why = NULL;
    const cJSON *first = cJSON_IsArray(cases) && cJSON_GetArraySize(cases) == 1 ? cJSON_GetArrayItem(cases, 0) : NULL;
    const cJSON *fcase = cJSON_GetObjectItemCaseSensitive(first, "case");
    const cJSON *fclass = cJSON_GetObjectItemCaseSensitive(first, "classification");
    const cJSON *fdetail = cJSON_GetObjectItemCaseSensitive(first, "detail");
    if (timed_out) {
        st = ST_TIMED_OUT;
        why = xasprintf("grading took longer than the %g s limit", cr->limit_s);
    } else if (cJSON_IsString(fcase) && !strcmp(fcase->valuestring, "(build)") && cJSON_IsString(fclass)) {
        bool refused = !strcmp(fclass->valuestring, "forbidden");
        st = refused ? ST_REFUSED : ST_BUILD_ERROR;
        // the compiler names the copy in the build tree: name the student's file instead
        char *wd = work_dir(cr, s), *src = xasprintf("%s/src/", wd);
        free(wd);
        char *detail = replace_all(cJSON_IsString(fdetail) ? fdetail->valuestring : fclass->valuestring, src, "");
        why = xasprintf("%s%s", refused ? "the build refused it: " : "", detail);
        free(detail);
        free(src);
    } else if (!results || (exit_code != 0 && exit_code != 1)) {
        st = ST_GRADER_ERROR;
        why = xasprintf("pl-grade exited with %d without reports; see %s/console.txt", exit_code, s->key);
    }
    s->status = st;

    cJSON *g = cJSON_CreateObject();
    cJSON_AddStringToObject(g, "student", s->student);
    cJSON_AddStringToObject(g, "key", s->key);
    // a grader error is never kept: the next run grades the submission again
    if (st == ST_GRADER_ERROR) cJSON_AddNullToObject(g, "hash");
    else cJSON_AddStringToObject(g, "hash", s->hash);
    cJSON_AddStringToObject(g, "status", status_name(st));
    cJSON_AddStringToObject(g, "why", why ? why : "");
    cJSON_AddStringToObject(g, "notes", s->notes ? s->notes : "");
    const cJSON *score = cJSON_GetObjectItemCaseSensitive(results, "score");
    cJSON_AddNumberToObject(g, "score", st != ST_TIMED_OUT && cJSON_IsNumber(score) ? score->valuedouble : 0);
    cJSON_AddNumberToObject(g, "max_score", cr->max_score);
    cJSON *items = cJSON_AddObjectToObject(g, "items");
    const cJSON *tests = cJSON_GetObjectItemCaseSensitive(results, "tests"), *t;
    for (int i = 0; i < cr->n_items; i++) {
        double v = 0;
        cJSON_ArrayForEach(t, tests) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
            const cJSON *sc = cJSON_GetObjectItemCaseSensitive(t, "score");
            if (cJSON_IsString(name) && !strcmp(name->valuestring, cr->items[i].name) && cJSON_IsNumber(sc))
                v = sc->valuedouble;
        }
        cJSON_AddNumberToObject(items, cr->items[i].name, st == ST_TIMED_OUT ? 0 : v);
    }
    cJSON *failures = cJSON_AddObjectToObject(g, "failures");
    for (size_t k = 0; k < sizeof class_order / sizeof class_order[0]; k++) {
        int n = 0;
        const cJSON *c;
        cJSON_ArrayForEach(c, cases) {
            const cJSON *cl = cJSON_GetObjectItemCaseSensitive(c, "classification");
            n += cJSON_IsString(cl) && !strcmp(cl->valuestring, class_order[k]);
        }
        if (n) cJSON_AddNumberToObject(failures, class_order[k], n);
    }
    if (timed_out) cJSON_AddNumberToObject(failures, "timed out", 1);
    cJSON_AddNumberToObject(g, "wall_s", (double)(long long)(wall * 10 + 0.5) / 10);
    cJSON_AddNumberToObject(g, "exit", exit_code);
    free(why);
    cJSON_Delete(results);
    cJSON_Delete(cases);
    return g;
}

/* Move the partial directory into place: the old result goes only once the new one is there. */
static void commit(const class_run *cr, const submission *s, const char *partial)
{
    char *final = student_dir(cr, s);
    char *old = xasprintf("%s/students/.%s.old", cr->out, s->key);
    remove_tree(old);
    if (rename(final, old) != 0 && errno != ENOENT) die("cannot move %s aside: %s", final, strerror(errno));
    if (rename(partial, final) != 0) die("cannot move %s to %s: %s", partial, final, strerror(errno));
    remove_tree(old);
    free(old);
    free(final);
}

static void write_record(const char *dir, cJSON *g)
{
    char *path = xasprintf("%s/grade.json", dir);
    char *json = cJSON_Print(g);
    char *line = xasprintf("%s\n", json);
    if (!write_text_file(path, line)) die("cannot write %s", path);
    free(line);
    free(json);
    free(path);
}

void record_ungraded(const class_run *cr, submission *s)
{
    char *partial = xasprintf("%s/students/.%s.partial", cr->out, s->key);
    remove_tree(partial);
    if (!make_dirs(partial, 0755)) die("cannot create %s", partial);
    sub_status verdict = s->status;
    cJSON *g = grade_record(cr, s, partial, 0, false, 0);
    // the intake's verdict stands (grade_record saw no reports and would call it an error)
    s->status = verdict;
    cJSON_ReplaceItemInObjectCaseSensitive(g, "status", cJSON_CreateString(status_name(s->status)));
    cJSON_ReplaceItemInObjectCaseSensitive(g, "hash", cJSON_CreateString(s->hash));
    cJSON_ReplaceItemInObjectCaseSensitive(g, "why", cJSON_CreateString(s->why ? s->why : ""));
    cJSON_DeleteItemFromObjectCaseSensitive(g, "failures");
    cJSON_AddObjectToObject(g, "failures");
    write_record(partial, g);
    cJSON_Delete(g);
    char *report = xasprintf("%s/report.txt", partial);
    char *text = xasprintf("%s: %s: %s\nscore: 0 / %g\n", s->student, status_name(s->status), s->why ? s->why : "",
                           cr->max_score);
    write_text_file(report, text);
    free(text);
    free(report);
    char *results = xasprintf("%s/results.json", partial);
    write_gradescope_result(cr, s, results);
    free(results);
    commit(cr, s, partial);
    free(partial);
}

/* The engine named its reports where it wrote them; they are read where they end up. */
static void fix_paths(const char *dir, const char *partial, const char *final)
{
    const char *names[] = {"console.txt", "report.txt"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *path = xasprintf("%s/%s", dir, names[i]);
        char *old = read_file(path, NULL);
        if (old && strstr(old, partial)) {
            char *fixed = replace_all(old, partial, final);
            write_text_file(path, fixed);
            free(fixed);
        }
        free(old);
        free(path);
    }
}

static void finish_job(class_run *cr, job *j, int wstatus, int *done, int total)
{
    submission *s = &cr->subs[j->sub];
    double wall = now_s() - j->start;
    int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    char *partial = xasprintf("%s/students/.%s.partial", cr->out, s->key);
    if (cr->as_root) chown_tree(partial, geteuid(), getegid());
    char *final = student_dir(cr, s);
    fix_paths(partial, partial, final);
    free(final);
    cJSON *g = grade_record(cr, s, partial, code, j->timed_out, wall);
    free(s->why);
    s->why = xstrdup(cJSON_GetObjectItem(g, "why")->valuestring);
    if (s->status == ST_TIMED_OUT || s->status == ST_GRADER_ERROR) {  // a report a reader can open anyway
        char *results = xasprintf("%s/results.json", partial);
        write_gradescope_result(cr, s, results);
        free(results);
    }
    write_record(partial, g);
    commit(cr, s, partial);
    char *work = work_dir(cr, s), *hidden_copy = xasprintf("%s.hidden", work);
    remove_tree(work);
    remove_tree(hidden_copy);
    free(hidden_copy);
    free(work);
    (*done)++;
    printf("[%*d/%d] %-12s %6g/%-6g %s (%.1f s)\n", total >= 100 ? 3 : 2, *done, total, status_name(s->status),
           cJSON_GetObjectItem(g, "score")->valuedouble, cr->max_score, s->student, wall);
    fflush(stdout);
    cJSON_Delete(g);
    free(partial);
}

static void on_signal(int sig)
{
    (void)sig;
    class_interrupted = 1;
}

void grade_all(class_run *cr)
{
    int queue_n = 0, total = 0, done = 0;
    int *queue = xmalloc((size_t)(cr->n_subs + 1) * sizeof *queue);
    for (int i = 0; i < cr->n_subs; i++)
        if (!cr->subs[i].reused && cr->subs[i].status == ST_PENDING) queue[queue_n++] = i;
    total = queue_n;
    if (cr->as_root) {  // the jobs' users must reach the kit and OUT, and must not read the hidden rubric
        uid_t u = slot_uid(0);
        char *probe = xasprintf("%s/Makefile", cr->root);
        if (queue_n && !readable_as(u, probe))
            die("the kit %s cannot be read by other users (each job runs as its own user, uid %u...): make it and its "
                "parent directories readable by others (chmod o+rX)", cr->root, (unsigned)u);
        free(probe);
        probe = xasprintf("%s/work", cr->out);
        if (queue_n && !readable_as(u, probe))
            die("OUT=%s cannot be reached by other users (each job runs as its own user, uid %u...): give its parent "
                "directories o+x, or choose an OUT under /tmp or the kit", cr->out, (unsigned)u);
        free(probe);
        if (cr->hidden) {
            probe = xasprintf("%s/%s.rubric", cr->hidden, cr->lab);
            if (readable_as(u, probe))
                die("HIDDEN=%s can be read by other users, so the graded code could read it: chmod 700 %s", cr->hidden,
                    cr->hidden);
            free(probe);
        }
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    job *jobs = xmalloc((size_t)cr->jobs * sizeof *jobs);
    for (int i = 0; i < cr->jobs; i++) jobs[i] = (job){.pid = 0};
    int next = 0, running = 0;
    bool said_busy = false;
    while (next < queue_n || running) {
        if (class_interrupted) {  // stop every job; what is committed stays, the rest reruns
            for (int i = 0; i < cr->jobs; i++)
                if (jobs[i].pid) kill(-jobs[i].pid, SIGTERM);
            double until = now_s() + TERM_GRACE_S;
            while (running && now_s() < until) {
                pid_t p = waitpid(-1, NULL, WNOHANG);
                if (p > 0) running--;
                else nanosleep(&(struct timespec){0, 50000000}, NULL);
            }
            for (int i = 0; i < cr->jobs; i++)
                if (jobs[i].pid) kill(-jobs[i].pid, SIGKILL);
            fprintf(stderr, "pl-class: interrupted; rerun the same command to continue\n");
            exit(130);
        }
        /* A job more only while other work leaves a core for it: beside a busy machine the
         * class is graded one at a time, as fast as it can be, and never starved. */
        int allowed = lc_free_cores(&g_quiet);
        if (allowed > cr->jobs) allowed = cr->jobs;
        if (allowed < cr->jobs && next < queue_n && running >= allowed && !said_busy) {
            printf("pl-class: %d job(s) at a time instead of %d, fewer at once while other work holds the cores "
                   "(it slows this machine %.1fx; the limits count seconds of a quiet machine)\n",
                   allowed, cr->jobs, lc_slowdown(&g_quiet));
            fflush(stdout);
            said_busy = true;
        }
        for (int i = 0; i < cr->jobs && next < queue_n && running < allowed; i++) {
            if (jobs[i].pid) continue;
            jobs[i] = (job){.sub = queue[next++], .slot = i, .start = now_s(), .qstart = lc_now(&g_quiet)};
            jobs[i].pid = start_job(cr, &cr->subs[jobs[i].sub], i);
            running++;
        }
        int wstatus = 0;
        pid_t p = waitpid(-1, &wstatus, WNOHANG);
        if (p > 0) {
            for (int i = 0; i < cr->jobs; i++) {
                if (jobs[i].pid != p) continue;
                kill(-p, SIGKILL);  // anything the job left in its group
                finish_job(cr, &jobs[i], wstatus, &done, total);
                jobs[i].pid = 0;
                running--;
            }
            continue;
        }
        double now = now_s(), qnow = lc_now(&g_quiet);
        for (int i = 0; i < cr->jobs; i++) {
            if (!jobs[i].pid) continue;
            if (!jobs[i].timed_out && qnow - jobs[i].qstart > cr->limit_s) {
                jobs[i].timed_out = true;
                jobs[i].term_at = now;
                kill(-jobs[i].pid, SIGTERM);
            } else if (jobs[i].timed_out && now - jobs[i].term_at > TERM_GRACE_S) {
                kill(-jobs[i].pid, SIGKILL);
            }
        }
        nanosleep(&(struct timespec){0, (long)(POLL_S * 1e9)}, NULL);
    }
    free(jobs);
    free(queue);
}
