/* test_kernels_flash_cuda.c - the CUDA versions of Lab 10's kernels (kern_flash_block, its
 * backward, kern_flash_merge), through their dispatchers on the cuda device, against the CPU
 * references on random inputs with poisoned outputs: causal and full, MHA and GQA, head
 * sizes 8, 64 and 128 (the lanes loop past 32), a long block (4096 keys). Built in the cuda
 * flavour; run only where a GPU is present (tests/kernels/test_kernels.sh); on a rank
 * without a cuda device it prints one skip line and exits 0.
 *
 *   mpirun -np 1 build/cuda/tests/test_kernels_flash_cuda --device cuda
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/tap.h"   // defines: tap_check, tap_finish (and includes pl.h)
#include "../harness/check.h" // defines: check_dev, dev_poisoned
#include "kern_flash.h"

#define ELEM_TOL 1e-5 /* fp32 on both sides; expf and the sums differ in rounding */

static uint64_t g_id = 3300;

static float *host_rand(size_t n, float lo, float hi) {
    float *p = malloc(n * sizeof(float) + 4);
    pl_rng_fill_host(p, 1, (int64_t)n, (int64_t)n, 0, 0, pl_info()->seed + 17, g_id++, PL_RNG_UNIFORM, lo, hi);
    return p;
}
static void *dev_from(const void *h, size_t bytes) {
    void *d = pl_malloc(bytes);
    pl_upload(d, h, bytes);
    return d;
}

static void test_flash(int nq, int nk, int H, int Hkv, int d, int causal) {
    size_t nqe = (size_t)nq * H * d, nke = (size_t)nk * Hkv * d, nl = (size_t)nq * H;
    float *q = host_rand(nqe, -2, 2), *k = host_rand(nke, -1, 1), *v = host_rand(nke, -1, 1);
    int *qp = malloc((size_t)nq * sizeof(int)), *kp = malloc((size_t)nk * sizeof(int));
    for (int i = 0; i < nq; i++) qp[i] = nk / 2 + i - 1;
    for (int j = 0; j < nk; j++) kp[j] = j % 2 ? nk - 1 - j / 2 : j / 2;
    float *o = malloc(nqe * sizeof(float)), *l = malloc(nl * sizeof(float));
    float *o2 = host_rand(nqe, -1, 1), *l2 = host_rand(nl, -3, 3);
    float sc = 1.0f / sqrtf((float)d);
    kern_flash_block_ref(o, l, q, k, v, qp, kp, nq, nk, H, Hkv, d, causal, sc);
    float *dq = dev_from(q, nqe * 4), *dk = dev_from(k, nke * 4), *dv = dev_from(v, nke * 4);
    int *dqp = dev_from(qp, (size_t)nq * sizeof(int)), *dkp = dev_from(kp, (size_t)nk * sizeof(int));
    float *dout = dev_poisoned(nqe), *dlse = dev_poisoned(nl);
    kern_flash_block(dout, dlse, dq, dk, dv, dqp, dkp, nq, nk, H, Hkv, d, causal, sc, pl_stream_compute());
    char what[160];
    snprintf(what, sizeof what, "flash_block %dx%d H %d Hkv %d d %d %s: o", nq, nk, H, Hkv, d, causal ? "causal" : "full");
    check_dev(what, dout, o, nqe, ELEM_TOL);
    snprintf(what, sizeof what, "flash_block %dx%d H %d Hkv %d d %d %s: lse", nq, nk, H, Hkv, d, causal ? "causal" : "full");
    check_dev(what, dlse, l, nl, ELEM_TOL);
    /* merge the block into a random running result */
    float *mo = dev_from(o2, nqe * 4), *ml = dev_from(l2, nl * 4);
    kern_flash_merge_ref(o2, l2, o, l, (int)nl, d);
    kern_flash_merge(mo, ml, dout, dlse, (int)nl, d, pl_stream_compute());
    snprintf(what, sizeof what, "flash_merge %zu rows d %d: o", nl, d);
    check_dev(what, mo, o2, nqe, ELEM_TOL);
    snprintf(what, sizeof what, "flash_merge %zu rows d %d: lse", nl, d);
    check_dev(what, ml, l2, nl, ELEM_TOL);
    /* the backward of the block with its own (o, lse), accumulated into random gradients */
    float *g = host_rand(nqe, -1, 1), *gq = host_rand(nqe, -1, 1), *gk = host_rand(nke, -1, 1), *gv = host_rand(nke, -1, 1);
    float *dg = dev_from(g, nqe * 4), *dgq = dev_from(gq, nqe * 4), *dgk = dev_from(gk, nke * 4), *dgv = dev_from(gv, nke * 4);
    kern_flash_block_backward_ref(gq, gk, gv, q, k, v, o, l, g, qp, kp, nq, nk, H, Hkv, d, causal, sc);
    kern_flash_block_backward(dgq, dgk, dgv, dq, dk, dv, dout, dlse, dg, dqp, dkp, nq, nk, H, Hkv, d, causal, sc,
                              pl_stream_compute());
    snprintf(what, sizeof what, "flash_block_backward %dx%d H %d Hkv %d d %d: dq", nq, nk, H, Hkv, d);
    check_dev(what, dgq, gq, nqe, 1e-4);
    snprintf(what, sizeof what, "flash_block_backward %dx%d H %d Hkv %d d %d: dk", nq, nk, H, Hkv, d);
    check_dev(what, dgk, gk, nke, 1e-4);
    snprintf(what, sizeof what, "flash_block_backward %dx%d H %d Hkv %d d %d: dv", nq, nk, H, Hkv, d);
    check_dev(what, dgv, gv, nke, 1e-4);
    pl_free(dg), pl_free(dgq), pl_free(dgk), pl_free(dgv);
    free(g), free(gq), free(gk), free(gv);
    pl_free(dq), pl_free(dk), pl_free(dv), pl_free(dqp), pl_free(dkp), pl_free(dout), pl_free(dlse), pl_free(mo), pl_free(ml);
    free(q), free(k), free(v), free(qp), free(kp), free(o), free(l), free(o2), free(l2);
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    if (pl_info()->device != PL_DEVICE_CUDA) {
        if (pl_rank() == 0) printf("# test_kernels_flash_cuda: device is %s, not cuda: nothing to compare (skipped)\n",
                                   pl_device_name(pl_info()->device));
        pl_finalize();
        return 0;
    }
    test_flash(17, 23, 4, 2, 8, 1);
    test_flash(33, 64, 8, 8, 64, 0);
    test_flash(64, 4096, 8, 2, 128, 1);
    return tap_finish();
}
