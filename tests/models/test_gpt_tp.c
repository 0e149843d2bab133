/* test_gpt_tp.c - the tensor-parallel GPT-2 block of models/gpt_tp.h at t = the world size
 * against the serial host block of models/gpt_host.h (plain loops, double accumulation):
 * the shard layout against the whole tensors, the forward output, dx and every gradient
 * shard, the traffic (two all-reduces of N*C floats each way, none at t = 1), the record's
 * bytes against the documented formula, and config errors. Run at np 1, 2 and 4.
 *
 *   mpirun -np 2 build/cpu/tests/test_gpt_tp
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/check.h" // defines: check_rel_ff, host_uniform, download
#include "../harness/tap.h"   // defines: tap_check, tap_finish
#include "gpt_host.h"
#include "gpt_tp.h"
#include "pl_instrument.h" // defines: pl_metrics (the traffic of the calls)

static const gpt_config CFG = {.seq = 6, .batch = 2, .hidden = 16, .heads = 4, .ffn = 32, .vocab = 0, .max_pos = 0};

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    int t = pl_world(), r = pl_rank(), layer = 3;
    uint64_t seed = pl_info()->seed;
    double tol = pl_tolerance();
    gpt_config c = CFG;
    char why[200];
    pl_comm *tp = pl_comm_split(pl_comm_world(), 0, r);
    size_t N = (size_t)c.seq * c.batch, NC = N * c.hidden, count = gpt_tp_block_count(&c, t);

    /* the serial block and its shard */
    gpt_block_params whole, gwhole;
    gpt_host_block_alloc(&whole, &c), gpt_host_block_init(&whole, &c, layer, seed);
    gpt_host_block_alloc(&gwhole, &c);
    float *shard = malloc(count * sizeof(float)), *sliced = malloc(count * sizeof(float));
    gpt_tp_block_init_host(shard, &c, layer, t, r, seed);
    gpt_tp_block_slice_host(sliced, &whole, &c, t, r);
    tap_check(memcmp(shard, sliced, count * sizeof(float)) == 0,
              "shard: the counter RNG's shard is bit for bit the slice of the whole tensors (qkv/fc1 rows, proj/fc2 columns)");
    size_t want_count = (size_t)(4 * c.hidden + 2 * c.hidden) + (size_t)(3 * c.hidden * c.hidden + 3 * c.hidden) / t +
                        (size_t)c.hidden * c.hidden / t + (size_t)(2 * c.ffn * c.hidden + c.ffn) / t;
    tap_check(count == want_count, "shard: 6C replicated floats + (3C^2 + 3C + C^2 + 2FC + F)/t sharded");
    gpt_tp_shard sq = gpt_tp_block_shard(&c, GPT_QKV_W, t, r), sp = gpt_tp_block_shard(&c, GPT_PROJ_W, t, r);
    tap_check(sq.rows == 3 * c.hidden / t && sq.row0 == r * sq.rows && sp.cols == c.hidden / t && sp.col0 == r * sp.cols &&
                  gpt_tp_block_shard(&c, GPT_FC2_B, t, r).replicated && !gpt_tp_block_shard(&c, GPT_FC1_B, t, r).replicated,
              "shard: qkv.w rows of this rank's heads, proj.w their columns; fc2.b replicated, fc1.b not");

    /* forward and backward on the host, whole */
    float *x = host_uniform(NC, seed, 9001), *dy = host_uniform(NC, seed, 9002);
    float *y_ref = calloc(NC, sizeof(float)), *dx_ref = calloc(NC, sizeof(float));
    gpt_host_acts ha;
    gpt_host_acts_alloc(&ha, &c);
    gpt_host_block_forward(&c, &whole, &ha, y_ref, x);
    gpt_host_block_backward(&c, &whole, &gwhole, &ha, dx_ref, dy);
    float *g_ref = malloc(count * sizeof(float));
    gpt_tp_block_slice_host(g_ref, &gwhole, &c, t, r);

    /* the same on the device over the group */
    gpt_block_params p, g;
    float *pbase = pl_malloc_floats(count), *gbase = pl_malloc_floats(count);
    pl_upload(pbase, shard, count * sizeof(float));
    pl_fill(gbase, 0.0f, count, NULL);
    gpt_tp_block_view(&p, pbase, &c, t);
    gpt_tp_block_view(&g, gbase, &c, t);
    gpt_tp_acts *a = gpt_tp_acts_alloc(&c, t);
    gpt_tp_workspace *ws = gpt_tp_workspace_alloc(&c, t);
    float *dx_d = pl_malloc_floats(NC), *y_d = pl_malloc_floats(NC), *dy_d = pl_malloc_floats(NC);
    pl_upload(y_d, x, NC * sizeof(float));
    pl_upload(dy_d, dy, NC * sizeof(float));
    pl_metrics mf, mb;
    pl_device_sync(), pl_metrics_reset();
    gpt_tp_block_forward(&p, a, y_d, y_d, ws, tp, NULL); /* y aliases x */
    pl_device_sync(), pl_metrics_get(&mf), pl_metrics_reset();
    gpt_tp_block_backward(&p, &g, a, dx_d, dy_d, ws, tp, NULL);
    pl_device_sync(), pl_metrics_get(&mb);
    float *y = download(y_d, NC), *dxh = download(dx_d, NC), *gh = download(gbase, count);
    char name[160];
    snprintf(name, sizeof name, "forward at t = %d: y equals the serial block's", t);
    check_rel_ff(name, y, y_ref, NC, tol);
    snprintf(name, sizeof name, "backward at t = %d: dx equals the serial block's", t);
    check_rel_ff(name, dxh, dx_ref, NC, tol);
    snprintf(name, sizeof name, "backward at t = %d: every gradient shard equals the slice of the serial gradients", t);
    check_rel_ff(name, gh, g_ref, count, tol);
    uint64_t want_ar = t > 1 ? 2 : 0;
    snprintf(name, sizeof name, "traffic at t = %d: %llu all-reduce(s) of N*C floats each way, nothing else", t, (unsigned long long)want_ar);
    tap_check(mf.coll_calls[PL_OP_ALLREDUCE] == want_ar && mb.coll_calls[PL_OP_ALLREDUCE] == want_ar && mf.coll_total == want_ar &&
                  mb.coll_total == want_ar && mf.coll_bytes == want_ar * NC * 4 && mb.coll_bytes == want_ar * NC * 4 &&
                  mf.msgs_sent == 0 && mb.msgs_sent == 0,
              name);
    int H = c.heads / t, F = c.ffn / t, Ct = c.hidden / t;
    size_t want_bytes = 4 * (N * (size_t)(4 * c.hidden + 4 * Ct + 2 * F + 4) + (size_t)c.batch * H * c.seq * c.seq);
    tap_check(gpt_tp_acts_bytes(&c, t) == want_bytes, "record: 4 (N (4C + 4C/t + 2F/t + 4) + b (H/t) T^2) bytes");
    gpt_config bad = c;
    bad.heads = 3, bad.hidden = 15;
    tap_check(!gpt_tp_config_valid(&bad, 2, why, sizeof why) && strstr(why, "t = 2"), "config: heads not divisible by t is refused, naming t");

    free(x), free(dy), free(y_ref), free(dx_ref), free(g_ref), free(shard), free(sliced), free(y), free(dxh), free(gh);
    gpt_host_acts_free(&ha);
    gpt_host_params_free(whole.base), gpt_host_params_free(gwhole.base);
    gpt_tp_acts_free(a), gpt_tp_workspace_free(ws);
    pl_free(pbase), pl_free(gbase), pl_free(dx_d), pl_free(y_d), pl_free(dy_d);
    pl_comm_free(tp);
    return tap_finish();
}
