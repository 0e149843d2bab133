// expect: wrong layer.one.*
/* Broken on purpose: the one-sided dispatcher puts its rows with a non-blocking put and
 * signals at once, with no fence or quiet in between: the signal may arrive before the
 * rows, and the receiver computes on what was in its buffer before. (Every put_signal of
 * the solution becomes put_nbi + signal.) */
#include "moe.h"
#define pl_sym_put_signal(dst, src, bytes, sig, value, op, pe, s) \
    (pl_sym_put_nbi(dst, src, bytes, pe, s), pl_sym_signal(sig, value, op, pe, s))
#include "../../../solutions/09-moe/moe_layer.c"
#undef pl_sym_put_signal
#include "../../../solutions/09-moe/moe_router.c"
#include "../../../solutions/09-moe/moe_allreduce.c"
