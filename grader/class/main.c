/* main.c - pl-class: a whole class graded in one command (`make grade-class`), or one
 * Gradescope submission (`run_autograder`). See docs/grader.md, "Grading a class".
 *
 *   pl-class --lab NAME --submissions DIR --out DIR [--jobs K|auto] [--hidden DIR] [--np "2 3"]
 *            [--test-scale] [--limit SEC] [--similarity PCT] [--sandbox on|auto]
 *            [--rubric FILE] [--engine PATH] [--mpirun CMD] [--flavor cpu|cuda] [--make CMD]
 *   pl-class --lab NAME --one DIR --out DIR --results FILE [the same options]
 *
 * Run from the kit's root. Steps: parse the rubric's items (for the gradebook's columns),
 * hash the grader, take the lab's file from every folder (intake.c), skip what an
 * earlier run graded with the same hashes, grade the rest k at a time (jobs.c), then
 * write the gradebook, the summary and the similarity report (book.c,
 * similar.c). Exit status: 0 when every submission has a row (whatever its score),
 * 1 when some could not be graded because pl-grade itself failed, 2 usage or setup error,
 * 130 interrupted (rerun the same command to continue). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "class.h"
#include "loadclock.h" // defines: lc_start, lc_free_cores (--jobs auto)
#include "landlock.h"  // defines: ll_abi

#define LIMIT_DEFAULT_S 3600.0
#define SIMILARITY_DEFAULT 60.0

static void usage(FILE *f)
{
    fputs("usage: pl-class --lab NAME (--submissions DIR | --one DIR --results FILE) --out DIR\n"
          "                [--jobs K|auto] [--hidden DIR] [--np \"2 3\"] [--test-scale] [--limit SEC]\n"
          "                [--similarity PCT] [--sandbox on|auto] [--rubric FILE] [--engine PATH]\n"
          "                [--mpirun CMD] [--flavor cpu|cuda] [--make CMD]\n"
          "Grades every submission folder with pl-grade in the sandbox, k at a time, and writes\n"
          "OUT/gradebook.csv, OUT/summary.md, OUT/summary.png and OUT/students/<folder>/.\n"
          "Run from the kit's root (make grade-class does). See docs/grader.md.\n",
          f);
}

static double number_option(const char *flag, const char *v, double lo, double hi)
{
    char *end = NULL;
    double d = strtod(v, &end);
    if (!end || *end || end == v || !(d >= lo && d <= hi)) die("%s wants a number from %g to %g, not '%s'", flag, lo, hi, v);
    return d;
}

static void parse_options(class_run *cr, int argc, char **argv)
{
    *cr = (class_run){.jobs = 1, .limit_s = LIMIT_DEFAULT_S, .similarity = SIMILARITY_DEFAULT, .sandbox = "on",
                      .engine = "build/tools/pl-grade", .mpirun = "mpirun", .flavor = "cpu", .make = "make"};
    struct {
        const char *flag;
        const char **value;
    } valued[] = {
        {"--lab", &cr->lab},       {"--submissions", &cr->submissions}, {"--out", &cr->out},
        {"--hidden", &cr->hidden}, {"--np", &cr->np},                   {"--rubric", &cr->rubric},
        {"--engine", &cr->engine}, {"--mpirun", &cr->mpirun},           {"--flavor", &cr->flavor},
        {"--sandbox", &cr->sandbox}, {"--make", &cr->make},             {"--one", &cr->one},
        {"--results", &cr->results},
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "--test-scale")) {
            cr->test_scale = true;
            continue;
        }
        if (!strcmp(a, "--sha256")) {  // the hash's own check (tests/grader/test_class.sh)
            if (i + 1 >= argc) die("--sha256 needs a file");
            sha256 c;
            sha256_init(&c);
            size_t len = 0;
            char *data = read_file(argv[i + 1], &len);
            if (!data) die("cannot read %s: %s", argv[i + 1], strerror(errno));
            sha256_update(&c, data, len);
            unsigned char d[32];
            char hex[65];
            sha256_final(&c, d);
            sha256_hex(d, hex);
            printf("%s\n", hex);
            exit(0);
        }
        if (i + 1 >= argc) die("%s needs a value (try --help)", a);
        if (!strcmp(a, "--jobs")) {  // auto: the cores, less what other work keeps busy
            if (!strcmp(argv[i + 1], "auto")) {
                load_clock lc;
                lc_start(&lc);
                cr->jobs = lc_free_cores(&lc);
                i++;
            } else {
                cr->jobs = (int)number_option(a, argv[++i], 1, 256);
            }
            continue;
        }
        if (!strcmp(a, "--limit")) {
            cr->limit_s = number_option(a, argv[++i], 1, 7 * 24 * 3600.0);
            continue;
        }
        if (!strcmp(a, "--similarity")) {
            cr->similarity = number_option(a, argv[++i], 0, 100);
            continue;
        }
        bool known = false;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0] && !known; k++)
            if (!strcmp(a, valued[k].flag)) {
                *valued[k].value = argv[++i];
                known = true;
            }
        if (!known) die("unknown option '%s' (try --help)", a);
    }
    if (!cr->lab || !cr->out || (!cr->submissions == !cr->one))
        die("--lab, --out and one of --submissions DIR or --one DIR are required (try --help)");
    if (cr->one && !cr->results) die("--one needs --results FILE (Gradescope: /autograder/results/results.json)");
    if (strcmp(cr->sandbox, "on") && strcmp(cr->sandbox, "auto")) die("--sandbox must be on or auto, not '%s'", cr->sandbox);
    if (!cr->lab[0] || strchr(cr->lab, '/') || cr->lab[0] == '.') die("--lab %s: not a lab name", cr->lab);
}

/* The rubric's items (public, then hidden), read for the gradebook's columns: only the
 * first words of `group` and `perf` lines (pl-grade checks the rest). */
static void read_items(class_run *cr, const char *path, bool hidden)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        if (hidden) return;
        die("cannot read the rubric %s: %s", path, strerror(errno));
    }
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) >= 0) {
        line[strcspn(line, "#")] = '\0';
        char kind[16], name[256], pts[64];
        if (sscanf(line, "%15s %255s %63s", kind, name, pts) != 3) continue;
        if (strcmp(kind, "group") && strcmp(kind, "perf")) continue;
        cr->items = xrealloc(cr->items, (size_t)(cr->n_items + 1) * sizeof *cr->items);
        cr->items[cr->n_items++] = (class_item){.name = xstrdup(name), .points = strtod(pts, NULL), .hidden = hidden};
        cr->max_score += strtod(pts, NULL);
    }
    free(line);
    fclose(f);
}

static void lab_files(class_run *cr)
{
    char *dir = xasprintf("%s/labs/%s", cr->root, cr->lab);
    DIR *d = opendir(dir);
    if (!d) die("no lab %s (no %s)", cr->lab, dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n > 2 && !strcmp(e->d_name + n - 2, ".c")) slist_push(&cr->lab_files, e->d_name);
    }
    closedir(d);
    slist_sort(&cr->lab_files);
    if (!cr->lab_files.count) die("lab %s has no student file to take (labs/%s/*.c)", cr->lab, cr->lab);
    free(dir);
}

/* The grader's hash: what decides a score besides the submission. A change to any of it
 * regrades everyone; nothing else does. */
static void hash_grader(class_run *cr)
{
    sha256 c;
    sha256_init(&c);
    char num[3] = {cr->lab[0], cr->lab[1], '\0'};
    // label (what it is, stable wherever the kit or the hidden directory lies) and path
    slist labels = {0}, files = {0};
    const char *fixed[][2] = {{"pl-class", "/proc/self/exe"}, {"pl-grade", cr->engine}, {"rubric", cr->rubric},
                              {"Makefile", "Makefile"}, {"public.syms", "build/public.syms"},
                              {"allowed-calls.txt", "grader/tools/allowed-calls.txt"},
                              {"student-object.sh", "grader/tools/student-object.sh"}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        slist_push(&labels, fixed[i][0]);
        slist_push(&files, fixed[i][1]);
    }
    slist_push(&labels, "libparalab.a");
    slist_push_own(&files, xasprintf("build/%s/libparalab.a", cr->flavor));
    if (cr->hidden) {
        slist_push(&labels, "hidden rubric");
        slist_push_own(&files, xasprintf("%s/%s.rubric", cr->hidden, cr->lab));
    }
    slist found = {0};
    // the case runner's own files, and the lab's case table, referee and player halves
    static const char *const runner_dirs[] = {"grader/runner", "grader/referee", "grader/player", "grader/cases"};
    DIR *d;
    struct dirent *e;
    for (size_t k = 0; k < sizeof runner_dirs / sizeof runner_dirs[0]; k++) {
        d = opendir(runner_dirs[k]);
        while (d && (e = readdir(d))) {
            size_t n = strlen(e->d_name);
            bool source = n > 2 && (!strcmp(e->d_name + n - 2, ".c") || !strcmp(e->d_name + n - 2, ".h"));
            bool other_lab = !strncmp(e->d_name, "lab", 3) && strncmp(e->d_name + 3, num, 2);
            if (source && !other_lab) slist_push_own(&found, xasprintf("%s/%s", runner_dirs[k], e->d_name));
        }
        if (d) closedir(d);
    }
    slist_push_own(&found, xasprintf("grader/api/%s.syms", cr->lab));
    char *labdir = xasprintf("labs/%s", cr->lab);
    d = opendir(labdir);
    while (d && (e = readdir(d)))
        if (strlen(e->d_name) > 2 && !strcmp(e->d_name + strlen(e->d_name) - 2, ".h"))
            slist_push_own(&found, xasprintf("%s/%s", labdir, e->d_name));
    if (d) closedir(d);
    free(labdir);
    slist_sort(&found);
    for (int i = 0; i < found.count; i++) {
        slist_push(&labels, found.items[i]);
        slist_push(&files, found.items[i]);
    }
    slist_free(&found);
    for (int i = 0; i < files.count; i++) sha256_add_file(&c, labels.items[i], files.items[i]);
    slist_free(&labels);
    char *opts = xasprintf("lab=%s np=%s test_scale=%d limit=%g flavor=%s sandbox=%s mpirun=%s", cr->lab,
                           cr->np ? cr->np : "", cr->test_scale, cr->limit_s, cr->flavor, cr->sandbox, cr->mpirun);
    sha256_add_string(&c, opts);
    free(opts);
    unsigned char dg[32];
    char hex[65];
    sha256_final(&c, dg);
    sha256_hex(dg, hex);
    cr->grader_hash = xstrdup(hex);
    slist_free(&files);
}

static char *absolute(const char *path, const char *what)
{
    char *r = realpath(path, NULL);
    if (!r) die("%s %s: %s", what, path, strerror(errno));
    return r;
}

/* Leftovers of a run that was killed: half-written results and build trees. */
static void clean_stale(const class_run *cr)
{
    char *students = xasprintf("%s/students", cr->out);
    make_dirs(students, 0755);
    DIR *d = opendir(students);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        bool stale = e->d_name[0] == '.' && ((n > 8 && !strcmp(e->d_name + n - 8, ".partial")) ||
                                             (n > 4 && !strcmp(e->d_name + n - 4, ".old")));
        if (stale) {
            char *p = xasprintf("%s/%s", students, e->d_name);
            remove_tree(p);
            free(p);
        }
    }
    if (d) closedir(d);
    free(students);
    char *work = xasprintf("%s/work", cr->out);
    remove_tree(work);
    make_dirs(work, 0755);
    free(work);
}

/* Is the launcher Slurm's srun (its first word, any directory)? */
static bool launcher_is_srun(const char *mpirun)
{
    if (!mpirun) return false;
    while (*mpirun == ' ' || *mpirun == '\t') mpirun++;
    size_t n = strcspn(mpirun, " \t");
    const char *base = mpirun;
    for (const char *p = mpirun; p < mpirun + n; p++)
        if (*p == '/') base = p + 1;
    return (size_t)(mpirun + n - base) == 4 && !strncmp(base, "srun", 4);
}

int main(int argc, char **argv)
{
    class_run cr;
    parse_options(&cr, argc, argv);
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) die("getcwd: %s", strerror(errno));
    cr.root = xstrdup(cwd);
    if (access("Makefile", R_OK) || access("grader/rubrics", R_OK)) die("run pl-class from the kit's root (make grade-class)");
    if (!cr.rubric) cr.rubric = xasprintf("grader/rubrics/%s.rubric", cr.lab);
    if (access(cr.engine, X_OK)) die("the engine %s is not built (make engine)", cr.engine);
    cr.engine = absolute(cr.engine, "--engine");
    cr.rubric = absolute(cr.rubric, "--rubric");
    if (cr.hidden) {
        struct stat st;
        if (stat(cr.hidden, &st) != 0 || !S_ISDIR(st.st_mode)) die("HIDDEN=%s: not a directory", cr.hidden);
        cr.hidden = absolute(cr.hidden, "HIDDEN=");
    }
    lab_files(&cr);
    read_items(&cr, cr.rubric, false);
    if (cr.hidden) {
        char *h = xasprintf("%s/%s.rubric", cr.hidden, cr.lab);
        read_items(&cr, h, true);
        free(h);
    }
    if (!cr.n_items) die("the rubric %s has no group or perf lines", cr.rubric);

    if (!make_dirs(cr.out, 0755)) die("OUT=%s: cannot create it: %s", cr.out, strerror(errno));
    cr.out = absolute(cr.out, "OUT=");
    if (cr.submissions) cr.submissions = absolute(cr.submissions, "SUBMISSIONS=");
    if (cr.submissions && !strncmp(cr.out, cr.submissions, strlen(cr.submissions)) &&
        (cr.out[strlen(cr.submissions)] == '/' || !cr.out[strlen(cr.submissions)]))
        die("OUT=%s lies inside SUBMISSIONS=%s: it would be read as a student's folder", cr.out, cr.submissions);
    char *lock = xasprintf("%s/.pl-class.lock", cr.out);
    int lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) != 0)
        die("another pl-class is grading into %s (or %s cannot be locked)", cr.out, lock);
    free(lock);

    cr.as_root = geteuid() == 0;
    /* Slurm lets only an allocation's owner start its job steps, and as root every grading job
     * runs as a user of its own (what keeps the submissions apart): srun would refuse each one */
    if (cr.as_root && launcher_is_srun(cr.mpirun))
        die("MPIRUN=\"%s\": as root every grading job runs as a user of its own, and Slurm starts job steps for "
            "the allocation's owner only; grade the class as the course's own account (not root) inside the "
            "allocation, with JOBS=1 and SANDBOX=auto (docs/setup.md, \"Several nodes\")",
            cr.mpirun);
    cr.build_sandbox = bwrap_works(&cr);
    if (!cr.build_sandbox && ll_abi() > 0) {  // no user namespaces: Landlock confines builds and runs
        char *tool = xasprintf("%s/build/tools/pl-landlock", cr.root);
        cr.build_landlock = access(tool, X_OK) == 0;
        free(tool);
    }
    if (!cr.build_sandbox && !cr.build_landlock && !strcmp(cr.sandbox, "on"))
        die("no sandbox can start here: bubblewrap cannot (install it with scripts/install-deps.sh and allow "
            "unprivileged user namespaces) and the kernel has no Landlock (Linux 5.13 or later); grade anyway, "
            "unconfined, with SANDBOX=auto (the students' code then runs as the grading users)");
    if (cr.build_landlock)
        fprintf(stderr, "pl-class: note: bubblewrap cannot start here: builds and runs are confined by Landlock\n");
    else if (!cr.build_sandbox)
        fprintf(stderr, "pl-class: note: no sandbox here (SANDBOX=auto): builds and runs are not isolated\n");
    hash_grader(&cr);
    clean_stale(&cr);

    if (cr.one) intake_one(&cr, cr.one);
    else intake(&cr);

    int reused = 0, ungraded = 0;
    for (int i = 0; i < cr.n_subs; i++) {
        submission *s = &cr.subs[i];
        char *dir = student_dir(&cr, s);
        char *path = xasprintf("%s/grade.json", dir);
        cJSON *g = read_json(path);
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(g, "hash");
        if (cJSON_IsString(h) && !strcmp(h->valuestring, s->hash)) {
            s->reused = true;
            reused++;
        } else if (s->status != ST_PENDING) {
            record_ungraded(&cr, s);
            ungraded++;
        }
        cJSON_Delete(g);
        free(path);
        free(dir);
    }
    int todo = cr.n_subs - reused - ungraded;
    printf("pl-class: lab %s, %d submission(s): %d to grade (%d at a time, %g s each at most), %d unchanged since "
           "the last run, %d not gradable%s\n",
           cr.lab, cr.n_subs, todo, cr.jobs, cr.limit_s, reused, ungraded,
           cr.as_root ? " (each job as a user of its own)" : "");
    fflush(stdout);
    grade_all(&cr);

    write_book(&cr);
    int errors = 0;
    for (int i = 0; i < cr.n_subs; i++) {
        char *path = xasprintf("%s/students/%s/grade.json", cr.out, cr.subs[i].key);
        cJSON *g = read_json(path);
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(g, "status");
        errors += !cJSON_IsString(st) || !strcmp(st->valuestring, "grader error");
        cJSON_Delete(g);
        free(path);
    }
    if (cr.one && cr.n_subs == 1) {
        // Gradescope: the engine's results.json, or the one written for a submission it did not score
        submission *s = &cr.subs[0];
        char *dir = student_dir(&cr, s);
        char *path = xasprintf("%s/results.json", dir);
        cJSON *r = read_json(path);
        char *gpath = xasprintf("%s/grade.json", dir);
        cJSON *g = read_json(gpath);
        if (!r) die("no results for the submission in %s", dir);
        // keep to Gradescope's documented keys: the engine's max_score moves into extra_data
        cJSON *max = cJSON_DetachItemFromObjectCaseSensitive(r, "max_score");
        cJSON *extra = cJSON_GetObjectItemCaseSensitive(r, "extra_data");
        if (!cJSON_IsObject(extra)) {
            cJSON_DeleteItemFromObjectCaseSensitive(r, "extra_data");
            extra = cJSON_AddObjectToObject(r, "extra_data");
        }
        if (max && !cJSON_ReplaceItemInObjectCaseSensitive(extra, "max_score", max)) cJSON_AddItemToObject(extra, "max_score", max);
        else if (!cJSON_GetObjectItemCaseSensitive(extra, "max_score")) cJSON_AddNumberToObject(extra, "max_score", cr.max_score);
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(g, "status"), *why = cJSON_GetObjectItemCaseSensitive(g, "why");
        const cJSON *notes = cJSON_GetObjectItemCaseSensitive(g, "notes");
        cJSON_AddStringToObject(extra, "status", cJSON_IsString(st) ? st->valuestring : "grader error");
        const cJSON *out = cJSON_GetObjectItemCaseSensitive(r, "output");
        char *o = xasprintf("%s%s%s%s", cJSON_IsString(out) ? out->valuestring : "",
                            cJSON_IsString(notes) && notes->valuestring[0] ? "\n" : "",
                            cJSON_IsString(notes) ? notes->valuestring : "",
                            cr.build_sandbox     ? ""
                            : cr.build_landlock ? "\n(graded in the Landlock sandbox: bubblewrap cannot start here)"
                                                : "\n(graded without a sandbox: none can start here)");
        cJSON_DeleteItemFromObjectCaseSensitive(r, "output");
        cJSON_AddStringToObject(r, "output", o);
        free(o);
        (void)why;
        char *json = cJSON_Print(r);
        char *line = xasprintf("%s\n", json);
        char *rdir = xstrdup(cr.results);
        char *slash = strrchr(rdir, '/');
        if (slash) {
            *slash = '\0';
            make_dirs(rdir, 0755);
        }
        if (!write_text_file(cr.results, line)) die("cannot write %s", cr.results);
        printf("pl-class: %s: %s, score %g (%s)\n", cr.results, cJSON_IsString(st) ? st->valuestring : "?",
               cJSON_GetObjectItem(r, "score") ? cJSON_GetObjectItem(r, "score")->valuedouble : 0, s->student);
        free(rdir);
        free(line);
        free(json);
        cJSON_Delete(r);
        cJSON_Delete(g);
        free(gpath);
        free(path);
        free(dir);
    } else {
        printf("pl-class: %s/gradebook.csv (%d rows), %s/summary.md, %s/summary.png, per student %s/students/<folder>/\n",
               cr.out, cr.n_subs, cr.out, cr.out, cr.out);
    }
    close(lock_fd);
    return errors ? 1 : 0;
}
