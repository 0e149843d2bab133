/* lab05_session.c - one run of the student's split per mode (a "session") and the checks
 * of the forward cases on it.
 *
 * A session: ls_init twice with two context lengths (the difference of device memory is the
 * KV cache, whatever else a rank allocates), then the scenario (lab05_scenario.c) step by
 * step, each step's traffic counted; then an invalid batch and invalid proportions, which
 * every rank must refuse. The first case of a mode runs it; the others read it. Everything
 * that reduces over the ranks is called by every rank in the same order.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab05.h"

enum { PH_INIT, PH_PROMPT, PH_GEN, PH_BATCH, PH_DECODE, PH_DONE };
static const char *PHASE[] = {"ls_init", "the prompt", "decoding", "the batch", "the batch's decode steps", "-"};

typedef struct {
    bool done;
    int reached;                /* the phase the run stopped in (PH_DONE: it completed)  */
    char fail[440];             /* why it stopped; the same text on every rank            */
    float cuts[LS_MAX_RANKS + 1];
    int out_rank;
    /* this rank's */
    double kv_per_pos, w_bytes;
    double err_prompt, err_gen, err_batch; /* on the output rank; 0 elsewhere           */
    int tok_step, tok_got, tok_want;      /* first wrong greedy pick: decode step k, -1 the
                                             one after the prompt, -2 none               */
    pl_metrics m_prompt, m_decode;
    pl_wire w_prompt, w_decode;
    int bad_batch_rc, bad_init_rc, bad_init_out;
    double t_prefill, t_decode;           /* seconds, slowest rank                       */
} session;
static session g_sess[3][S_KINDS]; /* [mode][which session] */

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

static bool init(session *se, ls_state **st, const ls_params *p, double *mem) {
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

/* The invalid inputs, on a state of their own (so that a rank that hangs on them costs only
 * the errors case): a token at position 2 of an empty sequence, a hole, then a negative
 * proportion. */
static void run_errors(session *se, const ls_params *p) {
    ls_state *st = NULL;
    double mem;
    if (!init(se, &st, p, &mem)) return;
    float *logits = pl_malloc_floats((size_t)g_cfg.n_vocab + 1);
    int tok = g_sc.btok[0], seq = g_sc.B > 1 ? 1 : 0, pos = 2;
    char err[300];
    se->bad_batch_rc = ls_forward(st, &tok, &seq, &pos, 1, LLM_LOGITS_LAST, logits, err, sizeof err);
    ls_free(st);
    pl_free(logits);
    float bad[LS_MAX_RANKS] = {-1.0f};
    ls_params q = *p;
    q.tensor_split = bad, q.n_split = 1;
    ls_state *const sentinel = (ls_state *)&q, *st2 = sentinel; /* must come back NULL */
    se->bad_init_rc = ls_init(&st2, &g_cfg, &q, err, sizeof err);
    se->bad_init_out = st2 != NULL;
    if (se->bad_init_rc == LS_OK && st2 && st2 != sentinel) ls_free(st2);
    se->reached = PH_DONE;
}

/* The scenario, step by step; the uneven split stops after the prompt. */
static void run_scenario(session *se, ls_params *prm, int kind) {
    size_t V = (size_t)g_cfg.n_vocab;
    ls_state *st = NULL;
    double mem1 = 0, mem2 = 0;
    if (kind == S_MAIN) { /* the probe: the same state with half the context */
        if (!init(se, &st, prm, &mem1)) return;
        ls_free(st);
    }
    prm->n_ctx = 2 * g_sc.n_ctx;
    kit_reset_loaded();
    if (!init(se, &st, prm, &mem2)) return;
    se->w_bytes = (double)kit_loaded();
    se->kv_per_pos = (mem2 - mem1) / g_sc.n_ctx;
    float *logits = pl_malloc_floats((size_t)g_sc.n_tok_max * V + 1);
    int *seq = calloc((size_t)g_sc.n_tok_max, sizeof(int)), *pos = calloc((size_t)g_sc.n_tok_max, sizeof(int));
    PL_CHECK(seq && pos, "out of host memory");
    for (int i = 0; i < g_sc.P; i++) pos[i] = i;
    if (!step(se, PH_PROMPT, st, g_sc.prompt, seq, pos, g_sc.P, LLM_LOGITS_ALL, g_sc.P, logits, &se->m_prompt,
              &se->w_prompt, &se->t_prefill))
        goto out;
    se->err_prompt = compare(se, logits, g_sc.ref_prompt, g_sc.P, -1, g_sc.gen[0]);
    for (int k = 0; k < g_sc.K && kind == S_MAIN; k++) {
        int ps = g_sc.P + k;
        if (!step(se, PH_GEN, st, &g_sc.gen[k], seq, &ps, 1, LLM_LOGITS_LAST, 1, logits, NULL, NULL, &se->t_decode))
            goto out;
        se->err_gen = max_d(se->err_gen, compare(se, logits, g_sc.ref_gen + (size_t)k * V, 1, k, g_sc.gen[k + 1]));
    }
    if (kind == S_MAIN) {
        if (!step(se, PH_BATCH, st, g_sc.btok, g_sc.bseq, g_sc.bpos, g_sc.bn, LLM_LOGITS_LAST, g_sc.B, logits, NULL,
                  NULL, NULL))
            goto out;
        se->err_batch = compare(se, logits, g_sc.ref_batch, g_sc.B, -2, 0);
    }
    for (int d = 0; d < g_sc.D && kind == S_MAIN; d++) {
        for (int s = 0; s < g_sc.B; s++) seq[s] = s, pos[s] = g_sc.blen[s] + d;
        if (!step(se, PH_DECODE, st, g_sc.dtok + (size_t)d * g_sc.B, seq, pos, g_sc.B, LLM_LOGITS_LAST, g_sc.B, logits,
                  d == 0 ? &se->m_decode : NULL, d == 0 ? &se->w_decode : NULL, NULL))
            goto out;
        double err = compare(se, logits, g_sc.ref_decode + (size_t)d * g_sc.B * V, g_sc.B, -2, 0);
        se->err_batch = max_d(se->err_batch, err);
    }
    se->reached = PH_DONE;
out:
    ls_free(st);
    free(seq), free(pos);
    pl_free(logits);
}

void session_run(drv_case *c) {
    session *se = &g_sess[c->arg[0]][c->arg[1]];
    if (se->done) return;
    ls_mode mode = (ls_mode)c->arg[0];
    float p[LS_MAX_RANKS];
    int np;
    PL_CHECK(rl_parse(c->arg[1] == S_UNEVEN ? uneven_split(g_n) : "", p, &np), "a malformed split");
    rl_cuts(p, np, g_n, se->cuts);
    se->out_rank = rl_output_rank(mode, se->cuts);
    se->tok_step = -2;
    se->done = true;
    ls_params prm = {mode, np ? p : NULL, np, g_sc.B, g_sc.n_ctx, g_sc.n_tok_max, g_micro, g_comm};
    if (c->arg[1] == S_ERRORS) run_errors(se, &prm);
    else run_scenario(se, &prm, (int)c->arg[1]);
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
    greedy(c, se, 0, g_sc.K);
    double tp = se->t_prefill, td = se->t_decode / (g_sc.K > 0 ? g_sc.K : 1);
    drv_num(c, "prefill_tok_per_s", g_sc.P / tp);
    drv_num(c, "decode_tok_per_s", 1 / td);
    drv_note(c, "%d greedy tokens as the single-device forward; prefill %d tokens %.1f ms (%.0f tok/s), decode %.1f ms/token "
             "(%.1f tok/s) on %d rank(s)", g_sc.K + 1, g_sc.P, 1e3 * tp, g_sc.P / tp, 1e3 * td, 1 / td, g_n);
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
        const char *kind = pl_op_kind_name((pl_op_kind)k);
        if (m->coll_calls[k])
            gl += snprintf(got + gl, sizeof got - (size_t)gl, ", %llu %s", (unsigned long long)m->coll_calls[k], kind);
        if (t->colls[k]) wl += snprintf(want + wl, sizeof want - (size_t)wl, ", %d %s", t->colls[k], kind);
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
    rl_expect_traffic(mode, se->cuts, g_me, g_sc.P, 1, g_sc.P, &tp);
    rl_expect_traffic(mode, se->cuts, g_me, g_sc.B, g_sc.B, g_sc.B, &td);
    char why[480] = "", what[96];
    bool tampered = false;
    snprintf(what, sizeof what, "the %d-token prompt", g_sc.P);
    bool ok = traffic_matches(&se->m_prompt, &se->w_prompt, &tp, what, why, sizeof why, &tampered);
    snprintf(what, sizeof what, "a decode step of %d sequences", g_sc.B);
    if (ok) ok = traffic_matches(&se->m_decode, &se->w_decode, &td, what, why, sizeof why, &tampered);
    double want = drv_sum(tp.p2p_bytes + tp.coll_bytes + td.p2p_bytes + td.coll_bytes);
    double got = drv_sum(total(&se->m_prompt) + total(&se->m_decode));
    drv_num(c, "bytes_per_token", got / (g_sc.P + g_sc.B));
    drv_num(c, "bytes_per_token_formula", want / (g_sc.P + g_sc.B));
    drv_num(c, "traffic_ratio", got > 0 ? want / got : 0);
    if (drv_max(tampered) > 0) drv_forbid(c, "the counted traffic differs from what went to the comm backend");
    else if (!ok) drv_fail(c, "%s", why);
    else drv_note(c, "%.0f bytes per token over all ranks (prompt + decode step), as the formula", got / (g_sc.P + g_sc.B));
}

void check_kvcache(drv_case *c) {
    if (!reached(c, PH_INIT)) return;
    const session *se = sess(c);
    double want = rl_kv_bytes_per_pos((ls_mode)c->arg[0], se->cuts, g_me, g_sc.B);
    bool bad = fabs(se->kv_per_pos - want) > 0.5;
    double any_bad = drv_max(bad), busiest = drv_max(want);
    drv_num(c, "kv_bytes_per_position", drv_max(se->kv_per_pos));
    if (bad)
        drv_fail(c, "this rank's KV cache grows by %.0f bytes per position (of %d sequences), it should by %.0f: the "
                 "layers / KV heads it owns", se->kv_per_pos, g_sc.B, want);
    else if (any_bad == 0)
        drv_note(c, "KV cache per position (%d sequences): %.0f bytes on the busiest rank", g_sc.B, busiest);
}

static void weights(drv_case *c, const session *se) {
    double want = rl_weight_bytes((ls_mode)c->arg[0], se->cuts, g_me);
    bool bad = se->w_bytes != want;
    double any_bad = drv_max(bad), busiest = drv_max(want), all = drv_sum(want);
    drv_num(c, "weight_bytes_per_rank", drv_max(se->w_bytes));
    if (bad)
        drv_fail(c, "this rank loaded %.0f bytes of weights, its share is %.0f in the types the file stores (%s)",
                 se->w_bytes, want,
                 se->w_bytes > want ? "more than it needs: a copy, another rank's part, or blocks dequantised?"
                                    : "fewer: what does it use?");
    else if (any_bad == 0)
        drv_note(c, "weights per rank as the split: %.1f MiB on the busiest, %.1f MiB in all", busiest / 1048576.0,
                 all / 1048576.0);
}

void check_weights(drv_case *c) {
    if (reached(c, PH_INIT)) weights(c, sess(c));
}

void check_errors(drv_case *c) {
    if (!reached(c, PH_INIT)) return;
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
        rl_expect_traffic((ls_mode)c->arg[0], se->cuts, g_me, g_sc.P, 1, g_sc.P, &t);
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
