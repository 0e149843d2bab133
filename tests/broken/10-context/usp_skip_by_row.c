// expect: wrong usp.u1r4.zigzag.*
// np: 4
/* Broken on purpose: the 2-D ring skips the blocks of later rows (owner > g) as if every
 * row held a contiguous slice of the sequence. Under the zig-zag layout every row has early
 * and late tokens, so the skipped blocks hold keys its queries must see. */
#include "context.h"
#define cp_usp_forward cp_usp_forward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_usp_forward
#define USP_NEEDED (owner <= g)
#include "usp_template.h"
