/* test_kernels_moe_cuda.c - the CUDA versions of Lab 9's kernels (kern_moe scatter, gather,
 * rowdot; kern_swiglu_backward), through their dispatchers on the cuda device, against the
 * CPU references on random inputs with poisoned outputs, at a small and a DeepSeek-like
 * size (4096 tokens, top-2 and top-8 with drops, hidden 7168). Built in the cuda flavour; run
 * only where a GPU is present (tests/kernels/test_kernels.sh); on a rank without a cuda
 * device it prints one skip line and exits 0.
 *
 *   mpirun -np 1 build/cuda/tests/test_kernels_moe_cuda --device cuda
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/tap.h"   // defines: tap_check, tap_finish (and includes pl.h)
#include "../harness/check.h" // defines: check_dev, dev_poisoned
#include "kern_moe.h"
#include "kern_swiglu.h"

#define ELEM_TOL 1e-5 /* fp32 on both sides; rowdot sums in another order */

static uint64_t g_id = 2900;

static float *host_rand(size_t n, float lo, float hi) {
    float *p = malloc(n * sizeof(float) + 4);
    pl_rng_fill_host(p, 1, (int64_t)n, (int64_t)n, 0, 0, pl_info()->seed + 13, g_id++, PL_RNG_UNIFORM, lo, hi);
    return p;
}
static void *dev_from(const void *h, size_t bytes) {
    void *d = pl_malloc(bytes);
    pl_upload(d, h, bytes);
    return d;
}

/* Slots: a random permutation of the rows, every fifth assignment dropped. */
static void test_moe(int T, int k, int H) {
    size_t na = (size_t)T * k, R = na;
    int *slot = malloc(na * sizeof *slot);
    for (size_t a = 0; a < na; a++) slot[a] = (int)a;
    for (size_t a = na; a > 1; a--) {
        size_t b = pl_rng_bits(31, g_id, a) % a;
        int t = slot[a - 1];
        slot[a - 1] = slot[b], slot[b] = t;
    }
    for (size_t a = 0; a < na; a += 5) slot[a] = -1;
    float *x = host_rand((size_t)T * H, -1, 1), *rows = host_rand(R * H, -1, 1), *w = host_rand(na, 0, 1);
    float *ref_rows = malloc(R * H * 4), *ref_out = malloc((size_t)T * H * 4), *ref_dot = malloc(na * 4);
    memcpy(ref_rows, rows, R * H * 4);
    kern_moe_scatter_ref(ref_rows, x, slot, w, T, k, H);
    kern_moe_gather_ref(ref_out, rows, slot, w, T, k, H);
    kern_moe_rowdot_ref(ref_dot, x, rows, slot, T, k, H);
    float *d_x = dev_from(x, (size_t)T * H * 4), *d_rows = dev_from(rows, R * H * 4), *d_w = dev_from(w, na * 4);
    int *d_slot = dev_from(slot, na * sizeof *slot);
    float *d_out = dev_poisoned((size_t)T * H), *d_dot = dev_poisoned(na);
    kern_moe_gather(d_out, d_rows, d_slot, d_w, T, k, H, NULL);
    kern_moe_rowdot(d_dot, d_x, d_rows, d_slot, T, k, H, NULL);
    kern_moe_scatter(d_rows, d_x, d_slot, d_w, T, k, H, NULL);
    char what[96];
    snprintf(what, sizeof what, "moe scatter T=%d k=%d H=%d", T, k, H);
    check_dev(what, d_rows, ref_rows, R * H, 0);
    snprintf(what, sizeof what, "moe gather T=%d k=%d H=%d", T, k, H);
    check_dev(what, d_out, ref_out, (size_t)T * H, ELEM_TOL);
    snprintf(what, sizeof what, "moe rowdot T=%d k=%d H=%d", T, k, H);
    check_dev(what, d_dot, ref_dot, na, ELEM_TOL);
    pl_free(d_x), pl_free(d_rows), pl_free(d_w), pl_free(d_slot), pl_free(d_out), pl_free(d_dot);
    free(slot), free(x), free(rows), free(w), free(ref_rows), free(ref_out), free(ref_dot);
}

static void test_swiglu_backward(size_t n) {
    float *g = host_rand(n, -8, 8), *u = host_rand(n, -2, 2), *d = host_rand(n, -1, 1);
    float *dg = malloc(n * 4), *du = malloc(n * 4);
    kern_swiglu_backward_ref(dg, du, d, g, u, n);
    float *d_g = dev_from(g, n * 4), *d_u = dev_from(u, n * 4), *d_d = dev_from(d, n * 4);
    float *d_dg = dev_poisoned(n), *d_du = dev_poisoned(n);
    kern_swiglu_backward(d_dg, d_du, d_d, d_g, d_u, n, NULL);
    char what[80];
    snprintf(what, sizeof what, "swiglu backward dgate n=%zu", n);
    check_dev(what, d_dg, dg, n, ELEM_TOL);
    snprintf(what, sizeof what, "swiglu backward dup n=%zu", n);
    check_dev(what, d_du, du, n, ELEM_TOL);
    pl_free(d_g), pl_free(d_u), pl_free(d_d), pl_free(d_dg), pl_free(d_du);
    free(g), free(u), free(d), free(dg), free(du);
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    if (pl_info()->device != PL_DEVICE_CUDA) {
        if (pl_rank() == 0) printf("# test_kernels_moe_cuda: device is %s, not cuda: nothing to compare (skipped)\n",
                                   pl_device_name(pl_info()->device));
        pl_finalize();
        return 0;
    }
    test_moe(37, 2, 33);
    test_moe(4096, 2, 7168);
    test_moe(512, 8, 7168);
    test_swiglu_backward(1001);
    test_swiglu_backward((size_t)4096 * 2048 + 3);
    return tap_finish();
}
