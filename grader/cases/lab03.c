/* lab03.c - the case table of Lab 3 (a Megatron tensor-parallel block, sequence parallelism).
 *
 * The referee (grader/referee/lab03*.c) builds the serial master block from the counter RNG
 * (the bits mg_fill_master gives), runs the kit's independent host reference of the block
 * (models/gpt_host: plain loops, double accumulation), gives each rank's player its shards
 * and its rows, and compares the outputs, input gradients and every gradient shard with
 * the matching slice of the serial ones. Lab 3 stores weights [in x out] (Y = XA, the
 * Megatron paper's notation, so that a column-parallel shard is a block of columns); the
 * reference takes [out x in], the kit's convention, so the referee transposes between them.
 * The player (grader/player/lab03.c) calls the block's functions on the slots.
 *
 * Cases:
 *   config.errors        mg_config_check: heads % tp, seq % tp with sp, hidden % heads
 *   forward.nosp / .sp   one block's output (and the shards mg_params_init built)
 *   backward.nosp / .sp  dx and every gradient shard (sp: after mg_sync_sp_grads)
 *   comm.nosp / .sp      collectives per block forward and backward vs the formulas
 *   memory.sp            activation bytes with sp vs without (the LN/residual regions / tp)
 *   train.nosp / .sp     a stack of L blocks, one SGD step: loss and the parameter update
 */
#include <stdio.h>
#include <string.h>

#include "lab03.h"

const char *const LAB3_TNAME[LAB3_NTENSORS] = {"ln1.w", "ln1.b", "qkv.w", "qkv.b", "proj.w", "proj.b",
                                               "ln2.w", "ln2.b", "fc1.w", "fc1.b", "fc2.w", "fc2.b"};

static lab3_flags g_flags3 = {.T = 7, .B = 2, .C = 32, .H = 8, .F = 128, .L = 2, .iters = 5};
const lab3_flags *lab3_opts(void) { return &g_flags3; }

lab3_cfg lab3_config(bool sp, int T) {
    return (lab3_cfg){T, g_flags3.B, g_flags3.C, g_flags3.H, g_flags3.F, sp};
}
int lab3_seq_for(bool sp, int tp) { return sp ? tp * ((g_flags3.T + tp - 1) / tp) : g_flags3.T; }
int lab3_local_rows(const lab3_cfg *k, int tp) { return k->sp ? k->seq * k->batch / tp : k->seq * k->batch; }

int lab3_error_configs(int tp, lab3_cfg *out, int *want, char (*what)[LAB3_WHAT_MAX]) {
    int n = 0;
    lab3_cfg k;
#define CFG(code_, ...)                                                   \
    do {                                                                  \
        out[n] = k;                                                       \
        if (want) want[n] = code_;                                        \
        if (what) snprintf(what[n], LAB3_WHAT_MAX, __VA_ARGS__);          \
        n++;                                                              \
    } while (0)
    k = lab3_config(false, g_flags3.T);
    CFG(LAB3_OK, "a valid configuration rejected");
    k.hidden = g_flags3.H * 4 + 1;
    CFG(LAB3_ERR_SHAPE, "hidden %d with %d heads not reported as MG_ERR_SHAPE", k.hidden, k.heads);
    /* every size below 1, alone (heads 0 before anything divides by it) */
    k = lab3_config(false, g_flags3.T), k.heads = 0;
    CFG(LAB3_ERR_SHAPE, "heads 0 not reported as MG_ERR_SHAPE (a size below 1, checked before hidden %% heads)");
    k = lab3_config(false, g_flags3.T), k.hidden = 0;
    CFG(LAB3_ERR_SHAPE, "hidden 0 not reported as MG_ERR_SHAPE (a size below 1)");
    k = lab3_config(false, g_flags3.T), k.ffn = -tp;
    CFG(LAB3_ERR_SHAPE, "ffn %d not reported as MG_ERR_SHAPE (a size below 1)", k.ffn);
    k = lab3_config(false, 0);
    CFG(LAB3_ERR_SHAPE, "seq 0 not reported as MG_ERR_SHAPE (a size below 1)");
    if (tp > 1) {
        k = lab3_config(false, g_flags3.T), k.heads = tp + 1, k.hidden = (tp + 1) * 4;
        CFG(LAB3_ERR_HEADS, "heads %d at tp %d not reported as MG_ERR_HEADS", k.heads, tp);
        k = lab3_config(true, tp * 2 + 1);
        CFG(LAB3_ERR_SEQ, "sp with seq %d at tp %d not reported as MG_ERR_SEQ", k.seq, tp);
        k = lab3_config(false, tp * 2 + 1);
        CFG(LAB3_OK, "an odd seq %d without sp rejected", k.seq);
        k = lab3_config(false, g_flags3.T), k.ffn = g_flags3.F + 1;
        CFG(LAB3_ERR_SHAPE, "ffn %d at tp %d not reported as MG_ERR_SHAPE", k.ffn, tp);
        /* two problems at once: the first in mg_config_check's order (megatron.h) */
        k = lab3_config(false, g_flags3.T), k.batch = 0, k.heads = tp + 1, k.hidden = (tp + 1) * 4;
        CFG(LAB3_ERR_SHAPE, "batch 0 with heads %d at tp %d: MG_ERR_SHAPE (a size below 1) comes first", k.heads, tp);
        k = lab3_config(true, tp * 2 + 1), k.heads = tp + 1, k.hidden = (tp + 1) * 4;
        CFG(LAB3_ERR_HEADS, "heads %d and sp with seq %d at tp %d: MG_ERR_HEADS comes first", k.heads, k.seq, tp);
        k = lab3_config(false, g_flags3.T), k.heads = tp + 1, k.hidden = (tp + 1) * 4 + 1;
        CFG(LAB3_ERR_HEADS, "heads %d with hidden %d at tp %d: MG_ERR_HEADS comes first", k.heads, k.hidden, tp);
        k = lab3_config(true, tp * 2 + 1), k.ffn = g_flags3.F + 1;
        CFG(LAB3_ERR_SEQ, "sp with seq %d and ffn %d at tp %d: MG_ERR_SEQ comes first", k.seq, k.ffn, tp);
        k = lab3_config(true, tp * 2 + 1), k.hidden = g_flags3.H * 4 + 1;
        CFG(LAB3_ERR_SEQ, "sp with seq %d and hidden %d with %d heads at tp %d: MG_ERR_SEQ comes first", k.seq, k.hidden,
            k.heads, tp);
    }
#undef CFG
    return n;
}

size_t lab3_layout(int C, int F, int tp, int rank, lab3_piece out[LAB3_NTENSORS]) {
    int64_t Cl = C / tp, Fl = F / tp, r = rank;
    /* mg_params_alloc's order: the replicated tensors, then the shards */
    static const int ORDER[LAB3_NTENSORS] = {LAB3_LN1_W, LAB3_LN1_B, LAB3_PROJ_B, LAB3_LN2_W, LAB3_LN2_B, LAB3_FC2_B,
                                             LAB3_QKV_W, LAB3_QKV_B, LAB3_PROJ_W, LAB3_FC1_W, LAB3_FC1_B, LAB3_FC2_W};
    const int64_t R[LAB3_NTENSORS] = {1, 1, C, 1, C, 1, 1, 1, C, 1, F, 1};
    const int64_t K[LAB3_NTENSORS] = {C, C, 3 * C, 3 * C, C, C, C, C, F, F, C, C};
    size_t off = 0;
    for (int i = 0; i < LAB3_NTENSORS; i++) {
        int w = ORDER[i];
        lab3_piece p = {.rows = R[w], .cols = K[w], .R = R[w], .K = K[w]};
        switch (w) {
        case LAB3_QKV_W: case LAB3_QKV_B: p.cols = 3 * Cl, p.c0 = r * 3 * Cl; break;
        case LAB3_FC1_W: case LAB3_FC1_B: p.cols = Fl, p.c0 = r * Fl; break;
        case LAB3_PROJ_W: p.rows = Cl, p.r0 = r * Cl; break;
        case LAB3_FC2_W: p.rows = Fl, p.r0 = r * Fl; break;
        default: break; /* replicated */
        }
        p.off = (int64_t)off;
        off += (size_t)(p.rows * p.cols);
        out[w] = p;
    }
    return off;
}

/* ---- the lab ------------------------------------------------------------------------------------ */

static void plan_sp(const drv_test *t, drv_plan *p) {
    for (int sp = 0; sp < 2; sp++) {
        drv_instance *in = drv_plan_add(p, t, "%s.%s", t->name, sp ? "sp" : "nosp");
        snprintf(in->group, sizeof in->group, "%s%s", t->group, sp ? "_sp" : "");
        in->arg[0] = sp;
    }
}

/* The block cases share their setup and play; data says what a case runs and judges. */
static const int FORWARD = 0, BACKWARD = 1, COMM = 2;

static const drv_test TESTS[] = {
    {.name = "config.errors", .group = "config", .setup = DRV_R(lab3_errors_setup), .check = DRV_R(lab3_errors_check),
     .play = DRV_P(lab3_errors_play)},
    {.name = "forward", .group = "forward", .plan = plan_sp, .setup = DRV_R(lab3_block_setup),
     .check = DRV_R(lab3_forward_check), .model = DRV_R(lab3_leak_model), .teardown = DRV_R(lab3_teardown), .play = DRV_P(lab3_block_play),
     .release = DRV_P(lab3_release), .data = &FORWARD},
    {.name = "backward", .group = "backward", .plan = plan_sp, .setup = DRV_R(lab3_block_setup),
     .check = DRV_R(lab3_backward_check), .model = DRV_R(lab3_leak_model), .teardown = DRV_R(lab3_teardown), .play = DRV_P(lab3_block_play),
     .release = DRV_P(lab3_release), .data = &BACKWARD},
    {.name = "comm", .group = "comm", .plan = plan_sp, .setup = DRV_R(lab3_block_setup), .check = DRV_R(lab3_comm_check),
     .model = DRV_R(lab3_comm_model), .perf = DRV_R(lab3_comm_perf), .refresh = DRV_R(lab3_comm_refresh), .verify = DRV_R(lab3_comm_verify),
     .teardown = DRV_R(lab3_teardown), .play = DRV_P(lab3_block_play), .timed = DRV_P(lab3_block_timed),
     .release = DRV_P(lab3_release), .data = &COMM},
    {.name = "memory.sp", .group = "memory_sp", .setup = DRV_R(lab3_memory_setup), .check = DRV_R(lab3_memory_check),
     .model = DRV_R(lab3_leak_model), .play = DRV_P(lab3_memory_play)},
    {.name = "train", .group = "train", .plan = plan_sp, .setup = DRV_R(lab3_train_setup),
     .check = DRV_R(lab3_train_check), .model = DRV_R(lab3_leak_model), .teardown = DRV_R(lab3_train_teardown), .play = DRV_P(lab3_train_play),
     .release = DRV_P(lab3_release)},
    {NULL},
};

static const drv_flag FLAGS[] = {
    {"--seq", DRV_INT, &g_flags3.T, 1, 1e6, "sequence length T (odd is fine without sp; sp rounds it up to a multiple of tp)"},
    {"--batch", DRV_INT, &g_flags3.B, 1, 1e6, "batch B"},
    {"--hidden", DRV_INT, &g_flags3.C, 1, 1e6, "hidden size C"},
    {"--heads", DRV_INT, &g_flags3.H, 1, 1e6, "attention heads H (a multiple of the world size)"},
    {"--ffn", DRV_INT, &g_flags3.F, 1, 1e7, "MLP width F (a multiple of the world size)"},
    {"--layers", DRV_INT, &g_flags3.L, 1, 1000, "blocks in the training-step stack"},
    {"--iters", DRV_INT, &g_flags3.iters, 1, 1e5, "timed iterations of the performance lines"},
    {NULL},
};
static const drv_lab LAB = {
    .name = "03-megatron",
    .title = "Lab 3: a Megatron tensor-parallel GPT-2 block, sequence parallelism",
    .flags = FLAGS,
    .tests = TESTS,
    .init = DRV_R(lab3_init),
    .finish = DRV_R(lab3_finish),
};

int main(int argc, char **argv) { return drv_main(&LAB, argc, argv); }
