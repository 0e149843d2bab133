// expect: error usp.u2r2.contig.causal.mha.*
// np: 4
/* Broken on purpose: the grid's communicators are split the other way round, Ulysses over
 * the ranks with the same column (j, u + j, ...) and the ring over consecutive ranks, while
 * the row's tokens and the ring's peers are still those of the right grid: the ring's
 * neighbours, computed for columns of n / u ranks, fall on this rank itself in a row of u,
 * and the harness stops the run ("send/recv to self"). */
#include "context.h"
#define cp_usp_forward cp_usp_forward_solution
#include "../../../solutions/10-context/context.c"
#undef cp_usp_forward
#define USP_ROW_SPLIT pl_comm_split(c->comm, j, g)
#define USP_COL_SPLIT pl_comm_split(c->comm, g, j)
#include "usp_template.h"
