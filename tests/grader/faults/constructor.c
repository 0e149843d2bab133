// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
/* The results channel is opened before any student code runs - unless student code runs
 * before main(). A constructor would; the object checker refuses it. */
#include <stdlib.h>

#include "../../../solutions/01-collectives/collectives.c"

__attribute__((constructor)) static void before_main(void) {
    /* here it would read PL_RESULTS_SOCK and PL_RESULTS_KEY before the driver scrubs them */
    (void)getenv("PL_RESULTS_KEY");
}
