/* referee.h - what the referee's runner files share (not for labs).
 *
 * From the top down (a file uses only those below it; tests/grader/test_layout.sh):
 *   main.c     the process: flags, connecting to the engine, starting the player, the case
 *              loop, the records of each case
 *   timing.c   timing the player: fresh inputs per run, the slowest rank's time
 *   slots.c    the shared region: slots, poison, red zones, const inputs
 *   checks.c   tensors, training steps, return codes and traffic against a reference (the
 *              labs' checks, in one message style), the traffic model
 *   verdict.c  verdicts, result fields, cross-rank values, leaks, seeds, tolerance
 *   relay.c    cross-rank values through the players (signed), or between the referees
 *   link.c     the engine's channel (signed records) and the player's control socket
 *   transport.c the player's messages, moved and counted by the referees (cpu device)
 *   confine.c  what the forked child does before it execs the player (seccomp, limits)
 */
#ifndef PL_REFEREE_H
#define PL_REFEREE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "runner.h"
#include "siphash.h" // defines: SIPHASH_KEY_BYTES

/* The referee's view of its player and of the run. */
typedef struct {
    int rank, world;
    bool graded;                        /* the engine runs us: records go to its channel */
    unsigned char key[SIPHASH_KEY_BYTES]; /* the run's key (zeros by hand)               */
    int engine_fd;                      /* -1 by hand                                     */
    uint64_t engine_seq;
    int ctl_fd;                         /* the control socket to the player               */
    pid_t player;
    unsigned char *region;              /* the shared region, mapped                      */
    int region_fd;
    unsigned char *arena;               /* the transport's arena, mapped (transport only)  */
    uint64_t arena_bytes;
    int arena_fd;                       /* -1 without the transport                        */
    uint64_t relay_seq;
    bool player_cuda;                   /* the player says it runs the cuda device        */
    int player_device, player_comm;     /* its pl_device_kind, pl_comm_kind (its claim)   */
    int player_nodes;                   /* hosts its MPI world spans (its claim)           */
    const char *current_case;           /* the case being run, for messages; NULL between */
    bool transport;                     /* the referees move the player's messages        */
} referee_state;
extern referee_state g_ref;

/* ---- link.c */
struct cJSON;
/* One record to the engine: the JSON, a tab, its signature (nothing by hand). */
void engine_record(struct cJSON *o);
/* The control socket failed: say how the player went and leave with its code. */
PL_NORETURN void player_gone(void);
/* A command to the player and its reply (REP_DONE); a player that dies or answers
 * anything else ends the referee (its exit code tells the engine what happened). */
void player_command(uint32_t cmd, uint32_t arg);
int referee_local_world(void);
/* The player's next message that is not a transport request (those are served meanwhile):
 * wire_recv's result. */
int player_recv(wire_msg *m, void **payload, uint64_t max);
/* The player broke the protocol or a relay was altered: tell the engine (a signed abort
 * record) and end this referee. */
PL_NORETURN void referee_tampered(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- transport.c */
/* What the referee moved for its player: the comm fields of pl_metrics, all of pl_wire and
 * the collectives' bytes by kind. */
typedef drv_moved transport_counts;
/* Start MPI among the referees and serve the player's requests (its arena, mapped, and its
 * control socket). */
void transport_start(unsigned char *arena, uint64_t arena_bytes, int ctl_fd);
void transport_stop(void);
bool transport_on(void);
bool transport_busy(void); /* requests posted and not completed */
/* One REP_XFER payload: NULL when posted (or answered), else why the player broke the
 * protocol; *sent = 0 when the answer could not be written. */
const char *transport_request(const void *payload, uint64_t len, int *sent);
/* Completions to the player; 0 when it cannot be told. */
int transport_progress(void);
void transport_show_node(void); /* the node's board into the arena's head, for the player's watchdog */
void transport_player_works(bool yes); /* the referee's busy mark: its player starts or computes */
void transport_counted(transport_counts *k);
/* d = k1 - k0 */
void transport_since(const transport_counts *k0, const transport_counts *k1, transport_counts *d);
/* The phases the player marked (drv_measure_slot by slot index, drv_mark after them): cleared
 * per case; what the referee moved between a phase's marks, false when it saw no complete pair. */
void transport_marks_clear(void);
/* The traffic fields of *m (point-to-point, collectives) and all of *w from d. */
void transport_overwrite(pl_metrics *m, pl_wire *w, const transport_counts *d);
bool transport_phase(int mark, transport_counts *moved);
/* The same, communicator by communicator (those that carried anything): how many, at most max. */
int transport_phase_comms(int mark, drv_comm_moved *out, int max);
/* Every referee's bytes, rank r's at r * bytes (MPI between the referees). */
void transport_allgather(const void *mine, size_t bytes, void *out);

/* ---- checks.c */
void apply_model(drv_case *c, const drv_model *md);

/* ---- verdict.c */
void case_begin(drv_case *c);            /* fields record */
void case_end(drv_case *c);
void gather_verdict(drv_case *c);
void check_leak(drv_case *c, const char *sites);
bool check_guards(drv_case *c, const char *when);
const char *verdict_name(drv_verdict v);
uint64_t hand_seed(void);
/* n bytes from the kernel's random source (getrandom, retried when interrupted; fatal if
 * it fails): keys and nonces the player cannot predict. */
void ref_random_bytes(void *buf, size_t n);

/* ---- slots.c */
void region_open(void);
/* The transport's arena: a memfd as large as the file-size limit allows (WIRE_ARENA_MAX). */
void arena_open(void);
void slots_reset(drv_case *c);
/* Copy the case and its slot table into the region's header, arm the red zones, poison the
 * OUT slots, hash the CONST ones. */
void slots_publish(drv_case *c, int case_index);
/* After play / a timed run: red zones intact, CONST slots unchanged; fails the case. */
void slots_verify(drv_case *c, const char *when);
/* The player's report, copied out of the region (untrusted values, bounds-checked). */
void slots_read_report(drv_case *c);
void slots_done(drv_case *c);

/* ---- confine.c */
/* In the forked child, right before exec: no new privileges, the parent-death signal, the
 * seccomp filter of the player's start-up. Returns false (errno set) if it cannot. */
bool confine_child(void);

#endif
