/* driver.c - the shared part of every lab driver: flags, sizes, the case protocol with
 * the grading engine, result records and the exit code. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

static FILE *g_json;        /* rank 0 only */
static const char *g_filter, *g_start_after;
static bool g_skipping;     /* still before --start-after */
static int g_run, g_failed;

bool drv_parse_bytes(const char *s, size_t *out) {
    if (!s || !*s) return false;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-') return false;
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

static void usage(const char *lab, const char *text, const drv_flag *extra) {
    if (pl_rank() != 0) return;
    printf("usage: mpirun -np N %s [flags]\n%s\n", lab, text ? text : "");
    printf("  -b BYTES  -e BYTES  -f FACTOR   size sweep (K/M/G suffixes), like nccl-tests\n"
           "  -w N  -n N                      warm-up and timed iterations (0: by size)\n"
           "  --filter GLOB  --start-after CASE  --list  --json FILE  -q\n"
           "  --device cpu|cuda  --comm mpi|nccl  --seed N  --watchdog SEC  --trace FILE\n");
    for (const drv_flag *f = extra; f && f->name; f++) printf("  %-30s  %s\n", f->name, f->help);
}

static const char *need_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) pl_usage_error("%s needs a value", argv[*i]);
    return argv[++*i];
}

static int parse_int(const char *flag, const char *s, int lo, int hi) {
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || !end || *end || end == s || v < lo || v > hi)
        pl_usage_error("%s: '%s' is not an integer in [%d, %d]", flag, s, lo, hi);
    return (int)v;
}

void drv_init(int *argc, char ***argv, const char *lab, const char *usage_text, drv_opts *o,
              const drv_flag *extra) {
    pl_init(argc, argv);
    char **av = *argv;
    for (int i = 1; i < *argc; i++) {
        const char *a = av[i];
        size_t bytes;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(lab, usage_text, extra);
            pl_finalize();
            exit(0);
        } else if (!strcmp(a, "--json")) {
            o->json_path = need_value(*argc, av, &i);
        } else if (!strcmp(a, "--filter")) {
            o->filter = need_value(*argc, av, &i);
        } else if (!strcmp(a, "--start-after")) {
            o->start_after = need_value(*argc, av, &i);
        } else if (!strcmp(a, "--list")) {
            o->list = true;
        } else if (!strcmp(a, "-q")) {
            o->quiet = true;
        } else if (!strcmp(a, "-b") || !strcmp(a, "-e")) {
            const char *v = need_value(*argc, av, &i);
            if (!drv_parse_bytes(v, &bytes)) pl_usage_error("%s: bad size '%s' (e.g. 1024, 64K, 64M)", a, v);
            if (a[1] == 'b') o->min_bytes = bytes;
            else o->max_bytes = bytes;
        } else if (!strcmp(a, "-f")) {
            const char *v = need_value(*argc, av, &i);
            char *end = NULL;
            double f = strtod(v, &end);
            if (!end || *end || !(f > 1.0) || f > 1024) pl_usage_error("-f: factor '%s' must be a number in (1, 1024]", v);
            o->factor = f;
        } else if (!strcmp(a, "-w")) {
            o->warmup = parse_int(a, need_value(*argc, av, &i), 0, 1000);
        } else if (!strcmp(a, "-n")) {
            o->iters = parse_int(a, need_value(*argc, av, &i), 0, 100000);
        } else {
            const drv_flag *f = extra;
            while (f && f->name && strcmp(f->name, a) != 0) f++;
            if (!f || !f->name) pl_usage_error("unknown flag '%s' (try --help)", a);
            const char *v = need_value(*argc, av, &i);
            if (f->int_value) *f->int_value = parse_int(a, v, -1000000000, 1000000000);
            else *f->str_value = v;
        }
    }
    if (o->min_bytes > o->max_bytes)
        pl_usage_error("-b %zu is larger than -e %zu", o->min_bytes, o->max_bytes);
    if (o->factor <= 1.0) o->factor = 2.0;
    g_filter = o->filter;
    g_start_after = o->start_after;
    g_skipping = g_start_after != NULL;
    if (o->json_path && pl_rank() == 0) {
        g_json = fopen(o->json_path, "a");
        if (!g_json) pl_fatal(__FILE__, __LINE__, "fopen(--json)", strerror(errno));
    }
}

size_t drv_sizes(const drv_opts *o, size_t *out, size_t cap) {
    size_t n = 0;
    /* 0 and 1 element first: the edge cases every collective must survive. */
    size_t edge[2] = {0, 1};
    for (int i = 0; i < 2; i++)
        if (edge[i] * 4 >= o->min_bytes && edge[i] * 4 <= o->max_bytes && n < cap) out[n++] = edge[i];
    double b = o->min_bytes < 4 ? 4 : (double)o->min_bytes;
    while (b <= (double)o->max_bytes && n < cap) {
        size_t count = (size_t)b / 4;
        if (n == 0 || count > out[n - 1]) out[n++] = count;
        b *= o->factor;
    }
    size_t last = o->max_bytes / 4;
    if (n < cap && last > (n ? out[n - 1] : 0) && o->max_bytes >= 4 && out[n - 1] != last) out[n++] = last;
    return n;
}

bool drv_case_begin(const char *name) {
    if (g_skipping) {
        if (!strcmp(name, g_start_after)) g_skipping = false;
        return false;
    }
    if (g_filter && fnmatch(g_filter, name, 0) != 0) return false;
    if (g_json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "event", "begin");
        cJSON_AddStringToObject(o, "case", name);
        char *s = cJSON_PrintUnformatted(o);
        fprintf(g_json, "%s\n", s);
        fflush(g_json);
        free(s);
        cJSON_Delete(o);
    }
    return true;
}

struct drv_result {
    cJSON *obj;
};

drv_result *drv_result_new(const char *name, const char *group) {
    drv_result *r = calloc(1, sizeof *r);
    PL_CHECK(r != NULL, "out of host memory");
    r->obj = cJSON_CreateObject();
    cJSON_AddStringToObject(r->obj, "event", "result");
    cJSON_AddStringToObject(r->obj, "case", name);
    cJSON_AddStringToObject(r->obj, "group", group);
    cJSON_AddNumberToObject(r->obj, "np", pl_world());
    return r;
}

void drv_result_num(drv_result *r, const char *key, double value) {
    cJSON_DeleteItemFromObject(r->obj, key);
    /* JSON has no NaN or infinity: record them as null rather than invalid JSON. */
    if (value != value || value > 1e300 || value < -1e300) cJSON_AddNullToObject(r->obj, key);
    else cJSON_AddNumberToObject(r->obj, key, value);
}

void drv_result_str(drv_result *r, const char *key, const char *value) {
    cJSON_DeleteItemFromObject(r->obj, key);
    cJSON_AddStringToObject(r->obj, key, value ? value : "");
}

void drv_result_emit(drv_result *r, const char *verdict, const char *message) {
    g_run++;
    if (strcmp(verdict, "pass") != 0) g_failed++;
    drv_result_str(r, "verdict", verdict);
    if (message) drv_result_str(r, "message", message);
    if (g_json) {
        char *s = cJSON_PrintUnformatted(r->obj);
        fprintf(g_json, "%s\n", s);
        fflush(g_json);
        free(s);
    }
    cJSON_Delete(r->obj);
    free(r);
}

void drv_print(const char *fmt, ...) {
    if (pl_rank() != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

int drv_cases_run(void) { return g_run; }
int drv_cases_failed(void) { return g_failed; }

int drv_finish(void) {
    if (g_json) {
        fprintf(g_json, "{\"event\":\"end\"}\n");
        fclose(g_json);
        g_json = NULL;
    }
    int failed = g_failed;
    pl_finalize();
    return failed ? PL_EXIT_CHECK_FAILED : PL_EXIT_OK;
}

#include <mpi.h>

static double reduce_world(double v, MPI_Op op) {
    double out = v;
    if (MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, op, MPI_COMM_WORLD) != MPI_SUCCESS)
        pl_fatal(__FILE__, __LINE__, "MPI_Allreduce", "failed");
    return out;
}
double drv_sum(double v) { return reduce_world(v, MPI_SUM); }
double drv_max(double v) { return reduce_world(v, MPI_MAX); }
double drv_min(double v) { return reduce_world(v, MPI_MIN); }
