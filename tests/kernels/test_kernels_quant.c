/* test_kernels_quant.c - the quantised products (kern_qmatmul.h): the scalar reference and
 * the vectorised CPU version against a float64 product of the weights dequantised by the
 * kit's GGUF reader (datasets/ds_gguf.c), element by element within kern_qmatmul.h's
 * bound; the embedding lookup bit for bit against that dequantiser; the dispatcher on the
 * cpu device bit for bit against the vectorised version, and its trace record.
 *
 *   mpirun -np 1 build/cpu/tests/test_kernels_quant [--gguf-out FILE]
 *
 * --gguf-out writes the weights (in their blocks), x, the vectorised y and each element's
 * bound into a GGUF file for tests/kernels/check_quant_gguf.py, which redoes the check
 * with the weights dequantised by gguf-py (llama.cpp's Python package) instead.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/check.h" // defines: check_record
#include "../harness/tap.h"   // defines: tap_check, tap_finish (and includes pl.h)
#include "ds_gguf.h"          // defines: ds_ggml_quantize_row, ds_ggml_dequantize_row, the writer
#include "kern_qmatmul.h"
#include "pl_instrument.h" // defines: pl_trace_count

static uint64_t g_id = 900;
static const int TYPES[3] = {KERN_Q4_0, KERN_Q4_1, KERN_Q8_0};

static float *randf(size_t n, float lo, float hi) {
    float *p = malloc(n * sizeof(float) + 4);
    pl_rng_fill_host(p, 1, (int64_t)n, (int64_t)n, 0, 0, 4244, g_id++, PL_RNG_UNIFORM, lo, hi);
    return p;
}

/* |d q_j| + |m| of weight j of a row, read from the blocks independently of the kernels. */
static void magnitudes(const uint8_t *row, int type, int cols, double *mag) {
    size_t bb = kern_q_block_bytes(type);
    for (int b = 0; b < cols / KERN_QK; b++) {
        const uint8_t *blk = row + (size_t)b * bb;
        double d = fabs((double)ds_fp16_to_fp32((uint16_t)(blk[0] | blk[1] << 8))), m = 0;
        if (type == KERN_Q4_1) m = fabs((double)ds_fp16_to_fp32((uint16_t)(blk[2] | blk[3] << 8)));
        for (int j = 0; j < KERN_QK; j++) {
            int q;
            if (type == KERN_Q8_0) q = (int8_t)blk[2 + j];
            else {
                const uint8_t *qs = blk + (type == KERN_Q4_1 ? 4 : 2);
                q = (j < 16 ? qs[j] & 15 : qs[j - 16] >> 4) - (type == KERN_Q4_0 ? 8 : 0);
            }
            mag[b * KERN_QK + j] = d * fabs((double)q) + m;
        }
    }
}

typedef struct {
    int type, n, rows, cols;
    uint8_t *W;         /* [rows] rows of blocks                       */
    float *x, *y;       /* [n, cols], [n, rows] (the vectorised y)     */
    float *bound;       /* [n, rows]: gamma_k sum (|d q| + |m|) |x|     */
} qcase;

/* One shape and type: both CPU versions against the float64 product, element by element. */
static void test_case(qcase *qc) {
    int type = qc->type, n = qc->n, rows = qc->rows, cols = qc->cols;
    size_t rb = kern_q_row_bytes(type, cols);
    float *master = randf((size_t)rows * cols, -1, 1);
    for (int r = 0; r < rows; r += 5) master[(size_t)r * cols + r % cols] = 40.0f; /* an outlier per few rows */
    qc->W = malloc((size_t)rows * rb);
    for (int r = 0; r < rows; r++) ds_ggml_quantize_row((uint32_t)type, master + (size_t)r * cols, qc->W + r * rb, cols);
    qc->x = randf((size_t)n * cols, -2, 2);
    float *wd = malloc((size_t)rows * cols * sizeof(float)), *yr = malloc((size_t)n * rows * sizeof(float));
    qc->y = malloc((size_t)n * rows * sizeof(float));
    qc->bound = malloc((size_t)n * rows * sizeof(float));
    double *mag = malloc((size_t)cols * sizeof(double));
    for (int r = 0; r < rows; r++) ds_ggml_dequantize_row((uint32_t)type, qc->W + r * rb, wd + (size_t)r * cols, cols);
    kern_qmatmul_forward_ref(yr, rows, qc->x, cols, qc->W, type, n, rows, cols);
    kern_qmatmul_forward_cpu(qc->y, rows, qc->x, cols, qc->W, type, n, rows, cols);
    double k = cols + 2, u = 0x1p-24, gamma = k * u / (1 - k * u), worst_ref = 0, worst_cpu = 0;
    for (int r = 0; r < rows; r++) {
        magnitudes(qc->W + r * rb, type, cols, mag);
        for (int t = 0; t < n; t++) {
            double exact = 0, scale = 0;
            for (int j = 0; j < cols; j++) {
                double xv = qc->x[(size_t)t * cols + j];
                exact += (double)wd[(size_t)r * cols + j] * xv;
                scale += mag[j] * fabs(xv);
            }
            double b = gamma * scale;
            qc->bound[(size_t)t * rows + r] = (float)b;
            double er = fabs(yr[(size_t)t * rows + r] - exact) / b, ec = fabs(qc->y[(size_t)t * rows + r] - exact) / b;
            worst_ref = er > worst_ref || isnan(er) ? er : worst_ref;
            worst_cpu = ec > worst_cpu || isnan(ec) ? ec : worst_cpu;
        }
    }
    char what[200];
    snprintf(what, sizeof what, "%s %d x %d, %d token(s): reference within the bound of the float64 dequantised product "
             "(worst %.3f of it)", ds_ggml_type_name((uint32_t)type), rows, cols, n, worst_ref);
    tap_check(worst_ref <= 1.0, what);
    snprintf(what, sizeof what, "%s %d x %d, %d token(s): vectorised within the bound (worst %.3f of it)",
             ds_ggml_type_name((uint32_t)type), rows, cols, n, worst_cpu);
    tap_check(worst_cpu <= 1.0, what);
    free(master), free(wd), free(yr), free(mag);
}

/* The dispatcher on the cpu device runs the vectorised version and records its cost. */
static void test_dispatch(const qcase *qc) {
    int n = qc->n, rows = qc->rows, cols = qc->cols, ldy = rows + 3, ldx = cols + 5;
    float *x = malloc((size_t)n * ldx * sizeof(float)), *y = malloc((size_t)n * ldy * sizeof(float));
    for (int t = 0; t < n; t++) memcpy(x + (size_t)t * ldx, qc->x + (size_t)t * cols, (size_t)cols * sizeof(float));
    for (size_t i = 0; i < (size_t)n * ldy; i++) y[i] = -7.0f;
    kern_qmatmul_forward(y, ldy, x, ldx, qc->W, qc->type, n, rows, cols, NULL);
    pl_stream_sync(NULL);
    bool same = true, pad = true;
    for (int t = 0; t < n; t++) {
        same &= !memcmp(y + (size_t)t * ldy, qc->y + (size_t)t * rows, (size_t)rows * sizeof(float));
        for (int r = rows; r < ldy; r++) pad &= y[(size_t)t * ldy + r] == -7.0f;
    }
    char what[200];
    snprintf(what, sizeof what, "%s dispatcher with strides (ldy %d, ldx %d): the vectorised result bit for bit, the "
             "padding untouched", ds_ggml_type_name((uint32_t)qc->type), ldy, ldx);
    tap_check(same && pad, what);
    double bytes, flops;
    kern_qmatmul_cost(qc->type, n, rows, cols, &bytes, &flops);
    check_record("qmatmul", bytes, flops);
    free(x), free(y);
}

static void test_get_rows(int type) {
    int V = 40, C = 96, n = 5, idx[5] = {3, 0, 39, 3, 17};
    size_t rb = kern_q_row_bytes(type, C);
    float *master = randf((size_t)V * C, -1, 1), *want = malloc((size_t)n * C * 4), *got = malloc((size_t)n * C * 4);
    uint8_t *W = malloc((size_t)V * rb);
    for (int r = 0; r < V; r++) ds_ggml_quantize_row((uint32_t)type, master + (size_t)r * C, W + r * rb, C);
    for (int i = 0; i < n; i++) ds_ggml_dequantize_row((uint32_t)type, W + idx[i] * rb, want + (size_t)i * C, C);
    kern_qget_rows(got, W, type, idx, n, C, NULL);
    pl_stream_sync(NULL);
    char what[160];
    snprintf(what, sizeof what, "%s row lookup: the rows as the GGUF reader dequantises them, bit for bit",
             ds_ggml_type_name((uint32_t)type));
    tap_check(!memcmp(got, want, (size_t)n * C * 4), what);
    double bytes, flops;
    kern_qget_rows_cost(type, n, C, &bytes, &flops);
    check_record("qget_rows", bytes, flops);
    free(master), free(want), free(got), free(W);
}

static void test_half(void) {
    bool ok = true;
    for (uint32_t h = 0; h < 65536 && ok; h++) {
        uint8_t b[2] = {(uint8_t)h, (uint8_t)(h >> 8)};
        float a = kern_half_to_float(b), c = ds_fp16_to_fp32((uint16_t)h);
        ok = isnan(c) ? isnan(a) : !memcmp(&a, &c, 4);
    }
    tap_check(ok, "fp16 -> fp32 (the blocks' scales): all 65536 halves as the GGUF reader converts them");
}

/* Every case into one GGUF file: W_i (raw blocks), x_i, y_i, bound_i. */
static void write_gguf(const char *path, qcase *cs, int ncase) {
    ds_gguf_writer *w = ds_gguf_writer_new(32);
    char name[64], err[256];
    for (int i = 0; i < ncase; i++) {
        int64_t new_[2] = {cs[i].cols, cs[i].rows}, nex[2] = {cs[i].cols, cs[i].n}, ney[2] = {cs[i].rows, cs[i].n};
        snprintf(name, sizeof name, "W_%d", i);
        ds_gguf_add_tensor_raw(w, name, (uint32_t)cs[i].type, 2, new_, cs[i].W);
        snprintf(name, sizeof name, "x_%d", i);
        ds_gguf_add_tensor(w, name, DS_GGML_F32, 2, nex, cs[i].x);
        snprintf(name, sizeof name, "y_%d", i);
        ds_gguf_add_tensor(w, name, DS_GGML_F32, 2, ney, cs[i].y);
        snprintf(name, sizeof name, "bound_%d", i);
        ds_gguf_add_tensor(w, name, DS_GGML_F32, 2, ney, cs[i].bound);
    }
    ds_gguf_add_u32(w, "paralab.cases", (uint32_t)ncase);
    int ok = !ds_gguf_writer_error(w) && ds_gguf_writer_save(w, path, err, sizeof err) == 0;
    tap_check(ok, "the cases are written for gguf-py's check");
    ds_gguf_writer_free(w);
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    const char *out = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--gguf-out")) out = argv[i + 1];
    test_half();
    static const int SHAPES[][3] = {{1, 37, 64}, {1, 96, 576}, {5, 50, 1536}, {9, 33, 96}, {4, 70, 32}};
    enum { NS = sizeof SHAPES / sizeof SHAPES[0] };
    qcase cs[3 * NS];
    int nc = 0;
    for (int t = 0; t < 3; t++)
        for (int s = 0; s < NS; s++, nc++) {
            cs[nc] = (qcase){TYPES[t], SHAPES[s][0], SHAPES[s][1], SHAPES[s][2], NULL, NULL, NULL, NULL};
            test_case(&cs[nc]);
            test_dispatch(&cs[nc]);
        }
    for (int t = 0; t < 3; t++) test_get_rows(TYPES[t]);
    if (out) write_gguf(out, cs, nc);
    for (int i = 0; i < nc; i++) free(cs[i].W), free(cs[i].x), free(cs[i].y), free(cs[i].bound);
    return tap_finish();
}
