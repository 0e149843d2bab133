// lab: 01-collectives
// expect: forbidden (build)
// speed: quick
// sandbox: both
/* Code that runs before main without .init_array: a function in the legacy .init section
 * (the linker splices it into _init), an entry in .preinit_array, and a GNU indirect
 * function whose resolver the loader calls. Each would read the run's secrets before the
 * runner starts - had they any place in the player. The build's allow-list of sections
 * (code, data, bss, debug information) and its refusal of indirect functions stop all
 * three before anything runs. */
#include <stddef.h>

#include "../../../solutions/01-collectives/collectives.c"

__attribute__((section(".init"), used)) static void early(void) {}
static void before_main(void) {}
__attribute__((section(".preinit_array"), used)) static void (*preinit)(void) = before_main;

static int impl(void) { return 0; }
static int (*resolve(void))(void) { return impl; }
int lab_helper_ifunc(void) __attribute__((ifunc("resolve")));
