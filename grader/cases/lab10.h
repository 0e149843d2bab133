/* lab10.h - Lab 10's driver (context parallelism): what its case table
 * (grader/cases/lab10.c), its referee half (grader/referee/lab10.c) and its player half
 * (grader/player/lab10.c) share. No lab header here: the referee never reads them.
 *
 * A case's parameters are its arg[] (A_* below, decoded by l10_params_of on either side).
 * Its slots (S tokens, Sl this rank's, H heads, Hkv kv heads, d head size, R merge rows):
 *   every case  "cfg"      IN const   l10_cfg: this rank's cp_config and the ulysses flag
 *               "counted"  OUT zeroed doubles, L10_CNT_*: the player's own count of its
 *                                     kernels (trace). Untrusted, as drv_case.m is
 *   merge       "o" [R, d], "lse" [R] (INOUT); "ob" [R, d], "lb" [R] (IN const)
 *   positions   "pos" [S / n + 2] int32, "count" int32 (OUT)
 *   config      "code" int32 (OUT)
 *   ring        "q" [Sl, H, d], "k" "v" [Sl, Hkv, d] (IN const); "o" [Sl, H, d], "lse" [Sl, H] (OUT)
 *   ulysses     "q" "k" "v" as the ring's (IN const); "o" [Sl, H, d] (OUT)
 *   ring_bwd    "q" "k" "v", "o" "lse" (the float64 forward, rounded), "dout" [Sl, H, d]
 *               (IN const); "dq" [Sl, H, d], "dk" "dv" [Sl, Hkv, d] (OUT)
 *   ulysses_bwd "q" "k" "v" "dout" (IN const); "dq" "dk" "dv" (OUT)
 *   usp         "q" "k" "v" (IN const); "o" (OUT)
 *   usp_bwd     as ulysses_bwd
 *   block       "w" [the block's parameters] (gpt.h's storage order), "x" "dy" [Sl, C] (IN
 *               const); "y" "dx" [Sl, C] (OUT); "g" [the parameters' count] (OUT zeroed):
 *               the GPT block of models/gpt_cp.h (C = H d, F = 2C, MHA, causal) forward and
 *               backward through the student's attention of kind u (1: the ring, n: Ulysses,
 *               else the u x n/u grid)
 * Every input of a rank is its own tokens' (from the case's seed, which only referees
 * know); the reference of the whole sequence is the referee's.
 */
#ifndef LAB10_CASES_H
#define LAB10_CASES_H

#include <stdbool.h>
#include <stdint.h>

#include "driver.h" // defines: drv_case, drv_test, drv_model
#include "gpt.h"    // defines: gpt_config (the block cases)

typedef struct {
    int head_dim;   /* --head-dim: d of the ring and Ulysses cases        */
    int seq_blocks; /* --seq-blocks: the long cases' S = seq_blocks * 2n + 3 */
    int merge_rows; /* --merge-rows: rows of the merge cases               */
    const char *profile; /* --profile: the bench's prediction               */
} lab10_flags;
extern lab10_flags L10;

typedef enum { K_MERGE, K_POS, K_CONFIG, K_RING, K_ULY, K_RING_BWD, K_ULY_BWD, K_USP, K_USP_BWD, K_BLOCK } l10_kind;
enum { M_RANDOM, M_LARGE, M_EMPTY_RUNNING, M_EMPTY_BLOCK, M_MIXED, M_COUNT };
enum {
    CFG_OK, CFG_SEQ0, CFG_HEADS_KV, CFG_DIM0, CFG_CAUSAL2, CFG_LAYOUT2, CFG_SEQ_CHUNKS, CFG_ULY_OK, CFG_ULY_HEADS,
    CFG_MISMATCH, CFG_MISMATCH_SHAPE, CFG_SHAPE_HEADS, CFG_COUNT
};
#define CFG_NEEDS_RANKS(v) ((v) == CFG_ULY_HEADS || (v) == CFG_MISMATCH || (v) == CFG_MISMATCH_SHAPE || (v) == CFG_SHAPE_HEADS)
enum { A_KIND, A_VARIANT, A_LAYOUT, A_CAUSAL, A_GQA, A_SEQ, A_U };

/* The codes and layouts of labs/10-context/context.h (the player checks that they agree). */
enum { L10_OK, L10_ERR_SHAPE, L10_ERR_HEADS, L10_ERR_MISMATCH };
enum { L10_CONTIGUOUS = 0, L10_ZIGZAG = 1 };

typedef struct {
    l10_kind kind;
    int variant, layout, causal, gqa;
    int n, S, H, Hkv, d, rows; /* rows: the merge's */
    int ulysses;
    int u; /* usp: the Ulysses degree (rows of u ranks), n / u the ring's */
} l10_params;
void l10_params_of(const drv_case *c, l10_params *p);

typedef struct {
    int32_t seq, heads, kv_heads, head_dim, causal, layout, ulysses, pad;
} l10_cfg;

/* "counted": what the player's trace saw of its kernels during play(): kern_flash_block's
 * (query, key) pairs, the block kernels (forward or backward) recorded before the call's
 * first receive, kern_flash_block_backward's pairs */
enum { L10_CNT_PAIRS, L10_CNT_EARLY, L10_CNT_BWD_PAIRS, L10_CNT_LEN };

/* The block cases' GPT-2 block: C = H d, F = 2C, one sequence of S tokens. */
static inline gpt_config l10_block_config(const l10_params *p) {
    gpt_config g = {.seq = p->S, .batch = 1, .hidden = p->H * p->d, .heads = p->H, .ffn = 2 * p->H * p->d};
    return g;
}

/* The layout (both sides agree with context.h): chunk i of C, and rank r's positions. */
static inline int l10_chunk_len(int S, int C, int i) { return S / C + (i < S % C); }
static inline int l10_chunk_start(int S, int C, int i) { return i * (S / C) + (i < S % C ? i : S % C); }
static inline int l10_pos_cap(int S, int n) { return S / n + 2; }

/* ---- referee (grader/referee/lab10.c) ---------------------------------------------- */
void lab10_setup(drv_case *c);
void lab10_check(drv_case *c);
void lab10_model(drv_case *c, drv_model *m);
void lab10_teardown(drv_case *c);

/* ---- player (grader/player/lab10.c) ------------------------------------------------- */
void lab10_player_init(void);
void lab10_play(drv_case *c);
int lab10_mode_bench(void);
int lab10_mode_dump(void);
int lab10_mode_long(void);

#endif
