/* test_costmodel.c - the cost model against values computed by hand (docs/cost-model.md).
 * Run under mpirun; the live-trace checks need 2 ranks, the rest run on any number. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../harness/tap.h" // defines: tap_check, tap_finish
#include "pl_costmodel.h"   // defines: the cost model under test

static int close_to(double got, double want) { return fabs(got - want) <= 1e-9 * fabs(want) + 1e-15; }

/* peak 1 TFLOP/s at 50%, 0.1 TFLOP/s elementwise, 100 GB/s memory, 2 us launch; intra 1 us / 10 GB/s,
 * inter 5 us / 1 GB/s; 2 ranks per node, 2 nodes. */
static const char *PROFILE_TEXT =
    "# a test machine\nname test\ngpus_per_node 2\nnodes 2\npeak_tflops 1\ngemm_efficiency 0.5\n"
    "vector_tflops 0.1\nmem_bw_GBps 100\nlaunch_us 2\nintra_latency_us 1\nintra_bw_GBps 10\ninter_latency_us 5\ninter_bw_GBps 1\n";

static plc_op op(int rank, pl_op_kind k, int stream, int size, int peer, double bytes, double flops, double t0, double t1) {
    return (plc_op){.rank = rank, .kind = k, .stream = stream, .comm_size = size, .peer = peer,
                    .bytes = bytes, .flops = flops, .t_start = t0, .t_end = t1};
}

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    plc_profile p;
    char err[256] = "";
    tap_check(plc_profile_parse(&p, PROFILE_TEXT, err, sizeof err) == 0 && !strcmp(p.name, "test"), "profile: parses");
    tap_check(close_to(p.peak_flops, 1e12) && close_to(p.mem_bw, 1e11) && close_to(p.launch, 2e-6) &&
                  close_to(p.intra_alpha, 1e-6) && close_to(p.inter_beta, 1e9) && p.gpus_per_node == 2,
              "profile: units converted to SI (TFLOP/s, GB/s, us)");
    plc_profile q;
    tap_check(plc_profile_parse(&q, "name x\nbogus 3\n", err, sizeof err) != 0 && strstr(err, "unknown key 'bogus'"),
              "profile: an unknown key is an error naming it");
    tap_check(plc_profile_parse(&q, "name x\ngpus_per_node 2\n", err, sizeof err) != 0 && strstr(err, "missing key"),
              "profile: a missing key is an error");
    tap_check(plc_profile_parse(&q, "name x\ngpus_per_node 2\nnodes 1\npeak_tflops 1\ngemm_efficiency 1\nmem_bw_GBps 1\n"
                                    "launch_us 1\nintra_latency_us 1\nintra_bw_GBps 1\ninter_latency_us 1\ninter_bw_GBps 1\n",
                                    err, sizeof err) != 0 && strstr(err, "missing key 'vector_tflops'"),
              "profile: a profile without vector_tflops names the missing key");
    tap_check(close_to(p.vector_flops, 1e11), "profile: vector_tflops in TFLOP/s");
    tap_check(plc_profile_parse(&q, "gpus_per_node two\n", err, sizeof err) != 0 && strstr(err, "bad value"),
              "profile: a malformed number is an error");
    const char *shipped[] = {"dgx-h100", "pcie-4gpu", "2x8-ib", "this-machine"};
    for (int i = 0; i < 4; i++) {
        char name[96];
        snprintf(name, sizeof name, "profile: common/profiles/%s.profile loads", shipped[i]);
        tap_check(plc_profile_load(&q, shipped[i], err, sizeof err) == 0, name);
    }

    /* GEMM roofline: 1e9 flops at 0.5 TFLOP/s = 2 ms (> 1e6 B / 100 GB/s = 10 us), + 2 us. */
    tap_check(close_to(plc_gemm_time(&p, 1e9, 1e6), 2e-3 + 2e-6), "gemm: compute-bound = flops/(peak*eff) + launch");
    tap_check(close_to(plc_gemm_time(&p, 1e3, 1e8), 1e-3 + 2e-6), "gemm: memory-bound = bytes/mem_bw + launch");
    /* Wave quantisation: 4 SMs, 128 x 64 tiles. A 256 x 128 output is 4 tiles, one wave: the
     * plain roofline. 257 x 128: 3 x 2 = 6 tiles one way (2 waves), 5 x 1 = 5 the other way
     * round (64 x 128: 2 waves too): 2 waves of 4 SMs x 2*128*64*k flops. k = 4096, fp32. */
    {
        plc_profile w = p;
        tap_check(plc_profile_parse(&w, "name w\ngpus_per_node 1\nnodes 1\npeak_tflops 1\ngemm_efficiency 0.5\n"
                                        "vector_tflops 0.1\nmem_bw_GBps 100\nlaunch_us 2\nintra_latency_us 1\nintra_bw_GBps 10\n"
                                        "inter_latency_us 5\ninter_bw_GBps 1\nsm_count 4\ngemm_tile_m 128\ngemm_tile_n 64\n",
                                    err, sizeof err) == 0 && w.sm_count == 4 && w.tile_m == 128 && w.tile_n == 64,
                  "profile: sm_count and the GEMM tile parse");
        double k = 4096, one = 2.0 * 128 * 64 * k / 0.5e12;
        tap_check(close_to(plc_gemm_shape_time(&w, 1, 256, 128, k, 4), 4 * one + 2e-6),
                  "gemm by shape: a whole wave of tiles = the roofline");
        tap_check(close_to(plc_gemm_shape_time(&w, 1, 257, 128, k, 4), 8 * one + 2e-6),
                  "gemm by shape: one row more costs a second wave (either orientation)");
        tap_check(close_to(plc_gemm_shape_time(&w, 1, 64, 512, k, 4), 4 * one + 2e-6),
                  "gemm by shape: the tile laid the other way round when that needs fewer waves (64 x 512: 4 tiles)");
        tap_check(close_to(plc_gemm_shape_time(&w, 3, 128, 64, k, 4), 4 * one + 2e-6),
                  "gemm by shape: a batched call's tiles share the waves (3 tiles: one wave)");
        tap_check(close_to(plc_gemm_shape_time(&p, 1, 257, 128, k, 4), plc_gemm_time(&p, 2 * 257 * 128 * k, 4 * (257 * k + k * 128 + 257 * 128))),
                  "gemm by shape: without sm_count it is the plain roofline");
        char path[] = "/tmp/pl-prof-XXXXXX";
        int fd = mkstemp(path);
        plc_profile back;
        tap_check(fd >= 0 && plc_profile_write(&w, path) == 0 && plc_profile_load(&back, path, err, sizeof err) == 0 &&
                      back.sm_count == 4 && back.tile_n == 64 && plc_profile_write(&p, path) == 0 &&
                      plc_profile_load(&back, path, err, sizeof err) == 0 && back.sm_count == 0,
                  "profile: written and read back with and without sm_count");
        if (fd >= 0) close(fd), unlink(path);
    }
    /* Kernels: 1e9 flops at 0.1 TFLOP/s = 10 ms (> 1e6 B / 100 GB/s), + 2 us; 1e3 flops on 1e8 B = 1 ms. */
    tap_check(close_to(plc_kernel_time(&p, 1e9, 1e6), 1e-2 + 2e-6), "kernel: compute-bound = flops/vector + launch");
    tap_check(close_to(plc_kernel_time(&p, 1e3, 1e8), 1e-3 + 2e-6), "kernel: memory-bound = bytes/mem_bw + launch");
    /* Collectives, S = 1e6 bytes. */
    tap_check(close_to(plc_coll_time(&p, PL_OP_ALLREDUCE, 4, 1, 1e6), 6e-6 + 1.5e-4),
              "all-reduce n=4 in a node: 2(n-1) alpha + 2(n-1)/n S/beta = 156 us");
    tap_check(close_to(plc_coll_time(&p, PL_OP_ALLGATHER, 4, 2, 1e6), 3 * 5e-6 + 0.75e-3),
              "all-gather n=4 over 2 nodes: (n-1) alpha + (n-1)/n S/beta on the inter-node link = 765 us");
    tap_check(close_to(plc_coll_time(&p, PL_OP_BROADCAST, 2, 1, 1e6), 1e-6 + 1e-4), "broadcast n=2: alpha + S/beta");
    tap_check(plc_coll_time(&p, PL_OP_ALLREDUCE, 1, 1, 1e9) == 0, "a collective over one rank costs 0");
    tap_check(close_to(plc_p2p_time(&p, 1, 1e6), 1e-6 + 1e-4) && close_to(plc_p2p_time(&p, 0, 1e6), 5e-6 + 1e-3),
              "p2p: alpha + S/beta, intra- and inter-node");

    /* Replay: rank 1's GEMM is twice rank 0's; the all-reduce waits for the slower rank. */
    plc_op ops[8];
    ops[0] = op(0, PL_OP_GEMM, 0, 1, -1, 0, 1e9, 0, 1);
    ops[1] = op(0, PL_OP_ALLREDUCE, 0, 2, -1, 1e6, 0, 1, 2);
    ops[2] = op(1, PL_OP_GEMM, 0, 1, -1, 0, 2e9, 0, 1);
    ops[3] = op(1, PL_OP_ALLREDUCE, 0, 2, -1, 1e6, 0, 1, 2);
    plc_prediction pr;
    int rc = plc_replay(&p, ops, 4, 2, &pr, err, sizeof err);
    double gemm1 = 4e-3 + 2e-6, ar = 2e-6 + 1e-4;
    tap_check(rc == 0 && close_to(pr.step_time, gemm1 + ar), "replay: collective starts when its slowest member is ready (4.104 ms)");
    tap_check(rc == 0 && close_to(pr.compute_time, gemm1) && close_to(pr.comm_fraction, 1 - gemm1 / (gemm1 + ar)),
              "replay: compute time and exposed comm fraction = 1 - compute/step");

    /* A ring exchange as a group: each rank sends and receives at once (the recorded
     * intervals overlap), which must not deadlock the replay. */
    ops[0] = op(0, PL_OP_SEND, 0, 2, 1, 1e6, 0, 0, 1);
    ops[1] = op(0, PL_OP_RECV, 0, 2, 1, 1e6, 0, 0.1, 1);
    ops[2] = op(1, PL_OP_SEND, 0, 2, 0, 1e6, 0, 0, 1);
    ops[3] = op(1, PL_OP_RECV, 0, 2, 0, 1e6, 0, 0.1, 1);
    rc = plc_replay(&p, ops, 4, 2, &pr, err, sizeof err);
    tap_check(rc == 0 && close_to(pr.step_time, 1e-6 + 1e-4), "replay: grouped send/recv pairs match and overlap (alpha + S/beta)");
    /* Blocking send then recv on rank 0, recv then send on rank 1: two messages in turn. */
    ops[0] = op(0, PL_OP_SEND, 0, 2, 1, 1e6, 0, 0, 1);
    ops[1] = op(0, PL_OP_RECV, 0, 2, 1, 1e6, 0, 2, 3);
    ops[2] = op(1, PL_OP_RECV, 0, 2, 0, 1e6, 0, 0, 1);
    ops[3] = op(1, PL_OP_SEND, 0, 2, 0, 1e6, 0, 2, 3);
    rc = plc_replay(&p, ops, 4, 2, &pr, err, sizeof err);
    tap_check(rc == 0 && close_to(pr.step_time, 2 * (1e-6 + 1e-4)), "replay: sequential messages add up (2 x 101 us)");
    /* Ranks 0 and 2 sit on different nodes (2 per node): the inter-node link. */
    ops[0] = op(0, PL_OP_SEND, 0, 4, 2, 1e6, 0, 0, 1);
    ops[1] = op(2, PL_OP_RECV, 0, 4, 0, 1e6, 0, 0, 1);
    rc = plc_replay(&p, ops, 2, 4, &pr, err, sizeof err);
    tap_check(rc == 0 && close_to(pr.step_time, 5e-6 + 1e-3), "replay: a message between nodes uses the inter-node link");
    ops[0] = op(0, PL_OP_SEND, 0, 2, 1, 1e6, 0, 0, 1);
    rc = plc_replay(&p, ops, 1, 2, &pr, err, sizeof err);
    tap_check(rc != 0 && strstr(err, "no matching recv"), "replay: a send nobody receives is reported, not hung");
    /* Overlap: a comm-stream send issued while a GEMM runs does not wait for it. */
    ops[0] = op(0, PL_OP_GEMM, 0, 1, -1, 0, 1e9, 0, 5);
    ops[1] = op(0, PL_OP_SEND, 1, 2, 1, 1e6, 0, 1, 2);
    ops[2] = op(1, PL_OP_RECV, 1, 2, 0, 1e6, 0, 1, 2);
    rc = plc_replay(&p, ops, 3, 2, &pr, err, sizeof err);
    tap_check(rc == 0 && close_to(pr.step_time, 2e-3 + 2e-6) && pr.comm_fraction == 0,
              "replay: comm on the comm stream overlaps compute (step = the GEMM)");
    /* rank 0's send (101 us) runs under its GEMM; rank 1's receive has no compute beside it */
    tap_check(rc == 0 && close_to(pr.comm_overlap, 0.5), "replay: comm_overlap = hidden comm time / comm time (1/2 here)");
    /* ... but a compute op issued after the send completed waits for it. */
    ops[0] = op(0, PL_OP_SEND, 1, 2, 1, 1e6, 0, 0, 1);
    ops[1] = op(0, PL_OP_GEMM, 0, 1, -1, 0, 1e9, 2, 3);
    ops[2] = op(1, PL_OP_RECV, 1, 2, 0, 1e6, 0, 0, 1);
    rc = plc_replay(&p, ops, 3, 2, &pr, err, sizeof err);
    tap_check(rc == 0 && close_to(pr.step_time, 1e-6 + 1e-4 + 2e-3 + 2e-6), "replay: compute issued after a completed comm op waits for it");
    tap_check(rc == 0 && pr.comm_overlap == 0, "replay: comm_overlap is 0 when compute waits for the comm");

    /* A kernel on the compute stream is priced by plc_kernel_time and adds to compute time. */
    ops[0] = op(0, PL_OP_GEMM, 0, 1, -1, 0, 1e9, 0, 1);
    ops[1] = op(0, PL_OP_KERNEL, 0, 1, -1, 1e8, 1e3, 1, 2);
    rc = plc_replay(&p, ops, 2, 1, &pr, err, sizeof err);
    tap_check(rc == 0 && close_to(pr.step_time, 2e-3 + 2e-6 + 1e-3 + 2e-6) && close_to(pr.compute_time, pr.step_time),
              "replay: a recorded kernel costs bytes/mem_bw + launch, as compute");

    /* Live: the harness's own record of a GEMM and an all-reduce, replayed on every rank. */
    int n = pl_world();
    float *A = pl_malloc_floats(64 * 64), *C = pl_malloc_floats(64 * 64);
    pl_fill(A, 1.0f, 64 * 64, NULL);
    pl_device_sync();
    size_t first = pl_trace_count();
    pl_gemm(false, false, 64, 64, 64, 1, A, 64, A, 64, 0, C, 64, NULL);
    pl_allreduce(C, C, 64 * 64, PL_SUM, pl_comm_world(), NULL);
    pl_device_sync();
    rc = plc_replay_trace(&p, first, pl_comm_world(), &pr, err, sizeof err);
    double want = plc_gemm_time(&p, 2.0 * 64 * 64 * 64, 4.0 * 3 * 64 * 64) +
                  plc_coll_time(&p, PL_OP_ALLREDUCE, n, n > 2 ? 2 : 1, 4.0 * 64 * 64);
    tap_check(rc == 0 && close_to(pr.step_time, want) && pr.ops == (size_t)(2 * n),
              "replay of a recorded run: GEMM (bytes from the trace) + all-reduce = hand formula");
    /* ... and of a copy and a local reduction: kernels with their bytes (docs/cost-model.md). */
    first = pl_trace_count();
    pl_copy(C, A, 4 * 64 * 64, NULL);
    pl_reduce_local(C, A, 64 * 64, PL_SUM, NULL);
    pl_device_sync();
    const pl_trace_event *ev = pl_trace_events() + first;
    tap_check(pl_trace_count() - first == 2 && ev[0].kind == PL_OP_KERNEL && ev[0].bytes == 2 * 4 * 64 * 64 &&
                  ev[1].kind == PL_OP_KERNEL && ev[1].bytes == 3 * 4 * 64 * 64 && ev[1].flops == 64 * 64 &&
                  !strcmp(ev[0].name, "copy") && !strcmp(ev[1].name, "reduce_local"),
              "trace: pl_copy and pl_reduce_local record kernels with bytes read + written");
    rc = plc_replay_trace(&p, first, pl_comm_world(), &pr, err, sizeof err);
    want = plc_kernel_time(&p, 0, 8.0 * 64 * 64) + plc_kernel_time(&p, 64 * 64, 12.0 * 64 * 64);
    tap_check(rc == 0 && close_to(pr.step_time, want), "replay of recorded kernels = hand formula");
    /* Cross-stream order as a GPU keeps it: from the recorded event waits and syncs, not
     * from the order the cpu device happened to run things in. */
    int64_t cnt = 256 * 1024;
    float *G = pl_malloc_floats((size_t)cnt);
    pl_fill(G, 1.0f, (size_t)cnt, NULL);
    pl_event *done = pl_event_create();
    double t_gemm = plc_gemm_time(&p, 2.0 * 64 * 64 * 64, 4.0 * 3 * 64 * 64);
    double t_ar = plc_coll_time(&p, PL_OP_ALLREDUCE, n, n > 2 ? 2 : 1, 4.0 * (double)cnt);
    for (int wait = 0; wait <= 1; wait++) {
        pl_device_sync();
        first = pl_trace_count();
        pl_gemm(false, false, 64, 64, 64, 1, A, 64, A, 64, 0, C, 64, NULL);
        pl_event_record(done, NULL);
        if (wait) pl_stream_wait_event(pl_stream_comm(), done);
        pl_allreduce(G, G, (size_t)cnt, PL_SUM, pl_comm_world(), pl_stream_comm());
        pl_device_sync();
        rc = plc_replay_trace(&p, first, pl_comm_world(), &pr, err, sizeof err);
        want = wait ? t_gemm + t_ar : (t_gemm > t_ar ? t_gemm : t_ar);
        tap_check(rc == 0 && close_to(pr.step_time, want),
                  wait ? "replay of a recorded run: a comm-stream all-reduce that waits for the GEMM's event starts after it"
                       : "replay of a recorded run: without the event wait the all-reduce runs beside the GEMM");
    }
    /* A host sync orders the streams too: the all-reduce issued after pl_stream_sync follows. */
    pl_device_sync();
    first = pl_trace_count();
    pl_gemm(false, false, 64, 64, 64, 1, A, 64, A, 64, 0, C, 64, NULL);
    pl_stream_sync(NULL);
    pl_allreduce(G, G, (size_t)cnt, PL_SUM, pl_comm_world(), pl_stream_comm());
    pl_device_sync();
    rc = plc_replay_trace(&p, first, pl_comm_world(), &pr, err, sizeof err);
    tap_check(rc == 0 && close_to(pr.step_time, t_gemm + t_ar),
              "replay of a recorded run: work issued after a stream sync follows what the host waited for");
    /* Communicators of any shape: ranks {0, 2} and {1, 3} at 4 ranks (a grid's columns);
     * the trace records each message's world peer, so the replay pairs them and prices the
     * link by the world ranks' nodes (2 GPUs a node here: every pair crosses nodes). */
    if (n == 4) {
        pl_comm *col = pl_comm_split(pl_comm_world(), pl_rank() % 2, pl_rank());
        int cr = pl_comm_rank(col), peer = 1 - cr;
        pl_device_sync();
        first = pl_trace_count();
        pl_group_start();
        pl_send(A, 64 * 64, peer, col, NULL);
        pl_recv(C, 64 * 64, peer, col, NULL);
        pl_group_end();
        pl_device_sync();
        ev = pl_trace_events() + first;
        tap_check(pl_trace_count() - first == 2 && ev[0].has_peer_world && ev[0].peer_world == (pl_rank() + 2) % 4,
                  "trace: a message on a strided communicator records its peer's world rank");
        rc = plc_replay_trace(&p, first, pl_comm_world(), &pr, err, sizeof err);
        want = plc_p2p_time(&p, 0, 4.0 * 64 * 64);
        char what[300];
        snprintf(what, sizeof what, "replay of a recorded run: send/recv on a strided communicator pair up by world rank "
                 "and cross nodes (%s)", rc ? err : "ok");
        tap_check(rc == 0 && close_to(pr.step_time, want), what);
        pl_comm_free(col);
    }
    pl_event_destroy(done);
    pl_free(G);
    pl_free(A);
    pl_free(C);
    return tap_finish();
}
