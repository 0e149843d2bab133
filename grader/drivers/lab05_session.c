/* lab05_session.c - the scenario every split runs, its single-device reference, and one run
 * of the student's split per mode (a "session") that the forward cases then check.
 *
 * The scenario: a prompt (one sequence, logits of every position), greedy decoding of
 * g_gen tokens after it, then a batch of g_batch sequences of different lengths prefilled
 * together (sequence 0 rewinds to position 0) and g_decode decode steps of all of them.
 * Rank 0 runs it once with models/llama's single-device llm_forward on weights read by
 * llm_load_gguf (not through ls_load) and shares the logits; decoding is teacher-forced:
 * every split is fed the reference's greedy tokens, and must pick the same ones.
 *
 * A session, per mode: ls_init twice with two context lengths (the difference of device
 * memory is the KV cache, whatever else a rank allocates), then the scenario step by step,
 * each step's traffic counted; then an invalid batch and invalid proportions, which every
 * rank must refuse. The first case of a mode runs it; the others read it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab05.h"

#define BATCH_TEXT "Once upon a time, a small robot learned to sing about the sea, the stars and the long road home."

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
} scenario;
static scenario S;

enum { PH_INIT, PH_PROMPT, PH_GEN, PH_BATCH, PH_DECODE, PH_ERRORS, PH_DONE };
static const char *PHASE[] = {"ls_init", "the prompt", "decoding", "the batch", "the batch's decode steps",
                              "the error checks", "-"};

typedef struct {
    bool done;
    int reached;                /* the phase the run stopped in (PH_DONE: it completed)  */
    char fail[440];             /* why it stopped; the same text on every rank            */
    float cuts[LS_MAX_RANKS + 1];
    int out_rank;
    /* this rank's */
    double kv_per_pos, w_floats;
    double err_prompt, err_gen, err_batch; /* on the output rank; 0 elsewhere           */
    int tok_step, tok_got, tok_want;      /* first wrong greedy token (step -1: none)   */
    pl_metrics m_prompt, m_decode;
    pl_wire w_prompt, w_decode;
    int bad_batch_rc, bad_init_rc, bad_init_out;
    double t_prefill, t_decode;           /* seconds, slowest rank                       */
} session;
static session g_sess[3][2]; /* [mode][uneven split] */

const char *uneven_split(int n) {
    static const char *fixed[] = {"", "1", "3,1", "1,0,2", "2,1,1,0"};
    static char more[4 * LS_MAX_RANKS];
    if (n <= 4) return fixed[n];
    int len = 0;
    for (int r = 0; r < n; r++) len += snprintf(more + len, sizeof more - (size_t)len, "%s%d", r ? "," : "", 1 + r % 2);
    return more;
}

int argmax_row(const float *row, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (row[i] > row[best]) best = i;
    return best;
}

/* ================================================================================== */
/* The scenario and its reference                                                     */
/* ================================================================================== */

static float *download_rows(const float *dev, int rows) {
    size_t n = (size_t)rows * g_cfg.n_vocab;
    float *h = malloc(n * sizeof(float));
    PL_CHECK(h != NULL, "out of host memory");
    pl_download(h, dev, n * sizeof(float));
    return h;
}

/* One reference forward on rank 0: rows of logits appended to *out. */
static void ref_step(const llm_weights *w, llm_kv_cache *kv, llm_workspace *ws, float *dev, const int *tok,
                     const int *seq, const int *pos, int n, int mode, float *out) {
    int rows = llm_forward(&g_cfg, w, kv, ws, tok, seq, pos, n, dev, mode, NULL);
    PL_CHECK(rows > 0, ws->err);
    float *h = download_rows(dev, rows);
    memcpy(out, h, (size_t)rows * g_cfg.n_vocab * sizeof(float));
    free(h);
}

static void reference(void) {
    size_t V = (size_t)g_cfg.n_vocab;
    char err[512] = "";
    llm_config rc;
    llm_weights w;
    double ok = g_me == 0 ? llm_load_gguf(kit_path(), &rc, &w, err, sizeof err) == 0 : 1;
    pl_host_bcast(err, sizeof err, 0, NULL);
    if (drv_min(ok) == 0) pl_usage_error("the single-device reference cannot read the model: %s", err);
    if (g_me == 0) {
        llm_kv_cache kv;
        llm_workspace ws;
        llm_kv_cache_init(&kv, &g_cfg, NULL, S.B, S.n_ctx, 0, g_cfg.n_layer);
        llm_workspace_init(&ws, &g_cfg, NULL, S.n_tok_max);
        float *dev = pl_malloc_floats((size_t)S.n_tok_max * V);
        int *seq = calloc((size_t)S.n_tok_max, sizeof(int)), *pos = calloc((size_t)S.n_tok_max, sizeof(int));
        PL_CHECK(seq && pos, "out of host memory");
        for (int i = 0; i < S.P; i++) pos[i] = i;
        ref_step(&w, &kv, &ws, dev, S.prompt, seq, pos, S.P, LLM_LOGITS_ALL, S.ref_prompt);
        S.gen[0] = argmax_row(S.ref_prompt + (size_t)(S.P - 1) * V, (int)V);
        for (int k = 0; k < S.K; k++) {
            int p = S.P + k;
            ref_step(&w, &kv, &ws, dev, &S.gen[k], seq, &p, 1, LLM_LOGITS_LAST, S.ref_gen + (size_t)k * V);
            S.gen[k + 1] = argmax_row(S.ref_gen + (size_t)k * V, (int)V);
        }
        ref_step(&w, &kv, &ws, dev, S.btok, S.bseq, S.bpos, S.bn, LLM_LOGITS_LAST, S.ref_batch);
        for (int d = 0; d < S.D; d++) {
            for (int s = 0; s < S.B; s++) seq[s] = s, pos[s] = S.blen[s] + d;
            ref_step(&w, &kv, &ws, dev, S.dtok + (size_t)d * S.B, seq, pos, S.B, LLM_LOGITS_LAST,
                     S.ref_decode + (size_t)d * S.B * V);
        }
        free(seq), free(pos);
        pl_free(dev);
        llm_workspace_free(&ws);
        llm_kv_cache_free(&kv);
        llm_weights_free(&w, &rc);
    }
    pl_host_bcast(S.gen, ((size_t)S.K + 1) * sizeof(int), 0, NULL);
    float *arrays[4] = {S.ref_prompt, S.ref_gen, S.ref_batch, S.ref_decode};
    size_t rows[4] = {(size_t)S.P, (size_t)S.K, (size_t)S.B, (size_t)S.D * S.B};
    for (int i = 0; i < 4; i++) pl_host_bcast(arrays[i], rows[i] * V * sizeof(float), 0, NULL);
}

void scenario_init(void) {
    S.prompt = kit_tokens(g_prompt, false, &S.P);
    if (S.P < 1 || S.P > 512) pl_usage_error("--prompt: %d tokens; the graded scenario takes 1 .. 512", S.P);
    S.K = g_gen, S.B = g_batch, S.D = g_decode;
    int N, longest = 0;
    int *text = kit_tokens(BATCH_TEXT, false, &N);
    S.blen = malloc((size_t)S.B * sizeof(int));
    S.gen = calloc((size_t)S.K + 1, sizeof(int));
    PL_CHECK(S.blen && S.gen, "out of host memory");
    S.bn = 0;
    for (int s = 0; s < S.B; s++) { /* lengths 2, 5, 3, 6, 4, 2, ...: sequences at different positions */
        S.blen[s] = 2 + 3 * s % 5;
        S.bn += S.blen[s];
        longest = S.blen[s] > longest ? S.blen[s] : longest;
    }
    S.btok = malloc((size_t)S.bn * sizeof(int)), S.bseq = malloc((size_t)S.bn * sizeof(int));
    S.bpos = malloc((size_t)S.bn * sizeof(int)), S.dtok = malloc((size_t)S.D * S.B * sizeof(int) + 1);
    PL_CHECK(S.btok && S.bseq && S.bpos && S.dtok, "out of host memory");
    for (int s = 0, t = 0; s < S.B; s++)
        for (int i = 0; i < S.blen[s]; i++, t++) S.btok[t] = text[(s + i) % N], S.bseq[t] = s, S.bpos[t] = i;
    for (int d = 0; d < S.D; d++)
        for (int s = 0; s < S.B; s++) S.dtok[d * S.B + s] = text[(7 * s + 3 * d + 1) % N];
    free(text);
    /* room for the longest sequence, and for the invalid batch's hole to be a hole */
    S.n_ctx = (S.P + S.K > longest + S.D ? S.P + S.K : longest + S.D) + 8;
    if (S.n_ctx * 2 > g_cfg.n_ctx) pl_usage_error("the scenario needs %d positions, the model has %d", 2 * S.n_ctx, g_cfg.n_ctx);
    S.n_tok_max = S.P > S.bn ? S.P : S.bn;
    size_t V = (size_t)g_cfg.n_vocab;
    S.ref_prompt = malloc((size_t)S.P * V * sizeof(float));
    S.ref_gen = malloc(((size_t)S.K + 1) * V * sizeof(float));
    S.ref_batch = malloc((size_t)S.B * V * sizeof(float));
    S.ref_decode = malloc(((size_t)S.D * S.B + 1) * V * sizeof(float));
    PL_CHECK(S.ref_prompt && S.ref_gen && S.ref_batch && S.ref_decode, "out of host memory");
    reference();
}

void scenario_free(void) {
    void *p[] = {S.prompt, S.gen, S.btok, S.bseq, S.bpos, S.blen, S.dtok, S.ref_prompt, S.ref_gen, S.ref_batch, S.ref_decode};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
    memset(&S, 0, sizeof S);
}

/* ================================================================================== */
/* One session                                                                        */
/* ================================================================================== */

/* Stop the session at `phase` with the lowest failing rank's reason (collective). */
static void stop(session *se, int phase, bool failed_here, const char *why) {
    char msg[sizeof se->fail];
    snprintf(msg, sizeof msg, "%s", failed_here ? why : "");
    double who = drv_min(failed_here ? g_me : 1e9);
    pl_host_bcast(msg, sizeof msg, (int)who, NULL);
    if (g_n > 1) snprintf(se->fail, sizeof se->fail, "rank %.0f: %.400s", who, msg);
    else snprintf(se->fail, sizeof se->fail, "%s", msg);
    se->reached = phase;
}

/* One collective forward: the logits poisoned first, the traffic counted, the time taken.
 * False (the session stopped) unless every rank returned `rows`. */
static bool step(session *se, int phase, ls_state *st, const int *tok, const int *seq, const int *pos, int n,
                 int mode, int rows, float *logits, pl_metrics *m, pl_wire *w, double *secs) {
    char err[300] = "";
    pl_wire w0, w1;
    pl_metrics mm;
    pl_poison(logits, (size_t)n * g_cfg.n_vocab, NULL);
    pl_device_sync();
    pl_metrics_reset();
    pl_wire_get(&w0);
    double t0 = pl_now();
    int got = ls_forward(st, tok, seq, pos, n, mode, logits, err, sizeof err);
    pl_device_sync();
    double t = pl_now() - t0;
    pl_metrics_get(m ? m : &mm);
    pl_wire_get(&w1);
    if (w) *w = (pl_wire){w1.p2p_bytes_sent - w0.p2p_bytes_sent, w1.p2p_msgs_sent - w0.p2p_msgs_sent,
                          w1.p2p_bytes_recv - w0.p2p_bytes_recv, w1.p2p_msgs_recv - w0.p2p_msgs_recv,
                          w1.coll_calls - w0.coll_calls, w1.coll_bytes - w0.coll_bytes};
    double tmax = drv_max(t);
    if (secs) *secs += tmax;
    if (drv_min(got == rows) > 0) return true;
    char why[400];
    snprintf(why, sizeof why, "%s: ls_forward returned %d, expected %d logits rows%s%s%s", PHASE[phase], got, rows,
             err[0] ? " (" : "", err, err[0] ? ")" : "");
    stop(se, phase, got != rows, why);
    return false;
}

/* Relative error of rows x V logits against the reference, on the output rank; a wrong
 * greedy token is remembered (step k, or -1 for the token after the prompt). */
static double compare(session *se, const float *logits, const float *ref, int rows, int greedy_step, int want) {
    if (g_me != se->out_rank) return 0;
    size_t V = (size_t)g_cfg.n_vocab;
    float *h = download_rows(logits, rows);
    pl_compare cmp = pl_compare_host(h, ref, (size_t)rows * V, 0.0);
    double rel = cmp.rel_fro;
    for (size_t i = 0; i < (size_t)rows * V; i++)
        if (!isfinite(h[i])) rel = INFINITY;
    if (greedy_step > -2 && se->tok_step == -2) {
        const float *last = h + (size_t)(rows - 1) * V, *rlast = ref + (size_t)(rows - 1) * V;
        int got = argmax_row(last, (int)V);
        double norm = 0;
        for (size_t i = 0; i < V; i++) norm += (double)rlast[i] * rlast[i];
        /* a different token is a tie only when the reference ranks it within the tolerance */
        if (got != want && !(rlast[want] - rlast[got] <= 2 * drv_tolerance() * sqrt(norm)))
            se->tok_step = greedy_step, se->tok_got = got, se->tok_want = want;
    }
    free(h);
    return rel;
}

static double max_d(double a, double b) { return a > b ? a : b; }

static bool init(session *se, ls_state **st, ls_params *p, double *mem) {
    char err[300] = "";
    size_t before = pl_mem_in_use();
    int rc = ls_init(st, &g_cfg, p, err, sizeof err);
    *mem = (double)pl_mem_in_use() - (double)before;
    if (drv_max(rc != LS_OK) == 0) return true;
    char why[400];
    snprintf(why, sizeof why, "ls_init (%s split) returned %d%s%s", MODE_NAME[p->mode], rc, err[0] ? ": " : "", err);
    stop(se, PH_INIT, rc != LS_OK, why);
    if (rc == LS_OK) ls_free(*st);
    return false;
}

/* The invalid inputs: a batch with a hole in its positions, and a negative proportion. */
static void errors(session *se, ls_state *st, float *logits, const ls_params *p) {
    int tok = S.btok[0], seq = S.B > 1 ? 1 : 0, pos = S.blen[seq] + S.D + 2;
    char err[300];
    se->bad_batch_rc = ls_forward(st, &tok, &seq, &pos, 1, LLM_LOGITS_LAST, logits, err, sizeof err);
    ls_free(st);
    float bad[LS_MAX_RANKS] = {-1.0f};
    ls_params q = *p;
    q.tensor_split = bad, q.n_split = 1;
    ls_state *const sentinel = (ls_state *)&q, *st2 = sentinel; /* must come back NULL */
    se->bad_init_rc = ls_init(&st2, &g_cfg, &q, err, sizeof err);
    se->bad_init_out = st2 != NULL;
    if (se->bad_init_rc == LS_OK && st2 && st2 != sentinel) ls_free(st2);
}

static void run(session *se, ls_mode mode, bool uneven) {
    float p[LS_MAX_RANKS];
    int np;
    const char *split = uneven ? uneven_split(g_n) : "";
    PL_CHECK(rl_parse(split, p, &np), "a malformed split");
    rl_cuts(p, np, g_n, se->cuts);
    se->out_rank = rl_output_rank(mode, se->cuts);
    se->tok_step = -2; /* unset: -1 is the token after the prompt */
    se->done = true;
    size_t V = (size_t)g_cfg.n_vocab;
    ls_params prm = {mode, np ? p : NULL, np, S.B, S.n_ctx, S.n_tok_max, g_micro, g_comm};
    ls_state *st = NULL;
    double mem1 = 0, mem2 = 0;
    if (!uneven) { /* the probe: the same state with half the context */
        if (!init(se, &st, &prm, &mem1)) return;
        ls_free(st);
    }
    prm.n_ctx = 2 * S.n_ctx;
    kit_reset_loaded();
    if (!init(se, &st, &prm, &mem2)) return;
    se->w_floats = (double)kit_loaded();
    se->kv_per_pos = (mem2 - mem1) / S.n_ctx;
    float *logits = pl_malloc_floats((size_t)S.n_tok_max * V + 1);
    int *seq = calloc((size_t)S.n_tok_max + S.B, sizeof(int)), *pos = calloc((size_t)S.n_tok_max + S.B, sizeof(int));
    PL_CHECK(seq && pos, "out of host memory");
    for (int i = 0; i < S.P; i++) pos[i] = i;
    if (!step(se, PH_PROMPT, st, S.prompt, seq, pos, S.P, LLM_LOGITS_ALL, S.P, logits, &se->m_prompt, &se->w_prompt,
              &se->t_prefill))
        goto out;
    se->err_prompt = compare(se, logits, S.ref_prompt, S.P, -1, S.gen[0]);
    if (uneven) {
        se->reached = PH_DONE;
        goto out;
    }
    for (int k = 0; k < S.K; k++) {
        int ps = S.P + k;
        if (!step(se, PH_GEN, st, &S.gen[k], seq, &ps, 1, LLM_LOGITS_LAST, 1, logits, NULL, NULL, &se->t_decode))
            goto out;
        se->err_gen = max_d(se->err_gen, compare(se, logits, S.ref_gen + (size_t)k * V, 1, k, S.gen[k + 1]));
    }
    if (!step(se, PH_BATCH, st, S.btok, S.bseq, S.bpos, S.bn, LLM_LOGITS_LAST, S.B, logits, NULL, NULL, NULL)) goto out;
    se->err_batch = compare(se, logits, S.ref_batch, S.B, -2, 0);
    for (int d = 0; d < S.D; d++) {
        for (int s = 0; s < S.B; s++) seq[s] = s, pos[s] = S.blen[s] + d;
        if (!step(se, PH_DECODE, st, S.dtok + (size_t)d * S.B, seq, pos, S.B, LLM_LOGITS_LAST, S.B, logits,
                  d == 0 ? &se->m_decode : NULL, d == 0 ? &se->w_decode : NULL, NULL))
            goto out;
        se->err_batch = max_d(se->err_batch, compare(se, logits, S.ref_decode + (size_t)d * S.B * V, S.B, -2, 0));
    }
    errors(se, st, logits, &prm);
    st = NULL;
    se->reached = PH_DONE;
out:
    if (st) ls_free(st);
    free(seq), free(pos);
    pl_free(logits);
}

void session_run(drv_case *c) {
    session *se = &g_sess[c->arg[0]][c->arg[1]];
    if (!se->done) run(se, (ls_mode)c->arg[0], c->arg[1] != 0);
}

void sessions_free(void) { memset(g_sess, 0, sizeof g_sess); }

/* ================================================================================== */
/* The checks                                                                         */
/* ================================================================================== */

static const session *sess(const drv_case *c) { return &g_sess[c->arg[0]][c->arg[1]]; }

/* False (the case failed) when the session stopped before finishing `phase`. */
static bool reached(drv_case *c, int phase) {
    const session *se = sess(c);
    if (se->reached > phase) return true;
    if (se->reached == phase) drv_fail(c, "%s", se->fail);
    else drv_fail(c, "not reached: the run stopped in %s (%s)", PHASE[se->reached > 0 ? se->reached : 0], se->fail);
    return false;
}

static void greedy(drv_case *c, const session *se, int first, int last) {
    bool bad = se->tok_step >= first && se->tok_step <= last;
    if (drv_max(bad) == 0) return;
    if (bad && se->tok_step < 0)
        drv_fail(c, "the greedy token after the prompt is %d, the single-device forward's is %d", se->tok_got, se->tok_want);
    else if (bad)
        drv_fail(c, "greedy decoding step %d picks token %d, the single-device forward picks %d", se->tok_step + 1,
                 se->tok_got, se->tok_want);
}

void check_prefill(drv_case *c) {
    if (!reached(c, PH_PROMPT)) return;
    const session *se = sess(c);
    drv_check_error(c, "the prompt's logits (every position) vs the single-device forward", se->err_prompt, drv_tolerance());
    greedy(c, se, -1, -1);
}

void check_generate(drv_case *c) {
    if (!reached(c, PH_GEN)) return;
    const session *se = sess(c);
    drv_check_error(c, "the logits of each greedy decoding step vs the single-device forward", se->err_gen, drv_tolerance());
    greedy(c, se, 0, S.K);
    double tp = se->t_prefill, td = se->t_decode / (S.K > 0 ? S.K : 1);
    drv_num(c, "prefill_tok_per_s", S.P / tp);
    drv_num(c, "decode_tok_per_s", 1 / td);
    drv_note(c, "%d greedy tokens as the single-device forward; prefill %d tokens %.1f ms (%.0f tok/s), decode %.1f ms/token "
             "(%.1f tok/s) on %d rank(s)", S.K + 1, S.P, 1e3 * tp, S.P / tp, 1e3 * td, 1 / td, g_n);
}

void check_batch(drv_case *c) {
    if (!reached(c, PH_DECODE)) return;
    drv_check_error(c, "a batch of sequences and its decode steps vs the single-device forward", sess(c)->err_batch,
                    drv_tolerance());
}

/* Counted traffic against the formula on this rank; why (this rank's) when it differs. */
static bool traffic_matches(const pl_metrics *m, const pl_wire *w, const rl_traffic *t, const char *what, char *why,
                            size_t cap, bool *tampered) {
    *tampered |= m->bytes_sent != w->p2p_bytes_sent || m->msgs_sent != w->p2p_msgs_sent ||
                 m->coll_total != w->coll_calls || m->coll_bytes != w->coll_bytes;
    bool ok = fabs((double)m->bytes_sent - t->p2p_bytes) < 0.5 && fabs((double)m->msgs_sent - t->p2p_msgs) < 0.5 &&
              fabs((double)m->coll_bytes - t->coll_bytes) < 0.5;
    char got[160] = "", want[160] = "";
    for (int k = 0, gl = 0, wl = 0; k < PL_OP_COUNT; k++) {
        ok &= m->coll_calls[k] == (uint64_t)t->colls[k];
        if (m->coll_calls[k]) gl += snprintf(got + gl, sizeof got - (size_t)gl, ", %llu %s", (unsigned long long)m->coll_calls[k], pl_op_kind_name((pl_op_kind)k));
        if (t->colls[k]) wl += snprintf(want + wl, sizeof want - (size_t)wl, ", %d %s", t->colls[k], pl_op_kind_name((pl_op_kind)k));
    }
    if (!ok)
        snprintf(why, cap, "%s: sent %.0f bytes in %.0f message(s)%s (S = %.0f), expected %.0f bytes in %.0f%s (S = %.0f)",
                 what, (double)m->bytes_sent, (double)m->msgs_sent, got, (double)m->coll_bytes, t->p2p_bytes, t->p2p_msgs,
                 want, t->coll_bytes);
    return ok;
}

static double total(const pl_metrics *m) { return (double)m->bytes_sent + (double)m->coll_bytes; }

void check_traffic(drv_case *c) {
    if (!reached(c, PH_DECODE)) return;
    const session *se = sess(c);
    ls_mode mode = (ls_mode)c->arg[0];
    if (g_n == 1) {
        drv_note(c, "1 rank: nothing crosses (counted: %.0f bytes)", total(&se->m_prompt) + total(&se->m_decode));
        return;
    }
    rl_traffic tp, td;
    rl_expect_traffic(mode, se->cuts, g_me, S.P, 1, S.P, &tp);
    rl_expect_traffic(mode, se->cuts, g_me, S.B, S.B, S.B, &td);
    char why[480] = "", what[96];
    bool tampered = false;
    snprintf(what, sizeof what, "the %d-token prompt", S.P);
    bool ok = traffic_matches(&se->m_prompt, &se->w_prompt, &tp, what, why, sizeof why, &tampered);
    snprintf(what, sizeof what, "a decode step of %d sequences", S.B);
    if (ok) ok = traffic_matches(&se->m_decode, &se->w_decode, &td, what, why, sizeof why, &tampered);
    double want = drv_sum(tp.p2p_bytes + tp.coll_bytes + td.p2p_bytes + td.coll_bytes);
    double got = drv_sum(total(&se->m_prompt) + total(&se->m_decode));
    drv_num(c, "bytes_per_token", got / (S.P + S.B));
    drv_num(c, "bytes_per_token_formula", want / (S.P + S.B));
    drv_num(c, "traffic_ratio", got > 0 ? want / got : 0);
    if (drv_max(tampered) > 0) drv_forbid(c, "the counted traffic differs from what went to the comm backend");
    else if (!ok) drv_fail(c, "%s", why);
    else drv_note(c, "%.0f bytes per token over all ranks (prompt + decode step), as the formula", got / (S.P + S.B));
}

void check_kvcache(drv_case *c) {
    if (!reached(c, PH_INIT)) return;
    const session *se = sess(c);
    double want = rl_kv_bytes_per_pos((ls_mode)c->arg[0], se->cuts, g_me, S.B);
    bool bad = fabs(se->kv_per_pos - want) > 0.5;
    double any_bad = drv_max(bad), busiest = drv_max(want);
    drv_num(c, "kv_bytes_per_position", drv_max(se->kv_per_pos));
    if (bad)
        drv_fail(c, "this rank's KV cache grows by %.0f bytes per position (of %d sequences), it should by %.0f: the "
                 "layers / KV heads it owns", se->kv_per_pos, S.B, want);
    else if (any_bad == 0)
        drv_note(c, "KV cache per position (%d sequences): %.0f bytes on the busiest rank", S.B, busiest);
}

static void weights(drv_case *c, const session *se) {
    double want = rl_weight_floats((ls_mode)c->arg[0], se->cuts, g_me);
    bool bad = se->w_floats != want;
    double any_bad = drv_max(bad), busiest = drv_max(want), all = drv_sum(want);
    drv_num(c, "weight_bytes_per_rank", 4 * drv_max(se->w_floats));
    if (bad)
        drv_fail(c, "this rank loaded %.0f weight floats, its share is %.0f (%s)", se->w_floats, want,
                 se->w_floats > want ? "more than it needs: a copy, or another rank's part?" : "fewer: what does it use?");
    else if (any_bad == 0)
        drv_note(c, "weights per rank as the split: %.1f MiB on the busiest, %.1f MiB in all", 4 * busiest / 1048576.0,
                 4 * all / 1048576.0);
}

void check_weights(drv_case *c) {
    if (reached(c, PH_INIT)) weights(c, sess(c));
}

void check_errors(drv_case *c) {
    if (!reached(c, PH_ERRORS)) return;
    const session *se = sess(c);
    if (drv_max(se->bad_batch_rc != -1) > 0) {
        if (se->bad_batch_rc != -1)
            drv_fail(c, "a batch with a hole in its positions: ls_forward returned %d on this rank, expected -1", se->bad_batch_rc);
    } else if (drv_max(se->bad_init_rc != LS_ERR_SPLIT || se->bad_init_out) > 0) {
        if (se->bad_init_rc != LS_ERR_SPLIT || se->bad_init_out)
            drv_fail(c, "a negative proportion: ls_init returned %d%s, expected LS_ERR_SPLIT and NULL", se->bad_init_rc,
                     se->bad_init_out ? " and a state" : "");
    }
}

/* The uneven split: the prompt's logits, its traffic and the weights. */
void check_split(drv_case *c) {
    if (!reached(c, PH_PROMPT)) return;
    const session *se = sess(c);
    drv_check_error(c, "the prompt's logits at an uneven --tensor-split vs the single-device forward", se->err_prompt,
                    drv_tolerance());
    greedy(c, se, -1, -1);
    bool failed = drv_max(drv_failed(c)) > 0; /* decided alike on every rank */
    if (g_n > 1 && !failed) {
        rl_traffic t;
        rl_expect_traffic((ls_mode)c->arg[0], se->cuts, g_me, S.P, 1, S.P, &t);
        char why[480] = "", what[96];
        bool tampered = false;
        snprintf(what, sizeof what, "the prompt at --tensor-split %s", uneven_split(g_n));
        bool ok = traffic_matches(&se->m_prompt, &se->w_prompt, &t, what, why, sizeof why, &tampered);
        if (drv_max(tampered) > 0) drv_forbid(c, "the counted traffic differs from what went to the comm backend");
        else if (drv_max(!ok) > 0 && !ok) drv_fail(c, "%s", why);
    }
    weights(c, se);
    if (!failed && (ls_mode)c->arg[0] == LS_LAYER) {
        char d[160];
        rl_describe_layers(se->cuts, g_n, g_cfg.n_layer, d, sizeof d);
        drv_note(c, "--tensor-split %s: %s", uneven_split(g_n), d);
    }
}
