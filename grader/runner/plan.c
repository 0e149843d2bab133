/* plan.c - what the referee and the player runners share: the common flags, the plan of
 * cases, the size sweep, the output lines, the slot table lookup, the wire's framing. */
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner.h"

const drv_lab *g_lab;
drv_options g_opt = {.max_bytes = 64u << 20, .factor = 2, .warmup = -1, .iters = -1};
runner_flags g_flags;

const drv_options *drv_opts(void) { return &g_opt; }

void *drv_state(drv_case *c, size_t size) {
    free(c->state);
    c->state = calloc(1, size ? size : 1);
    PL_CHECK(c->state != NULL, "out of host memory");
    return c->state;
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

void print_usage(void) {
    if (pl_rank() != 0) return;
    printf("usage: mpirun -np N <driver> [flags]\n%s (%s)\n", g_lab->title, g_lab->name);
    printf("  --list [--world N]  --filter GLOB  --start-after CASE  --skip-group GROUP\n"
           "  -q                            quiet: only failures and the closing summary line\n"
           "  -b BYTES -e BYTES -f FACTOR   size sweep (K/M/G suffixes), like nccl-tests\n"
           "  -w N -n N                     warm-up and timed iterations\n"
           "  --calls N                     at most N calls per timed run (0: enough for ~1 ms; 1: one)\n"
           "  --run MODE  --modes           another mode than grading (make lab-N RUN=MODE)\n"
           "  --device cpu|cuda  --comm mpi|nccl  --seed N  --watchdog SEC  --trace FILE\n");
    for (const drv_flag *f = g_lab->flags; f && f->name; f++) printf("  %-28s  %s\n", f->name, f->help);
    for (const drv_mode *m = g_lab->modes; m && m->name; m++) printf("  --run %-22s  %s\n", m->name, m->help);
}

void print_modes(void) {
    for (const drv_mode *m = g_lab->modes; m && m->name; m++)
        drv_say("%s\t%s\t%s\t%s\n", m->name, m->np ? m->np : "1", m->post ? m->post : "-", m->help);
    drv_say("cases\t2\t-\tthe graded cases run by hand: the driver's own report (tables, grids, a line per case), no score\n");
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

void parse_flags(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        size_t bytes;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            g_flags.help = true;
        } else if (!strcmp(a, "--list")) {
            g_flags.list = g_opt.quiet = true; /* the list alone on stdout */
        } else if (!strcmp(a, "--world")) {
            g_flags.list_world = (int)parse_number(a, need_value(argc, argv, &i), 1, 1024, true);
        } else if (!strcmp(a, "--modes")) {
            g_flags.list_modes = true;
        } else if (!strcmp(a, "-q")) {
            g_opt.quiet = true;
        } else if (!strcmp(a, "--filter")) {
            g_opt.filter = need_value(argc, argv, &i);
        } else if (!strcmp(a, "--start-after")) {
            g_flags.start_after = need_value(argc, argv, &i);
        } else if (!strcmp(a, "--skip-group")) {
            if (g_flags.nskip == (int)(sizeof g_flags.skip_groups / sizeof g_flags.skip_groups[0]))
                pl_usage_error("--skip-group given more than 32 times");
            g_flags.skip_groups[g_flags.nskip++] = need_value(argc, argv, &i);
        } else if (!strcmp(a, "--run")) {
            g_flags.run_mode = need_value(argc, argv, &i);
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
        } else if (!strcmp(a, "--calls")) {
            g_opt.calls = (int)parse_number(a, need_value(argc, argv, &i), 0, 1024, true);
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

static bool name_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n >= DRV_NAME_MAX) return false;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:+=,@-") == n;
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

int test_index(const drv_test *t) { return (int)(t - g_lab->tests); }
int test_count(void) {
    int n = 0;
    while (g_lab->tests[n].name) n++;
    return n;
}

/* --filter: one glob, or several separated by spaces or commas (T='broadcast.* reduce.*');
 * a case runs when any of them matches its name. */
static bool filter_matches(const char *filter, const char *name) {
    char glob[256];
    for (const char *p = filter; *p;) {
        size_t n = strcspn(p, " ,");
        if (n > 0 && n < sizeof glob) {
            memcpy(glob, p, n);
            glob[n] = '\0';
            if (fnmatch(glob, name, 0) == 0) return true;
        }
        p += n;
        p += strspn(p, " ,");
    }
    return false;
}

static bool selected(const drv_instance *in, bool *skipping) {
    if (*skipping) {
        if (!strcmp(in->name, g_flags.start_after)) *skipping = false;
        return false;
    }
    for (int i = 0; i < g_flags.nskip; i++)
        if (!strcmp(in->group, g_flags.skip_groups[i])) return false;
    return !g_opt.filter || filter_matches(g_opt.filter, in->name);
}

drv_plan make_plan(void) {
    drv_plan all = {0}, run = {0};
    for (const drv_test *t = g_lab->tests; t->name; t++) {
        if (t->plan) t->plan(t, &all);
        else drv_plan_add(&all, t, "%s", t->name);
    }
    bool skipping = g_flags.start_after != NULL;
    for (size_t i = 0; i < all.n; i++) {
        /* A name outside the protocol's alphabet is the driver's bug, not the student's. */
        if (!name_ok(all.v[i].name) || !name_ok(all.v[i].group))
            pl_fatal(__FILE__, __LINE__, all.v[i].name, "case or group name outside [A-Za-z0-9._:+=,@-]");
        for (size_t k = 0; k < i && k < 4096; k++)
            if (!strcmp(all.v[k].name, all.v[i].name))
                pl_fatal(__FILE__, __LINE__, all.v[i].name, "two cases share this name");
        if (selected(&all.v[i], &skipping)) *drv_plan_add(&run, all.v[i].test, "%s", "") = all.v[i];
    }
    if (g_flags.start_after && skipping) pl_usage_error("--start-after '%s': no such case", g_flags.start_after);
    free(all.v);
    return run;
}

/* ================================================================================== */
/* Sizes, iterations, output                                                          */
/* ================================================================================== */

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

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

pl_timing timing_of(double *us, int n) {
    pl_timing r = {.iters = n};
    if (n <= 0) return r;
    qsort(us, (size_t)n, sizeof *us, cmp_double);
    r.min_us = us[0], r.max_us = us[n - 1];
    r.median_us = n % 2 ? us[n / 2] : 0.5 * (us[n / 2 - 1] + us[n / 2]);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += us[i];
    r.mean_us = sum / n;
    return r;
}

/* ================================================================================== */
/* Slots and the wire                                                                 */
/* ================================================================================== */

const wire_slot *slot_find(const slot_table *t, const char *name, int *index) {
    for (int i = 0; t && i < t->n; i++)
        if (!strncmp(t->v[i].name, name, WIRE_SLOT_NAME)) {
            if (index) *index = i;
            return &t->v[i];
        }
    return NULL;
}

size_t drv_slot_bytes(const drv_case *c, const char *name) {
    const wire_slot *s = slot_find(c->slots, name, NULL);
    return s ? (size_t)s->bytes : 0;
}

int wire_read_full(int fd, void *buf, size_t n) {
    char *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        p += r;
        n -= (size_t)r;
    }
    return 1;
}

int wire_write_full(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return 0;
        p += w;
        n -= (size_t)w;
    }
    return 1;
}

int wire_send(int fd, uint32_t cmd, uint32_t arg, const void *payload, uint64_t len) {
    wire_msg m = {.cmd = cmd, .arg = arg, .len = len};
    return wire_write_full(fd, &m, sizeof m) && (!len || wire_write_full(fd, payload, (size_t)len));
}

int wire_recv(int fd, wire_msg *m, void **payload, uint64_t max) {
    *payload = NULL;
    if (!wire_read_full(fd, m, sizeof *m)) return 0;
    if (m->len > max) return -1;
    if (!m->len) return 1;
    *payload = malloc((size_t)m->len);
    if (!*payload) return 0;
    if (!wire_read_full(fd, *payload, (size_t)m->len)) {
        free(*payload);
        *payload = NULL;
        return 0;
    }
    return 1;
}
