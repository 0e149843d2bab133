/* lab05.c (player) - Lab 5's kit and calls: ls_load and ls_type (the student's only way to
 * the weights, counted), the rules the student states, and the runs of the student's split
 * on the tokens the referee gives. What the referee judges comes back in the slots: the
 * student's answers, the logits, and the player's report of what it saw and counted.
 *
 * A session (the first case of a mode's run): ls_init twice with two context lengths (the
 * difference of device memory is the KV cache, whatever else a rank allocates), then the
 * scenario step by step, each forward writing into its own rows of the "logits" slot and
 * its traffic counted; or the invalid inputs, which every rank must refuse. The ranks stop
 * together (a host reduction after each step) when a step failed anywhere. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab05_player.h"

_Static_assert(LS_MAX_RANKS == LAB5_MAX_RANKS && LS_ROW_ROUNDING == LAB5_ROW_ROUNDING,
               "llama_split.h and the driver's restatement differ");
_Static_assert((int)LS_OK == (int)LAB5_OK && (int)LS_ERR_SPLIT == (int)LAB5_ERR_SPLIT,
               "llama_split.h's codes and the driver's differ");
_Static_assert((int)LS_LAYER == (int)LAB5_LAYER && (int)LS_ROW == (int)LAB5_ROW && (int)LS_TENSOR == (int)LAB5_TENSOR,
               "ls_mode differs");
_Static_assert(sizeof(int) == sizeof(int32_t), "token ids travel as int32");

static lab5_kit g_kit;
lab5_kit *lab5_kit_state(void) { return &g_kit; }

/* ================================================================================== */
/* The kit: ls_type, ls_load                                                          */
/* ================================================================================== */

static int refuse(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(const char *name, const char *fmt, ...) {
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[rank %d] ls_load(%s): %s\n", pl_rank(), name, why);
    return -1;
}

int ls_type(llm_tensor which, int layer) { return lab5_tensor_type(&g_kit.model, which, layer); }

int ls_load(llm_tensor which, int layer, int64_t row0, int64_t nrows, int64_t col0, int64_t ncols, int type,
            void *dst) {
    char name[96], why[160];
    const lab5_model *m = &g_kit.model;
    const ds_gguf_tensor *t = lab5_tensor(m, which, layer, name, sizeof name, why, sizeof why);
    if (!t) return refuse(name, "%s", why);
    int64_t rows, cols;
    llm_tensor_shape(&m->cfg, which, &rows, &cols);
    if (row0 < 0 || nrows < 0 || row0 > rows || nrows > rows - row0 || col0 < 0 || ncols < 0 || col0 > cols ||
        ncols > cols - col0)
        return refuse(name, "rows %lld + %lld, columns %lld + %lld: outside the tensor's %lld x %lld", (long long)row0,
                      (long long)nrows, (long long)col0, (long long)ncols, (long long)rows, (long long)cols);
    int held = lab5_tensor_type(m, which, layer);
    if (type != LLM_F32 && type != held)
        return refuse(name, "type %s: the tensor is held as %s (or ask for %s, dequantised)", llm_type_name(type),
                      llm_type_name(held), llm_type_name(LLM_F32));
    if (type != LLM_F32 && (col0 % LLM_QK || ncols % LLM_QK))
        return refuse(name, "columns %lld + %lld cut a %s block of %d weights: load that block as %s", (long long)col0,
                      (long long)ncols, llm_type_name(type), LLM_QK, llm_type_name(LLM_F32));
    if (nrows == 0 || ncols == 0) return 0;
    if (!dst) return refuse(name, "a NULL destination for %lld x %lld weights", (long long)nrows, (long long)ncols);
    size_t bytes = llm_mat_bytes(type, nrows, ncols);
    if (type != LLM_F32) { /* whole blocks: each row's stretch of them, packed */
        size_t skip = llm_mat_bytes(type, 1, col0), row = llm_mat_bytes(type, 1, ncols);
        uint8_t *h = malloc(bytes);
        PL_CHECK(h != NULL, "out of host memory");
        for (int64_t r = 0; r < nrows; r++) memcpy(h + r * row, t->data + (row0 + r) * t->row_bytes + skip, row);
        pl_upload(dst, h, bytes);
        free(h);
        g_kit.loaded += bytes;
        return 0;
    }
    float *full = malloc((size_t)(nrows * cols) * sizeof(float));
    PL_CHECK(full != NULL, "out of host memory");
    char err[256];
    if (ds_gguf_dequantize(t, row0, nrows, full, err, sizeof err)) {
        free(full);
        return refuse(name, "%s", err);
    }
    if (ncols < cols) /* a block of columns: pack it densely, in place (each row moves left) */
        for (int64_t r = 0; r < nrows; r++)
            memmove(full + r * ncols, full + r * cols + col0, (size_t)ncols * sizeof(float));
    pl_upload(dst, full, bytes);
    free(full);
    g_kit.loaded += bytes;
    return 0;
}

/* The model, mapped before the play filter: in a graded run the file the referee names
 * (--gguf, its own tiny llama's or the one it resolved), in a mode the user's. */
void lab5_player_init(void) { lab5_model_open(&g_kit.model, pl_info()->seed); }

/* ================================================================================== */
/* Helpers                                                                            */
/* ================================================================================== */

int lab5_first_failing(bool failed, char *msg, size_t cap) {
    double who = failed ? pl_rank() : pl_world();
    pl_host_allreduce(&who, 1, PL_HOST_MIN, NULL);
    if (who < pl_world()) pl_host_bcast(msg, cap, (int)who, NULL);
    return (int)who;
}

ls_params lab5_ls_params(const lab5_params *p, float *split) {
    int n = p->n_split < 0 ? 0 : p->n_split > LAB5_MAX_RANKS ? LAB5_MAX_RANKS : p->n_split;
    memcpy(split, p->split, sizeof p->split);
    return (ls_params){(ls_mode)p->mode, n ? split : NULL, n, p->n_seq_max, p->n_ctx, p->n_tokens_max, p->n_micro,
                       pl_comm_world()};
}

/* A slot's bytes on the host (the region itself on the cpu device; copied from cuda). */
static void *host_copy(drv_case *c, const char *name, size_t min_bytes) {
    size_t n = drv_slot_bytes(c, name);
    if (n < min_bytes) pl_fatal(__FILE__, __LINE__, name, "a slot smaller than its layout");
    void *h = malloc(n ? n : 1);
    PL_CHECK(h != NULL, "out of host memory");
    pl_download(h, drv_slot(c, name), n);
    return h;
}

/* The counters of one call: differences around it (the runner's count of the whole play
 * stays whole). */
static pl_metrics metrics_between(const pl_metrics *a, const pl_metrics *b) {
    pl_metrics d = *a;
    d.bytes_sent -= b->bytes_sent, d.bytes_recv -= b->bytes_recv;
    d.msgs_sent -= b->msgs_sent, d.msgs_recv -= b->msgs_recv;
    for (int k = 0; k < PL_OP_COUNT; k++) d.coll_calls[k] -= b->coll_calls[k];
    d.coll_bytes -= b->coll_bytes, d.coll_total -= b->coll_total;
    d.gemm_calls -= b->gemm_calls, d.gemm_flops -= b->gemm_flops;
    d.kernel_calls -= b->kernel_calls, d.kernel_bytes -= b->kernel_bytes, d.reduce_elems -= b->reduce_elems;
    return d;
}

static pl_wire wire_between(const pl_wire *a, const pl_wire *b) {
    return (pl_wire){a->p2p_bytes_sent - b->p2p_bytes_sent, a->p2p_msgs_sent - b->p2p_msgs_sent,
                     a->p2p_bytes_recv - b->p2p_bytes_recv, a->p2p_msgs_recv - b->p2p_msgs_recv,
                     a->coll_calls - b->coll_calls, a->coll_bytes - b->coll_bytes};
}

/* ================================================================================== */
/* rules.*: the student's answers                                                     */
/* ================================================================================== */

static lab5_cuts_out cuts_of(const float *p, int n_props, int n) {
    lab5_cuts_out o;
    memset(&o, 0, sizeof o);
    o.rc = ls_cuts(p, n_props, n, o.cuts);
    return o;
}

void lab5_play_rules(drv_case *c) {
    if (c->arg[0] < 0 || c->arg[0] >= LAB5_NRULES) pl_fatal(__FILE__, __LINE__, c->name, "no such rule");
    const lab5_rule *rc = &LAB5_RULES[c->arg[0]];
    size_t bytes = lab5_rule_out_bytes(rc);
    if (drv_slot_bytes(c, "rout") != bytes) pl_fatal(__FILE__, __LINE__, "rout", "not the rule's layout");
    unsigned char *out = calloc(1, bytes);
    PL_CHECK(out != NULL, "out of host memory");
    float p[LAB5_MAX_RANKS + 1];
    int np = 0, n = rc->kind == LAB5_R_CUTS || rc->kind == LAB5_R_TENSOR ? 0 : lab5_rule_split(rc, p, &np);
    lab5_cuts_out *co = (lab5_cuts_out *)out;
    switch (rc->kind) {
    case LAB5_R_CUTS:
        for (int i = 0; i < LAB5_NCUTS_CALLS; i++) {
            const lab5_cuts_call *k = &LAB5_CUTS_CALLS[i];
            int kn = k->n_props;
            if (k->props) PL_CHECK(lab5_parse_split(k->props, p, &kn), "a malformed split in the calls");
            else memcpy(p, k->bad, sizeof k->bad);
            co[i] = cuts_of(kn ? p : NULL, kn, k->n);
        }
        break;
    case LAB5_R_LAYER: {
        *co = cuts_of(p, np, n);
        int32_t *owner = (int32_t *)(co + 1);
        for (int s = 0; s <= rc->a && co->rc == LS_OK; s++) owner[s] = ls_layer_owner(co->cuts, n, rc->a, s);
        break;
    }
    case LAB5_R_ROW: {
        *co = cuts_of(p, np, n);
        int64_t *range = (int64_t *)(co + 1);
        for (int r = 0; r < n && co->rc == LS_OK; r++) {
            int64_t a = -1, b = -1;
            ls_row_range(co->cuts, n, r, rc->a, &a, &b);
            range[2 * r] = a, range[2 * r + 1] = b;
        }
        break;
    }
    case LAB5_R_TENSOR: {
        llm_config cfg = lab5_rule_config(rc);
        lab5_tensor_out *to = (lab5_tensor_out *)out;
        for (int k = 1, i = 0; k <= rc->a + 1; k++)
            for (int r = 0; r < k; r++, i++) {
                llm_split sp;
                memset(&sp, 0xff, sizeof sp);
                int rc2 = ls_tensor_split(&cfg, k, r, &sp);
                to[i] = (lab5_tensor_out){rc2, sp.head0, sp.n_head, sp.ff0, sp.n_ff};
            }
        break;
    }
    }
    pl_upload(drv_slot(c, "rout"), out, bytes);
    free(out);
}

/* ================================================================================== */
/* Sessions                                                                           */
/* ================================================================================== */

typedef struct {
    const lab5_session_in *in;
    lab5_session_ints a;
    const llm_config *cfg;
    float *logits;    /* the slot (device): each forward's rows                          */
    lab5_report *rep; /* host, uploaded at the end                                       */
} session;

static float *rows_at(const session *s, int64_t row) { return s->logits + row * (int64_t)s->cfg->n_vocab; }

/* The run stops at `phase` on every rank; this rank says why if it failed here. */
static void stop(session *s, int phase, bool failed_here, const char *why) {
    s->rep->reached = phase;
    if (failed_here) snprintf(s->rep->fail, sizeof s->rep->fail, "%s", why);
}

/* One collective forward, its traffic counted; false (the run stopped) unless every rank
 * returned `rows`. */
/* A counted step (m, w) is also a phase the referees count where they move the messages
 * (mark: LAB5_MARK_*). */
static bool step(session *s, int phase, ls_state *st, const int *tok, const int *seq, const int *pos, int n, int mode,
                 int rows, float *logits, int mark, pl_metrics *m, pl_wire *w) {
    char err[300] = "";
    pl_metrics m0, m1;
    pl_wire w0, w1;
    pl_device_sync();
    if (m) drv_mark(mark, false);
    pl_metrics_get(&m0);
    pl_wire_get(&w0);
    int got = ls_forward(st, tok, seq, pos, n, mode, logits, err, sizeof err);
    pl_device_sync();
    if (m) drv_mark(mark, true);
    pl_metrics_get(&m1);
    pl_wire_get(&w1);
    if (m) *m = metrics_between(&m1, &m0);
    if (w) *w = wire_between(&w1, &w0);
    if (drv_everyone(got == rows)) return true;
    char why[400];
    snprintf(why, sizeof why, "%s: ls_forward returned %d, expected %d logits rows%s%s%s", LAB5_PHASE[phase], got, rows,
             err[0] ? " (" : "", err, err[0] ? ")" : "");
    stop(s, phase, got != rows, why);
    return false;
}

static bool init(session *s, ls_state **st, const ls_params *p, double *mem) {
    char err[300] = "";
    size_t before = pl_mem_in_use();
    *st = NULL;
    int rc = ls_init(st, s->cfg, p, err, sizeof err);
    *mem = (double)pl_mem_in_use() - (double)before;
    if (drv_everyone(rc == LS_OK)) return true;
    char why[400];
    snprintf(why, sizeof why, "ls_init (%s split) returned %d%s%s", LAB5_MODE_NAME[p->mode], rc, err[0] ? ": " : "",
             err);
    stop(s, LAB5_PH_INIT, rc != LS_OK, why);
    if (rc == LS_OK) ls_free(*st);
    *st = NULL;
    return false;
}

/* The invalid inputs, on a state of their own (so that a rank that hangs on them costs only
 * the errors case): a token at position 2 of an empty sequence, a hole, then a negative
 * proportion. */
static void run_errors(session *s, const ls_params *p) {
    ls_state *st = NULL;
    double mem;
    if (!init(s, &st, p, &mem)) return;
    int tok = s->in->bad_tok, seq = s->in->bad_seq, pos = s->in->bad_pos;
    char err[300];
    s->rep->bad_batch_rc = ls_forward(st, &tok, &seq, &pos, 1, LLM_LOGITS_LAST, s->logits, err, sizeof err);
    ls_free(st);
    float bad[LS_MAX_RANKS] = {-1.0f};
    ls_params q = *p;
    q.tensor_split = bad, q.n_split = 1;
    ls_state *const sentinel = (ls_state *)&q, *st2 = sentinel; /* must come back NULL */
    s->rep->bad_init_rc = ls_init(&st2, s->cfg, &q, err, sizeof err);
    s->rep->bad_init_out = st2 != NULL;
    if (s->rep->bad_init_rc == LS_OK && st2 && st2 != sentinel) ls_free(st2);
    s->rep->reached = LAB5_PH_DONE;
}

/* The scenario, step by step; the uneven split stops after the prompt. */
static void run_scenario(session *s, ls_params *prm) {
    const lab5_session_in *in = s->in;
    bool main_run = in->kind == LAB5_S_MAIN;
    ls_state *st = NULL;
    double mem1 = 0, mem2 = 0;
    if (main_run) { /* the probe: the same state with half the context */
        if (!init(s, &st, prm, &mem1)) return;
        ls_free(st);
    }
    prm->n_ctx = 2 * in->prm.n_ctx;
    g_kit.loaded = 0;
    if (!init(s, &st, prm, &mem2)) return;
    s->rep->w_bytes = (double)g_kit.loaded;
    s->rep->kv_per_pos = (mem2 - mem1) / in->prm.n_ctx;
    int n_max = in->P > in->bn ? in->P : in->bn;
    int *seq = calloc((size_t)n_max + 1, sizeof(int)), *pos = calloc((size_t)n_max + 1, sizeof(int));
    PL_CHECK(seq && pos, "out of host memory");
    for (int i = 0; i < in->P; i++) pos[i] = i;
    if (!step(s, LAB5_PH_PROMPT, st, s->a.prompt, seq, pos, in->P, LLM_LOGITS_ALL, in->P, rows_at(s, 0),
              LAB5_MARK_PROMPT, &s->rep->m_prompt, &s->rep->w_prompt))
        goto out;
    for (int k = 0; k < in->K && main_run; k++) {
        int ps = in->P + k;
        if (!step(s, LAB5_PH_GEN, st, &s->a.gen[k], seq, &ps, 1, LLM_LOGITS_LAST, 1, rows_at(s, lab5_row_gen(in, k)),
                  -1, NULL, NULL))
            goto out;
    }
    if (main_run && !step(s, LAB5_PH_BATCH, st, s->a.btok, s->a.bseq, s->a.bpos, in->bn, LLM_LOGITS_LAST, in->B,
                          rows_at(s, lab5_row_batch(in)), -1, NULL, NULL))
        goto out;
    for (int d = 0; d < in->D && main_run; d++) {
        for (int q = 0; q < in->B; q++) seq[q] = q, pos[q] = s->a.blen[q] + d;
        if (!step(s, LAB5_PH_DECODE, st, s->a.dtok + (size_t)d * in->B, seq, pos, in->B, LLM_LOGITS_LAST, in->B,
                  rows_at(s, lab5_row_decode(in, d)), LAB5_MARK_DECODE, d == 0 ? &s->rep->m_decode : NULL,
                  d == 0 ? &s->rep->w_decode : NULL))
            goto out;
    }
    s->rep->reached = LAB5_PH_DONE;
out:
    ls_free(st);
    free(seq), free(pos);
}

static void play_session(drv_case *c) {
    lab5_session_in *in = host_copy(c, "sin", sizeof(lab5_session_in));
    size_t need = sizeof *in + (size_t)(in->n_ints > 0 ? in->n_ints : 0) * sizeof(int32_t);
    if (drv_slot_bytes(c, "sin") < need || drv_slot_bytes(c, "report") < sizeof(lab5_report) ||
        drv_slot_bytes(c, "logits") < (size_t)lab5_logits_rows(in) * (size_t)g_kit.model.cfg.n_vocab * sizeof(float))
        pl_fatal(__FILE__, __LINE__, c->name, "the session's slots do not match their layout");
    lab5_report rep;
    memset(&rep, 0, sizeof rep);
    rep.measured = 1;
    session s = {.in = in, .a = lab5_session_arrays(in), .cfg = &g_kit.model.cfg, .logits = drv_slot_f(c, "logits"),
                 .rep = &rep};
    float split[LAB5_MAX_RANKS];
    ls_params prm = lab5_ls_params(&in->prm, split);
    if (in->kind == LAB5_S_ERRORS) run_errors(&s, &prm);
    else run_scenario(&s, &prm);
    pl_upload(drv_slot(c, "report"), &rep, sizeof rep);
    free(in);
}

/* ================================================================================== */
/* M.generate's timed runs                                                            */
/* ================================================================================== */

typedef struct {
    ls_state *st; /* the split the timed runs use; NULL when it failed on some rank */
} timing;

static void timing_init(drv_case *c) {
    lab5_timed_in *ti = host_copy(c, "tin", sizeof(lab5_timed_in));
    timing *tm = drv_state(c, sizeof *tm);
    float split[LAB5_MAX_RANKS];
    ls_params prm = lab5_ls_params(&ti->prm, split);
    char err[300] = "";
    int rc = ls_init(&tm->st, &g_kit.model.cfg, &prm, err, sizeof err);
    bool ok = drv_everyone(rc == LS_OK);
    if (!ok && rc == LS_OK) ls_free(tm->st);
    if (!ok) tm->st = NULL;
    int32_t ready = ok;
    pl_upload(drv_slot(c, "tready"), &ready, sizeof ready);
    free(ti);
}

void lab5_play_modes(drv_case *c) {
    if (drv_slot_bytes(c, "sin")) play_session(c);
    if (drv_slot_bytes(c, "tin")) timing_init(c);
}

/* One forward of the batch in "tin" (a fresh prompt, or one decode token) into "tlogits". */
void lab5_timed(drv_case *c, int which) {
    (void)which; /* the referee's tokens say which it is */
    timing *tm = c->state;
    if (!tm || !tm->st) return;
    lab5_timed_in *ti = host_copy(c, "tin", sizeof(lab5_timed_in));
    bool fits = ti->cap > 0 && ti->n > 0 && ti->n <= ti->cap && drv_slot_bytes(c, "tin") >= lab5_timed_in_bytes(ti->cap);
    int got = -1;
    if (fits) {
        const int32_t *tok = lab5_timed_ints(ti);
        char err[300];
        got = ls_forward(tm->st, tok, tok + ti->cap, tok + 2 * ti->cap, ti->n, LLM_LOGITS_LAST,
                         drv_slot_f(c, "tlogits"), err, sizeof err);
    }
    if (!drv_everyone(got == 1)) {
        ls_free(tm->st);
        tm->st = NULL;
    }
    free(ti);
}

void lab5_release(drv_case *c) {
    timing *tm = c->state;
    if (tm && tm->st) ls_free(tm->st);
    if (tm) tm->st = NULL;
}
