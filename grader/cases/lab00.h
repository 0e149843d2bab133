/* lab00.h - Lab 0's driver (hello, parallel world): what its case table
 * (grader/cases/lab00.c), its referee half (grader/referee/lab00.c) and its player half
 * (grader/player/lab00.c) share.
 *
 * Lab 0 has no student file: its player half is the lab's program (device buffers, an
 * all-gather, send/recv, a barrier, a timer); its referee half makes the messages, checks
 * what arrived and writes the report. Cases and their slots:
 *   topology     "cards" (OUT: world x LAB0_CARD_FLOATS floats, every rank's card as this
 *                rank's all-gather delivered it), "why" (OUT: the player's reasons for its
 *                backends, two strings), "links" (OUT: rank 0's GPU link matrix, text)
 *   p2p.<a>-<b>  arg[0] = a (sender), arg[1] = b (echoer). On rank a: "base" (IN const:
 *                the largest message, from a seed only referees know), "back" (OUT: per
 *                size, the sum over every round of what came back), "lat" (OUT: per size,
 *                the median one-way time in us, by the player's clock). On rank b: "fwd"
 *                (OUT: per size, the sum over every round of what arrived). Other ranks
 *                have no slot and only keep step (a barrier per size).
 * Round k of a size of n floats sends lab0_message(base, n, k, i) at index i: different in
 * every round, so a lost round (the receive buffer is poisoned with NaN before each) or a
 * stale or misrouted message changes the sums.
 */
#ifndef LAB00_CASES_H
#define LAB00_CASES_H

#include <stdbool.h>
#include <stddef.h>

#include "driver.h" // defines: drv_case, drv_opts, drv_sizes

#define LAB0_MAX_SIZES 64
#define LAB0_HOST_CHARS 64
#define LAB0_GPU_CHARS 128
#define LAB0_WHY_CHARS 160
#define LAB0_LINKS_CHARS 16384
#define LAB0_DEFAULT_MAX_BYTES (4u << 20)
#define LAB0_DEFAULT_WARMUP 2

/* One rank's self-description. It travels through pl_allgather as floats: numbers as they
 * are, text one character per float (exact for 0..255), so no string call is needed. */
typedef struct {
    int rank, local_rank, local_world, nodes, device, comm, cuda_device, gpus;
    char host[LAB0_HOST_CHARS];
    char gpu[LAB0_GPU_CHARS];
} lab0_card;
enum { LAB0_CARD_INTS = 8, LAB0_CARD_FLOATS = LAB0_CARD_INTS + LAB0_HOST_CHARS + LAB0_GPU_CHARS };

void lab0_card_pack(const lab0_card *c, float *f);
void lab0_card_unpack(const float *f, lab0_card *c); /* NaN (never sent) reads as -1 / "" */

/* The sweep's message sizes in floats (-b/-e/-f, without the empty one); how many. */
size_t lab0_sizes(size_t *out);
size_t lab0_total(const size_t *sizes, size_t n); /* floats of one sum per size, end to end */
int lab0_warmup(void);
int lab0_iters(size_t bytes);
/* Element i of round k's message of n floats: a rotation of the base, plus k. */
float lab0_message(const float *base, size_t n, int round, size_t i);

const char *lab0_p2p_json(void); /* --p2p-json FILE, or NULL */

/* referee */
void lab0_init(void);
void lab0_finish(void);
void lab0_topology_setup(drv_case *c);
void lab0_topology_check(drv_case *c);
void lab0_p2p_setup(drv_case *c);
void lab0_p2p_check(drv_case *c);
/* player */
void lab0_player_init(void);
void lab0_topology_play(drv_case *c);
void lab0_p2p_play(drv_case *c);

#endif
