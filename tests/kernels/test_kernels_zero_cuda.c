/* test_kernels_zero_cuda.c - test_kernels_zero.c built against the cuda flavour: run with
 * --device cuda, every dispatcher runs its CUDA version and must give the CPU reference's
 * bits (bf16 words, exactly) or its values (sums and AdamW, to 1e-6). */
#include "test_kernels_zero.c"
