/* pl_tensor.h - a 2-D row-major view of device memory and its sub-views. */
#ifndef PL_TENSOR_H
#define PL_TENSOR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    float *data;   /* device pointer to element (0, 0)          */
    int64_t rows;  /* number of rows                             */
    int64_t cols;  /* number of columns                          */
    int64_t ld;    /* elements between the starts of two rows    */
} pl_tensor;

static inline pl_tensor pl_tensor_view(float *data, int64_t rows, int64_t cols) {
    pl_tensor t = {data, rows, cols, cols};
    return t;
}
/* Rows [r0, r0 + n) of t. */
static inline pl_tensor pl_tensor_rows(pl_tensor t, int64_t r0, int64_t n) {
    pl_tensor v = {t.data + r0 * t.ld, n, t.cols, t.ld};
    return v;
}
/* Columns [c0, c0 + n) of t (same leading dimension). */
static inline pl_tensor pl_tensor_cols(pl_tensor t, int64_t c0, int64_t n) {
    pl_tensor v = {t.data + c0, t.rows, n, t.ld};
    return v;
}
static inline int64_t pl_tensor_numel(pl_tensor t) { return t.rows * t.cols; }
static inline int pl_tensor_contiguous(pl_tensor t) { return t.ld == t.cols || t.rows <= 1; }

pl_tensor pl_tensor_alloc(int64_t rows, int64_t cols); /* device memory, uninitialised */
/* The same naming its call site (pl_device.h, pl_malloc_at); the macro below passes it. */
pl_tensor pl_tensor_alloc_at(int64_t rows, int64_t cols, const char *file, int line);
#define pl_tensor_alloc(rows, cols) pl_tensor_alloc_at((rows), (cols), __FILE__, __LINE__)
void pl_tensor_free(pl_tensor *t);
/* Copy a (possibly strided) device view to a dense host array rows*cols and back. */
void pl_tensor_download(float *host, pl_tensor t);
void pl_tensor_upload(pl_tensor t, const float *host);

#ifdef __cplusplus
}
#endif

#endif
