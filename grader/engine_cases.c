/* engine_cases.c - runs a lab driver under mpirun for one world size and turns what it
 * reports into classified cases (the driver protocol is in docs/grader.md).
 *
 * The driver appends one JSON object per line to a file: "begin" when a case starts,
 * "result" with the verdict when it ends, "end" after the last case. A case that began
 * but has no result when the run ends abnormally is classified from the run's exit code
 * and its stderr markers (deadlock, crash, timeout), and the driver is started again with
 * --start-after that case, so one bad case never hides the others. */
#include <fcntl.h>   // defines: open, O_CREAT
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"

#define MAX_RESTARTS 100  // per world size
/* A program that deadlocks or hangs on every case would cost a watchdog period or a
 * timeout per case; after this many in a row at one world size, the rest is skipped. */
#define MAX_HANGS_IN_A_ROW 3
#define EXIT_DEADLOCK 86  // the harness watchdog's exit code
#define EXIT_USAGE 2
#define EXIT_FATAL 3

/* ---------------------------------------------------------------- the case list */

static char *case_id(int np, const char *label, const char *name)
{
    return label ? xasprintf("np%d@%s/%s", np, label, name) : xasprintf("np%d/%s", np, name);
}

static bool case_known(const case_list *l, const char *id)
{
    for (int i = 0; i < l->count; i++)
        if (!strcmp(l->v[i].id, id)) return true;
    return false;
}

bool case_matches(const case_result *c, const char *glob)
{
    if (c->whole_run) return true;
    return glob_match(glob, strchr(glob, '/') ? c->id : c->name);
}

bool case_number(const case_result *c, const char *field, double *out)
{
    const cJSON *v = c->json ? cJSON_GetObjectItemCaseSensitive(c->json, field) : NULL;
    if (!cJSON_IsNumber(v)) return false;
    *out = v->valuedouble;
    return true;
}

void case_list_free(case_list *l)
{
    for (int i = 0; i < l->count; i++) {
        free(l->v[i].id);
        free(l->v[i].name);
        free(l->v[i].run_label);
        free(l->v[i].detail);
        cJSON_Delete(l->v[i].json);
    }
    free(l->v);
    *l = (case_list){0};
}

/* ---------------------------------------------------------------- one driver run */

typedef struct {
    const run_config *cfg;
    int np;
    const char *label;
    case_list *cases;
    console *con;
    char *pending;    // began, no result yet
    char *last_done;  // the last case with a result
    int progress;     // new begins and results in this run
    int results;      // new results in this run
    bool saw_end;
} run_state;

/* Adds a case unless this id is already known (a driver that ignores --start-after must
 * not count twice). Takes ownership of detail and json. */
static bool add_case(run_state *s, const char *name, classification cls, char *detail, cJSON *json,
                     bool whole_run)
{
    char *id = case_id(s->np, s->label, name);
    if (case_known(s->cases, id)) {
        free(id);
        free(detail);
        cJSON_Delete(json);
        return false;
    }
    case_list *l = s->cases;
    if (l->count == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = xrealloc(l->v, (size_t)l->cap * sizeof *l->v);
    }
    case_result *c = &l->v[l->count++];
    *c = (case_result){.id = id, .name = xstrdup(name), .np = s->np, .cls = cls, .detail = detail,
                       .json = json, .whole_run = whole_run};
    c->run_label = s->label ? xstrdup(s->label) : NULL;
    if (cls == CL_PASS) l->passed++;
    console_case(s->con, c);
    return true;
}

static const char *json_string(const cJSON *o, const char *field)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, field);
    return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

/* The driver's own message when it wrote one; otherwise
 * "index 17: expected 3, got 5 (12 of 1024 wrong)" from whichever fields exist. */
static char *wrong_detail(const cJSON *o)
{
    const char *own = json_string(o, "message");
    if (own) return xstrdup(own);
    char buf[1024] = "";
    size_t n = 0;
    const cJSON *v;
#define APPEND(...) n += (size_t)snprintf(buf + n, n < sizeof buf ? sizeof buf - n : 0, __VA_ARGS__)
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(o, "first_wrong"))) APPEND("index %.15g", v->valuedouble);
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(o, "expected")))
        APPEND("%sexpected %.9g", n ? ": " : "", v->valuedouble);
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(o, "got"))) APPEND("%sgot %.9g", n ? ", " : "", v->valuedouble);
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(o, "wrong"))) {
        APPEND("%s(%.15g", n ? " " : "", v->valuedouble);
        if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(o, "count"))) APPEND(" of %.15g", v->valuedouble);
        APPEND(" wrong)");
    }
#undef APPEND
    return xstrdup(n ? buf : "wrong result");
}

static void handle_result(run_state *s, cJSON *o)
{
    const char *name = json_string(o, "case");
    if (!name) name = s->pending;
    if (!name) return;  // a result for no case at all: nothing to attribute it to
    char *owned_name = xstrdup(name);

    const char *verdict = json_string(o, "verdict");
    const char *msg = json_string(o, "message");
    classification cls;
    char *detail = NULL;
    if (verdict && !strcmp(verdict, "pass")) {
        cls = CL_PASS;
    } else if (verdict && !strcmp(verdict, "wrong")) {
        cls = CL_WRONG;
        detail = wrong_detail(o);
    } else if (verdict && !strcmp(verdict, "forbidden")) {
        cls = CL_FORBIDDEN;
        detail = xstrdup(msg ? msg : "called a library collective");
    } else if (verdict && !strcmp(verdict, "error")) {
        cls = CL_ERROR;
        detail = xstrdup(msg ? msg : "the driver reported an error");
    } else {
        cls = CL_ERROR;
        detail = xasprintf("the driver reported an unknown verdict '%s'", verdict ? verdict : "(none)");
    }
    if (add_case(s, owned_name, cls, detail, o, false)) {
        s->progress++;
        s->results++;
        free(s->last_done);
        s->last_done = xstrdup(owned_name);
    }  // else a duplicate, and add_case freed o
    if (s->pending && !strcmp(s->pending, owned_name)) {
        free(s->pending);
        s->pending = NULL;
    }
    free(owned_name);
}

/* One line of the driver's JSON-lines file. Lines that are not objects are ignored: the
 * file is the driver's, but a student's stray write into it must not stop grading. */
static void on_json_line(void *ctx, char *line)
{
    run_state *s = ctx;
    clean_text(line);
    cJSON *o = cJSON_Parse(line);
    const char *event = cJSON_IsObject(o) ? json_string(o, "event") : NULL;
    if (event && !strcmp(event, "result")) {
        handle_result(s, o);  // takes o
        return;
    }
    if (event && !strcmp(event, "begin")) {
        const char *name = json_string(o, "case");
        char *id = name ? case_id(s->np, s->label, name) : NULL;
        if (id && !case_known(s->cases, id)) {
            free(s->pending);
            s->pending = xstrdup(name);
            s->progress++;
        }
        free(id);
    } else if (event && !strcmp(event, "end")) {
        s->saw_end = true;
    }
    cJSON_Delete(o);
}

/* ---------------------------------------------------------------- abnormal ends */

static char *join_lines(const strlist *l)
{
    return strlist_join(l, "\n");
}

/* Why did the run stop without its "end" line? Markers win over exit codes because mpirun
 * does not always pass the rank's exit code or signal on unchanged. */
static classification classify_end(const child_run *ch, const rubric *rub, char **detail)
{
    if (ch->deadlock_lines.count) {
        *detail = join_lines(&ch->deadlock_lines);
        return CL_DEADLOCK;
    }
    if (ch->exit_code == EXIT_DEADLOCK) {
        *detail = xstrdup("the comm watchdog fired (exit code 86)");
        return CL_DEADLOCK;
    }
    if (ch->crash_lines.count) {
        *detail = join_lines(&ch->crash_lines);
        return CL_CRASH;
    }
    if (ch->timed_out) {
        *detail = xasprintf("no progress for %g s (rubric timeout); the run was killed", rub->timeout_s);
        return CL_TIMEOUT;
    }
    if (ch->hit_cap) {
        *detail = xasprintf("the run took longer than its overall cap of %g s (rubric run-timeout)",
                            rub->run_timeout_s);
        return CL_TIMEOUT;
    }
    if (ch->term_signal) {
        *detail = xasprintf("killed by signal %d (%s)", ch->term_signal, strsignal(ch->term_signal));
        return CL_CRASH;
    }
    char *line = NULL;
    if (ch->exec_failed) {
        *detail = capture_last_line(&ch->err);
        return CL_ERROR;
    }
    if (ch->exit_code == EXIT_USAGE) {
        line = capture_find_line(&ch->err, "error");
        *detail = xasprintf("driver usage error: %s", line ? line : "(no message)");
    } else if (ch->exit_code == EXIT_FATAL) {
        line = capture_last_line(&ch->err);
        *detail = xasprintf("fatal harness error: %s", line ? line : "(no message)");
    } else {
        line = capture_last_line(&ch->err);
        *detail = xasprintf("the driver exited with code %d before finishing its cases%s%s", ch->exit_code,
                            line ? ": " : "", line ? line : "");
    }
    free(line);
    return CL_ERROR;
}

/* ---------------------------------------------------------------- one world size */

static void build_argv(strlist *argv, const run_config *cfg, int np, const rubric_run *extra,
                       const char *json_path, const char *start_after)
{
    char np_text[16];
    snprintf(np_text, sizeof np_text, "%d", np);
    /* The launcher: "-np N" is appended, unless the command names the place of the rank
     * count itself with {np} (e.g. "srun -n {np}" under Slurm). */
    bool placed = false;
    for (int i = 0; i < cfg->mpirun.count; i++) {
        if (!strcmp(cfg->mpirun.items[i], "{np}")) {
            strlist_push(argv, np_text);
            placed = true;
        } else {
            strlist_push(argv, cfg->mpirun.items[i]);
        }
    }
    if (!placed) {
        strlist_push(argv, "-np");
        strlist_push(argv, np_text);
    }
    strlist_push(argv, cfg->driver);
    strlist_push(argv, "--json");
    strlist_push(argv, json_path);
    if (cfg->filter) {
        strlist_push(argv, "--filter");
        strlist_push(argv, cfg->filter);
    }
    if (start_after) {
        strlist_push(argv, "--start-after");
        strlist_push(argv, start_after);
    }
    const rubric *rub = cfg->rub;
    strlist_push_all(argv, cfg->test_scale && rub->have_test_args ? &rub->test_args : &rub->args);
    if (extra) strlist_push_all(argv, &extra->args);  // later options win in the drivers
    if (cfg->device) {
        strlist_push(argv, "--device");
        strlist_push(argv, cfg->device);
    }
    if (cfg->comm) {
        strlist_push(argv, "--comm");
        strlist_push(argv, cfg->comm);
    }
    if (rub->watchdog) {
        strlist_push(argv, "--watchdog");
        strlist_push(argv, rub->watchdog);
    }
}

void run_world(const run_config *cfg, int np, const rubric_run *extra, case_list *cases, console *con)
{
    const char *label = extra ? extra->label : NULL;
    char *start_after = NULL;
    int hangs_in_a_row = 0;
    for (int restarts = 0;; restarts++) {
        char *json_path = xasprintf("%s/np%d%s%s.%d.jsonl", cfg->work_dir, np, label ? "-" : "",
                                    label ? label : "", restarts);
        int fd = open(json_path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
        if (fd < 0) {
            perror(json_path);
            exit(3);
        }
        close(fd);

        strlist argv = {0};
        build_argv(&argv, cfg, np, extra, json_path, start_after);
        if (restarts == 0) {
            char *cmd = strlist_join(&argv, " ");
            console_note(con, "np %d%s%s: %s", np, label ? " " : "", label ? label : "", cmd);
            free(cmd);
        }
        run_state s = {.cfg = cfg, .np = np, .label = label, .cases = cases, .con = con};
        child_run ch = {.argv = argv.items, .json_path = json_path, .on_line = on_json_line, .ctx = &s,
                        .no_progress_s = cfg->rub->timeout_s, .total_s = cfg->rub->run_timeout_s};
        child_run_exec(&ch);

        bool normal = s.saw_end && !ch.timed_out && !ch.hit_cap && !ch.term_signal &&
                      (ch.exit_code == 0 || ch.exit_code == 1);
        char *next = NULL;  // where a restart picks up
        if (!normal && !ch.interrupted) {
            char *detail;
            classification cls = classify_end(&ch, cfg->rub, &detail);
            if (s.saw_end) {
                // every case reported; the trouble came after (e.g. in MPI_Finalize)
                char *first = xstrdup(detail);
                first[strcspn(first, "\n")] = '\0';
                console_note(con, "note: np %d ended abnormally after its last case: %s", np, first);
                free(first);
                free(detail);
            } else if (s.pending) {
                next = xstrdup(s.pending);
                add_case(&s, s.pending, cls, detail, NULL, false);
                bool hang = cls == CL_DEADLOCK || cls == CL_TIMEOUT;
                hangs_in_a_row = !hang ? 0 : s.results ? 1 : hangs_in_a_row + 1;
                if (hangs_in_a_row >= MAX_HANGS_IN_A_ROW) {
                    char *name = xasprintf("(rest of np %d after %s)", np, next);
                    add_case(&s, name, cls,
                             xasprintf("skipped: %d cases in a row ended in a %s", hangs_in_a_row,
                                       cls == CL_DEADLOCK ? "deadlock" : "timeout"),
                             NULL, true);
                    console_note(con, "  np %d: %d %ss in a row, skipping the rest of this world size", np,
                                 hangs_in_a_row, cls == CL_DEADLOCK ? "deadlock" : "timeout");
                    free(name);
                    free(next);
                    next = NULL;
                }
            } else if (s.progress) {
                next = xstrdup(s.last_done);
                console_note(con, "note: np %d stopped between cases: %s", np, detail);
                free(detail);
            } else {
                // no case began: the cases this run would have reached are unknown
                char *name = start_after ? xasprintf("(run after %s)", start_after) : xstrdup("(run)");
                add_case(&s, name, cls, detail, NULL, true);
                free(name);
            }
        }
        if (next && restarts + 1 > MAX_RESTARTS) {
            char *name = xasprintf("(run after %s)", next);
            add_case(&s, name, CL_ERROR, xasprintf("stopped after %d restarts at this world size", MAX_RESTARTS),
                     NULL, true);
            free(name);
            free(next);
            next = NULL;
        }
        if (next) console_note(con, "  restarting np %d after %s (restart %d)", np, next, restarts + 1);

        free(s.pending);
        free(s.last_done);
        child_run_free(&ch);
        strlist_free(&argv);
        unlink(json_path);
        free(json_path);
        free(start_after);
        start_after = next;
        if (!next || engine_interrupted) break;
    }
    free(start_after);
}
