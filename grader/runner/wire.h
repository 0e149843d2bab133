/* wire.h - what a referee and its player share: a control socket and a memory region.
 *
 * The referee creates both before it forks the player; the player finds them at fixed
 * descriptors after exec. The control socket carries one small message per command and its
 * reply (and the payload of a relay); the region holds a header (the case being run, its
 * slot table, the player's report) and the slots' bytes, each slot between two red zones.
 *
 * Nothing the player writes is trusted: the referee keeps its own copy of the slot table
 * and reads the report into its own memory, bounds-checked, before looking at it.
 */
#ifndef PL_WIRE_H
#define PL_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "driver.h" // defines: DRV_NAME_MAX, DRV_ARGS; pl_metrics, pl_wire

#define WIRE_FD_CTL 3 /* the player's end of the control socket */
#define WIRE_FD_SHM 4 /* the shared region (a memfd)            */
#define WIRE_FD_ARENA 5 /* the transport's arena (a memfd), where the referees move the messages */
#define WIRE_MAGIC 0x504c57495245ull /* "PLWIRE" */
#define WIRE_VERSION 1

#define WIRE_SLOTS_MAX 96
#define WIRE_SLOT_NAME 32
#define WIRE_MARKS (WIRE_SLOTS_MAX + DRV_PHASES) /* phase marks: a slot's, then drv_mark's */
#define WIRE_GUARD 256          /* red-zone bytes before and after every slot           */
#define WIRE_ALIGN 256          /* slot data starts on this boundary                    */
#define WIRE_HEADER_BYTES (1u << 20)
#define WIRE_REGION_BYTES ((uint64_t)64 << 30) /* virtual size; pages exist once touched */
#define WIRE_GUARD_BYTE 0xA5
#define WIRE_RELAY_MAX (1u << 20) /* bytes of one referee's relay contribution           */

typedef struct {
    char name[WIRE_SLOT_NAME];
    uint64_t offset; /* of the data, from the region's start */
    uint64_t bytes;
    uint32_t flags;  /* DRV_IN, DRV_OUT, ... */
    uint32_t pad;
} wire_slot;

/* What the player says about a play() (its own counters: untrusted). */
typedef struct {
    pl_metrics m;
    pl_wire wire;
    int64_t mem_before, mem_after, mem_peak;
    char guards[320]; /* red zones of pl_malloc damaged during play() or release() (checked mode) */
    char leaks[256];  /* allocations made in play() and still live after release(), with sites  */
} wire_report;

typedef struct {
    uint64_t magic;
    uint32_t version;
    int32_t case_index;            /* in the plan; -1 before the first case */
    int32_t test_index;            /* in the lab's table of tests            */
    char name[DRV_NAME_MAX];
    char group[48];
    int64_t arg[DRV_ARGS];
    int32_t nslots;
    int32_t pad;
    wire_slot slots[WIRE_SLOTS_MAX];
    wire_report report;
} wire_header;

/* The referee's transport (graded runs on the cpu device, docs/grader.md): the player has no
 * MPI and no socket of its own; every message and collective is a request on the control
 * socket, its operands in the arena (a memfd of its own, at WIRE_FD_ARENA, as large as the
 * file-size limit allows, up to WIRE_ARENA_MAX), and the referees move and count them. The
 * player owns the arena's allocation; the referee checks every request against its bounds. */
#define WIRE_ARENA_MAX ((uint64_t)32 << 30)
#define WIRE_XFER_INLINE_MAX ((uint64_t)64 << 20) /* host collectives' bytes, in the message */
/* The arena's first bytes are no operand's: two words where the referee shows its player
 * the node's referees (pl_watchdog_watch_words): [0] their ticks, [1] a count that moves
 * while any of their players is not waiting for a message. */
#define WIRE_ARENA_HEAD 256

enum {
    XFER_SEND = 1, XFER_RECV, XFER_ALLREDUCE, XFER_ALLGATHER, XFER_REDUCE_SCATTER, XFER_BROADCAST,
    XFER_REDUCE, XFER_ALLTOALL, XFER_BARRIER, XFER_SPLIT, XFER_FREE,
    XFER_MARK, /* a measured phase begins (op 0) or ends (op 1); peer: its slot, or WIRE_SLOTS_MAX + a drv_mark phase */
    XFER_HOST_ALLREDUCE,
    XFER_HOST_GATHERV, XFER_HOST_BCAST,
    XFER_NAME, /* the kit names communicator `comm` for counting (drv_name_comm); peer: the name */
    XFER_KINDS
};
enum { XFER_F32 = 0, XFER_BF16 = 1 }; /* element types of the arena's operands */

/* One request (player -> referee, REP_XFER; host collectives' bytes follow it). */
typedef struct {
    uint64_t id;       /* the player's number for it: the completion names it             */
    uint32_t kind, dtype;
    int32_t comm;      /* the referee's communicator number (0: the world)                 */
    int32_t peer;      /* send/recv: the peer; broadcast/reduce/host: the root (-1: all)   */
    int32_t op;        /* pl_op or pl_host_op; split: the colour                           */
    int32_t key;       /* split: the key                                                   */
    uint64_t count;    /* elements as the API counts them (host: bytes or doubles)         */
    uint64_t in_off, out_off; /* operands: offsets in the arena                            */
} xfer_req;

/* Its completion (referee -> player, CMD_XFER_DONE; a host collective's result follows). */
typedef struct {
    uint64_t id;
    int64_t a, b, c;   /* split: a = member (0/1), b = rank, c = size (comm number in id's reply) */
    int64_t comm;
} xfer_done;

/* Commands (referee -> player) and replies (player -> referee). */
enum {
    CMD_PLAY = 1,   /* run the case's play() on the header's slots; reply REP_DONE        */
    CMD_STAGE,      /* arg = which: bring the (refreshed) IN slots to the device          */
    CMD_GO,         /* arg = which + (calls << 8): `calls` x timed(which) on sets
                       0..calls-1, sync; reply REP_DONE (after CMD_READY)                   */
    CMD_COLLECT,    /* bring the OUT slots back from the device; reply REP_DONE           */
    CMD_RELEASE,    /* the case is over: release(), free the slots' device buffers        */
    CMD_RELAY,      /* payload: this referee's signed contribution; reply: every rank's   */
    CMD_EXIT,       /* finalize and exit 0                                                */
    CMD_RESUME,     /* the referee's interlude is over: go on with play() (no reply)      */
    CMD_XFER_DONE,  /* payload: xfer_done (+ bytes): a transport request completed         */
    CMD_READY,      /* before a timed run: sync, barrier of the players; reply REP_DONE      */
    REP_READY = 100,/* after start-up: payload = the player's runtime info                */
    REP_DONE,
    REP_RELAY,
    REP_INTERLUDE,  /* arg = which: play() pauses for the test's interlude (drv_interlude)  */
    REP_XFER,       /* payload: xfer_req (+ bytes): move this (the referee's transport)    */
};

typedef struct {
    uint32_t cmd;
    uint32_t arg;
    uint64_t len; /* payload bytes that follow */
} wire_msg;

/* What the player says when it is ready (untrusted; the referee checks rank and world). */
typedef struct {
    int32_t rank, world;
    int32_t device, comm; /* pl_device_kind, pl_comm_kind */
    int32_t nodes;        /* hosts its MPI world spans (its own MPI; 1 otherwise) */
    char device_why[160], comm_why[160];
} wire_ready;

/* Read or write exactly n bytes (EINTR retried); false on end of file or error. */
int wire_read_full(int fd, void *buf, size_t n);
int wire_write_full(int fd, const void *buf, size_t n);
/* One message (header + payload): 1, or 0 at end of file / on an error, or -1 for a
 * payload over `max` (not a message of ours). The payload buffer is malloc'd into
 * *payload (NULL when len is 0). */
int wire_send(int fd, uint32_t cmd, uint32_t arg, const void *payload, uint64_t len);
int wire_recv(int fd, wire_msg *m, void **payload, uint64_t max);

#endif
