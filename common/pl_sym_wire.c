/* pl_sym_wire.c - what the symmetric-memory backends were handed, counted: puts and their
 * bytes, signals, waits, barriers (pl_sym_backend.h). Below pl_sym.c and its backends: each
 * backend counts what it does here, and pl_sym.c's callers read the totals. */
#include <stdint.h>

#include "pl_sym_backend.h" // defines: pl_sym_wire, the API implemented here

static pl_sym_wire g_wire;

void pl_sym_wire_get(pl_sym_wire *w) { *w = g_wire; }
void pl_sym_wire_put(uint64_t bytes) { g_wire.puts++, g_wire.put_bytes += bytes; }
void pl_sym_wire_signal(void) { g_wire.signals++; }
void pl_sym_wire_wait(void) { g_wire.waits++; }
void pl_sym_wire_barrier(void) { g_wire.barriers++; }
