/* lab00.h - what the two files of Lab 0's program share (lab00.c: the backends, the ranks,
 * the topology, the cases; lab00_p2p.c: the ping-pong sweep, its matrices and JSON). */
#ifndef LAB00_DRIVER_H
#define LAB00_DRIVER_H

#include <stdbool.h>
#include <stdio.h>

#include "driver.h" // defines: drv_case, drv_opts; brings in pl.h

#define MAX_SIZES 64
#define HOST_CHARS 64
#define GPU_CHARS 128
#define DEFAULT_MAX_BYTES (4u << 20)
#define DEFAULT_WARMUP 2

/* One rank's self-description. It travels through pl_allgather as floats: numbers as they
 * are, text one character per float (exact for 0..255), so no string call is needed. */
typedef struct {
    int rank, local_rank, local_world, nodes, device, comm, cuda_device, gpus;
    char host[HOST_CHARS];
    char gpu[GPU_CHARS];
} rank_card;

typedef struct {
    size_t bytes;
    int iters;
    double latency_us;     /* one way: half the median round trip */
    double bandwidth_gbps; /* bytes / one-way time, 1 GB = 1e9 bytes */
    double wrong_bytes;    /* over all iterations, both directions */
} p2p_point;

typedef struct {
    int src, dst;
    bool same_host;
    int n;
    p2p_point pt[MAX_SIZES];
} p2p_pair;

/* The message src sends in iteration `iter`: small integers, exact in float32, different
 * for every pair and iteration so a stale or misrouted buffer is caught. */
typedef struct {
    float *d_out, *d_in, *d_token; /* device buffers, max size */
    float *h_want, *h_got;         /* host staging */
    double *times;
} p2p_buffers;

int warmup(void);
int iters_for(size_t bytes);
void print_sweep_header(void);
/* The sweep for one ordered pair; every rank takes part, so results reach rank 0. */
void sweep_pair(const size_t *sizes, size_t n_sizes, p2p_buffers *b, p2p_pair *p);
void report_pair(drv_case *c, const p2p_pair *p);
void print_matrices(const p2p_pair *pairs, int n_pairs);
void write_p2p_json(const char *path, const rank_card *cards, const p2p_pair *pairs, int n_pairs);

#endif
