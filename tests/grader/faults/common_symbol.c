// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
/* A common symbol (__attribute__((common))) is neither defined nor undefined: the linker
 * merges it with any global of the same name, so a tentative "int pl_cb;" would become the
 * harness's own comm-backend pointer, reachable and writable without a single call. The
 * object checker refuses common symbols. */
#include "../../../solutions/01-collectives/collectives.c"

__attribute__((common)) void *pl_cb;

void lab_touch_backend(void) { pl_cb = 0; }
