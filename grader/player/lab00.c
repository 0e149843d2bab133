/* lab00.c (player) - Lab 0's program on the harness: the backends it chose and why, every
 * rank's card gathered with one all-gather, and a ping-pong between every ordered pair of
 * ranks, timed round trip by round trip.
 *
 * It decides nothing: what arrived goes back to the referee (grader/referee/lab00.c),
 * which made the messages and checks them. The times are this process's own clock
 * (pl_now): they are reported, never scored.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab00.h"
#ifdef PL_HAVE_CUDA
#include "pl_cuda_info.h" // defines: pl_cuda_versions, pl_cuda_device_describe, pl_cuda_link_matrix
#endif

/* ------------------------------------------------------------------ sections 1 and 2 */

static const char *launcher(void) {
    if (getenv("OMPI_COMM_WORLD_SIZE")) return "Open MPI mpirun";
    if (getenv("SLURM_STEP_ID") || getenv("SLURM_JOB_ID")) return "Slurm";
    if (getenv("PMI_RANK") || getenv("PMIX_RANK")) return "a PMI launcher";
    return "a single process (no launcher)";
}

/* Before the first case (rank 0 prints): what only this process knows. */
void lab0_player_init(void) {
    const pl_runtime_info *in = pl_info();
    drv_print("== backends ==\n");
    drv_print("  device  %-5s %s\n", pl_device_name(in->device), in->device_why);
    drv_print("  comm    %-5s %s\n", pl_comm_name(in->comm), in->comm_why);
    drv_print("  watchdog %.0f s, BLAS threads per rank %d, trace %s\n", in->watchdog_sec, in->blas_threads,
              in->trace ? in->trace_path : "off (TRACE=1 to write one)");
    drv_print("== versions ==\n");
    drv_print("  launched by   %s (MPI version: `mpirun --version`, or `make doctor`)\n", launcher());
#ifdef PL_HAVE_CUDA
    char buf[160];
    pl_cuda_versions(buf, sizeof buf);
    drv_print("  CUDA          %s\n", buf);
#ifdef PL_HAVE_NCCL
    pl_nccl_version(buf, sizeof buf);
    drv_print("  NCCL          %s\n", buf);
#else
    drv_print("  NCCL          not in this build (NO_NCCL=1, or nccl.h was not found)\n");
#endif
#else
    drv_print("  CUDA, NCCL    not in this build (the cpu flavour; nvcc was not used)\n");
#endif
}

/* ------------------------------------------------------------------ topology */

static lab0_card my_card(void) {
    const pl_runtime_info *in = pl_info();
    lab0_card c = {.rank = in->rank, .local_rank = in->local_rank, .local_world = in->local_world,
                   .nodes = in->nodes, .device = in->device, .comm = in->comm,
                   .cuda_device = in->cuda_device, .gpus = in->gpus_on_node};
    snprintf(c.host, sizeof c.host, "%s", in->host);
    snprintf(c.gpu, sizeof c.gpu, "-");
#ifdef PL_HAVE_CUDA
    if (in->cuda_device >= 0 && pl_cuda_device_describe(in->cuda_device, c.gpu, sizeof c.gpu) != 0)
        snprintf(c.gpu, sizeof c.gpu, "GPU %d (no description)", in->cuda_device);
#endif
    return c;
}

/* Every rank's card with one all-gather, straight into the slot; the receive buffer is
 * poisoned first, so a rank that sent nothing shows up as NaN. */
void lab0_topology_play(drv_case *c) {
    size_t world = (size_t)pl_world(), n = LAB0_CARD_FLOATS;
    float mine[LAB0_CARD_FLOATS];
    lab0_card me = my_card();
    lab0_card_pack(&me, mine);
    float *d_mine = pl_malloc_floats(n), *d_all = drv_slot_f(c, "cards");
    pl_upload(d_mine, mine, n * sizeof(float));
    pl_poison(d_all, n * world, NULL);
    pl_allgather(d_mine, d_all, n, pl_comm_world(), NULL);
    pl_device_sync();
    pl_free(d_mine);

    char why[2 * LAB0_WHY_CHARS];
    memset(why, 0, sizeof why);
    snprintf(why, LAB0_WHY_CHARS, "%s", pl_info()->device_why);
    snprintf(why + LAB0_WHY_CHARS, LAB0_WHY_CHARS, "%s", pl_info()->comm_why);
    pl_upload(drv_slot(c, "why"), why, sizeof why);
#ifdef PL_HAVE_CUDA
    if (pl_rank() == 0 && pl_info()->gpus_on_node > 0) {
        char *buf = calloc(LAB0_LINKS_CHARS, 1);
        PL_CHECK(buf != NULL, "out of host memory");
        if (pl_cuda_link_matrix(buf, LAB0_LINKS_CHARS) < 0) {
            char reason[LAB0_LINKS_CHARS - 16];
            snprintf(reason, sizeof reason, "%s", buf);
            snprintf(buf, LAB0_LINKS_CHARS, "  unavailable: %s\n", reason);
        }
        buf[LAB0_LINKS_CHARS - 1] = 0;
        pl_upload(drv_slot(c, "links"), buf, LAB0_LINKS_CHARS);
        free(buf);
    }
#endif
    pl_device_sync();
}

/* ------------------------------------------------------------------ ping-pong */

typedef struct {
    float *d_out, *d_in, *d_token; /* device buffers of the largest size */
    float *h_base, *h_msg, *h_got; /* host: the referee's base, a message, what arrived */
    float *h_sum;                  /* per size, what arrived, summed over the rounds */
    double *times, *lat;
} pingpong_bufs;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One message size between src and dst. src sends, dst echoes what it received, src times
 * the round trip. Before each timed round dst sends src a one-float token, so the clock
 * starts only once dst is ready to receive (its bookkeeping of the previous round is not
 * counted). Each side adds what it received into sum[0..count); on src, the median
 * one-way time in us. */
static double pingpong(int src, int dst, size_t count, int warmup, int iters, pingpong_bufs *b, float *sum) {
    pl_comm *w = pl_comm_world();
    int me = pl_rank();
    size_t bytes = count * sizeof(float);
    for (int it = -warmup; it < iters; it++) {
        int round = it + warmup;
        pl_poison(b->d_in, count, NULL);
        if (me == src) {
            for (size_t i = 0; i < count; i++) b->h_msg[i] = lab0_message(b->h_base, count, round, i);
            pl_upload(b->d_out, b->h_msg, bytes);
            pl_device_sync();
            pl_recv(b->d_token, 1, dst, w, NULL);
            pl_stream_sync(NULL);
            double t0 = pl_now();
            pl_send(b->d_out, count, dst, w, NULL);
            pl_recv(b->d_in, count, dst, w, NULL);
            pl_stream_sync(NULL);
            double t1 = pl_now();
            if (it >= 0) b->times[it] = t1 - t0;
        } else {
            pl_device_sync();
            pl_send(b->d_token, 1, src, w, NULL);
            pl_recv(b->d_in, count, src, w, NULL);
            pl_send(b->d_in, count, src, w, NULL);
            pl_stream_sync(NULL);
        }
        pl_download(b->h_got, b->d_in, bytes);
        for (size_t i = 0; i < count; i++) sum[i] += b->h_got[i];
    }
    if (me != src || iters <= 0) return 0;
    qsort(b->times, (size_t)iters, sizeof *b->times, cmp_double);
    double median = iters % 2 ? b->times[iters / 2] : 0.5 * (b->times[iters / 2 - 1] + b->times[iters / 2]);
    return median / 2 * 1e6;
}

/* The sweep of one ordered pair. Every rank takes part in a barrier per size, so no rank
 * waits longer than one size in one call (the watchdog's limit is per call). */
void lab0_p2p_play(drv_case *c) {
    int src = (int)c->arg[0], dst = (int)c->arg[1], me = pl_rank();
    size_t sizes[LAB0_MAX_SIZES], ns = lab0_sizes(sizes), total = lab0_total(sizes, ns);
    bool in_pair = me == src || me == dst;
    pingpong_bufs b;
    memset(&b, 0, sizeof b);
    if (in_pair) {
        size_t max = sizes[ns - 1];
        int max_iters = 0;
        for (size_t k = 0; k < ns; k++) {
            int it = lab0_iters(sizes[k] * sizeof(float));
            if (it > max_iters) max_iters = it;
        }
        b.d_out = pl_malloc_floats(max), b.d_in = pl_malloc_floats(max), b.d_token = pl_malloc_floats(1);
        b.h_base = malloc(max * sizeof(float)), b.h_msg = malloc(max * sizeof(float));
        b.h_got = malloc(max * sizeof(float)), b.h_sum = calloc(total, sizeof(float));
        b.times = malloc((size_t)max_iters * sizeof(double)), b.lat = calloc(ns, sizeof(double));
        PL_CHECK(b.h_base && b.h_msg && b.h_got && b.h_sum && b.times && b.lat, "out of host memory");
        pl_fill(b.d_token, 1.0f, 1, NULL);
        if (me == src) pl_download(b.h_base, drv_slot(c, "base"), max * sizeof(float));
    }
    size_t off = 0;
    for (size_t k = 0; k < ns; k++) {
        pl_barrier(pl_comm_world());
        if (in_pair)
            b.lat[k] = pingpong(src, dst, sizes[k], lab0_warmup(), lab0_iters(sizes[k] * sizeof(float)), &b,
                                b.h_sum + off);
        off += sizes[k];
    }
    if (in_pair) {
        pl_upload(drv_slot(c, me == src ? "back" : "fwd"), b.h_sum, total * sizeof(float));
        if (me == src) pl_upload(drv_slot(c, "lat"), b.lat, ns * sizeof(double));
        pl_device_sync();
        pl_free(b.d_out), pl_free(b.d_in), pl_free(b.d_token);
        free(b.h_base), free(b.h_msg), free(b.h_got), free(b.h_sum), free(b.times), free(b.lat);
    }
}
