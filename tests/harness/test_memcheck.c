/* test_memcheck.c - the grader's memory checks (pl_memcheck.h): red zones in checked mode
 * catch writes past the end and before the start of an allocation, through harness calls
 * and kernels, on eager and deferred streams, at pl_free and on demand, reported once
 * with the offset and the call site; pl_mem_in_use counts exactly what was asked for; a
 * leak report names what a piece of code left behind.
 *
 *   mpirun -np 2 build/cpu/tests/test_memcheck
 */
#include <stdlib.h>
#include <string.h>

#include "kern_gelu.h"   // defines: kern_gelu_forward (a kernel that overruns, given a wrong n)
#include "pl_defer.h"    // defines: pl_streams_set_deferred
#include "pl_memcheck.h" // defines: pl_mem_set_checked, pl_mem_check_guards, pl_mem_mark, ...
#include "tap.h"

static char report[4096];

/* The report on one line, for a check's name. */
static const char *flat(void) {
    for (char *c = report; *c; c++)
        if (*c == '\n') *c = '|';
    return report;
}

/* The report holds `want` with this file's line in place of %d. */
static int says(const char *want, int line) {
    char w[512];
    snprintf(w, sizeof w, want, line);
    return strstr(report, w) != NULL;
}

static void overruns(bool deferred) {
    const char *mode = deferred ? "deferred" : "eager";
    char name[1024];
    pl_streams_set_deferred(deferred);

    int line = __LINE__ + 1;
    float *a = pl_malloc(4096);
    pl_fill(a, 1.0f, 1024, NULL);
    size_t n = pl_mem_check_guards(report, sizeof report);
    snprintf(name, sizeof name, "%s: writes inside an allocation are no finding (%zu)", mode, n);
    tap_check(n == 0, name);

    pl_memset((char *)a + 4096, 0, 4, NULL); /* one float past the end */
    n = pl_mem_check_guards(report, sizeof report);
    snprintf(name, sizeof name, "%s: one float past the end is named with its size and site: \"%.900s\"", mode, flat());
    tap_check(n == 1 && says("wrote 4 bytes past the end of an allocation of 4096 bytes made at "
                             "tests/harness/test_memcheck.c:%d", line), name);
    n = pl_mem_check_guards(report, sizeof report);
    snprintf(name, sizeof name, "%s: a finding is reported once (%zu the second time)", mode, n);
    tap_check(n == 0, name);

    pl_copy((char *)a - 8, a, 8, NULL); /* two floats before the start */
    n = pl_mem_check_guards(report, sizeof report);
    snprintf(name, sizeof name, "%s: a write before the start: \"%.900s\"", mode, flat());
    tap_check(n == 1 && says("wrote 8 bytes before the start of an allocation of 4096 bytes made at "
                             "tests/harness/test_memcheck.c:%d", line), name);

    line = __LINE__ + 1;
    float *x = pl_malloc_floats(100), *y = pl_malloc_floats(100);
    pl_fill(x, 1.0f, 101, NULL);
    kern_gelu_forward(y, x, 101, NULL); /* a kernel given one element too many */
    pl_free(y);                           /* found when freed, reported at the next check */
    n = pl_mem_check_guards(report, sizeof report);
    snprintf(name, sizeof name, "%s: overruns by a fill and by a kernel, one found at pl_free: \"%.900s\"", mode, flat());
    tap_check(n == 2 && says("wrote 4 bytes past the end of an allocation of 400 bytes made at "
                             "tests/harness/test_memcheck.c:%d", line) && strchr(report, '|'), name);
    pl_free(x);
    pl_free(a);
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    tap_check(!pl_mem_checked(), "checked mode is off unless asked for");
    pl_mem_set_checked(true);
    overruns(false);
    overruns(true);
    pl_streams_set_deferred(false);

    /* exact accounting: what was asked for, red zones excluded */
    size_t before = pl_mem_in_use();
    void *p1 = pl_malloc(1), *p2 = pl_malloc(4097), *p3 = pl_malloc(0);
    pl_tensor t = pl_tensor_alloc(3, 5);
    tap_check(pl_mem_in_use() - before == 1 + 4097 + 0 + 60, "pl_mem_in_use counts exactly the bytes asked for");
    pl_free(p1);
    pl_free(p2);
    pl_free(p3);
    pl_tensor_free(&t);
    tap_check(pl_mem_in_use() == before, "and gives them back at pl_free");

    /* leaks since a mark, with their sites, oldest first */
    uint64_t mark = pl_mem_mark();
    int l1 = __LINE__ + 1;
    float *k1 = pl_malloc(8192);
    float *gone = pl_malloc_floats(10);
    int l2 = __LINE__ + 1;
    pl_tensor k2 = pl_tensor_alloc(32, 64);
    pl_free(gone);
    size_t bytes = 0, live = pl_mem_live_since(mark, NULL, 0, &bytes);
    size_t leaks = pl_mem_leak_report(mark, report, sizeof report);
    char want[512], name[1024];
    snprintf(want, sizeof want, "leaked 2 allocations (16384 bytes): tests/harness/test_memcheck.c:%d, "
             "tests/harness/test_memcheck.c:%d", l1, l2);
    snprintf(name, sizeof name, "leak report: \"%.900s\"", report);
    tap_check(live == 2 && bytes == 16384 && leaks == 2 && !strcmp(report, want), name);
    pl_free(k1);
    pl_tensor_free(&k2);
    tap_check(pl_mem_leak_report(mark, report, sizeof report) == 0, "nothing leaked once freed");

    /* one entry per site, with how many times it leaked (a free that forgets a per-unit buffer) */
    mark = pl_mem_mark();
    void *units[3];
    int l3 = __LINE__ + 1;
    for (int i = 0; i < 3; i++) units[i] = pl_malloc(256);
    int l4 = __LINE__ + 1;
    void *other = pl_malloc(512);
    pl_mem_leak_report(mark, report, sizeof report);
    snprintf(want, sizeof want, "leaked 4 allocations (1280 bytes): tests/harness/test_memcheck.c:%d (3 times), "
             "tests/harness/test_memcheck.c:%d", l3, l4);
    snprintf(name, sizeof name, "leak report by site: \"%.900s\"", report);
    tap_check(!strcmp(report, want), name);
    for (int i = 0; i < 3; i++) pl_free(units[i]);
    pl_free(other);

    /* called through a pointer, not the macro: the site is the caller's return address */
    void *(*alloc_fn)(size_t) = pl_malloc;
    mark = pl_mem_mark();
    void *q = alloc_fn(64);
    pl_mem_leak_report(mark, report, sizeof report);
    snprintf(name, sizeof name, "a call through a pointer is placed by its return address: \"%.900s\"", report);
    tap_check(strstr(report, "+0x") && !strstr(report, "pl_memguard"), name);
    pl_free(q);

    pl_mem_set_checked(false);
    void *plain = pl_malloc(64);
    pl_free(plain);
    tap_check(pl_mem_check_guards(report, sizeof report) == 0, "unchecked allocations have no zones to find");
    return tap_finish();
}
