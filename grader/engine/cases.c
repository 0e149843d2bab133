/* cases.c - runs a lab driver under mpirun for one world size (or one rubric `run`
 * line) and gives every case of its plan exactly one classification.
 *
 * The driver's first run announces its plan: the cases the rubric expects. Records arrive
 * on the run's channel (channel.c) and are checked by protocol.c; a result
 * classifies its case. When the run ends:
 *  - tampered (a record the protocol refuses): the run is killed at once; the running case
 *    (or, between cases, the one whose result the bad record follows, or the next) is
 *    `tampered`, the other open cases `missing`, and there is no restart;
 *  - normally (end record, exit 0 or 1): open cases are `missing`;
 *  - abnormally: the running case takes the run's classification (deadlock, crash, timeout,
 *    error: classify_end) and the driver is started again with --start-after that case, so
 *    one bad case never hides the others. A restart must announce exactly the rest of the
 *    first plan. Three hangs in a row in one driver group give up that group only
 *    (--skip-group); run-timeout is one budget for the world size over all its restarts. */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine.h"

#define MAX_RESTARTS 100  // per world size
#define HANGS_IN_A_ROW 3  // per driver group at one world size
#define EXIT_DEADLOCK 86  // the harness watchdog's exit code
#define EXIT_USAGE 2
#define EXIT_FATAL 3
#define CPU_MARGIN_S 60.0        // RLIMIT_CPU = run-timeout + this
#define EXIT_AFTER_END_S 15.0    // after the end record, the run must exit within this (or timeout)
#define LAUNCH_S 60.0            // the first record of a run is due within this (or the rubric's timeout)
#define LAUNCH_RETRIES 1         // a restart that ends before its first case is tried this many times more
#define FILE_SIZE_MAX (1024.0 * 1024 * 1024)
#define OPEN_FILES_MAX 8192.0
#define PROCS_BASE 256           // RLIMIT_NPROC above the user's processes: this + per rank
#define PROCS_PER_RANK 16

/* ---------------------------------------------------------------- the case list */

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
        free(l->v[i].group);
        free(l->v[i].run_label);
        free(l->v[i].detail);
        cJSON_Delete(l->v[i].json);
    }
    free(l->v);
    *l = (case_list){0};
}

/* ---------------------------------------------------------------- one world size */

typedef struct {
    const run_config *cfg;
    int np;
    const char *label;
    bool hidden;
    case_list *cases;
    case_plan plan;     // the first run's plan: every case here ends with one classification
    bool have_plan;
    int *outcome;       // per planned case: its index in `cases`, -1 while open
    int open;           // planned cases without a classification
    strlist skipped;    // groups given up after hangs in a row (--skip-group)
    strlist hang_groups;
    int *hangs;         // hangs in a row, per hang_groups entry
    double budget;      // run-timeout seconds left
    int launch_retries; // restarts tried again after they ended before their first case
    int done, passed;   // for the one line a hidden run prints
} world;

static void note(const world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(const world *w, const char *fmt, ...)
{
    if (!w->cfg->report.on_note) return;
    va_list ap;
    va_start(ap, fmt);
    char *text = NULL;
    if (vasprintf(&text, fmt, ap) < 0) text = NULL;
    va_end(ap);
    if (text) w->cfg->report.on_note(w->cfg->report.ctx, text);
    free(text);
}

/* "np 4" or "np 4 seed7": how notes name this world size (a hidden run by its label only). */
static char *world_name(const world *w)
{
    return w->label ? xasprintf("np %d %s", w->np, w->label) : xasprintf("np %d", w->np);
}

static case_result *new_case(world *w, const char *name, const char *group, classification cls, char *detail,
                             cJSON *json, bool whole_run)
{
    case_list *l = w->cases;
    if (l->count == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = xrealloc(l->v, (size_t)l->cap * sizeof *l->v);
    }
    case_result *c = &l->v[l->count++];
    *c = (case_result){.name = xstrdup(name), .group = group ? xstrdup(group) : NULL, .np = w->np, .cls = cls,
                       .detail = detail, .json = json, .whole_run = whole_run, .hidden = w->hidden};
    c->id = w->label ? xasprintf("np%d@%s/%s", w->np, w->label, name) : xasprintf("np%d/%s", w->np, name);
    c->run_label = w->label ? xstrdup(w->label) : NULL;
    if (cls == CL_PASS) l->passed++;
    w->done++;
    if (cls == CL_PASS) w->passed++;
    return c;
}

static void report_case(const world *w, const case_result *c, const classification *before)
{
    if (!w->hidden && w->cfg->report.on_case) w->cfg->report.on_case(w->cfg->report.ctx, c, before);
}

static int *hang_count(world *w, const char *group)
{
    for (int i = 0; i < w->hang_groups.count; i++)
        if (!strcmp(w->hang_groups.items[i], group)) return &w->hangs[i];
    strlist_push(&w->hang_groups, group);
    w->hangs = xrealloc(w->hangs, (size_t)w->hang_groups.count * sizeof *w->hangs);
    w->hangs[w->hang_groups.count - 1] = 0;
    return &w->hangs[w->hang_groups.count - 1];
}

/* Classify planned case i (open). Takes detail and json. */
static void classify(world *w, int i, classification cls, char *detail, cJSON *json)
{
    const planned_case *pc = &w->plan.v[i];
    case_result *c = new_case(w, pc->name, pc->group, cls, detail, json, false);
    w->outcome[i] = (int)(c - w->cases->v);
    w->open--;
    if (cls != CL_DEADLOCK && cls != CL_TIMEOUT) *hang_count(w, pc->group) = 0;
    report_case(w, c, NULL);
}

/* Planned case i (classified already) turns out to be something else. Takes detail. */
static void revise(world *w, int i, classification cls, char *detail)
{
    case_result *c = &w->cases->v[w->outcome[i]];
    classification before = c->cls;
    if (before == CL_PASS) {
        w->cases->passed--;
        w->passed--;
    }
    c->cls = cls;
    free(c->detail);
    c->detail = detail;
    report_case(w, c, &before);
}

/* Every open case (of `group`, or all when NULL) gets cls with the detail. */
static void classify_open(world *w, const char *group, classification cls, const char *detail)
{
    for (int i = 0; i < w->plan.count; i++)
        if (w->outcome[i] < 0 && (!group || !strcmp(group, w->plan.v[i].group)))
            classify(w, i, cls, xstrdup(detail), NULL);
}

/* A stand-in for cases no plan announced: counts as a failed case in every group. */
static void stand_in(world *w, const char *after, classification cls, char *detail)
{
    char *name = after ? xasprintf("(run after %s)", after) : xstrdup("(run)");
    case_result *c = new_case(w, name, NULL, cls, detail, NULL, true);
    report_case(w, c, NULL);
    free(name);
}

/* ---------------------------------------------------------------- one driver run */

typedef struct {
    world *w;
    proto_state proto;
    channel *chan;
    case_plan expected;   // a restart: the rest of the first plan it must announce
    int *expected_index;  // its cases' indices in the first plan
    bool plan_taken;      // its plan came (the first valid record): the rubric's timeout counts
    double due;           // the next valid record is due by then
    int results;
} run_state;

/* The first record of a run (its plan) is due within this: the launcher starting every rank,
 * the referees' handshake and the driver's start, none of them a case. A machine whose disk
 * or memory is busy slows them in ways its run queue does not show, so the rubric's timeout
 * (seconds without a result, which a short rubric keeps to a few) starts at the first record. */
static double launch_limit(const rubric *rub)
{
    return rub->timeout_s > LAUNCH_S ? rub->timeout_s : LAUNCH_S;
}

/* The index in the first plan of this run's case i. */
static int first_index(const run_state *s, int i)
{
    return s->expected_index ? s->expected_index[i] : i;
}

static bool on_line(void *ctx, const char *line, size_t len)
{
    run_state *s = ctx;
    world *w = s->w;
    proto_event ev = proto_feed(&s->proto, line, len);
    s->chan->line_max = proto_line_max(&s->proto);
    if (ev == PROTO_TAMPERED) return false;
    // only a valid record moves the clock; after the end record only the exit is left to do
    double limit = w->cfg->rub->timeout_s;
    if (ev == PROTO_END && limit > EXIT_AFTER_END_S) limit = EXIT_AFTER_END_S;
    s->due = quiet_seconds() + limit;
    if (s->proto.stage >= PROTO_CASES) s->plan_taken = true;
    if (ev == PROTO_RESULT) {
        classify(w, first_index(s, s->proto.result_index), s->proto.result_cls, s->proto.result_detail,
                 s->proto.result_json);
        s->proto.result_detail = NULL;
        s->proto.result_json = NULL;
        s->results++;
    }
    return true;
}

static double deadline(void *ctx)
{
    return ((run_state *)ctx)->due;
}

/* The rest of the first plan after `start_after`, less the skipped groups. */
static void rest_of_plan(run_state *s, const world *w, const char *start_after)
{
    int from = 0;
    if (start_after)
        for (int i = 0; i < w->plan.count; i++)
            if (!strcmp(w->plan.v[i].name, start_after)) from = i + 1;
    s->expected_index = xmalloc((size_t)(w->plan.count - from + 1) * sizeof *s->expected_index);
    for (int i = from; i < w->plan.count; i++) {
        if (strlist_has(&w->skipped, w->plan.v[i].group)) continue;
        s->expected_index[s->expected.count] = i;
        plan_push(&s->expected, w->plan.v[i].name, w->plan.v[i].group);
    }
}

/* Why did the run stop without its end record? Markers win over exit codes because mpirun
 * does not always pass the rank's exit code or signal on unchanged. */
static classification classify_end(const child_run *ch, const world *w, bool running, bool plan_taken, char **detail)
{
    const rubric *rub = w->cfg->rub;
    if (ch->deadlock_lines.count) {
        *detail = strlist_join(&ch->deadlock_lines, "\n");
        return CL_DEADLOCK;
    }
    if (ch->exit_code == EXIT_DEADLOCK) {
        *detail = xstrdup("the comm watchdog fired (exit code 86)");
        return CL_DEADLOCK;
    }
    if (ch->crash_lines.count) {
        *detail = strlist_join(&ch->crash_lines, "\n");
        return CL_CRASH;
    }
    if (ch->timed_out) {
        *detail = running  ? xasprintf("no result within %g s of its begin (rubric timeout); the run was killed",
                                       rub->timeout_s)
                  : plan_taken ? xasprintf("the driver sent no record for %g s (rubric timeout); the run was killed",
                                      rub->timeout_s)
                          : xasprintf("the run sent no record within %g s of its launch; the run was killed",
                                      launch_limit(rub));
        return CL_TIMEOUT;
    }
    if (ch->hit_cap) {
        *detail = xasprintf("the world size used up its run-timeout of %g s (over all its restarts)",
                            rub->run_timeout_s);
        return CL_TIMEOUT;
    }
    if (ch->term_signal) {
        *detail = xasprintf("killed by signal %d (%s)", ch->term_signal, strsignal(ch->term_signal));
        return CL_CRASH;
    }
    char *line = capture_reason(&ch->err);
    if (!line) line = capture_reason(&ch->out);
    if (ch->exec_failed) *detail = xstrdup(line ? line : "the driver could not be started");
    else if (ch->exit_code == EXIT_USAGE) *detail = xasprintf("driver usage error: %s", line ? line : "(no message)");
    else if (ch->exit_code == EXIT_FATAL) *detail = xasprintf("fatal harness error: %s", line ? line : "(no message)");
    else
        *detail = xasprintf("the driver exited with code %d before finishing its cases%s%s", ch->exit_code,
                            line ? ": " : "", line ? line : "");
    free(line);
    return CL_ERROR;
}

static void build_argv(strlist *argv, const run_config *cfg, int np, const rubric_run *extra,
                       const strlist *skipped, const char *start_after)
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
    strlist_push_all(argv, &cfg->rank_wrapper);
    strlist_push(argv, cfg->driver);
    if (cfg->filter) {
        strlist_push(argv, "--filter");
        strlist_push(argv, cfg->filter);
    }
    if (start_after) {
        strlist_push(argv, "--start-after");
        strlist_push(argv, start_after);
    }
    for (int i = 0; i < skipped->count; i++) {
        strlist_push(argv, "--skip-group");
        strlist_push(argv, skipped->items[i]);
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

/* The run's environment: the engine's, plus this run's channel and secret (its key never:
 * the referees get it over the channel, channel.c) and its tag, which names what a referee
 * leaves in /dev/shm (Lab 7's checkpoint directory) so that the engine can remove it after
 * the run, whatever became of the referee (shm_leftovers). Open MPI copies the environment
 * of mpirun only to the ranks on its own host; mca_base_env_list names what it forwards to
 * the others (srun forwards everything). */
static void build_env(strlist *env, const run_config *cfg, const channel *ch, const char *tag)
{
    const char *list = NULL;
    for (char **e = cfg->envp; e && *e; e++) {
        if (!strncmp(*e, "OMPI_MCA_mca_base_env_list=", 27)) list = *e + 27;
        else if (cfg->own_tmpdir && !strncmp(*e, "TMPDIR=", 7)) continue;  // run_world gives the run its own
        else strlist_push(env, *e);
    }
    char *where = ch->endpoint ? xasprintf("PL_ENGINE_TCP=%s", ch->endpoint) : xasprintf("PL_RESULTS_SOCK=%s", ch->path);
    char *secret = xasprintf("PL_ENGINE_SECRET=%s", ch->secret);
    char *fwd = xasprintf("OMPI_MCA_mca_base_env_list=%s%s%s;PL_ENGINE_SECRET;PL_RUN_TAG", list && *list ? list : "",
                          list && *list ? ";" : "", ch->endpoint ? "PL_ENGINE_TCP" : "PL_RESULTS_SOCK");
    char *run_tag = xasprintf("PL_RUN_TAG=%s", tag);
    strlist_push(env, run_tag);
    free(run_tag);
    strlist_push(env, where);
    strlist_push(env, secret);
    strlist_push(env, fwd);
    memset(secret, 0, strlen(secret));
    free(where);
    free(secret);
    free(fwd);
}

/* What this run's referees left in /dev/shm under its tag (a referee killed before it
 * could remove its checkpoint directory); this host's only. */
static void shm_leftovers(const char *tag)
{
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    char *prefix = xasprintf("paralab-zero.%s.", tag);
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
        char *path = xasprintf("/dev/shm/%s", e->d_name);
        remove_tree(path);
        free(path);
    }
    free(prefix);
    closedir(d);
}

/* The plan comes from the engine: the driver's referee lists the cases of world size np
 * (`--list --world N` with the run's arguments; it links no student code), and the run
 * must announce exactly that. Returns false with the reason when the list fails. */
static bool list_plan(world *w, const rubric_run *extra, char **why)
{
    const run_config *cfg = w->cfg;
    strlist argv = {0};
    strlist_push(&argv, cfg->driver);
    strlist_push(&argv, "--list");
    strlist_push(&argv, "--world");
    char np_text[16];
    snprintf(np_text, sizeof np_text, "%d", w->np);
    strlist_push(&argv, np_text);
    if (cfg->filter) {
        strlist_push(&argv, "--filter");
        strlist_push(&argv, cfg->filter);
    }
    const rubric *rub = cfg->rub;
    strlist_push_all(&argv, cfg->test_scale && rub->have_test_args ? &rub->test_args : &rub->args);
    if (extra) strlist_push_all(&argv, &extra->args);
    child_limits lim = cfg->limits;
    lim.cpu_s = 120;
    child_run ch = {.argv = argv.items, .envp = cfg->envp, .limits = &lim, .total_s = 120};
    child_run_exec(&ch);
    bool ok = !ch.timed_out && !ch.hit_cap && !ch.term_signal && ch.exit_code == 0 && !ch.exec_failed &&
              ch.out.total <= CAPTURE_HALF;
    if (!ok) {
        char *line = capture_reason(&ch.err);
        *why = ch.out.total > CAPTURE_HALF && ch.exit_code == 0
                   ? xstrdup("the driver's list of cases is longer than the engine reads")
                   : xasprintf("the driver could not list its cases (exit %d)%s%s", ch.exit_code, line ? ": " : "",
                               line ? line : "");
        free(line);
    } else {
        char *text = capture_text(&ch.out);
        for (char *save = NULL, *ln = strtok_r(text, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
            char *sp = strchr(ln, ' ');
            if (!sp) continue;
            *sp = '\0';
            if (!valid_name(ln) || !valid_name(sp + 1)) {
                ok = false;
                *why = xstrdup("the driver listed a case without a valid name and group");
                break;
            }
            plan_push(&w->plan, ln, sp + 1);
        }
        free(text);
    }
    contain_kill_descendants();
    child_run_free(&ch);
    strlist_free(&argv);
    if (!ok) {
        plan_free(&w->plan);
        return false;
    }
    w->have_plan = true;
    w->outcome = xmalloc((size_t)(w->plan.count ? w->plan.count : 1) * sizeof *w->outcome);
    for (int i = 0; i < w->plan.count; i++) w->outcome[i] = -1;
    w->open = w->plan.count;
    return true;
}

/* After a tampering: the case a referee's signed abort names, when it is still open (rank
 * 0's records of the cases before it may not have been read yet), is `tampered`; else the
 * running case; between cases, a stray result makes the result before it suspect (a
 * forger's pass, answered by the driver's own record), so that case is revised to
 * `tampered`; anything else makes the next open case `tampered`. The other open cases are
 * `missing`. */
static void classify_tampering(world *w, run_state *s, const char *start_after)
{
    char *why = xasprintf("the run's records cannot be trusted: %s", s->proto.tamper);
    if (!w->have_plan) {
        stand_in(w, start_after, CL_TAMPERED, why);
        return;
    }
    int target = -1;
    bool done = false;  // the target has a classification already
    const char *named = s->chan ? s->chan->abort_case : NULL;  // the aborting referee's case
    for (int i = 0; named && i < w->plan.count && target < 0; i++)
        if (w->outcome[i] < 0 && !strcmp(w->plan.v[i].name, named)) target = i;
    if (target < 0 && s->proto.pending >= 0) {
        target = first_index(s, s->proto.pending);
    } else if (target < 0 && s->proto.stray_result && s->proto.last_result >= 0) {
        target = first_index(s, s->proto.last_result);
        done = true;
    } else {
        for (int i = 0; i < w->plan.count && target < 0; i++)
            if (w->outcome[i] < 0) target = i;
    }
    if (target >= 0 && done) {
        revise(w, target, CL_TAMPERED, why);
    } else if (target >= 0) {
        classify(w, target, CL_TAMPERED, why, NULL);
    } else {
        stand_in(w, start_after, CL_TAMPERED, why);
    }
    classify_open(w, NULL, CL_MISSING, "not run: the run was stopped for tampering");
}

/* After a hang of case i: three in a row in its group give up the group at this size. */
static void count_hang(world *w, int i, classification cls)
{
    const char *group = w->plan.v[i].group;
    int *hangs = hang_count(w, group);
    if (++*hangs < HANGS_IN_A_ROW) return;
    const char *what = cls == CL_DEADLOCK ? "deadlock" : "timeout";
    char *detail = xasprintf("skipped: %d cases of group %s in a row ended in a %s", *hangs, group, what);
    char *name = world_name(w);
    if (!w->hidden) note(w, "  %s: %d %ss in a row in group %s, skipping its other cases", name, *hangs, what, group);
    free(name);
    classify_open(w, group, cls, detail);
    free(detail);
    strlist_push(&w->skipped, group);
}

/* What the end of a run says about its records, beyond what the protocol saw. */
static void judge_finish(run_state *s, const channel *chan, const child_run *ch)
{
    proto_state *p = &s->proto;
    bool ended = !ch->timed_out && !ch->hit_cap && !ch->interrupted && !ch->term_signal && !ch->distrusted;
    if (chan->tamper && !p->tamper) p->tamper = xstrdup(chan->tamper);
    if (p->tamper || !ended) return;
    // every referee got the key, and rank 0 then said nothing: its first record is the plan
    if (chan->keyed && p->stage == PROTO_PLAN && ch->exit_code == 0)
        p->tamper = xstrdup("the driver ran without sending its plan");
    // a driver exits 0 when every case passed and 1 otherwise; the other code after an
    // end record means the records did not come from the driver's own finish
    if (p->stage == PROTO_DONE && (ch->exit_code == 0 || ch->exit_code == 1) && ch->exit_code != (p->failed ? 1 : 0)) {
        p->tamper = xasprintf("the run exited with code %d after an end record with %d failed case(s)", ch->exit_code,
                              p->failed);
        p->stray_result = true;  // the records before the end are the suspects
    }
}

/* Classify what the run left open; returns where a restart picks up (malloc'd), or NULL
 * when this world size is done. */
static char *after_run(world *w, run_state *s, const child_run *ch, const char *start_after, int restarts)
{
    const proto_state *p = &s->proto;
    char *wname = world_name(w), *next = NULL, *detail = NULL;
    bool running = p->pending >= 0;
    if (ch->distrusted || p->tamper) {
        classify_tampering(w, s, start_after);
        if (!w->hidden) note(w, "  %s: the run was stopped for tampering; no restart", wname);
    } else if (ch->interrupted) {
        // Ctrl-C: nothing more is classified
    } else if (p->stage == PROTO_DONE) {
        if (ch->timed_out || ch->hit_cap || ch->term_signal || (ch->exit_code != 0 && ch->exit_code != 1)) {
            // the shutdown went wrong: the run's last case is not trusted to be done either
            // (a forger who wrote the end record itself cannot let the driver finish)
            classification cls = classify_end(ch, w, false, s->plan_taken, &detail);
            detail[strcspn(detail, "\n")] = '\0';
            note(w, "note: %s ended abnormally after its end record: %s", wname, detail);
            if (p->last_result >= 0)
                revise(w, first_index(s, p->last_result), cls, xasprintf("after the run's end record: %s", detail));
        }
        classify_open(w, NULL, CL_MISSING, "the driver ended without running this case");
    } else {
        classification cls = classify_end(ch, w, running, s->plan_taken, &detail);
        if (!w->have_plan) {
            stand_in(w, start_after, cls, detail);  // the cases it would have run are unknown
            detail = NULL;
        } else if (ch->hit_cap) {
            if (running) classify(w, first_index(s, p->pending), cls, detail, NULL);
            else free(detail);
            detail = NULL;
            classify_open(w, NULL, CL_TIMEOUT, "not run: the world size used up its run-timeout");
        } else if (running) {
            int i = first_index(s, p->pending);
            next = xstrdup(w->plan.v[i].name);
            classify(w, i, cls, detail, NULL);
            detail = NULL;
            if (cls == CL_DEADLOCK || cls == CL_TIMEOUT) count_hang(w, i, cls);
        } else if (s->results) {
            next = xstrdup(w->plan.v[first_index(s, p->last_result)].name);
            detail[strcspn(detail, "\n")] = '\0';
            if (!w->hidden) note(w, "note: %s stopped between cases: %s", wname, detail);
        } else if (restarts && start_after && w->launch_retries < LAUNCH_RETRIES) {
            // a restart that never reached a case, where the first run did: the same restart
            // once more before its failure closes the rest (a machine that stalled the launch
            // does not decide what the cases score; a driver that fails so every time still does)
            w->launch_retries++;
            next = xstrdup(start_after);
            detail[strcspn(detail, "\n")] = '\0';
            if (!w->hidden) note(w, "note: %s: the restart ended before its first case (%s); trying it once more", wname, detail);
        } else {
            // no case began and none finished: a restart would do the same again
            // the launcher started no rank: its first words say why. No referee means no player
            // ran either, so the launcher's stdout holds only its own daemons' lines (a node's
            // daemon failing to call back as the launcher gives up), never the student's; its
            // stderr comes first, where it names the node it could not start.
            char *first = NULL;
            if (!s->chan->accepted && ch->exit_code != EXIT_USAGE && ch->exit_code != EXIT_FATAL) {
                first = capture_first(&ch->err);
                if (!first) first = capture_first(&ch->out);
            }
            if (first) {
                char *d = xasprintf("no rank's referee reached the engine; the launcher said first: %s", first);
                free(detail);
                free(first);
                detail = d;
            }
            char *why = xasprintf("not run: the %s ended before its first case: %s", restarts ? "restart" : "run",
                                  detail);
            why[strcspn(why, "\n")] = '\0';
            classify_open(w, NULL, cls, why);
            free(why);
        }
    }
    free(detail);
    if (next && (!w->open || restarts + 1 > MAX_RESTARTS || w->budget <= 0)) {
        if (w->open && restarts + 1 > MAX_RESTARTS) {
            char *why = xasprintf("not run: the driver was restarted %d times at this world size", MAX_RESTARTS);
            classify_open(w, NULL, CL_ERROR, why);
            free(why);
        } else if (w->open) {
            classify_open(w, NULL, CL_TIMEOUT, "not run: the world size used up its run-timeout");
        }
        free(next);
        next = NULL;
    }
    if (next && !w->hidden) note(w, "  restarting %s after %s (restart %d)", wname, next, restarts + 1);
    free(wname);
    return next;
}

void run_world(const run_config *cfg, int np, const rubric_run *extra, case_list *cases)
{
    static int serial;  // channel directories are never reused within one engine run
    world w = {.cfg = cfg, .np = np, .label = extra ? extra->label : NULL, .hidden = extra && extra->hidden,
               .cases = cases, .budget = cfg->rub->run_timeout_s};
    const sandbox *sb = cfg->sandbox;
    bool landlock = sb && sb->kind == SANDBOX_LANDLOCK;
    char *start_after = NULL;
    char *wname = world_name(&w);
    for (int restarts = 0;; restarts++) {
        if (restarts == 0 && !w.have_plan) {
            char *why = NULL;
            if (!list_plan(&w, extra, &why)) {
                stand_in(&w, NULL, CL_ERROR, why);
                break;
            }
            if (w.plan.count == 0 && cfg->filter && !w.hidden) {
                note(&w, "note: %s: --filter (T=) '%s' matches none of its cases: nothing ran (the names: %s "
                         "--list --world %d; several globs go separated by spaces)", wname, cfg->filter, cfg->driver, np);
                break;
            }
        }
        channel chan;
        channel_open(&chan, cfg->work_dir, ++serial, sb && sb->drop_root ? SANDBOX_UID : (uid_t)-1, cfg->rub->lab, np,
                     cfg->engine_addr);
        strlist argv = {0}, env = {0}, full = {0};
        build_argv(&argv, cfg, np, extra, &w.skipped, start_after);
        char tag[48];
        snprintf(tag, sizeof tag, "%lx-%x", (unsigned long)getpid(), (unsigned)serial);
        build_env(&env, cfg, &chan, tag);
        if (landlock) {  // the one directory the run may write besides its channel
            char *tmp = xasprintf("TMPDIR=%s", sb->scratch);
            strlist_push(&env, tmp);
            free(tmp);
        }
        char *own_tmp = NULL;
        if (cfg->own_tmpdir) {  // across hosts: what the ranks on this host may write (pl-landlock)
            own_tmp = xasprintf("%s/tmp.%d", cfg->work_dir, serial);
            if (mkdir(own_tmp, 0700) == 0) {
                char *tmp = xasprintf("TMPDIR=%s", own_tmp);
                strlist_push(&env, tmp);
                free(tmp);
            }
        }
        if (restarts == 0 && !w.hidden) {  // a hidden run's command line holds its seeds
            char *cmd = strlist_join(&argv, " ");
            note(&w, "%s: %s%s", wname, cmd, sb ? " (in the sandbox)" : "");
            free(cmd);
        }
        child_limits lim = cfg->limits;
        lim.cpu_s = w.budget + CPU_MARGIN_S;
        lim.fsize_bytes = FILE_SIZE_MAX;
        lim.nofile = OPEN_FILES_MAX;
        if (sb)  // above what the run's user has already: RLIMIT_NPROC counts them all
            lim.nproc = processes_of_user(sb->drop_root ? SANDBOX_UID : getuid()) + PROCS_BASE + PROCS_PER_RANK * np;
        if (sb && !landlock) sandbox_argv(&full, sb, chan.dir, argv.items);

        run_state s = {.w = &w, .chan = &chan, .due = quiet_seconds() + launch_limit(cfg->rub)};
        rest_of_plan(&s, &w, start_after);
        proto_init(&s.proto, chan.key, cfg->rub->lab, np, &s.expected);
        chan.line_max = proto_line_max(&s.proto);
        child_run ch = {.argv = sb && !landlock ? full.items : argv.items, .envp = env.items, .limits = &lim,
                        .drop_root = sb && sb->drop_root, .landlock = landlock ? sb : NULL,
                        .landlock_chan = chan.dir, .chan = &chan, .on_line = on_line,
                        .deadline = deadline, .ctx = &s, .total_s = w.budget};
        child_run_exec(&ch);
        w.budget -= ch.quiet_s;
        int killed = contain_kill_descendants();  // before anything is decided or written
        if (killed) note(&w, "note: %s: killed %d leftover process(es) after the run", wname, killed);
        if (own_tmp) remove_tree(own_tmp);
        free(own_tmp);
        shm_leftovers(tag);
        if (landlock) {  // what the run left in its TMPDIR goes with it
            remove_tree(sb->scratch);
            mkdir(sb->scratch, 0700);
            if (sb->drop_root && chown(sb->scratch, SANDBOX_UID, SANDBOX_UID) != 0) { /* the next run says why */ }
        }
        if (chan.endpoint && restarts == 0 && !w.hidden) {  // across hosts: where each rank ran
            char *hosts = channel_hosts(&chan);
            if (hosts) note(&w, "%s: the ranks ran on %s (channel %s)", wname, hosts, chan.endpoint);
            free(hosts);
        }
        if (chan.refused)
            note(&w, "note: %s: %d connection(s) to %s without the run's secret were closed", wname, chan.refused,
                 chan.endpoint);
        judge_finish(&s, &chan, &ch);
        char *next = after_run(&w, &s, &ch, start_after, restarts);

        proto_free(&s.proto);
        plan_free(&s.expected);
        free(s.expected_index);
        child_run_free(&ch);
        channel_close(&chan);
        strlist_free(&argv);
        strlist_free(&env);
        strlist_free(&full);
        free(start_after);
        start_after = next;
        if (!next || engine_interrupted) break;
    }
    if (w.hidden) note(&w, "hidden run %s at np %d: %d cases, %d passed", w.label, np, w.done, w.passed);
    free(start_after);
    free(wname);
    plan_free(&w.plan);
    free(w.outcome);
    strlist_free(&w.skipped);
    strlist_free(&w.hang_groups);
    free(w.hangs);
}
