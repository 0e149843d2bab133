/* lab10.c - the case table of Lab 10 (context parallelism).
 *
 * Cases:
 *   merge.*      cp_merge on the host against the float64 merge: random partial results,
 *                large log-sum-exps (an unsubtracted exponential overflows), running or
 *                block sides that saw no key (-inf), a mix of all
 *   positions.*  cp_positions of every rank, contiguous and zig-zag, S not a multiple of 2n
 *   config.*     cp_config_check on good and bad configurations (every rank the same code)
 *   ring.*       cp_ring_forward, contiguous and zig-zag, causal and full, MHA and GQA, two
 *                lengths: o and lse against the float64 attention of the whole sequence;
 *                the K/V blocks' traffic exact; the kernel's work within the causal
 *                bounds; the extra memory within two blocks
 *   ring_bwd.*   cp_ring_backward, both layouts, causal (two lengths) and full, MHA and GQA:
 *                dq, dk, dv against the float64 gradients of the whole sequence's
 *                attention; traffic exact (K and V n - 1 times, dK and dV n times); work,
 *                order and memory as the forward's
 *   ulysses.*    cp_ulysses_forward, both layouts, causal and full, MHA and GQA: o, and the
 *                four all-to-alls' traffic exact
 *   usp.*        cp_usp_forward on every grid u x (n / u) of the world, both layouts, causal,
 *                MHA and GQA: o, and the row all-to-alls' and column ring's traffic exact
 *   usp_bwd.*    cp_usp_backward on every grid: dq, dk, dv, and the traffic exact
 *   ulysses_bwd.* cp_ulysses_backward, the same variants: dq, dk, dv, and the seven
 *                all-to-alls' traffic exact
 *   block.*      the GPT block of models/gpt_cp.h over the world, its attention the
 *                student's ring (zig-zag and contiguous), Ulysses and one 2-D grid: y, dx
 *                and every parameter gradient against the serial host block of the whole
 *                sequence (models/gpt_host.h)
 * The referee (grader/referee/lab10.c) makes every token's q, k, v from a seed only
 * referees know, gives each rank its own tokens, computes the float64 reference and
 * judges; the player (grader/player/lab10.c) makes the student's calls on the slots.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lab10.h"

lab10_flags L10 = {.head_dim = 16, .seq_blocks = 6, .merge_rows = 96, .profile = "dgx-h100"};

void l10_params_of(const drv_case *c, l10_params *p) {
    const int64_t *a = c->arg;
    memset(p, 0, sizeof *p);
    p->kind = (l10_kind)a[A_KIND], p->variant = (int)a[A_VARIANT], p->layout = (int)a[A_LAYOUT];
    p->causal = (int)a[A_CAUSAL], p->gqa = (int)a[A_GQA], p->S = (int)a[A_SEQ];
    p->n = c->world, p->d = L10.head_dim, p->rows = L10.merge_rows;
    int n = p->n;
    switch (p->kind) {
    case K_RING:
    case K_RING_BWD: p->H = p->gqa ? 6 : 4, p->Hkv = p->gqa ? 2 : 4; break;
    case K_ULY:
    case K_ULY_BWD: p->H = 2 * n, p->Hkv = p->gqa ? n : 2 * n, p->ulysses = 1; break;
    case K_USP:
    case K_USP_BWD: p->u = (int)a[A_U], p->H = 2 * n, p->Hkv = p->gqa ? n : 2 * n; break;
    case K_BLOCK: p->u = (int)a[A_U], p->H = 2 * n, p->Hkv = 2 * n; break;
    case K_POS: p->H = 1, p->Hkv = 1; break;
    case K_CONFIG: {
        int v = p->variant;
        p->S = 4 * n + 1, p->H = 4, p->Hkv = 2, p->d = 8, p->causal = 1, p->layout = L10_ZIGZAG;
        if (v == CFG_SEQ0 || v == CFG_SHAPE_HEADS) p->S = 0;
        if (v == CFG_HEADS_KV) p->H = 6, p->Hkv = 4;
        if (v == CFG_DIM0) p->d = 0;
        if (v == CFG_CAUSAL2) p->causal = 2;
        if (v == CFG_LAYOUT2) p->layout = 2;
        if (v == CFG_SEQ_CHUNKS) p->S = 2 * n - 1;
        if (v == CFG_ULY_OK) p->H = 2 * n, p->Hkv = n, p->ulysses = 1;
        if (v == CFG_ULY_HEADS || v == CFG_SHAPE_HEADS) p->H = n + 1, p->Hkv = n + 1, p->ulysses = 1;
        break;
    }
    default: break;
    }
}

static drv_instance *add(drv_plan *pp, const drv_test *t, const char *group, l10_kind kind, int variant, int layout,
                         int causal, int gqa, int S, const char *fmt, ...) __attribute__((format(printf, 10, 11)));
static drv_instance *add(drv_plan *pp, const drv_test *t, const char *group, l10_kind kind, int variant, int layout,
                         int causal, int gqa, int S, const char *fmt, ...) {
    char name[DRV_NAME_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    drv_instance *in = drv_plan_add(pp, t, "%s", name);
    snprintf(in->group, sizeof in->group, "%s", group);
    int64_t a[DRV_ARGS] = {kind, variant, layout, causal, gqa, S, variant};
    memcpy(in->arg, a, sizeof a);
    return in;
}

static const char *MERGE_NAMES[M_COUNT] = {"random", "large", "empty_running", "empty_block", "mixed"};
static const char *CFG_NAMES[CFG_COUNT] = {"ok", "seq0", "heads_not_multiple_of_kv", "head_dim0", "causal2",
                                           "layout_unknown", "seq_under_chunks", "ulysses_ok", "ulysses_heads",
                                           "seq_mismatch", "mismatch_and_shape", "shape_and_heads"};
static const char *LAYOUTS[2] = {"contig", "zigzag"};

static void plan_usp(const drv_test *t, drv_plan *pp, int n, int S) {
    for (int u = 1; u <= n; u++) /* every grid u x (n / u) */
        if (n % u == 0)
            for (int l = 0; l < 2; l++)
                for (int gqa = 0; gqa < 2; gqa++)
                    add(pp, t, "usp", K_USP, u, l, 1, gqa, S, "usp.u%dr%d.%s.causal.%s.S%d", u, n / u, LAYOUTS[l],
                        gqa ? "gqa" : "mha", S);
    for (int u = 1; u <= n; u++) /* the backward: causal zig-zag GQA, and full MHA contiguous */
        if (n % u == 0) {
            add(pp, t, "usp_backward", K_USP_BWD, u, 1, 1, 1, S, "usp_bwd.u%dr%d.zigzag.causal.gqa.S%d", u, n / u, S);
            add(pp, t, "usp_backward", K_USP_BWD, u, 0, 0, 0, S, "usp_bwd.u%dr%d.contig.full.mha.S%d", u, n / u, S);
        }
}

static void plan(const drv_test *t, drv_plan *pp) {
    int n = pl_world(), lens[2] = {2 * n + 1, L10.seq_blocks * 2 * n + 3};
    for (int v = 0; v < M_COUNT; v++) add(pp, t, "merge", K_MERGE, v, 0, 0, 0, 0, "merge.%s", MERGE_NAMES[v]);
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < 2; i++)
            add(pp, t, "positions", K_POS, 0, l, 0, 0, lens[i], "positions.%s.S%d", LAYOUTS[l], lens[i]);
    for (int v = 0; v < CFG_COUNT; v++)
        if (n > 1 || !CFG_NEEDS_RANKS(v)) add(pp, t, "config", K_CONFIG, v, 0, 0, 0, 0, "config.%s", CFG_NAMES[v]);
    for (int l = 0; l < 2; l++)
        for (int causal = 1; causal >= 0; causal--)
            for (int gqa = 0; gqa < 2; gqa++)
                for (int i = 0; i < 2; i++)
                    add(pp, t, l ? "ring_zigzag" : "ring", K_RING, 0, l, causal, gqa, lens[i], "ring.%s.%s.%s.S%d",
                        LAYOUTS[l], causal ? "causal" : "full", gqa ? "gqa" : "mha", lens[i]);
    for (int l = 0; l < 2; l++)
        for (int causal = 1; causal >= 0; causal--)
            for (int gqa = 0; gqa < 2; gqa++)
                for (int i = 1 - causal; i < 2; i++) /* full attention at the long length only */
                    add(pp, t, "ring_backward", K_RING_BWD, 0, l, causal, gqa, lens[i], "ring_bwd.%s.%s.%s.S%d",
                        LAYOUTS[l], causal ? "causal" : "full", gqa ? "gqa" : "mha", lens[i]);
    for (int l = 0; l < 2; l++)
        for (int causal = 1; causal >= 0; causal--)
            for (int gqa = 0; gqa < 2; gqa++)
                add(pp, t, "ulysses", K_ULY, 0, l, causal, gqa, lens[1], "ulysses.%s.%s.%s.S%d", LAYOUTS[l],
                    causal ? "causal" : "full", gqa ? "gqa" : "mha", lens[1]);
    for (int l = 0; l < 2; l++)
        for (int causal = 1; causal >= 0; causal--)
            for (int gqa = 0; gqa < 2; gqa++)
                add(pp, t, "ulysses_backward", K_ULY_BWD, 0, l, causal, gqa, lens[1], "ulysses_bwd.%s.%s.%s.S%d",
                    LAYOUTS[l], causal ? "causal" : "full", gqa ? "gqa" : "mha", lens[1]);
    plan_usp(t, pp, n, lens[1]);
    for (int l = 1; l >= 0; l--) /* the block: the ring in both layouts, Ulysses, one grid */
        add(pp, t, "block", K_BLOCK, 1, l, 1, 0, lens[1], "block.ring.%s.S%d", LAYOUTS[l], lens[1]);
    if (n > 1) add(pp, t, "block", K_BLOCK, n, 1, 1, 0, lens[1], "block.ulysses.zigzag.S%d", lens[1]);
    for (int u = 2; u < n; u++)
        if (n % u == 0) {
            add(pp, t, "block", K_BLOCK, u, 1, 1, 0, lens[1], "block.usp.u%dr%d.zigzag.S%d", u, n / u, lens[1]);
            break;
        }
}

static const drv_test TESTS[] = {
    {.name = "context", .plan = plan, .setup = DRV_R(lab10_setup), .check = DRV_R(lab10_check),
     .model = DRV_R(lab10_model), .teardown = DRV_R(lab10_teardown), .play = DRV_P(lab10_play)},
    {NULL},
};

static const drv_flag FLAGS[] = {
    {"--head-dim", DRV_INT, &L10.head_dim, 1, 1024, "head size d of the ring and Ulysses cases (default 16)"},
    {"--seq-blocks", DRV_INT, &L10.seq_blocks, 1, 4096, "the long cases' S = seq_blocks * 2n + 3 (default 6)"},
    {"--merge-rows", DRV_INT, &L10.merge_rows, 1, 1 << 20, "rows of the merge cases (default 96)"},
    {"--profile", DRV_STR, &L10.profile, 0, 0, "cost-model profile of the bench's prediction (default dgx-h100)"},
    {NULL},
};

static const drv_mode MODES[] = {
    {"bench", "ring (contiguous, zig-zag), Ulysses, the 2-D grid and TP's attention, forward and forward + backward, "
              "by tokens per rank, measured and predicted; the profile's long-context table with the crossover and "
              "where the ring's overlap hides its traffic", DRV_P(lab10_mode_bench), "1 2 4", NULL},
    {"long", "the peak memory per rank (forward + backward), measured against the "
             "design's formula (the ring, Ulysses, the 2-D grid), and the longest sequence each fits in 80 GB on 1 to 8 "
             "GPUs; a plot", DRV_P(lab10_mode_long), "1 2 4", "scripts/plot-lab10-long.sh"},
    {"dump", "every tensor of a small causal zig-zag case (inputs, the ring's and Ulysses' outputs and gradients), "
             "for tests/lab10/check_reference.py", DRV_P(lab10_mode_dump), "1 2 4", NULL},
    {NULL},
};

static const drv_lab LAB = {
    .name = "10-context",
    .title = "Lab 10: context parallelism (the online-softmax merge, ring attention and Ulysses, forward and backward, contiguous and zig-zag, and their 2-D grid)",
    .flags = FLAGS,
    .tests = TESTS,
    .modes = MODES,
    .player_init = DRV_P(lab10_player_init),
};

int main(int argc, char **argv) { return drv_main(&LAB, argc, argv); }
