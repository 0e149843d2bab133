/* lab08.c (referee) - Lab 8's inputs, rules, references and checks for the configuration,
 * grid, embedding and loss cases, and the traffic formulas every case judges by.
 *
 * Every input comes from a seed only referees know: a rank's own shard (of the embedding
 * table, of the logits) from that rank's seed, what a group shares (positions, gradients,
 * tokens, targets) from the case's shared seed. Each referee derives every seed itself, so
 * it rebuilds the whole table its rank's output depends on without asking anyone, and no
 * player holds another rank's shard: the only way to the right answer is the tensor
 * group's all-reduce. Host arrays only; no device, no student code. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab08_ref.h"

uint64_t l8_shared_seed(const drv_case *c, int run) { return drv_case_seed(c, -1, run); }

void l8_init(void) {
    l8_state *S = l8_lab();
    l8_check_flags(S);
    drv_print("# lab08: %d rank(s); GPT T=%d b=%d C=%d H=%d F=%d V=%d L=%d, tied embedding; %d steps of AdamW (lr %g) "
              "clipped to norm %g; m = p + 1 micro-batches per replica\n",
              pl_world(), S->T, S->b, S->C, S->H, S->F, S->V, S->L, S->steps, S->lr, S->clip);
}

static float *host_floats(size_t n) {
    float *p = malloc((n + 1) * sizeof *p);
    PL_CHECK(p != NULL, "out of host memory");
    return p;
}

static void fill(float *dst, size_t n, uint64_t seed, uint64_t id, pl_rng_dist dist, float lo, float hi) {
    pl_rng_fill_host(dst, 1, (int64_t)n, (int64_t)n, 0, 0, seed, id, dist, lo, hi);
}

/* ==================================================================================== */
/* config.errors                                                                          */
/* ==================================================================================== */

typedef struct {
    const char *what[32];
    int want[32], n;
} config_case;

/* Every case frees what it allocated: the player's pl_mem_in_use after the calls (and the
 * kit's own frees) equals its value before them, on every rank (docs/grader.md). */
void l8_model(drv_case *c, drv_model *m) {
    (void)c;
    m->no_leak = true;
}

void l8_config_setup(drv_case *c) {
    config_case *x = drv_state(c, sizeof *x);
    l8_config_in in[32];
    l8_cfg base = l8_config(l8_state_of(c), 1, 1);
    int n = 0;
#define CASE(world_, want_, what_, ...)                         \
    do {                                                        \
        l8_cfg c_ = base;                                       \
        __VA_ARGS__;                                            \
        in[n] = (l8_config_in){c_, world_};                     \
        x->want[n] = want_, x->what[n] = what_, n++;            \
    } while (0)
    CASE(1, L8_OK, "t 1, p 1 on 1 rank", (void)0);
    CASE(8, L8_OK, "t 2, p 2 on 8 ranks (d 2)", c_.t = 2, c_.p = 2);
    CASE(8, L8_OK, "t 8, p 1 on 8 ranks", c_.t = 8);
    CASE(8, L8_ERR_WORLD, "t 3 on 8 ranks", c_.t = 3);
    CASE(8, L8_ERR_WORLD, "t 2, p 3 on 8 ranks (6 does not divide 8)", c_.t = 2, c_.p = 3);
    CASE(4, L8_ERR_WORLD, "t 0", c_.t = 0);
    CASE(4, L8_ERR_WORLD, "p 0", c_.p = 0);
    CASE(8, L8_ERR_WORLD, "t 16 on 8 ranks", c_.t = 16);
    CASE(2, L8_ERR_BATCH, "m 0", c_.micro = 0);
    CASE(2, L8_ERR_BATCH, "hidden 30 with 8 heads", c_.hidden = 30);
    CASE(2, L8_ERR_BATCH, "seq 0", c_.seq = 0);
    /* every other size below 1 alone (heads 0 before hidden % heads divides by it) */
    CASE(2, L8_ERR_BATCH, "batch 0", c_.batch = 0);
    CASE(2, L8_ERR_BATCH, "hidden 0", c_.hidden = 0);
    CASE(2, L8_ERR_BATCH, "heads 0", c_.heads = 0);
    CASE(2, L8_ERR_BATCH, "MLP width -8", c_.ffn = -8);
    CASE(2, L8_ERR_BATCH, "vocabulary 0", c_.vocab = 0);
    CASE(1, L8_ERR_BATCH, "0 layers (p 1: a size below 1, not too few layers)", c_.layers = 0);
    CASE(4, L8_ERR_HEADS, "t 4 with 6 heads (hidden 48)", c_.t = 4, c_.heads = 6, c_.hidden = 48);
    CASE(4, L8_ERR_HEADS, "t 4 with MLP width 66", c_.t = 4, c_.ffn = 66);
    CASE(4, L8_ERR_VOCAB, "t 4 with vocabulary 66", c_.t = 4, c_.vocab = 66);
    CASE(8, L8_ERR_VOCAB, "t 4, p 2 with vocabulary 66 and 1 layer (the vocabulary first)", c_.t = 4, c_.p = 2,
         c_.vocab = 66, c_.layers = 1);
    CASE(8, L8_ERR_LAYERS, "p 8 with 4 layers", c_.p = 8, c_.layers = 4);
    CASE(2, L8_ERR_LAYERS, "p 2 with 1 layer", c_.p = 2, c_.layers = 1);
    /* two problems at once: the first in td_config_check's order (threed.h) */
    CASE(8, L8_ERR_WORLD, "t 3 on 8 ranks with m 0 (the world first)", c_.t = 3, c_.micro = 0);
    CASE(4, L8_ERR_BATCH, "t 4 with 6 heads and hidden 50 (the shape first)", c_.t = 4, c_.heads = 6, c_.hidden = 50);
    CASE(4, L8_ERR_BATCH, "m 0 with t 4 and vocabulary 66 (the batch first)", c_.t = 4, c_.micro = 0, c_.vocab = 66);
    CASE(4, L8_ERR_HEADS, "t 4 with MLP width 66 and vocabulary 66 (the heads first)", c_.t = 4, c_.ffn = 66,
         c_.vocab = 66);
    CASE(8, L8_ERR_HEADS, "t 4, p 2 with 6 heads (hidden 48) and 1 layer (the heads first)", c_.t = 4, c_.p = 2,
         c_.heads = 6, c_.hidden = 48, c_.layers = 1);
#undef CASE
    x->n = n;
    memcpy(drv_slot_new(c, "cases", (size_t)n * sizeof in[0], DRV_IN | DRV_CONST), in, (size_t)n * sizeof in[0]);
    drv_slot_new(c, "codes", (size_t)n * sizeof(int32_t), DRV_OUT);
}

void l8_config_check(drv_case *c) {
    const config_case *x = c->state;
    const int32_t *codes = drv_slot_host(c, "codes");
    for (int i = 0; i < x->n; i++) {
        char what[160];
        snprintf(what, sizeof what, "td_config_check(%s)", x->what[i]);
        if (!drv_check_code(c, codes[i], x->want[i], what, l8_code_name)) return;
    }
    drv_note(c, "%d configurations: the right code for each", x->n);
}

/* ==================================================================================== */
/* grid.*                                                                                 */
/* ==================================================================================== */

int l8_members(int rank, int t, int p, int d, int group, int *out) {
    int tp, dp, pp, n = 0;
    l8_coords(rank, t, d, &tp, &dp, &pp);
    switch (group) {
    case L8_TENSOR:
        for (int i = 0; i < t; i++) out[n++] = l8_rank_of(i, dp, pp, t, d);
        break;
    case L8_DATA:
        for (int i = 0; i < d; i++) out[n++] = l8_rank_of(tp, i, pp, t, d);
        break;
    case L8_PIPE:
        for (int i = 0; i < p; i++) out[n++] = l8_rank_of(tp, dp, i, t, d);
        break;
    case L8_EMBED:
        if (pp != 0 && pp != p - 1) break;
        out[n++] = l8_rank_of(tp, dp, 0, t, d);
        if (p > 1) out[n++] = l8_rank_of(tp, dp, p - 1, t, d);
        break;
    default: break;
    }
    return n;
}

static void list(char *out, size_t len, const int32_t *v, int n) {
    int w = snprintf(out, len, "[");
    for (int i = 0; i < n && w < (int)len; i++) w += snprintf(out + w, len - (size_t)w, "%s%d", i ? "," : "", (int)v[i]);
    if (w < (int)len) snprintf(out + w, len - (size_t)w, "]");
}

void l8_grid_setup(drv_case *c) {
    *(uint64_t *)drv_slot_new(c, "token", sizeof(uint64_t), DRV_IN | DRV_CONST) = drv_case_seed(c, c->rank, 0);
    drv_slot_new(c, "grid", sizeof(l8_grid_out), DRV_OUT);
}

void l8_grid_check(drv_case *c) {
    l8_grid_out x;
    memcpy(&x, drv_slot_host(c, "grid"), sizeof x);
    int t = (int)c->arg[0], p = (int)c->arg[1], N = c->world, d = N / (t * p), rank = c->rank;
    if (!drv_all_ok(c, x.rc, "td_grid_build", l8_code_name)) return;
    int tp, dp, pp;
    l8_coords(rank, t, d, &tp, &dp, &pp);
    if (x.t != t || x.p != p || x.d != d || x.tp != tp || x.dp != dp || x.pp != pp)
        drv_fail(c, "t=%d p=%d d=%d: rank %d's grid says sizes %d,%d,%d and (tp, dp, pp) = (%d, %d, %d); the rule gives (%d, %d, %d)",
                 t, p, d, rank, x.t, x.p, x.d, x.tp, x.dp, x.pp, tp, dp, pp);
    const int groups[4] = {L8_TENSOR, L8_DATA, L8_PIPE, L8_EMBED};
    for (int i = 0; i < 4 && !drv_failed(c); i++) {
        int want[L8_MAX_MEMBERS], g = groups[i], n = l8_members(rank, t, p, d, g, want);
        int32_t want32[L8_MAX_MEMBERS];
        for (int k = 0; k < n; k++) want32[k] = want[k];
        int got = x.count[g] < 0 ? 0 : x.count[g] > L8_MAX_MEMBERS ? L8_MAX_MEMBERS : x.count[g];
        for (int k = 0; k < got; k++)
            if (x.members[g][k] < 0 || x.members[g][k] >= N || x.tokens[g][k] != drv_case_seed(c, x.members[g][k], 0)) {
                drv_forbid(c, "rank %d's %s group lists world rank %d, whose token it does not hold: the list did not "
                              "travel through the group", rank, l8_group_name(g), (int)x.members[g][k]);
                break;
            }
        if (drv_failed(c)) break;
        if (n == x.count[g] && !memcmp(want32, x.members[g], (size_t)n * sizeof(int32_t))) continue;
        char a[200], b[200];
        list(a, sizeof a, x.members[g], got);
        list(b, sizeof b, want32, n);
        drv_fail(c, "t=%d p=%d d=%d: rank %d's %s group is world ranks %s (in its order), the rule gives %s%s", t, p, d, rank,
                 l8_group_name(g), got ? a : "(none)", n ? b : "(none: a stage between the first and the last)",
                 g == L8_EMBED ? " (first and last stage of this tp, dp)" : "");
    }
    if (drv_max(drv_failed(c)) == 0) drv_note(c, "every rank in its tensor, data, pipeline and embedding group, in order");
}

void l8_grid_errors_setup(drv_case *c) {
    l8_grid_bad *x = drv_slot_new(c, "bad", sizeof *x, DRV_IN | DRV_CONST);
    int N = c->world, bad[L8_BAD_GRIDS][2] = {{0, 1}, {1, 0}, {N + 1, 1}, {1, 2 * N}, {3, 1}};
    x->n = N % 3 && N > 1 ? 5 : 4;
    for (int i = 0; i < x->n; i++) x->t[i] = bad[i][0], x->p[i] = bad[i][1];
    drv_slot_new(c, "rc", sizeof(l8_grid_rc), DRV_OUT);
}

void l8_grid_errors_check(drv_case *c) {
    const l8_grid_bad *x = drv_slot_host(c, "bad");
    const l8_grid_rc *r = drv_slot_host(c, "rc");
    for (int i = 0; i < x->n && !drv_failed(c); i++) {
        if (r->rc[i] != L8_ERR_WORLD)
            drv_fail(c, "td_grid_build(t %d, p %d on %d rank(s)) returned %d (%s), expected TD_ERR_WORLD", x->t[i], x->p[i],
                     c->world, (int)r->rc[i], l8_code_name(r->rc[i]));
        else if (r->touched[i])
            drv_fail(c, "td_grid_build(t %d, p %d on %d rank(s)) returned TD_ERR_WORLD but wrote into the grid", x->t[i],
                     x->p[i], c->world);
    }
    if (drv_max(drv_failed(c)) == 0) drv_note(c, "%d bad grids: TD_ERR_WORLD on every rank, the grid untouched", x->n);
}

/* ==================================================================================== */
/* Traffic                                                                                */
/* ==================================================================================== */

void l8_expected_traffic(const l8_cfg *c, const l8_layout *lay, int world, l8_tally want[L8_NGROUPS]) {
    memset(want, 0, L8_NGROUPS * sizeof *want);
    double m = c->micro, N = (double)c->seq * c->batch, C = c->hidden, NC = N * C, L = lay->nlayers;
    if (c->t > 1) {
        /* per micro-batch: 2 + 2 per block; the embedding's sum; the head's input
         * gradient and the loss's maxima, target logits and sums of exponentials */
        want[L8_TENSOR].calls[PL_OP_ALLREDUCE] = m * (4 * L + lay->first + 4 * lay->last);
        want[L8_TENSOR].bytes = 4 * m * (4 * L * NC + lay->first * NC + lay->last * (NC + 3 * N));
    }
    if (c->p > 1) {
        want[L8_PIPE].msgs = m * ((lay->pp < c->p - 1) + (lay->pp > 0));
        want[L8_PIPE].msg_bytes = want[L8_PIPE].msgs * NC * 4;
        if (lay->first || lay->last) {
            want[L8_EMBED].calls[PL_OP_ALLREDUCE] = 1;
            want[L8_EMBED].bytes = 4.0 * c->vocab / c->t * C;
        }
    }
    if (lay->d > 1) {
        want[L8_DATA].calls[PL_OP_REDUCE_SCATTER] = 1;
        want[L8_DATA].calls[PL_OP_ALLGATHER] = 1;
        want[L8_DATA].bytes = 2.0 * 4 * (double)lay->count;
    }
    if (world > 1) {
        want[L8_WORLD].calls[PL_OP_ALLREDUCE] = 1;
        want[L8_WORLD].bytes = 4;
    }
}

bool l8_check_groups(drv_case *c, const char *what, const l8_tally got[L8_NGROUPS], const l8_tally want[L8_NGROUPS]) {
    bool ok = true;
    for (int g = 0; g < L8_NGROUPS && ok; g++) {
        char w[240];
        snprintf(w, sizeof w, "%s, %s group", what, l8_group_name(g));
        ok = drv_check_traffic(c, w, &got[g], &want[g]);
    }
    return ok;
}

/* The groups of this rank's grid (t, p, the world) as sets of world ranks, bit r. */
static void group_members(int t, int p, int world, int rank, uint64_t m[L8_NGROUPS]) {
    memset(m, 0, L8_NGROUPS * sizeof *m);
    int d = world / (t * p), tp, dp, pp;
    l8_coords(rank, t, d, &tp, &dp, &pp);
    bool ends = pp == 0 || pp == p - 1;
    for (int r = 0; r < world && r < 64; r++) {
        int a, b, e;
        l8_coords(r, t, d, &a, &b, &e);
        uint64_t bit = (uint64_t)1 << r;
        if (b == dp && e == pp) m[L8_TENSOR] |= bit;
        if (a == tp && e == pp) m[L8_DATA] |= bit;
        if (a == tp && b == dp) m[L8_PIPE] |= bit;
        if (a == tp && b == dp && ends && (e == 0 || e == p - 1)) m[L8_EMBED] |= bit;
        m[L8_WORLD] |= bit;
    }
}

bool l8_tally_moved(int phase, int t, int p, int world, int rank, l8_tally out[L8_NGROUPS]) {
    drv_comm_moved mv[64];
    int n = world <= 64 ? drv_moved_by_comm(phase, mv, 64) : -1;
    if (n < 0) return false;
    uint64_t want[L8_NGROUPS];
    group_members(t, p, world, rank, want);
    memset(out, 0, L8_NGROUPS * sizeof *out);
    static const int grid[] = {L8_TENSOR, L8_PIPE, L8_DATA, L8_EMBED};
    for (int i = 0; i < n; i++) {
        /* a communicator counts for the group whose members it has: the kit's name picks
         * among groups with the same members; any other is "other" */
        int g = mv[i].world ? L8_WORLD : L8_OTHER;
        for (int k = 0; k < 4 && !mv[i].world; k++)
            if (mv[i].members && want[grid[k]] == mv[i].members && (g == L8_OTHER || mv[i].label == grid[k])) g = grid[k];
        l8_tally *x = &out[g];
        for (int k = 0; k < PL_OP_COUNT; k++) x->calls[k] += mv[i].t.calls[k];
        x->bytes += mv[i].t.bytes, x->msgs += mv[i].t.msgs, x->msg_bytes += mv[i].t.msg_bytes;
    }
    return true;
}

/* A call that may talk on the tensor group only, and exactly so (the referees' count where
 * they move the messages, else the player's). */
static void check_tensor_traffic(drv_case *c, const char *what, const l8_tally got[L8_NGROUPS], double allreduces,
                                 double bytes) {
    l8_tally want[L8_NGROUPS];
    memset(want, 0, sizeof want);
    want[L8_TENSOR].calls[PL_OP_ALLREDUCE] = allreduces;
    want[L8_TENSOR].bytes = bytes;
    l8_check_groups(c, what, got, want);
}

/* ==================================================================================== */
/* embed.*                                                                                */
/* ==================================================================================== */

/* Each tensor rank's shard of a table [t * rows, cols] comes from that rank's own seed; the
 * kit's tensor groups are t consecutive ranks. */
static float *whole_table(const drv_case *c, int t, int rows, int cols, float sd) {
    float *full = host_floats((size_t)t * rows * cols);
    int first = (c->rank / t) * t;
    for (int r = 0; r < t; r++)
        fill(full + (size_t)r * rows * cols, (size_t)rows * cols, drv_case_seed(c, first + r, 0), 1, PL_RNG_NORMAL, 0, sd);
    return full;
}

typedef struct {
    int t, T, b, C, V;
} embed_case;

void l8_embed_setup(drv_case *c) {
    const l8_state *S = l8_state_of(c);
    embed_case *x = drv_state(c, sizeof *x);
    *x = (embed_case){(int)c->arg[0], S->T, S->b, S->C, S->V};
    size_t NC = (size_t)x->T * x->b * x->C, VtC = (size_t)(x->V / x->t) * x->C, TC = (size_t)x->T * x->C;
    int n = x->T * x->b;
    uint64_t shared = l8_shared_seed(c, 0);
    fill(drv_slot_new(c, "wte", VtC * sizeof(float), DRV_IN | DRV_CONST), VtC, drv_case_seed(c, c->rank, 0), 1,
         PL_RNG_NORMAL, 0, 0.5f);
    fill(drv_slot_new(c, "wpe", TC * sizeof(float), DRV_IN | DRV_CONST), TC, shared, 2, PL_RNG_NORMAL, 0, 0.5f);
    fill(drv_slot_new(c, "dx", NC * sizeof(float), DRV_IN | DRV_CONST), NC, shared, 3, PL_RNG_UNIFORM, -1, 1);
    fill(drv_slot_new(c, "dwte", VtC * sizeof(float), DRV_INOUT), VtC, shared, 4, PL_RNG_UNIFORM, -1, 1);
    fill(drv_slot_new(c, "dwpe", TC * sizeof(float), DRV_INOUT), TC, shared, 5, PL_RNG_UNIFORM, -1, 1);
    /* ids spread over the vocabulary (every shard has rows to look up), the last one a
     * repeat of the first (its gradient rows add up) */
    int32_t *tokens = drv_slot_new(c, "tokens", (size_t)n * sizeof(int32_t), DRV_IN | DRV_CONST);
    int r0 = (int)(pl_rng_bits(shared, 6, 0) % (uint64_t)x->V);
    for (int i = 0; i < n; i++) tokens[i] = (r0 + i * (2 * x->V / n + 1)) % x->V;
    if (n > 1) tokens[n - 1] = tokens[0];
    drv_slot_new(c, "x", NC * sizeof(float), DRV_OUT);
    drv_slot_new(c, "tally", 2 * L8_NGROUPS * sizeof(l8_tally), DRV_OUT);
}

/* The reference: x = wte_full[tokens] + wpe, the gradients of the lookup (double). */
static void embed_reference(double *x, double *dwte, double *dwpe, const float *wte_full, const float *wpe,
                            const int32_t *tokens, const float *dx, int T, int b, int C, int V) {
    memset(dwte, 0, (size_t)V * C * sizeof *dwte);
    memset(dwpe, 0, (size_t)T * C * sizeof *dwpe);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < b; j++) {
            size_t row = (size_t)t * b + j;
            int id = tokens[row];
            for (int k = 0; k < C; k++) {
                x[row * C + k] = (double)wte_full[(size_t)id * C + k] + wpe[(size_t)t * C + k];
                dwte[(size_t)id * C + k] += dx[row * C + k];
                dwpe[(size_t)t * C + k] += dx[row * C + k];
            }
        }
}

void l8_embed_check(drv_case *c) {
    const embed_case *x = c->state;
    int t = x->t, r = c->rank % t, Vt = x->V / t, C = x->C, N = x->T * x->b;
    size_t NC = (size_t)N * C, TC = (size_t)x->T * C, VtC = (size_t)Vt * C;
    uint64_t shared = l8_shared_seed(c, 0);
    float *full = whole_table(c, t, Vt, C, 0.5f), *wpe = host_floats(TC), *dx = host_floats(NC);
    float *dwte0 = host_floats(VtC), *dwpe0 = host_floats(TC);
    fill(wpe, TC, shared, 2, PL_RNG_NORMAL, 0, 0.5f);
    fill(dx, NC, shared, 3, PL_RNG_UNIFORM, -1, 1);
    fill(dwte0, VtC, shared, 4, PL_RNG_UNIFORM, -1, 1);
    fill(dwpe0, TC, shared, 5, PL_RNG_UNIFORM, -1, 1);
    double *X = malloc(NC * sizeof *X), *dW = malloc((size_t)x->V * C * sizeof *dW), *dP = malloc(TC * sizeof *dP);
    PL_CHECK(X && dW && dP, "out of host memory");
    embed_reference(X, dW, dP, full, wpe, drv_slot_host(c, "tokens"), dx, x->T, x->b, C, x->V);
    for (size_t i = 0; i < VtC; i++) dW[i] = dW[(size_t)r * VtC + i] + dwte0[i];
    for (size_t i = 0; i < TC; i++) dP[i] += dwpe0[i];
    double tol = drv_tolerance();
    drv_check_tensor(c, "x = wte[tokens] + wpe after td_embed_forward", drv_slot_host(c, "x"), X, NC, tol);
    drv_check_tensor(c, "dwte (this rank's rows, accumulated) after td_embed_backward", drv_slot_host(c, "dwte"), dW, VtC, tol);
    drv_check_tensor(c, "dwpe (accumulated) after td_embed_backward", drv_slot_host(c, "dwpe"), dP, TC, tol);
    l8_tally tally[2][L8_NGROUPS];
    memcpy(tally, drv_slot_host(c, "tally"), sizeof tally);
    if (!l8_tally_moved(L8_MARK_FIRST, t, 1, c->world, c->rank, tally[0]) ||
        !l8_tally_moved(L8_MARK_SECOND, t, 1, c->world, c->rank, tally[1]))
        drv_traffic_from_player(c);
    if (drv_max(drv_failed(c)) == 0) {
        check_tensor_traffic(c, "td_embed_forward", tally[0], t > 1, t > 1 ? 4.0 * NC : 0);
        check_tensor_traffic(c, "td_embed_backward", tally[1], 0, 0);
    }
    if (drv_max(drv_failed(c)) == 0)
        drv_note(c, "t=%d: x, dwte and dwpe as the whole-vocabulary lookup; %s forward, nothing backward", t,
                 t > 1 ? "one all-reduce of N*C floats" : "no collective");
    free(full), free(wpe), free(dx), free(dwte0), free(dwpe0), free(X), free(dW), free(dP);
}

/* ==================================================================================== */
/* xent.*                                                                                 */
/* ==================================================================================== */

typedef struct {
    int t, N, V;
    float scale;
} xent_case;

void l8_xent_setup(drv_case *c) {
    const l8_state *S = l8_state_of(c);
    xent_case *x = drv_state(c, sizeof *x);
    x->t = (int)c->arg[0], x->N = S->T * S->b, x->V = S->V, x->scale = 0.37f / (float)x->N;
    size_t n = (size_t)x->N * (size_t)(x->V / x->t);
    float *logits = drv_slot_new(c, "logits", n * sizeof(float), DRV_IN | DRV_CONST);
    fill(logits, n, drv_case_seed(c, c->rank, 0), 1, PL_RNG_NORMAL, 0, 3.0f);
    if (c->arg[1]) /* large logits: only a shift by the row's maximum keeps exp in range */
        for (size_t i = 0; i < n; i++) logits[i] += L8_LARGE_LOGIT;
    int32_t *targets = drv_slot_new(c, "targets", (size_t)x->N * sizeof(int32_t), DRV_IN | DRV_CONST);
    for (int i = 0; i < x->N; i++) targets[i] = (int32_t)(pl_rng_bits(l8_shared_seed(c, 0), 7, (uint64_t)i) % (uint64_t)x->V);
    drv_slot_new(c, "dlogits", n * sizeof(float), DRV_OUT);
    drv_slot_new(c, "losses", (size_t)x->N * sizeof(double), DRV_OUT);
    drv_slot_new(c, "tally", L8_NGROUPS * sizeof(l8_tally), DRV_OUT);
}

/* Softmax cross-entropy over the whole vocabulary (double). */
static void xent_reference(double *losses, double *dlogits, const float *logits_full, const int32_t *targets, int N, int V,
                           float scale) {
    for (int i = 0; i < N; i++) {
        const float *row = logits_full + (size_t)i * V;
        double mx = row[0], sum = 0;
        for (int j = 1; j < V; j++) mx = row[j] > mx ? row[j] : mx;
        for (int j = 0; j < V; j++) sum += exp((double)row[j] - mx);
        losses[i] = log(sum) + mx - row[targets[i]];
        for (int j = 0; j < V; j++)
            dlogits[(size_t)i * V + j] = scale * (exp((double)row[j] - mx) / sum - (j == targets[i] ? 1.0 : 0.0));
    }
}

void l8_xent_check(drv_case *c) {
    const xent_case *x = c->state;
    int t = x->t, r = c->rank % t, Vt = x->V / t, N = x->N;
    /* rank q's shard [N, Vt] holds columns [q Vt, (q+1) Vt) of every row */
    float *shards = whole_table(c, t, N, Vt, 3.0f), *full = host_floats((size_t)N * x->V);
    double *L = malloc((size_t)N * sizeof *L), *D = malloc((size_t)N * x->V * sizeof *D);
    PL_CHECK(L && D, "out of host memory");
    for (int q = 0; q < t; q++)
        for (int i = 0; i < N; i++)
            memcpy(full + (size_t)i * x->V + (size_t)q * Vt, shards + ((size_t)q * N + i) * Vt, (size_t)Vt * sizeof(float));
    xent_reference(L, D, full, drv_slot_host(c, "targets"), N, x->V, x->scale);
    const double *losses = drv_slot_host(c, "losses");
    double num = 0, den = 0;
    for (int i = 0; i < N; i++) num += (losses[i] - L[i]) * (losses[i] - L[i]), den += L[i] * L[i];
    double loss_err = isfinite(num) ? sqrt(num / den) : INFINITY;
    for (int i = 0; i < N; i++) memmove(D + (size_t)i * Vt, D + (size_t)i * x->V + (size_t)r * Vt, (size_t)Vt * sizeof *D);
    double tol = drv_tolerance();
    drv_check_error(c, "losses after td_xent (whole-vocabulary softmax)", loss_err, tol);
    drv_check_tensor(c, "dlogits (this rank's columns) after td_xent", drv_slot_host(c, "dlogits"), D, (size_t)N * Vt, tol);
    l8_tally tally[L8_NGROUPS];
    memcpy(tally, drv_slot_host(c, "tally"), sizeof tally);
    if (!l8_tally_moved(L8_MARK_FIRST, t, 1, c->world, c->rank, tally)) drv_traffic_from_player(c);
    if (drv_max(drv_failed(c)) == 0) check_tensor_traffic(c, "td_xent", tally, t > 1 ? 3 : 0, t > 1 ? 3.0 * 4 * N : 0);
    if (drv_max(drv_failed(c)) == 0)
        drv_note(c, "t=%d: losses and dlogits as the whole-vocabulary softmax; %s", t,
                 t > 1 ? "three all-reduces of N floats, nothing gathered" : "no collective");
    free(shards), free(full), free(L), free(D);
}
