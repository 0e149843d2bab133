/* lab05.h - what the files of Lab 5's driver share:
 *   lab05_kit.c      the model the driver serves (SmolLM2 from its GGUF file, or the tiny
 *                    llama written at start-up), ls_load for the student (counted per rank),
 *                    the tokenizer;
 *   lab05_rules.c    the driver's own statement of the split rules and of what each rank
 *                    must hold and send (layer map, row ranges, heads, KV and weight bytes,
 *                    traffic), and the rules.* cases;
 *   lab05_scenario.c the scenario and its single-device reference;
 *   lab05_session.c  one run of the student's split per mode, and the forward cases' checks;
 *   lab05_modes.c    --run chat, sweep and bench.
 * lab05.c holds the flags, the plan and main. */
#ifndef LAB05_DRIVER_H
#define LAB05_DRIVER_H

#include <stdbool.h>
#include <stdint.h>

#include "driver.h"       // defines: drv_* (the case runner)
#include "ds_bpe.h"       // defines: ds_bpe (the model's tokenizer)
#include "llama_split.h"  // defines: the lab API (ls_*)
#include "pl_costmodel.h" // defines: plc_profile, plc_replay_trace

/* ---- flags (lab05.c) ------------------------------------------------------------------- */
extern const char *g_model;  /* --model tiny|smollm2                                      */
extern const char *g_gguf;   /* --gguf FILE: wins over --model                            */
extern const char *g_prompt; /* --prompt TEXT                                             */
extern const char *g_split;  /* --tensor-split "3,1" (modes)                              */
extern int g_gen, g_batch, g_decode, g_micro, g_tokens, g_prompt_len;
extern int g_n, g_me;
extern pl_comm *g_comm;
extern const char *MODE_NAME[3]; /* "layer", "row", "tensor" */

/* ---- the model (lab05_kit.c) ------------------------------------------------------------ */
extern llm_config g_cfg;
extern ds_bpe *g_bpe;
extern char g_model_desc[160];
/* Open the model on every rank (collective; a usage error on a missing or bad file). The
 * file's path stays valid until kit_forget_path(). */
void kit_open(void);
const char *kit_path(void);
void kit_forget_path(void); /* the tiny model's temporary file is removed */
bool kit_temporary(void);   /* the file is the tiny model's, removed by kit_forget_path */
extern bool g_keep_file;    /* --run bench: the file stays until the bench has read it */
void kit_close(void);
/* Bytes ls_load has delivered on this rank since the last reset. */
uint64_t kit_loaded(void);
/* The type a tensor is held in (ls_type): the file's Q4_0/Q4_1/Q8_0 for a matrix stored so,
 * else LLM_F32; -1 for no such tensor. */
int kit_type(llm_tensor which, int layer);
void kit_reset_loaded(void);
/* Text -> token ids (malloc'd, *n of them); chat: wrapped in the model's chat template
 * when its vocabulary has one. Decoding into out (NUL-terminated). */
int *kit_tokens(const char *text, bool chat, int *n);
void kit_text(const int *ids, int n, char *out, size_t cap);

/* ---- the rules, as the driver states them (lab05_rules.c) ------------------------------- */
/* p: proportions "3,1" (NULL or "": equal) -> cuts[0 .. n]; false on a malformed list. */
bool rl_parse(const char *list, float *p, int *np_out);
void rl_cuts(const float *p, int n_props, int n, float *cuts);
int rl_owner(const float *cuts, int n, int n_layer, int slot);
void rl_rows(const float *cuts, int n, int r, int64_t nrows, int64_t *a, int64_t *b);
/* Rank r's query heads and FFN features of a tensor split over n; false when n > heads. */
bool rl_heads(const llm_config *c, int n, int r, int *h0, int *nh, int *f0, int *nf);
int rl_output_rank(ls_mode mode, const float *cuts);
/* What rank r must hold: KV-cache bytes per position (n_seq sequences) and weight bytes
 * (each block in its stored type, or 4 bytes a weight where a column cut falls inside a
 * quantised block: rl_block_bytes). */
double rl_kv_bytes_per_pos(ls_mode mode, const float *cuts, int r, int n_seq);
double rl_weight_bytes(ls_mode mode, const float *cuts, int r);
double rl_block_bytes(llm_tensor which, int layer, int64_t nrows, int64_t col0, int64_t ncols);
/* What rank r must send in one forward of n_tok tokens of n_seqs sequences with n_out
 * logits rows: p2p bytes and messages, collective calls by kind and their S. */
typedef struct {
    double p2p_bytes, p2p_msgs, coll_bytes;
    int colls[PL_OP_COUNT];
} rl_traffic;
void rl_expect_traffic(ls_mode mode, const float *cuts, int r, int n_tok, int n_seqs, int n_out, rl_traffic *t);
/* "layers per rank 16/14, output on rank 1" and the like, for messages. */
void rl_describe_layers(const float *cuts, int n, int n_layer, char *out, size_t cap);

void plan_rules(const drv_test *t, drv_plan *p);
void rules_run(drv_case *c);

/* ---- the scenario (lab05_scenario.c) ---------------------------------------------------- */
typedef struct {
    int P, K, B, D, n_ctx, n_tok_max;
    int *prompt;                /* [P]                                                    */
    int *gen;                   /* [K + 1]: the reference's greedy tokens after the prompt */
    int bn, *btok, *bseq, *bpos;/* the batch prefill: bn tokens, sequence s has blen[s]   */
    int *blen;                  /* [B]                                                    */
    int *dtok;                  /* [D * B]: decode step d, sequence s                     */
    float *ref_prompt;          /* [P, V]   every position                                */
    float *ref_gen;             /* [K, V]   after gen[k] at position P + k                 */
    float *ref_batch;           /* [B, V]   last token of each sequence                    */
    float *ref_decode;          /* [D, B, V]                                              */
} lab5_scenario;
extern lab5_scenario g_sc;
/* Builds the scenario's tokens and computes its single-device reference on rank 0 (then
 * shared): the prompt's logits, the greedy continuation, a batch of sequences and its
 * decode steps. */
void scenario_init(void);
void scenario_free(void);
/* The uneven --tensor-split of the split.* cases at world size n: "3,1" at 2, ... */
const char *uneven_split(int n);
/* rows x n_vocab device floats -> a malloc'd host copy. */
float *download_rows(const float *dev, int rows);

/* ---- the sessions and the forward cases' checks (lab05_session.c) ------------------------ */

/* Three sessions per mode: the scenario at an equal split, the prompt at an uneven split,
 * and the invalid inputs on a state of their own. */
enum { S_MAIN, S_UNEVEN, S_ERRORS, S_KINDS };
void session_run(drv_case *c);   /* arg[0] = mode, arg[1] = the session (S_*) */
void check_prefill(drv_case *c);
void check_generate(drv_case *c);
void check_batch(drv_case *c);
void check_traffic(drv_case *c);
void check_kvcache(drv_case *c);
void check_weights(drv_case *c);
void check_errors(drv_case *c);
void check_split(drv_case *c);
void sessions_free(void);

/* ---- modes (lab05_modes.c) --------------------------------------------------------------- */
int mode_chat(void);
int mode_sweep(void);
int mode_bench(void); /* one rank: float32 vs quantised weights (then the sweep) */
/* Greedy argmax of a host row of n_vocab logits. */
int argmax_row(const float *row, int n);

#endif
