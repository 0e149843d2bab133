/* pl_cuda_check.h - error checks for CUDA, cuBLAS and NCCL calls (CUDA builds only).
 *
 * Each macro evaluates its statement once and, on failure, calls pl_fatal(), which prints
 *   [rank R] file:line: statement -> reason
 * and aborts the whole job with PL_EXIT_FATAL. Included by .cu files only; lab code never
 * sees it. The NCCL part needs PL_HAVE_NCCL (defined by the build when NCCL is found), so
 * kernel files compile on machines with CUDA but without NCCL.
 */
#ifndef PL_CUDA_CHECK_H
#define PL_CUDA_CHECK_H

#include <stdio.h>

#include <cublas_v2.h>    // defines: cublasStatus_t
#include <cuda_runtime.h> // defines: cudaError_t, cudaGetErrorString, cudaGetLastError
#ifdef PL_HAVE_NCCL
#include <nccl.h> // defines: ncclResult_t, ncclGetErrorString, ncclGetLastError
#endif

#include "pl_runtime.h" // defines: pl_fatal

/* cuBLAS statuses with a hint at the usual cause, since "INVALID_VALUE" alone does not
 * tell a student that a leading dimension is too small. */
static inline const char *pl_cublas_status_name(cublasStatus_t st) {
    switch (st) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
        return "CUBLAS_STATUS_NOT_INITIALIZED (no cuBLAS handle: is the cuda backend set up?)";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED (out of device memory)";
    case CUBLAS_STATUS_INVALID_VALUE:
        return "CUBLAS_STATUS_INVALID_VALUE (check m, n, k and the leading dimensions)";
    case CUBLAS_STATUS_ARCH_MISMATCH:
        return "CUBLAS_STATUS_ARCH_MISMATCH (the GPU lacks a feature this call needs)";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
        return "CUBLAS_STATUS_EXECUTION_FAILED (the GEMM kernel failed to run: bad pointer?)";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "unknown cuBLAS status";
}

#define PL_CUDA_CHECK(stmt)                                                                \
    do {                                                                                   \
        cudaError_t pl_cuda_rc_ = (stmt);                                                  \
        if (pl_cuda_rc_ != cudaSuccess)                                                    \
            pl_fatal(__FILE__, __LINE__, #stmt, cudaGetErrorString(pl_cuda_rc_));          \
    } while (0)

#define PL_CUBLAS_CHECK(stmt)                                                              \
    do {                                                                                   \
        cublasStatus_t pl_cublas_rc_ = (stmt);                                             \
        if (pl_cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                        \
            pl_fatal(__FILE__, __LINE__, #stmt, pl_cublas_status_name(pl_cublas_rc_));     \
    } while (0)

/* After every kernel launch: a bad launch configuration is only reported here. Build with
 * -DPL_CUDA_SYNC_CHECK to also wait for the kernel, so a fault inside it is reported at
 * its own launch rather than at some later, unrelated call (slow; for debugging). */
#ifdef PL_CUDA_SYNC_CHECK
#define PL_CUDA_KERNEL_CHECK()                                                             \
    do {                                                                                   \
        PL_CUDA_CHECK(cudaGetLastError());                                                 \
        PL_CUDA_CHECK(cudaDeviceSynchronize());                                            \
    } while (0)
#else
#define PL_CUDA_KERNEL_CHECK() PL_CUDA_CHECK(cudaGetLastError())
#endif

#ifdef PL_HAVE_NCCL
/* The reason for a failed NCCL call: NCCL's own string, its last detailed message, and
 * for the errors after which a communicator cannot be used again, a note that it must be
 * aborted (the job ends right after, which releases it). One buffer per translation unit
 * is enough: the reason is printed once, right before the job ends. */
static inline const char *pl_nccl_reason(ncclResult_t rc) {
    static char buf[512];
    const char *last = ncclGetLastError(NULL);
    int fatal = rc == ncclUnhandledCudaError || rc == ncclSystemError ||
                rc == ncclInternalError || rc == ncclRemoteError;
    snprintf(buf, sizeof buf, "%s%s%s%s", ncclGetErrorString(rc),
             last && last[0] ? ": " : "", last ? last : "",
             fatal ? " (the communicator is unusable now and must be destroyed with "
                     "ncclCommAbort; NCCL_DEBUG=WARN shows more)"
                   : "");
    return buf;
}

#define PL_NCCL_CHECK(stmt)                                                                \
    do {                                                                                   \
        ncclResult_t pl_nccl_rc_ = (stmt);                                                 \
        if (pl_nccl_rc_ != ncclSuccess)                                                    \
            pl_fatal(__FILE__, __LINE__, #stmt, pl_nccl_reason(pl_nccl_rc_));              \
    } while (0)
#endif

#endif
