/* driver.c - the case runner of every lab driver (grader/driver.h): flags, the plan of
 * cases, the measure/check/perf sequence, verdicts gathered over ranks, the results channel
 * to the grading engine, the per-case lines and the exit code. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>  // defines: getrandom
#include <sys/socket.h>  // defines: socket, connect
#include <sys/un.h>      // defines: sockaddr_un
#include <unistd.h>

#include "driver.h"
#include "siphash.h" // defines: siphash_record, the signature of every record

/* ================================================================================== */
/* State                                                                              */
/* ================================================================================== */

static const drv_lab *g_lab;
static drv_options g_opt = {.max_bytes = 64u << 20, .factor = 2, .warmup = -1, .iters = -1};
static const char *g_start_after, *g_run_mode;
static const char *g_skip_groups[32];
static int g_nskip;
static bool g_list, g_list_modes;
static int g_cases_run, g_cases_failed;

/* The results channel: rank 0's socket to the engine (docs/grader.md, protocol 2), the
 * run's key that signs every record, and the records sent so far. */
static char g_sock_path[108];
static unsigned char g_key[SIPHASH_KEY_BYTES];
static uint64_t g_seq;
static int g_chan = -1;

const drv_options *drv_opts(void) { return &g_opt; }
bool drv_graded(void) { return g_sock_path[0] != '\0'; }

/* ================================================================================== */
/* The engine's variables: taken and wiped before MPI starts (no student code has run yet,
 * and none ever sees them: /proc/self/environ shows the wiped bytes).                  */
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

static uint64_t splitmix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t drv_case_seed(const drv_case *c) {
    uint64_t v = 0;
    if (drv_graded() && getrandom(&v, sizeof v, 0) == (ssize_t)sizeof v) return v;
    v = splitmix(pl_info()->seed * 0x100000001B3ull + (uint64_t)pl_rank());
    for (const char *p = c->name; *p; p++) v = (v ^ (unsigned char)*p) * 0x100000001B3ull;
    return splitmix(v);
}

/* ================================================================================== */
/* Flags                                                                              */
/* ================================================================================== */

bool drv_parse_bytes(const char *s, size_t *out) {
    if (!s || !*s || s[0] == '-') return false;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) return false;
    unsigned long long mult = 1;
    if (*end) {
        switch (*end) {
        case 'k': case 'K': mult = 1ull << 10; break;
        case 'm': case 'M': mult = 1ull << 20; break;
        case 'g': case 'G': mult = 1ull << 30; break;
        default: return false;
        }
        if (end[1] && !((end[1] == 'B' || end[1] == 'b') && !end[2])) return false;
    }
    if (v > (1ull << 40) / mult) return false; /* more than 1 TiB: surely a typo */
    *out = (size_t)(v * mult);
    return true;
}

static double parse_number(const char *flag, const char *s, double lo, double hi, bool integer) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi) || (integer && v != floor(v)))
        pl_usage_error("%s: '%s' is not %s in [%g, %g]", flag, s, integer ? "an integer" : "a number", lo, hi);
    return v;
}

static void usage(void) {
    if (pl_rank() != 0) return;
    printf("usage: mpirun -np N <driver> [flags]\n%s (%s)\n", g_lab->title, g_lab->name);
    printf("  --list  --filter GLOB  --start-after CASE  --skip-group GROUP\n"
           "  -q                            quiet: only failures and the closing summary line\n"
           "  -b BYTES -e BYTES -f FACTOR   size sweep (K/M/G suffixes), like nccl-tests\n"
           "  -w N -n N                     warm-up and timed iterations\n"
           "  --run MODE  --modes           another mode than grading (make lab-N RUN=MODE)\n"
           "  --device cpu|cuda  --comm mpi|nccl  --seed N  --watchdog SEC  --trace FILE\n");
    for (const drv_flag *f = g_lab->flags; f && f->name; f++) printf("  %-28s  %s\n", f->name, f->help);
    for (const drv_mode *m = g_lab->modes; m && m->name; m++)
        printf("  --run %-22s  %s\n", m->name, m->help);
}

static const char *need_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) pl_usage_error("%s needs a value", argv[*i]);
    return argv[++*i];
}

static void lab_flag(const drv_flag *f, const char *v) {
    size_t bytes;
    switch (f->type) {
    case DRV_INT: *(int *)f->value = (int)parse_number(f->name, v, f->lo, f->hi, true); break;
    case DRV_DOUBLE: *(double *)f->value = parse_number(f->name, v, f->lo, f->hi, false); break;
    case DRV_STR: *(const char **)f->value = v; break;
    case DRV_BYTES:
        if (!drv_parse_bytes(v, &bytes) || (double)bytes < f->lo || (double)bytes > f->hi)
            pl_usage_error("%s: bad size '%s' (e.g. 4096, 64K, 1M; in [%g, %g] bytes)", f->name, v, f->lo, f->hi);
        *(size_t *)f->value = bytes;
        break;
    }
}

static void parse_flags(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        size_t bytes;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            pl_finalize();
            exit(0);
        } else if (!strcmp(a, "--list")) {
            g_list = g_opt.quiet = true; /* the list alone on stdout */
        } else if (!strcmp(a, "--modes")) {
            g_list_modes = true;
        } else if (!strcmp(a, "-q")) {
            g_opt.quiet = true;
        } else if (!strcmp(a, "--filter")) {
            g_opt.filter = need_value(argc, argv, &i);
        } else if (!strcmp(a, "--start-after")) {
            g_start_after = need_value(argc, argv, &i);
        } else if (!strcmp(a, "--skip-group")) {
            if (g_nskip == (int)(sizeof g_skip_groups / sizeof g_skip_groups[0]))
                pl_usage_error("--skip-group given more than 32 times");
            g_skip_groups[g_nskip++] = need_value(argc, argv, &i);
        } else if (!strcmp(a, "--run")) {
            g_run_mode = need_value(argc, argv, &i);
        } else if (!strcmp(a, "-b") || !strcmp(a, "-e")) {
            const char *v = need_value(argc, argv, &i);
            if (!drv_parse_bytes(v, &bytes)) pl_usage_error("%s: bad size '%s' (e.g. 1024, 64K, 64M)", a, v);
            *(a[1] == 'b' ? &g_opt.min_bytes : &g_opt.max_bytes) = bytes;
        } else if (!strcmp(a, "-f")) {
            const char *v = need_value(argc, argv, &i);
            char *end = NULL;
            double f = strtod(v, &end);
            if (!end || *end || !(f > 1.0) || f > 1024) pl_usage_error("-f: factor '%s' must be a number in (1, 1024]", v);
            g_opt.factor = f;
        } else if (!strcmp(a, "-w")) {
            g_opt.warmup = (int)parse_number(a, need_value(argc, argv, &i), 0, 1000, true);
        } else if (!strcmp(a, "-n")) {
            g_opt.iters = (int)parse_number(a, need_value(argc, argv, &i), 1, 100000, true);
        } else {
            const drv_flag *f = g_lab->flags;
            while (f && f->name && strcmp(f->name, a) != 0) f++;
            if (!f || !f->name) pl_usage_error("unknown flag '%s' (try --help)", a);
            lab_flag(f, need_value(argc, argv, &i));
        }
    }
    if (g_opt.min_bytes > g_opt.max_bytes)
        pl_usage_error("-b %zu is larger than -e %zu", g_opt.min_bytes, g_opt.max_bytes);
}

/* ================================================================================== */
/* The plan                                                                           */
/* ================================================================================== */

struct drv_plan {
    drv_instance *v;
    size_t n, cap;
};

static bool name_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n >= DRV_NAME_MAX) return false;
    for (; *s; s++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:+=,@-", *s)) return false;
    return true;
}

drv_instance *drv_plan_add(drv_plan *p, const drv_test *t, const char *fmt, ...) {
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 256;
        p->v = realloc(p->v, p->cap * sizeof *p->v);
        PL_CHECK(p->v != NULL, "out of host memory");
    }
    drv_instance *in = &p->v[p->n++];
    memset(in, 0, sizeof *in);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(in->name, sizeof in->name, fmt, ap);
    va_end(ap);
    snprintf(in->group, sizeof in->group, "%s", t->group ? t->group : t->name);
    in->test = t;
    return in;
}

static bool selected(const drv_instance *in, bool *skipping) {
    if (*skipping) {
        if (!strcmp(in->name, g_start_after)) *skipping = false;
        return false;
    }
    for (int i = 0; i < g_nskip; i++)
        if (!strcmp(in->group, g_skip_groups[i])) return false;
    return !g_opt.filter || fnmatch(g_opt.filter, in->name, 0) == 0;
}

static drv_plan make_plan(void) {
    drv_plan all = {0}, run = {0};
    for (const drv_test *t = g_lab->tests; t->name; t++) {
        if (t->plan) t->plan(t, &all);
        else drv_plan_add(&all, t, "%s", t->name);
    }
    bool skipping = g_start_after != NULL;
    for (size_t i = 0; i < all.n; i++) {
        /* A name outside the protocol's alphabet is the driver's bug, not the student's. */
        if (!name_ok(all.v[i].name) || !name_ok(all.v[i].group))
            pl_fatal(__FILE__, __LINE__, all.v[i].name, "case or group name outside [A-Za-z0-9._:+=,@-]");
        for (size_t k = 0; k < i && k < 4096; k++)
            if (!strcmp(all.v[k].name, all.v[i].name))
                pl_fatal(__FILE__, __LINE__, all.v[i].name, "two cases share this name");
        if (selected(&all.v[i], &skipping)) *drv_plan_add(&run, all.v[i].test, "%s", "") = all.v[i];
    }
    if (g_start_after && skipping)
        pl_usage_error("--start-after '%s': no such case", g_start_after);
    free(all.v);
    return run;
}

/* ================================================================================== */
/* The results channel                                                                */
/* ================================================================================== */

/* One record: the JSON, a tab, its signature (SipHash-2-4 of the record's number and the
 * JSON under the run's key, 16 hex digits), a newline. */
static void chan_send(cJSON *o) {
    if (g_chan < 0) return;
    char *s = cJSON_PrintUnformatted(o);
    PL_CHECK(s != NULL, "out of host memory");
    size_t n = strlen(s);
    char *line = malloc(n + SIPHASH_HEX + 3);
    PL_CHECK(line != NULL, "out of host memory");
    int k = snprintf(line, n + SIPHASH_HEX + 3, "%s\t%016llx\n", s,
                     (unsigned long long)siphash_record(g_key, g_seq++, s, n));
    for (size_t off = 0; off < (size_t)k;) {
        ssize_t w = write(g_chan, line + off, (size_t)k - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) pl_fatal(__FILE__, __LINE__, "write(results channel)", strerror(errno));
        off += (size_t)w;
    }
    free(line);
    free(s);
}

static void chan_event(const char *event, const char *name) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "event", event);
    if (name) cJSON_AddStringToObject(o, "case", name);
    chan_send(o);
    cJSON_Delete(o);
}

/* Rank 0 connects before any student code runs and sends hello and the plan; the other
 * ranks forget the channel (they never need it) and wait until rank 0 is connected, after
 * which the engine takes no other connection. */
static void chan_open(const drv_plan *plan) {
    if (!drv_graded()) return;
    if (pl_rank() != 0) {
        memset(g_key, 0, sizeof g_key);
        memset(g_sock_path, 0, sizeof g_sock_path);
        drv_max(0); /* the barrier below */
        return;
    }
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", g_sock_path);
    g_chan = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (g_chan < 0 || connect(g_chan, (struct sockaddr *)&addr, sizeof addr) != 0)
        pl_fatal(__FILE__, __LINE__, "connect(PL_RESULTS_SOCK)", strerror(errno));
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "event", "hello");
    cJSON_AddNumberToObject(o, "protocol", 2);
    cJSON_AddStringToObject(o, "lab", g_lab->name);
    cJSON_AddNumberToObject(o, "np", pl_world());
    chan_send(o);
    cJSON_Delete(o);
    o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "event", "plan");
    cJSON *cases = cJSON_AddArrayToObject(o, "cases");
    for (size_t i = 0; i < plan->n; i++) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "case", plan->v[i].name);
        cJSON_AddStringToObject(c, "group", plan->v[i].group);
        cJSON_AddItemToArray(cases, c);
    }
    chan_send(o);
    cJSON_Delete(o);
    drv_max(0); /* the other ranks start once the channel is rank 0's alone */
}

/* ================================================================================== */
/* Verdicts and fields                                                                */
/* ================================================================================== */

static void set_verdict(drv_case *c, drv_verdict v, const char *fmt, va_list ap) {
    if (c->verdict != DRV_PASS && v <= c->verdict) return; /* the first of a kind explains */
    c->verdict = v;
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
}

#define VERDICT_FN(fn, kind)                      \
    void fn(drv_case *c, const char *fmt, ...) {  \
        va_list ap;                               \
        va_start(ap, fmt);                        \
        set_verdict(c, kind, fmt, ap);            \
        va_end(ap);                               \
    }
VERDICT_FN(drv_fail, DRV_WRONG)
VERDICT_FN(drv_error, DRV_ERROR)
VERDICT_FN(drv_forbid, DRV_FORBIDDEN)

void drv_note(drv_case *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->note, sizeof c->note, fmt, ap);
    va_end(ap);
}

bool drv_failed(const drv_case *c) { return c->verdict != DRV_PASS; }

void *drv_state(drv_case *c, size_t size) {
    free(c->state);
    c->state = calloc(1, size ? size : 1);
    PL_CHECK(c->state != NULL, "out of host memory");
    return c->state;
}

void drv_num(drv_case *c, const char *key, double value) {
    cJSON *o = c->fields;
    cJSON_DeleteItemFromObjectCaseSensitive(o, key);
    /* JSON has no NaN or infinity: record them as null rather than invalid JSON. */
    if (!isfinite(value)) cJSON_AddNullToObject(o, key);
    else cJSON_AddNumberToObject(o, key, value);
}

/* The case's verdict over all ranks: the strongest kind wins, the lowest rank with it
 * explains. Host collectives only: nothing here counts as the student's traffic. */
static void gather_verdict(drv_case *c) {
    double v = c->verdict;
    pl_host_allreduce(&v, 1, PL_HOST_MAX, NULL);
    double who = c->verdict == (drv_verdict)v ? c->rank : 1e9;
    pl_host_allreduce(&who, 1, PL_HOST_MIN, NULL);
    c->verdict = (drv_verdict)v;
    if (c->verdict == DRV_PASS) return;
    pl_host_bcast(c->msg, sizeof c->msg, (int)who, NULL);
    c->msg[sizeof c->msg - 1] = '\0';
    if (who != 0 && c->rank == 0 && c->world > 1) {
        char m[sizeof c->msg + 32];
        snprintf(m, sizeof m, "rank %.0f: %s", who, c->msg);
        memcpy(c->msg, m, sizeof c->msg - 1); /* cut at the field's size */
        c->msg[sizeof c->msg - 1] = '\0';
    }
}

/* ================================================================================== */
/* Checks                                                                             */
/* ================================================================================== */

double drv_tolerance(void) { return pl_tolerance(); }
const char *drv_tolerance_why(void) { return pl_tolerance_why(); }

double drv_sum(double v) { pl_host_allreduce(&v, 1, PL_HOST_SUM, NULL); return v; }
double drv_max(double v) { pl_host_allreduce(&v, 1, PL_HOST_MAX, NULL); return v; }
double drv_min(double v) { pl_host_allreduce(&v, 1, PL_HOST_MIN, NULL); return v; }

void drv_allgather_u64(uint64_t v, uint64_t *out) {
    uint64_t *all = pl_host_allgatherv(&v, sizeof v, NULL, NULL);
    memcpy(out, all, (size_t)pl_world() * sizeof v);
    free(all);
}

/* The worst relative error of the case so far, reported as rel_err with the tolerance. */
static void note_error(drv_case *c, double rel, double tol) {
    const cJSON *old = cJSON_GetObjectItemCaseSensitive(c->fields, "rel_err");
    if (!cJSON_IsNumber(old) || rel > old->valuedouble || !isfinite(rel)) drv_num(c, "rel_err", isfinite(rel) ? rel : 1e30);
    drv_num(c, "tolerance", tol);
}

bool drv_all_ok(drv_case *c, int rc, const char *what, const char *(*name)(int)) {
    double bad = drv_max(rc != 0);
    if (rc != 0) drv_fail(c, "%s returned %d (%s)", what, rc, name ? name(rc) : "error");
    else if (bad > 0) drv_fail(c, "%s failed on another rank", what);
    return bad == 0;
}

double drv_check_error(drv_case *c, const char *what, double rel_err, double tolerance) {
    double worst = drv_max(isfinite(rel_err) ? rel_err : 1e30);
    note_error(c, worst, tolerance);
    if (worst >= 1e30) drv_fail(c, "%s: NaN or infinity (never written?)", what);
    else if (!(worst <= tolerance))
        drv_fail(c, "%s: relative Frobenius error %.3g > tolerance %.0e", what, worst, tolerance);
    return worst;
}

double drv_check_tensor(drv_case *c, const char *what, pl_tensor got, const float *expected, bool exact) {
    size_t n = (size_t)pl_tensor_numel(got);
    float *h = calloc(n + 1, sizeof *h);
    PL_CHECK(h != NULL, "out of host memory");
    if (n) pl_tensor_download(h, got);
    pl_compare cmp = pl_compare_host(h, expected, n, 0.0);
    bool nan_seen = false;
    for (size_t i = 0; i < n; i++) nan_seen |= isnan(h[i]);
    free(h);
    if (!exact) return drv_check_error(c, what, nan_seen ? INFINITY : cmp.rel_fro, drv_tolerance());
    double wrong = drv_sum((double)cmp.wrong);
    if (wrong > 0)
        drv_fail(c, "%s: %.0f element(s) differ from the expected bits (wrong rows/columns, or transposed?)", what, wrong);
    return wrong;
}

float *drv_poisoned(size_t n) {
    float *p = pl_malloc_floats(n + 1);
    pl_poison(p, n + 1, NULL);
    return p;
}

/* ================================================================================== */
/* Measuring and timing                                                               */
/* ================================================================================== */

void drv_measure(void (*fn)(void *), void *arg, pl_metrics *m) {
    pl_device_sync();
    pl_metrics_reset();
    fn(arg);
    pl_device_sync();
    pl_metrics_get(m);
}

static void run_case_fn(void *arg) {
    drv_case *c = arg;
    c->inst->test->run(c);
}

pl_timing drv_time(void (*fn)(void *), void *arg, int warmup, int iters) {
    return pl_time(fn, arg, g_opt.warmup >= 0 ? g_opt.warmup : warmup, g_opt.iters > 0 ? g_opt.iters : iters,
                   pl_comm_world());
}

int drv_iters_for(size_t bytes) {
    if (g_opt.iters > 0) return g_opt.iters;
    if (bytes >= (32u << 20)) return 2;
    if (bytes >= (4u << 20)) return 4;
    if (bytes >= (256u << 10)) return 10;
    return 20;
}

size_t drv_sizes(size_t *out, size_t cap) {
    size_t n = 0;
    /* 0 and 1 element first: the edge cases every collective must survive. */
    for (size_t e = 0; e < 2; e++)
        if (e * 4 >= g_opt.min_bytes && e * 4 <= g_opt.max_bytes && n < cap) out[n++] = e;
    double b = g_opt.min_bytes < 4 ? 4 : (double)g_opt.min_bytes;
    while (b <= (double)g_opt.max_bytes && n < cap) {
        size_t count = (size_t)b / 4;
        if (n == 0 || count > out[n - 1]) out[n++] = count;
        b *= g_opt.factor;
    }
    size_t last = g_opt.max_bytes / 4;
    if (n < cap && n && last > out[n - 1]) out[n++] = last;
    return n;
}

/* The model's rules and ratios against what run() did (rank-local counters, reduced). Every
 * branch is decided on values reduced over the ranks, so all ranks take it together. */
static void apply_model(drv_case *c, const drv_model *md) {
    const pl_metrics *m = &c->m;
    int n = c->world;
    bool failed = drv_max(c->verdict != DRV_PASS) > 0; /* a wrong result explains itself best */
    /* The counters of the public API must match what reached MPI / NCCL. */
    double mismatch = (double)(m->bytes_sent != c->wire.p2p_bytes_sent || m->msgs_sent != c->wire.p2p_msgs_sent ||
                               m->coll_total != c->wire.coll_calls || m->coll_bytes != c->wire.coll_bytes);
    if (drv_max(mismatch) > 0)
        drv_forbid(c, "the counted traffic differs from what went to the comm backend (instrumentation tampered with?)");
    double colls = drv_sum((double)m->coll_total);
    drv_num(c, "lib_calls", colls);
    if (drv_max(md->no_collectives) > 0 && colls > 0) {
        int which = -1;
        for (int k = 0; k < PL_OP_COUNT && which < 0; k++)
            if (drv_sum((double)m->coll_calls[k]) > 0) which = k;
        drv_forbid(c, "called the library collective pl_%s %.0f time(s): use pl_send/pl_recv only",
                   which >= 0 ? pl_op_kind_name((pl_op_kind)which) : "?", colls);
    }
    double msgs = drv_max((double)m->msgs_sent);
    if (drv_max(md->no_p2p) > 0 && msgs > 0) drv_fail(c, "used point-to-point sends (%.0f); use the library collectives", msgs);
    if (drv_max(md->exact_collectives) > 0) {
        double bad = 0;
        for (int k = 0; k < PL_OP_COUNT; k++) bad += m->coll_calls[k] != (uint64_t)md->colls[k];
        bad += fabs((double)m->coll_bytes - md->coll_bytes) > 0.5;
        if (drv_max(bad) > 0) {
            char got[160] = "", want[160] = "";
            for (int k = 0, gl = 0, wl = 0; k < PL_OP_COUNT; k++) {
                if (m->coll_calls[k]) gl += snprintf(got + gl, sizeof got - (size_t)gl, "%s%llu %s", gl ? ", " : "", (unsigned long long)m->coll_calls[k], pl_op_kind_name((pl_op_kind)k));
                if (md->colls[k]) wl += snprintf(want + wl, sizeof want - (size_t)wl, "%s%d %s", wl ? ", " : "", md->colls[k], pl_op_kind_name((pl_op_kind)k));
            }
            drv_fail(c, "collectives: %s (S = %.0f bytes), expected %s (S = %.0f bytes)", got[0] ? got : "none",
                     (double)m->coll_bytes, want[0] ? want : "none", md->coll_bytes);
        }
    }
    if (drv_max(md->gemm_flops) > 0) {
        double err = drv_max(fabs(m->gemm_flops - md->gemm_flops)), most = drv_max(m->gemm_flops);
        drv_num(c, "gemm_flops_per_rank", most);
        if (err > 0.5) drv_fail(c, "%.0f GEMM flops on the busiest rank, expected %.0f", most, md->gemm_flops);
    }
    if (drv_max(md->exact_p2p) > 0) {
        double bad = drv_max((double)(fabs((double)m->bytes_sent - md->p2p_bytes) > 0.5 || fabs((double)m->msgs_sent - md->p2p_msgs) > 0.5));
        if (bad > 0) drv_fail(c, "point-to-point: sent %.0f bytes in %.0f messages on this rank, expected %.0f in %.0f",
                              (double)m->bytes_sent, (double)m->msgs_sent, md->p2p_bytes, md->p2p_msgs);
    }
    if (drv_max(md->bytes_optimal) > 0) {
        bool avg = md->bytes_agg == DRV_BYTES_AVG;
        double opt = avg ? drv_sum(md->bytes_optimal) / n : drv_max(md->bytes_optimal);
        double meas = avg ? drv_sum((double)m->bytes_sent) / n : drv_max((double)m->bytes_sent);
        drv_num(c, "bytes_per_rank", meas);
        drv_num(c, "bytes_optimal", opt);
        drv_num(c, "bytes_ratio", meas > 0 ? opt / meas : 0);
        /* Data that must cross ranks cannot have been computed without sending it. */
        if (meas <= 0 && !failed)
            drv_fail(c, "no bytes were sent, but %.0f per rank must move: the result cannot be right", opt);
        else if (meas > 0 && opt / meas > 1.0001 && !failed)
            drv_fail(c, "%.0f bytes per rank sent, fewer than any correct algorithm needs (%.0f)", meas, opt);
    }
    if (drv_max(md->msgs_optimal) > 0) {
        double opt = drv_max(md->msgs_optimal);
        drv_num(c, "msgs_per_rank", msgs);
        drv_num(c, "msgs_optimal", opt);
        drv_num(c, "msgs_ratio", msgs > 0 ? opt / msgs : 0);
        if (msgs <= 0 && !failed) drv_fail(c, "no messages were sent, but %.0f per rank are needed", opt);
    }
}

/* ================================================================================== */
/* Output                                                                             */
/* ================================================================================== */

static void vprint(bool always, const char *fmt, va_list ap) {
    if (pl_rank() != 0 || (g_opt.quiet && !always)) return;
    vprintf(fmt, ap);
    fflush(stdout);
}
void drv_print(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprint(false, fmt, ap);
    va_end(ap);
}
void drv_say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprint(true, fmt, ap);
    va_end(ap);
}

static const char *verdict_name(drv_verdict v) {
    static const char *names[] = {"pass", "wrong", "error", "forbidden"};
    return names[v];
}

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
    const char *msg = c->verdict != DRV_PASS ? c->msg : c->note;
    if (msg[0]) cJSON_AddStringToObject(o, "message", msg);
    chan_send(o);
    if (c->verdict != DRV_PASS) /* failures even when quiet */
        drv_say("%-9s %s%s%s\n", verdict_name(c->verdict), c->name, msg[0] ? "  " : "", msg);
    else if (!g_lab->after_case)
        drv_print("%-9s %s%s%s\n", verdict_name(c->verdict), c->name, msg[0] ? "  " : "", msg);
}

/* ================================================================================== */
/* The runner                                                                         */
/* ================================================================================== */

static void run_case(const drv_instance *in) {
    const drv_test *t = in->test;
    drv_case c = {.inst = in, .name = in->name, .arg = in->arg, .rank = pl_rank(), .world = pl_world()};
    c.fields = cJSON_CreateObject();
    PL_CHECK(c.fields != NULL, "out of host memory");
    chan_event("begin", c.name);
    if (t->setup) t->setup(&c);
    /* run() only when setup went well on every rank: a rank that skipped it alone would
     * leave the others waiting in its collectives. */
    if (t->run && drv_max(drv_failed(&c)) == 0) {
        c.ran = true;
        pl_wire w0, w1;
        pl_wire_get(&w0);
        drv_measure(run_case_fn, &c, &c.m);
        pl_wire_get(&w1);
        c.wire = (pl_wire){w1.p2p_bytes_sent - w0.p2p_bytes_sent, w1.p2p_msgs_sent - w0.p2p_msgs_sent,
                           w1.p2p_bytes_recv - w0.p2p_bytes_recv, w1.p2p_msgs_recv - w0.p2p_msgs_recv,
                           w1.coll_calls - w0.coll_calls, w1.coll_bytes - w0.coll_bytes};
    }
    if (t->check) t->check(&c);
    if (t->model) {
        drv_model md;
        memset(&md, 0, sizeof md);
        t->model(&c, &md);
        apply_model(&c, &md);
    }
    gather_verdict(&c);
    if (t->perf && c.verdict == DRV_PASS) t->perf(&c);
    emit(&c);
    if (g_lab->after_case) g_lab->after_case(&c);
    if (t->teardown) t->teardown(&c);
    free(c.state);
    cJSON_Delete(c.fields);
}

/* Every lab also has the mode "cases": its cases run by hand, with the driver's own report
 * (tables, grids, every case's line) and no score: what `mpirun ... DRIVER` prints. */
static bool builtin_cases_mode(void) { return !strcmp(g_run_mode, "cases"); }

static int run_mode(void) {
    for (const drv_mode *m = g_lab->modes; m && m->name; m++)
        if (!strcmp(m->name, g_run_mode)) return m->fn();
    pl_usage_error("--run: this lab has no mode '%s' (try --modes)", g_run_mode);
}

static int finish(int rc) {
    if (g_chan >= 0) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "event", "end");
        cJSON_AddNumberToObject(o, "cases", g_cases_run);
        cJSON_AddNumberToObject(o, "failed", g_cases_failed);
        chan_send(o);
        cJSON_Delete(o);
        close(g_chan);
        g_chan = -1;
    }
    pl_finalize();
    return rc;
}

int drv_main(const drv_lab *lab, int argc, char **argv) {
    g_lab = lab;
    if (lab->defaults) g_opt = *lab->defaults;
    char hex[80] = "";
    take_env("PL_RESULTS_SOCK", g_sock_path, sizeof g_sock_path);
    take_env("PL_RESULTS_KEY", hex, sizeof hex);
    bool bad_key = g_sock_path[0] && siphash_key_from_hex(hex, g_key) != 0;
    memset(hex, 0, sizeof hex);
    pl_init(&argc, &argv);
    if (bad_key) pl_fatal(__FILE__, __LINE__, "PL_RESULTS_KEY", "not the 32 hex digits the grading engine gives");
    parse_flags(argc, argv);
    if (g_list_modes) {
        for (const drv_mode *m = lab->modes; m && m->name; m++)
            drv_say("%s\t%s\t%s\t%s\n", m->name, m->np ? m->np : "1", m->post ? m->post : "-", m->help);
        drv_say("cases\t2\t-\tthe graded cases run by hand: the driver's own report (tables, grids, a line per case), no score\n");
        return finish(0);
    }
    if (lab->init) lab->init();
    if (g_run_mode && !builtin_cases_mode()) return finish(run_mode());
    drv_plan plan = make_plan();
    if (g_list) {
        for (size_t i = 0; i < plan.n; i++) drv_say("%s %s\n", plan.v[i].name, plan.v[i].group);
        free(plan.v);
        return finish(0);
    }
    chan_open(&plan);
    for (size_t i = 0; i < plan.n; i++) run_case(&plan.v[i]);
    free(plan.v);
    if (lab->finish) lab->finish();
    drv_say("# %s: %d case(s), %d failed (%d rank(s), device %s, comm %s)\n", lab->name, g_cases_run,
            g_cases_failed, pl_world(), pl_device_name(pl_info()->device), pl_comm_name(pl_info()->comm));
    return finish(g_cases_failed ? PL_EXIT_CHECK_FAILED : PL_EXIT_OK);
}
