// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
/* collectives.h says in a comment that a rank "reads" its chunk; the word "read" is no
 * permission to call read(2). The allow-list takes the names of the lab headers' code, not
 * of their comments. */
#include <unistd.h>

#include "../../../solutions/01-collectives/collectives.c"

long lab_peek(void *buf) { return read(0, buf, 0); }
