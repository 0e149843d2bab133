/* transport.h - the player's comm backend when its referee moves the messages
 * (transport.c). */
#ifndef PL_PLAYER_TRANSPORT_H
#define PL_PLAYER_TRANSPORT_H

#include "pl_backend.h" // defines: pl_comm_backend

extern const pl_comm_backend pl_comm_referee;
/* The arena the requests' operands live in (mapped before pl_init). */
void transport_attach(unsigned char *arena, uint64_t bytes);
/* A measured phase begins or ends (`mark`: drv_measure_slot's slot, or WIRE_SLOTS_MAX plus a
 * drv_mark phase): the referee counts what it moves in between. */
void transport_mark(int mark, bool end);
/* Name communicator c (not the world) for the referee's counts by communicator. */
void transport_name(pl_comm *c, int label);

#endif
