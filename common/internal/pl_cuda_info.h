/* pl_cuda_info.h - what Lab 0 and the runtime may ask the CUDA and NCCL backends.
 *
 * Plain C declarations (no CUDA headers), so C code can call them. They exist only in
 * builds with CUDA (PL_HAVE_CUDA) and, for the pl_nccl_* ones, NCCL (PL_HAVE_NCCL).
 * Every function writes one NUL-terminated text into buf, truncated to len.
 */
#ifndef PL_CUDA_INFO_H
#define PL_CUDA_INFO_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "driver 13.0, runtime 13.0", or "driver none, runtime 13.0" without an NVIDIA driver. */
void pl_cuda_versions(char *buf, size_t len);

/* One line about device `dev`, e.g.
 *   "NVIDIA H100 80GB HBM3, 79.2 GiB, 132 SMs, compute capability 9.0, PCI 0000:18:00.0".
 * Returns 0, or -1 with the reason in buf. Never aborts. */
int pl_cuda_device_describe(int dev, char *buf, size_t len);

/* A text matrix of the links between the visible GPUs, in the spirit of
 * `nvidia-smi topo -m`: for each pair whether peer-to-peer access works and CUDA's
 * relative performance rank of the link (0 = best), then a legend. Returns the number of
 * GPUs, or -1 with the reason in buf. Never aborts. */
int pl_cuda_link_matrix(char *buf, size_t len);

/* "NCCL 2.28.9" (the library actually loaded; the headers' version is added if it
 * differs). */
void pl_nccl_version(char *buf, size_t len);

/* NCCL reports some failures (a peer died, a network error) only asynchronously, while
 * operations wait on the GPU. Checks every live NCCL communicator; on an error, aborts
 * the communicators and calls pl_fatal. Returns 0 when all is well. Cheap: call it in
 * every host-side wait loop, next to pl_watchdog_poll(). */
int pl_nccl_check_async(void);

#ifdef __cplusplus
}
#endif

#endif
