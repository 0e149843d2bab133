/* lab05_session.c (referee) - the forward cases: a session's inputs, what the player left
 * (its logits, its report), the checks, and M.generate's timed runs.
 *
 * The first case of a session that runs declares its slots and gives the player the
 * scenario; its check() reads the report and the logits into the referee's summary of the
 * session (lab5_session), which every case of the session is judged on. Everything that
 * reduces over the ranks is called by every referee in the same order: the sessions' done
 * flags, the case order and the verdicts gathered by the runner are the same on all of them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab05_referee.h"

/* M.generate's timed runs (the -w / -n flags win): a warm-up and timed prefills of a fresh
 * prompt each, then decode steps after the last one (warm by then). Few: every run is
 * checked against the single-device forward, and the rubric scores no speed here. */
#define TIMED_PREFILL_WARMUP 1
#define TIMED_PREFILLS 2
#define TIMED_DECODE_WARMUP 0
#define TIMED_DECODES 3
#define TIMED_KEPT 64 /* runs kept for their check at most (more: checked when it fills) */

/* The case's state in the referee. */
typedef struct {
    bool runs_session;    /* this case gave the player the session's inputs               */
    lab5_session_in in;   /* their header (the row offsets of "logits")                   */
    /* M.generate's timed runs */
    bool timing;
    int which;            /* 0: a prefill of a fresh prompt, 1: a decode step             */
    int decode_j, room;   /* decode runs so far; positions P .. P + room - 1, then rewound */
    bool verifies;        /* this rank holds the logits: it checks every timed run        */
    double tol;           /* of a timed run's logits (a prompt nobody chose)              */
    llm_kv_cache kv;      /* the reference's state along the timed runs                   */
    llm_workspace ws;
    float *dev;
    int stored;           /* timed runs kept for their check (kept[]): checked after
                             the loop, so that the reference's time on this rank never
                             delays the other ranks' next run, which would count it        */
    struct {
        int run;
        int32_t *ints;    /* n, then tok, seq, pos [cap] each, as "tin" held them           */
        float *row;       /* the logits row the player left                                 */
    } kept[TIMED_KEPT];
    char note[200];       /* the check's note, completed by perf()                         */
} modes_case;

static uint64_t mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static void split_of(const lab5_referee *R, int kind, float *p, int *np, float *cuts) {
    PL_CHECK(lab5_parse_split(kind == LAB5_S_UNEVEN ? lab5_uneven_split(R->n) : "", p, np), "a malformed split");
    lab5_cuts(p, *np, R->n, cuts);
}

/* ================================================================================== */
/* Setup: the session's inputs, the timing slots                                      */
/* ================================================================================== */

/* Rank 0's greedy tokens to every referee (those whose rank holds no logits computed none). */
static void share_gen(lab5_referee *R) {
    lab5_scenario *sc = &R->sc;
    if (sc->gen_shared) return;
    size_t bytes = ((size_t)sc->K + 1) * sizeof(int);
    int *all = malloc(bytes * (size_t)R->n);
    PL_CHECK(all != NULL, "out of host memory");
    drv_allgather(sc->gen, bytes, all);
    PL_CHECK(!R->have_ref || !memcmp(sc->gen, all, bytes), "two referees' single-device forwards differ");
    memcpy(sc->gen, all, bytes);
    free(all);
    sc->gen_shared = true;
}

static void session_setup(drv_case *c, lab5_referee *R, modes_case *st, int mode, int kind) {
    const lab5_scenario *sc = &R->sc;
    share_gen(R);
    float p[LAB5_MAX_RANKS], cuts[LAB5_MAX_RANKS + 1];
    int np;
    split_of(R, kind, p, &np, cuts);
    lab5_session_in *h = &st->in;
    *h = (lab5_session_in){.kind = kind, .P = sc->P, .K = sc->K, .B = sc->B, .D = sc->D, .bn = sc->bn,
                           .bad_tok = sc->btok[0], .bad_seq = sc->B > 1 ? 1 : 0, .bad_pos = 2};
    h->prm = (lab5_params){.mode = mode, .n_split = np, .n_seq_max = sc->B, .n_ctx = sc->n_ctx,
                           .n_tokens_max = sc->n_tok_max, .n_micro = lab5_opts()->micro};
    memcpy(h->prm.split, p, (size_t)np * sizeof(float));
    h->n_ints = lab5_session_n_ints(sc->P, sc->K, sc->B, sc->D, sc->bn);
    lab5_session_in *in = drv_slot_new(c, "sin", sizeof *in + (size_t)h->n_ints * sizeof(int32_t), DRV_IN | DRV_CONST);
    *in = *h;
    int32_t *v = (int32_t *)(in + 1);
    const int *parts[7] = {sc->prompt, sc->gen, sc->btok, sc->bseq, sc->bpos, sc->blen, sc->dtok};
    const int lens[7] = {sc->P, sc->K + 1, sc->bn, sc->bn, sc->bn, sc->B, sc->D * sc->B};
    for (int i = 0; i < 7; i++)
        for (int k = 0; k < lens[i]; k++) *v++ = parts[i][k];
    drv_slot_new(c, "logits", (size_t)lab5_logits_rows(h) * (size_t)R->model.cfg.n_vocab * sizeof(float), DRV_OUT);
    drv_slot_new(c, "report", sizeof(lab5_report), DRV_OUT | DRV_ZEROED);
    st->runs_session = true;
}

static void timing_setup(drv_case *c, lab5_referee *R, modes_case *st, int mode) {
    const lab5_scenario *sc = &R->sc;
    const llm_config *cfg = &R->model.cfg;
    const drv_options *o = drv_opts();
    int warm = o->warmup >= 0 ? o->warmup : TIMED_DECODE_WARMUP, iters = o->iters > 0 ? o->iters : TIMED_DECODES;
    int n_ctx = sc->P + warm + iters + 1 < cfg->n_ctx ? sc->P + warm + iters + 1 : cfg->n_ctx;
    st->room = n_ctx - sc->P;
    lab5_timed_in *ti = drv_slot_new(c, "tin", lab5_timed_in_bytes(sc->P), DRV_IN | DRV_CONST);
    ti->prm = (lab5_params){.mode = mode, .n_seq_max = 1, .n_ctx = n_ctx, .n_tokens_max = sc->P,
                            .n_micro = lab5_opts()->micro};
    ti->cap = sc->P;
    drv_slot_new(c, "tlogits", (size_t)sc->P * cfg->n_vocab * sizeof(float), DRV_OUT);
    drv_slot_new(c, "tready", sizeof(int32_t), DRV_OUT | DRV_ZEROED);
    float p[LAB5_MAX_RANKS], cuts[LAB5_MAX_RANKS + 1];
    int np;
    split_of(R, LAB5_S_MAIN, p, &np, cuts);
    st->verifies = R->me == lab5_output_rank(mode, cuts, R->n, cfg->n_layer);
    st->tol = lab5_prompt_tolerance(cfg, n_ctx, R->tol);
    if (st->verifies) {
        PL_CHECK(R->have_ref, "a referee that checks logits holds no reference");
        llm_kv_cache_init(&st->kv, &R->wcfg, NULL, 1, n_ctx, 0, R->wcfg.n_layer);
        llm_workspace_init(&st->ws, &R->wcfg, NULL, sc->P);
        st->dev = pl_malloc_floats((size_t)sc->P * cfg->n_vocab);
    }
    st->timing = true;
}

void lab5_modes_setup(drv_case *c) {
    lab5_referee *R = lab5_ref();
    lab5_forget_file(R); /* the player has mapped it */
    modes_case *st = drv_state(c, sizeof *st);
    int mode = (int)c->arg[0], kind = (int)c->arg[1];
    if (!R->sess[mode][kind].done) session_setup(c, R, st, mode, kind);
    if (c->arg[2] == LAB5_C_GENERATE) timing_setup(c, R, st, mode);
}

void lab5_modes_teardown(drv_case *c) {
    modes_case *st = c->state;
    if (!st || !st->verifies) return;
    for (int k = 0; k < st->stored; k++) free(st->kept[k].ints), free(st->kept[k].row);
    llm_kv_cache_free(&st->kv);
    llm_workspace_free(&st->ws);
    pl_free(st->dev);
}

/* ================================================================================== */
/* What the player left: the session's summary                                        */
/* ================================================================================== */

/* Relative error of rows x V logits against the reference; a wrong greedy token is
 * remembered (step k, or -1 for the token after the prompt): it is a tie only when the
 * reference ranks it within the tolerance. */
static double compare(const lab5_referee *R, lab5_session *se, const float *got, const float *ref, int rows,
                      int greedy_step, int want, double tol) {
    size_t V = (size_t)R->model.cfg.n_vocab;
    double rel = drv_rel_err_f(got, ref, (size_t)rows * V);
    if (greedy_step > -2 && se->tok_step == -2) {
        const float *last = got + (size_t)(rows - 1) * V, *rlast = ref + (size_t)(rows - 1) * V;
        int pick = lab5_argmax(last, (int)V);
        double norm = 0;
        for (size_t i = 0; i < V; i++) norm += (double)rlast[i] * rlast[i];
        if (pick != want && !(rlast[want] - rlast[pick] <= 2 * tol * sqrt(norm)))
            se->tok_step = greedy_step, se->tok_got = pick, se->tok_want = want;
    }
    return rel;
}

static double max_d(double a, double b) { return a > b ? a : b; }

/* The output rank's logits, phase by phase as far as the run came. */
static void compare_logits(drv_case *c, const lab5_referee *R, lab5_session *se, const lab5_session_in *in) {
    const lab5_scenario *sc = &R->sc;
    size_t V = (size_t)R->model.cfg.n_vocab;
    const float *lg = drv_slot_host(c, "logits");
    PL_CHECK(R->have_ref, "a referee that checks logits holds no reference");
    if (se->reached > LAB5_PH_PROMPT)
        se->err_prompt = compare(R, se, lg, sc->ref_prompt, in->P, -1, sc->gen[0], R->tol_prompt);
    if (in->kind != LAB5_S_MAIN) return;
    for (int k = 0; k < in->K && se->reached > LAB5_PH_GEN; k++)
        se->err_gen = max_d(se->err_gen, compare(R, se, lg + lab5_row_gen(in, k) * V, sc->ref_gen + (size_t)k * V, 1, k,
                                                 sc->gen[k + 1], R->tol_prompt));
    if (se->reached < LAB5_PH_DONE) return;
    se->err_batch = compare(R, se, lg + lab5_row_batch(in) * V, sc->ref_batch, in->B, -2, 0, R->tol);
    for (int d = 0; d < in->D; d++)
        se->err_batch = max_d(se->err_batch, compare(R, se, lg + lab5_row_decode(in, d) * V,
                                                     sc->ref_decode + (size_t)d * in->B * V, in->B, -2, 0, R->tol));
}

/* The player's report (its own account, bounds-checked) and the logits, into the summary. */
static void absorb(drv_case *c, lab5_referee *R, lab5_session *se, const lab5_session_in *in) {
    int mode = (int)c->arg[0], kind = (int)c->arg[1];
    float p[LAB5_MAX_RANKS];
    int np;
    split_of(R, kind, p, &np, se->cuts);
    se->out_rank = lab5_output_rank(mode, se->cuts, R->n, R->model.cfg.n_layer);
    se->tok_step = -2;
    se->done = true;
    lab5_report rep;
    memset(&rep, 0, sizeof rep);
    if (c->ran) memcpy(&rep, drv_slot_host(c, "report"), sizeof rep);
    rep.fail[sizeof rep.fail - 1] = '\0';
    bool valid = rep.measured == 1 && rep.reached >= LAB5_PH_INIT && rep.reached <= LAB5_PH_DONE;
    if (!valid) {
        rep.reached = LAB5_PH_INIT;
        snprintf(rep.fail, sizeof rep.fail, "%s", c->ran ? "the player left no report of its run" : "the run did not start");
    }
    se->reached = (int)drv_min(rep.reached);
    /* why: the lowest rank that says */
    char *all = malloc((size_t)R->n * sizeof rep.fail);
    PL_CHECK(all != NULL, "out of host memory");
    drv_allgather(rep.fail, sizeof rep.fail, all);
    int who = -1;
    for (int r = 0; r < R->n && who < 0; r++)
        if (all[(size_t)r * sizeof rep.fail]) who = r;
    if (se->reached < LAB5_PH_DONE) {
        const char *msg = who >= 0 ? all + (size_t)who * sizeof rep.fail : "";
        if (who < 0) snprintf(se->fail, sizeof se->fail, "the run stopped in %s on every rank without a reason",
                              LAB5_PHASE[se->reached]);
        else if (R->n > 1) snprintf(se->fail, sizeof se->fail, "rank %d: %.400s", who, msg);
        else snprintf(se->fail, sizeof se->fail, "%.400s", msg);
    }
    free(all);
    se->kv_per_pos = rep.kv_per_pos, se->w_bytes = rep.w_bytes;
    se->m_prompt = rep.m_prompt, se->m_decode = rep.m_decode;
    se->w_prompt = rep.w_prompt, se->w_decode = rep.w_decode;
    /* where the referees moved the messages, the traffic is what they counted between the marks */
    drv_moved mp, md;
    se->counted = drv_moved_in(LAB5_MARK_PROMPT, &mp) && drv_moved_in(LAB5_MARK_DECODE, &md);
    if (se->counted) drv_moved_apply(&mp, &se->m_prompt, &se->w_prompt), drv_moved_apply(&md, &se->m_decode, &se->w_decode);
    se->bad_batch_rc = rep.bad_batch_rc, se->bad_init_rc = rep.bad_init_rc, se->bad_init_out = rep.bad_init_out;
    if (kind != LAB5_S_ERRORS && R->me == se->out_rank) compare_logits(c, R, se, in);
}

/* ================================================================================== */
/* The checks                                                                         */
/* ================================================================================== */

/* False (the case failed) when the session stopped before finishing `phase`. */
static bool reached(drv_case *c, const lab5_session *se, int phase) {
    if (se->reached > phase) return true;
    if (se->reached == phase) drv_fail(c, "%s", se->fail);
    else
        drv_fail(c, "not reached: the run stopped in %s (%s)", LAB5_PHASE[se->reached > 0 ? se->reached : 0], se->fail);
    return false;
}

static void greedy(drv_case *c, const lab5_session *se, int first, int last) {
    bool bad = se->tok_step >= first && se->tok_step <= last;
    if (drv_max(bad) == 0) return;
    if (bad && se->tok_step < 0)
        drv_fail(c, "the greedy token after the prompt is %d, the single-device forward's is %d", se->tok_got,
                 se->tok_want);
    else if (bad)
        drv_fail(c, "greedy decoding step %d picks token %d, the single-device forward picks %d", se->tok_step + 1,
                 se->tok_got, se->tok_want);
}

static void check_prefill(drv_case *c, const lab5_referee *R, const lab5_session *se) {
    if (!reached(c, se, LAB5_PH_PROMPT)) return;
    drv_check_error(c, "the prompt's logits (every position) vs the single-device forward", se->err_prompt,
                    R->tol_prompt);
    greedy(c, se, -1, -1);
}

static void check_generate(drv_case *c, const lab5_referee *R, const lab5_session *se, modes_case *st) {
    if (!reached(c, se, LAB5_PH_GEN)) return;
    drv_check_error(c, "the logits of each greedy decoding step vs the single-device forward", se->err_gen,
                    R->tol_prompt);
    greedy(c, se, 0, R->sc.K);
    snprintf(st->note, sizeof st->note, "%d greedy tokens as the single-device forward", R->sc.K + 1);
    drv_note(c, "%s", st->note);
}

static void check_batch(drv_case *c, const lab5_referee *R, const lab5_session *se) {
    if (!reached(c, se, LAB5_PH_DECODE)) return;
    drv_check_error(c, "a batch of sequences and its decode steps vs the single-device forward", se->err_batch, R->tol);
}

/* The player's counters against what its comm backend saw: they must agree. */
static bool wire_differs(const pl_metrics *m, const pl_wire *w) {
    return m->bytes_sent != w->p2p_bytes_sent || m->msgs_sent != w->p2p_msgs_sent || m->coll_total != w->coll_calls ||
           m->coll_bytes != w->coll_bytes;
}

static double total(const pl_metrics *m) { return (double)m->bytes_sent + (double)m->coll_bytes; }

static void check_traffic(drv_case *c, const lab5_referee *R, const lab5_session *se) {
    if (!reached(c, se, LAB5_PH_DECODE)) return;
    const lab5_scenario *sc = &R->sc;
    int mode = (int)c->arg[0];
    if (R->n == 1) {
        drv_note(c, "1 rank: nothing crosses (counted: %.0f bytes)", total(&se->m_prompt) + total(&se->m_decode));
        return;
    }
    if (!se->counted) drv_traffic_from_player(c); /* the session's own records of its prompt and decode */
    drv_traffic tp, td, gp = drv_traffic_of(&se->m_prompt), gd = drv_traffic_of(&se->m_decode);
    rl_expect_traffic(R, mode, se->cuts, R->me, sc->P, 1, sc->P, &tp);
    rl_expect_traffic(R, mode, se->cuts, R->me, sc->B, sc->B, sc->B, &td);
    double want = drv_sum(tp.msg_bytes + tp.bytes + td.msg_bytes + td.bytes);
    double got = drv_sum(total(&se->m_prompt) + total(&se->m_decode));
    drv_num(c, "bytes_per_token", got / (sc->P + sc->B));
    drv_num(c, "bytes_per_token_formula", want / (sc->P + sc->B));
    drv_num(c, "traffic_ratio", got > 0 ? want / got : 0);
    char what[96];
    snprintf(what, sizeof what, "the %d-token prompt", sc->P);
    bool tampered = wire_differs(&se->m_prompt, &se->w_prompt) || /* the decode's, once the prompt's traffic is right */
                    (!drv_traffic_differs(&gp, &tp) && wire_differs(&se->m_decode, &se->w_decode));
    if (!drv_check_counted(c, tampered, "the comm backend") || !drv_check_traffic(c, what, &gp, &tp)) return;
    snprintf(what, sizeof what, "a decode step of %d sequences", sc->B);
    if (drv_check_traffic(c, what, &gd, &td))
        drv_note(c, "%.0f bytes per token over all ranks (prompt + decode step), as the formula", got / (sc->P + sc->B));
}

static void check_kvcache(drv_case *c, const lab5_referee *R, const lab5_session *se) {
    if (!reached(c, se, LAB5_PH_INIT)) return;
    double want = rl_kv_bytes_per_pos(R, (int)c->arg[0], se->cuts, R->me, R->sc.B), busiest = drv_max(want);
    char what[160];
    snprintf(what, sizeof what, "bytes this rank's KV cache grows by per position of %d sequences (the layers / KV heads "
             "it owns)", R->sc.B);
    drv_num(c, "kv_bytes_per_position", drv_max(se->kv_per_pos));
    if (drv_check_count(c, what, se->kv_per_pos, want))
        drv_note(c, "KV cache per position (%d sequences): %.0f bytes on the busiest rank", R->sc.B, busiest);
}

static void weights(drv_case *c, const lab5_referee *R, const lab5_session *se) {
    double want = rl_weight_bytes(R, (int)c->arg[0], se->cuts, R->me);
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

static void check_errors(drv_case *c, const lab5_session *se) {
    if (!reached(c, se, LAB5_PH_INIT)) return;
    if (!drv_check_code(c, se->bad_batch_rc, -1, "a batch with a hole in its positions: ls_forward", NULL)) return;
    bool bad = se->bad_init_rc != LAB5_ERR_SPLIT || se->bad_init_out;
    if (drv_max(bad) > 0 && bad)
        drv_fail(c, "a negative proportion: ls_init returned %d%s, expected LS_ERR_SPLIT and NULL", se->bad_init_rc,
                 se->bad_init_out ? " and a state" : "");
}

/* The uneven split: the prompt's logits, its traffic and the weights. */
static void check_split(drv_case *c, const lab5_referee *R, const lab5_session *se) {
    if (!reached(c, se, LAB5_PH_PROMPT)) return;
    int mode = (int)c->arg[0];
    drv_check_error(c, "the prompt's logits at an uneven --tensor-split vs the single-device forward", se->err_prompt,
                    R->tol_prompt);
    greedy(c, se, -1, -1);
    bool failed = drv_max(drv_failed(c)) > 0; /* decided alike on every rank */
    if (R->n > 1 && !failed) {
        if (!se->counted) drv_traffic_from_player(c);
        drv_traffic t, got = drv_traffic_of(&se->m_prompt);
        rl_expect_traffic(R, mode, se->cuts, R->me, R->sc.P, 1, R->sc.P, &t);
        char what[96];
        snprintf(what, sizeof what, "the prompt at --tensor-split %s", lab5_uneven_split(R->n));
        if (drv_check_counted(c, wire_differs(&se->m_prompt, &se->w_prompt), "the comm backend"))
            drv_check_traffic(c, what, &got, &t);
    }
    weights(c, R, se);
    if (!failed && mode == LAB5_LAYER) {
        char d[160];
        rl_describe_layers(se->cuts, R->n, R->model.cfg.n_layer, d, sizeof d);
        drv_note(c, "--tensor-split %s: %s", lab5_uneven_split(R->n), d);
    }
}

void lab5_modes_check(drv_case *c) {
    lab5_referee *R = lab5_ref();
    modes_case *st = c->state;
    lab5_session *se = &R->sess[c->arg[0]][c->arg[1]];
    if (st->runs_session) absorb(c, R, se, &st->in);
    switch (c->arg[2]) {
    case LAB5_C_PREFILL: check_prefill(c, R, se); break;
    case LAB5_C_GENERATE: check_generate(c, R, se, st); break;
    case LAB5_C_BATCH: check_batch(c, R, se); break;
    case LAB5_C_TRAFFIC: check_traffic(c, R, se); break;
    case LAB5_C_KVCACHE: check_kvcache(c, R, se); break;
    case LAB5_C_WEIGHTS:
        if (reached(c, se, LAB5_PH_INIT)) weights(c, R, se);
        break;
    case LAB5_C_ERRORS: check_errors(c, se); break;
    case LAB5_C_SPLIT: check_split(c, R, se); break;
    }
}

/* ================================================================================== */
/* M.generate: tokens/s, timed by the referee on fresh tokens, every run checked      */
/* ================================================================================== */

/* Timed run `run`: a fresh prompt of P tokens drawn from natural text (the same on every
 * rank: rank 0's seed), or a fresh decode token at the next position. */
void lab5_modes_refresh(drv_case *c, int run) {
    lab5_referee *R = lab5_ref();
    modes_case *st = c->state;
    lab5_timed_in *ti = drv_slot_host(c, "tin");
    int32_t *tok = lab5_timed_ints(ti), *seq = tok + ti->cap, *pos = seq + ti->cap;
    uint64_t seed = drv_case_seed(c, 0, run + 1000 * st->which);
    const lab5_scenario *sc = &R->sc;
    if (st->which == 0) {
        ti->n = sc->P;
        for (int i = 0; i < sc->P; i++) tok[i] = sc->pool[mix(seed + (uint64_t)i) % (uint64_t)sc->npool], seq[i] = 0, pos[i] = i;
    } else {
        ti->n = 1;
        tok[0] = sc->pool[mix(seed) % (uint64_t)sc->npool], seq[0] = 0;
        pos[0] = sc->P + st->decode_j++ % st->room;
    }
}

/* ... and its logits: kept, and checked against the single-device forward on the same
 * tokens, run along, once the loop is over (check_kept). */
static void check_kept(drv_case *c, modes_case *st) {
    lab5_referee *R = lab5_ref();
    size_t V = (size_t)R->wcfg.n_vocab;
    int cap = ((lab5_timed_in *)drv_slot_host(c, "tin"))->cap;
    float *ref = malloc(V * sizeof(float));
    PL_CHECK(ref != NULL, "out of host memory");
    for (int k = 0; k < st->stored; k++) {
        const int32_t *v = st->kept[k].ints;
        int rows = llm_forward(&R->wcfg, &R->w, &st->kv, &st->ws, v + 1, v + 1 + cap, v + 1 + 2 * cap, v[0], st->dev,
                               LLM_LOGITS_LAST, NULL);
        PL_CHECK(rows == 1, st->ws.err);
        pl_download(ref, st->dev, V * sizeof(float));
        double rel = drv_rel_err_f(st->kept[k].row, ref, V);
        if (!(rel <= st->tol) && !drv_failed(c))
            drv_fail(c, "timed run %d (%s): logits %.3g from the single-device forward's on its fresh tokens "
                     "(tolerance %.2g)%s", st->kept[k].run, st->which ? "a decode step" : "a prefill", rel, st->tol,
                     isfinite(rel) ? "" : ": never written (a result computed once and repeated?)");
        free(st->kept[k].ints), free(st->kept[k].row);
    }
    free(ref);
    st->stored = 0;
}

void lab5_modes_verify(drv_case *c, int run) {
    modes_case *st = c->state;
    if (!st->verifies) return;
    size_t V = (size_t)lab5_ref()->wcfg.n_vocab;
    const lab5_timed_in *ti = drv_slot_host(c, "tin");
    size_t nints = 1 + 3 * (size_t)ti->cap;
    int32_t *ints = malloc(nints * sizeof *ints);
    float *row = malloc(V * sizeof *row);
    PL_CHECK(ints && row, "out of host memory");
    ints[0] = ti->n;
    memcpy(ints + 1, lab5_timed_ints((lab5_timed_in *)ti), (nints - 1) * sizeof *ints);
    memcpy(row, drv_slot_host(c, "tlogits"), V * sizeof *row);
    st->kept[st->stored].run = run, st->kept[st->stored].ints = ints, st->kept[st->stored].row = row;
    if (++st->stored == TIMED_KEPT) check_kept(c, st);
}

/* One loop of timed runs, then their checks; false on every rank when a run was wrong. */
static bool timed_loop(drv_case *c, modes_case *st, int which, int warmup, int iters, pl_timing *t) {
    st->which = which, st->decode_j = 0;
    *t = drv_time_player(c, which, warmup, iters);
    if (st->verifies) check_kept(c, st);
    return drv_max(drv_failed(c)) == 0;
}

void lab5_modes_perf(drv_case *c) {
    modes_case *st = c->state;
    if (!st->timing) return;
    lab5_referee *R = lab5_ref();
    int32_t ready;
    memcpy(&ready, drv_slot_host(c, "tready"), sizeof ready);
    if (!drv_check_all(c, ready == 1, "the split for the timed runs: ls_init failed on some rank")) return;
    pl_timing tp, td;
    if (!timed_loop(c, st, 0, TIMED_PREFILL_WARMUP, TIMED_PREFILLS, &tp)) return;
    if (!timed_loop(c, st, 1, TIMED_DECODE_WARMUP, TIMED_DECODES, &td)) return;
    double tp_s = tp.median_us * 1e-6, td_s = td.median_us * 1e-6;
    drv_num(c, "prefill_tok_per_s", R->sc.P / tp_s);
    drv_num(c, "decode_tok_per_s", 1 / td_s);
    drv_note(c, "%s; prefill %d tokens %.1f ms (%.0f tok/s), decode %.1f ms/token (%.1f tok/s) on %d rank(s), fresh "
             "tokens every run", st->note, R->sc.P, 1e3 * tp_s, R->sc.P / tp_s, 1e3 * td_s, 1 / td_s, R->n);
}

/* Every case frees what it allocated: the player's pl_mem_in_use after ls_free (and the
 * release of the timed runs' state) equals its value before the play, on every rank
 * (docs/grader.md). */
void lab5_leak_model(drv_case *c, drv_model *m) {
    (void)c;
    m->no_leak = true;
}
