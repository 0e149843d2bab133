/* test_costmodel.c - the cost model against values computed by hand (docs/cost-model.md).
 * Run under mpirun; the live-trace checks need 2 ranks, the rest run on any number. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../harness/tap.h" // defines: tap_check, tap_finish
#include "pl_costmodel.h"   // defines: the cost model under test

static int close_to(double got, double want) { return fabs(got - want) <= 1e-9 * fabs(want) + 1e-15; }

/* peak 1 TFLOP/s at 50%, 100 GB/s memory, 2 us launch; intra 1 us / 10 GB/s,
 * inter 5 us / 1 GB/s; 2 ranks per node, 2 nodes. */
static const char *PROFILE_TEXT =
    "# a test machine\nname test\ngpus_per_node 2\nnodes 2\npeak_tflops 1\ngemm_efficiency 0.5\n"
    "mem_bw_GBps 100\nlaunch_us 2\nintra_latency_us 1\nintra_bw_GBps 10\ninter_latency_us 5\ninter_bw_GBps 1\n";

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
    /* ... but a compute op issued after the send completed waits for it. */
    ops[0] = op(0, PL_OP_SEND, 1, 2, 1, 1e6, 0, 0, 1);
    ops[1] = op(0, PL_OP_GEMM, 0, 1, -1, 0, 1e9, 2, 3);
    ops[2] = op(1, PL_OP_RECV, 1, 2, 0, 1e6, 0, 0, 1);
    rc = plc_replay(&p, ops, 3, 2, &pr, err, sizeof err);
    tap_check(rc == 0 && close_to(pr.step_time, 1e-6 + 1e-4 + 2e-3 + 2e-6), "replay: compute issued after a completed comm op waits for it");

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
    pl_free(A);
    pl_free(C);
    return tap_finish();
}
