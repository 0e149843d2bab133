/* lab05_referee.h - what the referee files of Lab 5 share:
 *   lab05.c          the referee's state: its own mapping of the model, the scenario and its
 *                    single-device reference (float32-dequantised weights), kept by the
 *                    referees whose rank holds logits in some mode;
 *   lab05_rules.c    the split rules as the referee states them, what each rank must hold
 *                    and send under them, and the rules.* cases;
 *   lab05_session.c  the forward cases: the session's inputs, what the player reported, the
 *                    checks, and M.generate's timed runs.
 * Everything here runs in the referee: no student code, no MPI. */
#ifndef LAB05_REFEREE_H
#define LAB05_REFEREE_H

#include "lab05.h"

/* The scenario every split runs, and (on referees that hold one) its reference. */
typedef struct {
    int P, K, B, D, n_ctx, n_tok_max;
    int *prompt;                 /* [P]                                                    */
    int *gen;                    /* [K + 1]: the reference's greedy tokens after the prompt */
    int bn, *btok, *bseq, *bpos; /* the batch prefill: bn tokens, sequence s has blen[s]   */
    int *blen;                   /* [B]                                                    */
    int *dtok;                   /* [D * B]: decode step d, sequence s                     */
    int *pool, npool;            /* natural tokens the timed runs' fresh prompts are drawn from */
    bool gen_shared;             /* gen is rank 0's (every referee has it)                 */
    float *ref_prompt;           /* [P, V]   every position                 (reference only) */
    float *ref_gen;              /* [K, V]   after gen[k] at position P + k                 */
    float *ref_batch;            /* [B, V]   last token of each sequence                    */
    float *ref_decode;           /* [D, B, V]                                               */
} lab5_scenario;

/* What a session's run came to, as the referee judged the player's report and logits. */
typedef struct {
    bool done;
    int reached;                 /* the phase the run stopped in (LAB5_PH_DONE: completed)  */
    char fail[440];              /* why: the lowest failing rank's reason, "rank R: ..."   */
    float cuts[LAB5_MAX_RANKS + 1];
    int out_rank;
    /* this rank's */
    double kv_per_pos, w_bytes;  /* the player's accounting                                 */
    double err_prompt, err_gen, err_batch; /* on the output rank; 0 elsewhere              */
    int tok_step, tok_got, tok_want;       /* first wrong greedy pick: decode step k, -1 the
                                              one after the prompt, -2 none                */
    pl_metrics m_prompt, m_decode;         /* the player's counters, or the referees' (counted) */
    pl_wire w_prompt, w_decode;
    bool counted;                          /* the referees counted the prompt and the decode  */
    int bad_batch_rc, bad_init_rc, bad_init_out;
} lab5_session;

typedef struct {
    lab5_model model;    /* the referee's own mapping of the file                          */
    int n, me;
    bool ready;          /* init prepared the scenario (not --list)                         */
    double tol;          /* logits of the graded inputs (drv_tolerance)                     */
    double tol_prompt;   /* logits of the prompt: tol, or the derived bound when the user
                            chose it (lab5_prompt_tolerance)                                */
    lab5_scenario sc;
    bool have_ref;       /* this rank holds logits in some mode: it computed the reference */
    llm_config wcfg;
    llm_weights w;       /* the float32-dequantised model (have_ref), for the timed runs   */
    lab5_session sess[3][LAB5_S_KINDS];
} lab5_referee;
lab5_referee *lab5_ref(void);
/* The tiny llama's file, once the player has mapped it (any case's setup). */
void lab5_forget_file(lab5_referee *R);

/* ---- the rules (lab05_rules.c) --------------------------------------------------------- */
void rl_rows(const float *cuts, int n, int r, int64_t nrows, int64_t *a, int64_t *b);
/* Rank r's query heads and FFN features of a tensor split over n; false when n > heads. */
bool rl_heads(const llm_config *c, int n, int r, int *h0, int *nh, int *f0, int *nf);
/* What rank r must hold: KV-cache bytes per position (n_seq sequences) and weight bytes
 * (each block in its stored type, or 4 bytes a weight where a column cut falls inside a
 * quantised block). */
double rl_kv_bytes_per_pos(const lab5_referee *R, int mode, const float *cuts, int r, int n_seq);
double rl_weight_bytes(const lab5_referee *R, int mode, const float *cuts, int r);
/* What rank r must send in one forward of n_tok tokens of n_seqs sequences with n_out
 * logits rows: p2p bytes and messages, collective calls by kind and their S. */
void rl_expect_traffic(const lab5_referee *R, int mode, const float *cuts, int r, int n_tok, int n_seqs, int n_out,
                       drv_traffic *t);
/* "16/14 layers, output on rank 1" and the like, for messages. */
void rl_describe_layers(const float *cuts, int n, int n_layer, char *out, size_t cap);

#endif
