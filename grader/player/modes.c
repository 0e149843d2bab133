/* modes.c (player) - what the labs' players share outside the cases: cross-rank values
 * (host reductions that no counter sees) and the text a training mode learns from. */
#include <stdio.h>
#include <stdlib.h>

#include "runner.h"

static double host_op(double v, pl_host_op op) {
    pl_host_allreduce(&v, 1, op, NULL);
    return v;
}
double drv_sum(double v) { return host_op(v, PL_HOST_SUM); }
double drv_max(double v) { return host_op(v, PL_HOST_MAX); }
double drv_min(double v) { return host_op(v, PL_HOST_MIN); }

enum { TEXT_MAX = 1 << 22, TEXT_MIN = 1000 };

unsigned char *drv_read_text(const char *path, const char *handout, size_t *n) {
    const char *paths[2] = {path ? path : "/usr/share/common-licenses/GPL-3", path ? NULL : handout};
    for (int i = 0; i < 2 && paths[i]; i++) {
        FILE *f = fopen(paths[i], "rb");
        if (!f) continue;
        unsigned char *buf = malloc(TEXT_MAX);
        PL_CHECK(buf != NULL, "out of host memory");
        *n = fread(buf, 1, TEXT_MAX, f);
        fclose(f);
        if (*n >= TEXT_MIN) {
            drv_say("# train: %zu bytes of %s\n", *n, paths[i]);
            return buf;
        }
        free(buf);
    }
    pl_usage_error("--text %s: cannot read it, or it holds under %d bytes", paths[0], TEXT_MIN);
}
