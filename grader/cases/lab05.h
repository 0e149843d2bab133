/* lab05.h - Lab 5's driver (llama.cpp-style inference of a GGUF llama over n ranks): what
 * its case table (grader/cases/lab05*.c), its referee half (grader/referee/lab05*.c) and its
 * player half (grader/player/lab05*.c) share: the flags, the model file, the rules both
 * sides need (proportions -> cuts, the layer owner: the modes use them too), the rules.*
 * examples, and the layouts of the slots.
 *
 * The referee compiles without labs/05-llama-split/ on its include path: the lab's constants
 * are restated here (LAB5_*) and the player checks at compile time that they agree.
 *
 * Cases (names, groups and arguments as the single-process driver had them):
 *   rules.*       arg[0] the example (LAB5_RULES); the player calls ls_cuts, ls_layer_owner,
 *                 ls_row_range or ls_tensor_split on it and leaves the answers in "rout"
 *   M.CHECK       arg[0] the mode (LAB5_LAYER..), arg[1] its session (LAB5_S_*), arg[2] the
 *                 check (LAB5_C_*). A session is one run of the student's split; the first case
 *                 of a session that runs gives the player its inputs ("sin") and receives the
 *                 logits ("logits") and the player's report ("report"); the session's other
 *                 cases are judged on what the referee kept. M.generate also times a prefill and
 *                 a decode step ("tin" -> "tlogits", fresh tokens every run).
 */
#ifndef LAB05_CASES_H
#define LAB05_CASES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "driver.h" // defines: drv_case, drv_test; pl_metrics, pl_wire
#include "ds_bpe.h"  // defines: ds_bpe (the model's tokenizer)
#include "ds_gguf.h" // defines: ds_gguf (the model file)
#include "llama.h"   // defines: llm_config, llm_tensor, llm_mat_bytes

/* llama_split.h's constants (the player checks they agree) */
#define LAB5_MAX_RANKS 16
#define LAB5_ROW_ROUNDING 128
enum { LAB5_OK = 0, LAB5_ERR_SPLIT = 1 };
enum { LAB5_LAYER = 0, LAB5_ROW = 1, LAB5_TENSOR = 2 };
extern const char *const LAB5_MODE_NAME[3]; /* "layer", "row", "tensor" */

#define LAB5_DEFAULT_PROMPT "The capital of France is"
#define LAB5_BATCH_TEXT "Once upon a time, a small robot learned to sing about the sea, the stars and the long road home."
#define LAB5_SWEEP_TEXT "It was a bright cold day in April, and the clocks were striking thirteen over the quiet town."

/* ---- flags (both sides parse the same command line) ---------------------------------- */
typedef struct {
    const char *model, *gguf, *prompt, *split;
    int gen, batch, decode, micro, tokens, prompt_len;
    bool list_only; /* --list: the plan needs no model                                     */
} lab5_flags;
const lab5_flags *lab5_opts(void);

/* ---- the model file (grader/cases/lab05_model.c) --------------------------------------- */
typedef struct {
    char path[4096];
    bool tmp;          /* the tiny llama's temporary file: removed by lab5_model_forget   */
    ds_gguf *file;     /* mapped: what ls_load copies from stays readable after the filter */
    ds_bpe *bpe;
    llm_config cfg;
    char desc[160];
} lab5_model;
/* --gguf FILE, else --model smollm2 ($GGUF or datasets/cache/) or tiny (written to a
 * temporary file, its weights from `seed`); then open and read it. A usage error on a
 * missing or bad file. */
void lab5_model_open(lab5_model *m, uint64_t seed);
void lab5_model_forget(lab5_model *m); /* the temporary file is removed (the mapping stays) */
void lab5_model_close(lab5_model *m);
/* The file's tensor behind `which` of `layer` (the tied output reads token_embd): NULL,
 * and why in `why`, when there is none. name receives its GGUF name. */
const ds_gguf_tensor *lab5_tensor(const lab5_model *m, llm_tensor which, int layer, char *name, size_t len,
                                  char *why, size_t whylen);
/* The type the tensor is held in: the file's Q4_0/Q4_1/Q8_0 for a matrix stored so, else
 * LLM_F32; -1 for no such tensor (ls_type). */
int lab5_tensor_type(const lab5_model *m, llm_tensor which, int layer);
/* Text -> token ids (malloc'd, *n of them; chat: in the model's chat template when its
 * vocabulary has one); ids -> text. */
int *lab5_tokens(const lab5_model *m, const char *text, bool chat, int *n);
void lab5_text(const lab5_model *m, const int *ids, int n, char *out, size_t cap);

/* ---- the split's statement, on both sides (grader/cases/lab05.c) ---------------------- */
/* "3,1" -> p[], *n_props; NULL or "": none. False on a malformed list. */
bool lab5_parse_split(const char *list, float *p, int *n_props);
/* Proportions -> cuts[0 .. n], the same float operations in the same order as the rule. */
void lab5_cuts(const float *p, int n_props, int n, float *cuts);
/* The rank of layer-split slot `slot` (slot n_layer: the output). */
int lab5_owner(const float *cuts, int n, int n_layer, int slot);
/* The rank that holds the logits: the output slot's owner (layer), rank 0 (row, tensor). */
int lab5_output_rank(int mode, const float *cuts, int n, int n_layer);
/* The uneven --tensor-split of the split.* cases at world size n: "3,1" at 2, ... */
const char *lab5_uneven_split(int n);
int lab5_argmax(const float *row, int n);

/* The tolerance of logits for a prompt other than the graded default (--prompt, the timed
 * runs' fresh prompts, RUN=chat), derived from the reduction lengths: the split and the
 * single-device forward round the same sums in different orders, each product of length k
 * off by about sqrt(k) units of float32 rounding (u = 2^-24), both evaluations (sqrt 2), over
 * the 2L + 1 products in series on the residual stream (sqrt(2L + 1)), k the longest
 * reduction: max(C, n_head*hd, F, positions), times LAB5_PROMPT_MARGIN: that is the typical
 * error of one sum, and the worst of a prompt's rows, of one greedy row, of many prompts is
 * several times it (measured: 1.3 and 3.8 times). Never below `base` (the graded tolerance).
 * docs/llama-split.md derives it and shows what it measured. */
#define LAB5_PROMPT_MARGIN 8.0
double lab5_prompt_tolerance(const llm_config *cfg, int positions, double base);

/* ---- the rules.* examples -------------------------------------------------------------- */
typedef enum { LAB5_R_CUTS, LAB5_R_LAYER, LAB5_R_ROW, LAB5_R_TENSOR } lab5_rule_kind;
typedef struct {
    lab5_rule_kind kind;
    const char *name;  /* the case name after "rules."                      */
    int a;             /* layer: n_layer; row: nrows; tensor: heads         */
    const char *split; /* proportions; "n8": 8 ranks, equal                 */
    int kv, ff;        /* tensor: KV heads, FFN features                     */
} lab5_rule;
extern const lab5_rule LAB5_RULES[];
extern const int LAB5_NRULES;
/* The example's split: rank count, proportions into p (n_props of them). */
int lab5_rule_split(const lab5_rule *rc, float *p, int *n_props);
/* tensor: the small model whose heads are split. */
llm_config lab5_rule_config(const lab5_rule *rc);

/* rules.cuts: the calls of ls_cuts, in order */
typedef struct {
    const char *props; /* "3,1"; NULL: the proportions below                 */
    float bad[2];      /* with n_props 2, when props is NULL and n_props is 2 */
    int n_props, n;    /* n_props -1: as parsed from props                    */
    bool valid;        /* LS_OK expected (and the rule's cuts)                */
} lab5_cuts_call;
extern const lab5_cuts_call LAB5_CUTS_CALLS[];
extern const int LAB5_NCUTS_CALLS;

/* What the player leaves in "rout" (the student's answers, as they came). */
typedef struct {
    int32_t rc;
    float cuts[LAB5_MAX_RANKS + 2];
} lab5_cuts_out;
/* layer: a lab5_cuts_out, then int32 owner[a + 1]; row: a lab5_cuts_out, then int64
 * [n][2] row ranges; tensor: one lab5_tensor_out per (n, r), n = 1 .. a + 1, r < n. */
typedef struct {
    int32_t rc, head0, n_head, ff0, n_ff;
} lab5_tensor_out;
size_t lab5_rule_out_bytes(const lab5_rule *rc);

/* ---- sessions ------------------------------------------------------------------------------ */
/* Three sessions per mode: the scenario at an equal split, the prompt at an uneven split, and
 * the invalid inputs on a state of their own. */
enum { LAB5_S_MAIN, LAB5_S_UNEVEN, LAB5_S_ERRORS, LAB5_S_KINDS };
enum { LAB5_C_PREFILL, LAB5_C_GENERATE, LAB5_C_BATCH, LAB5_C_TRAFFIC, LAB5_C_KVCACHE, LAB5_C_WEIGHTS,
       LAB5_C_ERRORS, LAB5_C_SPLIT, LAB5_NCHECKS };
/* The phases of a session: where it stopped (LAB5_PH_DONE: it completed). */
enum { LAB5_PH_INIT, LAB5_PH_PROMPT, LAB5_PH_GEN, LAB5_PH_BATCH, LAB5_PH_DECODE, LAB5_PH_DONE };
extern const char *const LAB5_PHASE[LAB5_PH_DONE + 1];

/* ls_params, as ints and floats (comm: the world) */
typedef struct {
    int32_t mode, n_split;
    float split[LAB5_MAX_RANKS];
    int32_t n_seq_max, n_ctx, n_tokens_max, n_micro;
} lab5_params;

/* "sin" (IN, const): the header, then n_ints ints: prompt[P], gen[K + 1] (the reference's
 * greedy tokens: decoding is teacher-forced), btok[bn], bseq[bn], bpos[bn], blen[B],
 * dtok[D * B]. Main: the graded ls_init takes n_ctx * 2 (the first, at n_ctx, is the KV
 * probe); errors: bad_* is the invalid batch's one token. */
typedef struct {
    int32_t kind; /* LAB5_S_* */
    lab5_params prm;
    int32_t P, K, B, D, bn;
    int32_t bad_tok, bad_seq, bad_pos;
    int32_t n_ints;
} lab5_session_in;
/* The ints after the header. */
typedef struct {
    const int32_t *prompt, *gen, *btok, *bseq, *bpos, *blen, *dtok;
} lab5_session_ints;
lab5_session_ints lab5_session_arrays(const lab5_session_in *in);
int32_t lab5_session_n_ints(int P, int K, int B, int D, int bn);
/* "logits" (OUT): each forward's buffer of n_tokens rows of V, one after the other: the
 * prompt [P], each decode step [1] x K, the batch [bn], each of its decode steps [B] x D
 * (the uneven session: the prompt; errors: the invalid batch's [1]). */
int64_t lab5_logits_rows(const lab5_session_in *in);
int64_t lab5_row_gen(const lab5_session_in *in, int k);
int64_t lab5_row_batch(const lab5_session_in *in);
int64_t lab5_row_decode(const lab5_session_in *in, int d);

/* The phases the referees count where they move the messages (drv_mark): the prompt's
 * forward and the batch's first decode step, as m_prompt and m_decode below. */
enum { LAB5_MARK_PROMPT = 0, LAB5_MARK_DECODE = 1 };

/* "report" (OUT, zeroed): what the player saw and counted (its own account: untrusted). */
typedef struct {
    int32_t measured;          /* 1 once the player wrote it                                */
    int32_t reached;           /* the phase the run stopped in (LAB5_PH_DONE: completed)     */
    char fail[440];            /* why, when it failed on this rank                           */
    double kv_per_pos;         /* device bytes per position: ls_init at 2 n_ctx minus at n_ctx */
    double w_bytes;            /* the bytes ls_load delivered during the graded ls_init      */
    pl_metrics m_prompt, m_decode; /* the prompt's forward, the batch's first decode step   */
    pl_wire w_prompt, w_decode;    /* what reached the comm backend in the same            */
    int32_t bad_batch_rc, bad_init_rc, bad_init_out, pad;
} lab5_report;

/* M.generate's timed runs: "tin" (IN) one batch of one sequence (the prompt, or a decode
 * token), "tlogits" (OUT) its buffer [P, V], "tready" (OUT, zeroed) 1 when the timing
 * state's ls_init succeeded on every rank. */
typedef struct {
    lab5_params prm;
    int32_t n, cap;  /* tokens of this run; room for cap of each below */
    /* then int32 tok[cap], seq[cap], pos[cap] */
} lab5_timed_in;
size_t lab5_timed_in_bytes(int cap);
int32_t *lab5_timed_ints(lab5_timed_in *in); /* tok; seq = tok + cap; pos = seq + cap */

/* ---- referee (grader/referee/lab05*.c) ---------------------------------------------------- */
void lab5_init(void);
void lab5_finish(void);
void lab5_rules_setup(drv_case *c);
void lab5_rules_check(drv_case *c);
void lab5_modes_setup(drv_case *c);
void lab5_modes_check(drv_case *c);
void lab5_leak_model(drv_case *c, drv_model *m);
void lab5_modes_perf(drv_case *c);
void lab5_modes_refresh(drv_case *c, int run);
void lab5_modes_verify(drv_case *c, int run);
void lab5_modes_teardown(drv_case *c);
/* ---- player (grader/player/lab05*.c) ------------------------------------------------------ */
void lab5_player_init(void);
void lab5_play_rules(drv_case *c);
void lab5_play_modes(drv_case *c);
void lab5_timed(drv_case *c, int which);
void lab5_release(drv_case *c);
int lab5_mode_chat(void);
int lab5_mode_sweep(void);
int lab5_mode_bench(void);

#endif
