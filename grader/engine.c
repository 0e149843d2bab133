/* engine.c - pl-grade, the ParaLab grading engine: command line and the order of the steps
 * (build, run every world size, score, report). See docs/grader.md for the whole story.
 *
 *   pl-grade --lab NAME --rubric FILE --driver PATH [--build "SHELL CMD"] [--np "1 2 4"]
 *            [--filter GLOB] [--device D] [--comm C] [--mpirun "mpirun --oversubscribe"]
 *            [--out DIR] [--hidden DIR] [--quiet] [--test-scale]
 *
 * Exit status: 0 full marks, 1 anything less (a build error included), 2 usage or rubric
 * error, 3 the engine itself failed (cannot write its reports, out of memory),
 * 130 interrupted. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine.h"

#define BUILD_TIMEOUT_S 1800.0

typedef struct {
    const char *lab, *rubric, *driver, *build, *np, *filter, *device, *comm, *mpirun, *out, *hidden;
    bool quiet, test_scale;
} options;

static void usage(FILE *f)
{
    fputs("usage: pl-grade --lab NAME --rubric FILE --driver PATH [--build \"SHELL CMD\"]\n"
          "                [--np \"1 2 4\"] [--filter GLOB] [--device D] [--comm C]\n"
          "                [--mpirun \"mpirun --oversubscribe\"] [--out DIR] [--hidden DIR]\n"
          "                [--quiet] [--test-scale]\n"
          "Builds, runs the lab driver under mpirun for each world size, scores it with the\n"
          "rubric and prints a report; exit 0 only with full marks. See docs/grader.md.\n",
          f);
}

static options parse_options(int argc, char **argv)
{
    options o = {.mpirun = "mpirun"};
    struct {
        const char *flag;
        const char **value;
    } valued[] = {
        {"--lab", &o.lab},       {"--rubric", &o.rubric}, {"--driver", &o.driver}, {"--build", &o.build},
        {"--np", &o.np},         {"--filter", &o.filter}, {"--device", &o.device}, {"--comm", &o.comm},
        {"--mpirun", &o.mpirun}, {"--out", &o.out},       {"--hidden", &o.hidden},
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
        bool known = false;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0] && !known; k++) {
            size_t n = strlen(valued[k].flag);
            if (strncmp(arg, valued[k].flag, n)) continue;
            if (arg[n] == '=') {  // --flag=value
                *valued[k].value = arg + n + 1;
                known = true;
            } else if (arg[n] == '\0') {
                if (i + 1 >= argc) die_usage("%s needs a value", arg);
                *valued[k].value = argv[++i];
                known = true;
            }
        }
        if (!known) die_usage("unknown option '%s' (try --help)", arg);
    }
    if (!o.lab || !o.rubric || !o.driver) die_usage("--lab, --rubric and --driver are required (try --help)");
    return o;
}

/* --np "1 2 4" */
static int parse_world_sizes(const char *text, int **np)
{
    strlist words = {0};
    strlist_split(&words, text);
    if (!words.count) die_usage("--np needs at least one world size");
    *np = xmalloc((size_t)words.count * sizeof **np);
    for (int i = 0; i < words.count; i++) {
        double v;
        if (!parse_number(words.items[i], &v) || v < 1 || v != (int)v)
            die_usage("--np: '%s' is not a world size", words.items[i]);
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
    if (access(path, F_OK) == 0) {
        rubric_load(r, path, true);
        console_note(con, "hidden rubric: %s", path);
    } else {
        console_note(con, "no hidden rubric for lab %s in %s", lab, dir);
    }
    free(path);
}

/* Runs the build command; returns NULL on success, else the line to report (malloc'd). */
static char *run_build(const char *cmd, console *con)
{
    char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
    child_run ch = {.argv = argv, .merge_stderr = true, .total_s = BUILD_TIMEOUT_S};
    console_note(con, "build: %s", cmd);
    child_run_exec(&ch);
    char *first = NULL;
    if (ch.exit_code != 0 || ch.term_signal || ch.hit_cap || ch.exec_failed || ch.interrupted) {
        first = capture_find_line(&ch.out, "error");
        if (!first) first = capture_find_line(&ch.out, "Error");
        if (!first) first = capture_last_line(&ch.out);
        if (!first && ch.hit_cap) first = xasprintf("the build took longer than %g s", BUILD_TIMEOUT_S);
        if (!first) first = xasprintf("the build command failed with exit code %d", ch.exit_code);
        char *text = capture_text(&ch.out);
        clean_text_keep_lines(text);
        console_build_error(con, first, text);
        free(text);
    }
    child_run_free(&ch);
    return first;
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

int main(int argc, char **argv)
{
    options opt = parse_options(argc, argv);
    install_signals();

    console con;
    console_init(&con, opt.quiet);
    rubric rub = {0};
    rubric_load(&rub, opt.rubric, false);
    if (rub.lab && strcmp(rub.lab, opt.lab))
        die_usage("%s is the rubric of lab '%s', not '%s'", opt.rubric, rub.lab, opt.lab);
    if (opt.hidden) load_hidden(&rub, opt.hidden, opt.lab, &con);
    rubric_check(&rub, opt.rubric);

    int *np = rub.np, n_np = rub.n_np;
    bool np_given = opt.np != NULL;
    if (np_given) n_np = parse_world_sizes(opt.np, &np);
    if (!n_np) die_usage("%s has no 'np' line and --np was not given", opt.rubric);

    run_config cfg = {.rub = &rub, .driver = opt.driver, .filter = opt.filter, .device = opt.device,
                      .comm = opt.comm, .test_scale = opt.test_scale};
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
    char *build_error = opt.build ? run_build(opt.build, &con) : NULL;
    if (build_error) {
        // one stand-in case so junit.xml and cases.json say what happened
        cases.v = xmalloc(sizeof *cases.v);
        cases.cap = cases.count = 1;
        cases.v[0] = (case_result){.id = xstrdup("(build)"), .name = xstrdup("(build)"), .cls = CL_BUILD_ERROR,
                                   .detail = xstrdup(build_error), .whole_run = true};
    } else if (!engine_interrupted) {
        if (strchr(opt.driver, '/') && access(opt.driver, X_OK) != 0)
            die_usage("driver %s: %s (was it built?)", opt.driver, strerror(errno));
        const char *tmp = getenv("TMPDIR");
        char *work = xasprintf("%s/pl-grade.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
        if (!mkdtemp(work)) {
            fprintf(stderr, "pl-grade: cannot create a work directory %s: %s\n", work, strerror(errno));
            return 3;
        }
        cfg.work_dir = work;
        for (int i = 0; i < n_np && !engine_interrupted; i++) run_world(&cfg, np[i], NULL, &cases, &con);
        for (int i = 0; i < n_extra && !engine_interrupted; i++)
            run_world(&cfg, extra[i]->np, extra[i], &cases, &con);
        rmdir(work);
        free(work);
    }
    if (engine_interrupted) {
        fputs("pl-grade: interrupted\n", stderr);
        return 130;
    }

    grade g;
    grade_compute(&g, &rub, &cases, build_error);
    console_summary(&con, &g, opt.lab);
    int status = g.score == g.max_score ? 0 : 1;
    if (opt.out && !write_outputs(opt.out, opt.lab, &g, &cases)) status = 3;

    grade_free(&g);
    case_list_free(&cases);
    free(build_error);
    free(extra);
    strlist_free(&cfg.mpirun);
    if (np != rub.np) free(np);
    rubric_free(&rub);
    return status;
}
