// expect: wrong layer.one.*
/* Broken on purpose: every wait of the one-sided dispatcher is for one signal fewer than
 * the n that come (n - 1 peers "plus myself, who surely is done"): a rank goes on before the
 * last sender's rows are there. */
#include "moe.h"
#define pl_sym_wait_until(sig, cmp, value, s) pl_sym_wait_until(sig, cmp, (value) - 1, s)
#include "../../../solutions/09-moe/moe_layer.c"
#undef pl_sym_wait_until
#include "../../../solutions/09-moe/moe_router.c"
#include "../../../solutions/09-moe/moe_allreduce.c"
