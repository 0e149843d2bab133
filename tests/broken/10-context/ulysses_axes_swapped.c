// expect: wrong ulysses.*
/* Broken on purpose: the all-to-all's send side reads q, k and v as [heads groups, tokens]
 * instead of [tokens, heads groups]: rank p is sent a slice of the sequence with every
 * head, where it should get every local token with its own heads (the sequence and head
 * axes swapped). */
#include "context.h"
#define cp_ulysses_forward cp_ulysses_forward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_ulysses_forward
#define ULY_PACK(t, p, rows, n) ((p) * (rows) + (t))
#include "ulysses_template.h"
