/* lab06_modes.c (player) - Lab 6's modes, the student's DDP run alone (no referee):
 * `--run bench` (make bench LAB=6: naive, bucketed and overlapped step times, measured and
 * predicted) and `--run train` (make lab-6 RUN=train: the MLP on Fashion-MNIST with the
 * overlapped DDP, a progress bar, loss and test accuracy per epoch; scripts/plot-train.sh
 * plots them and checks the accuracy). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds_fashion.h" // defines: ds_dataset, ds_synthetic, ds_fashion_load, ds_sampler
#include "lab06_mlp.h"

int lab6_mode_bench(void) {
    const lab6_flags *o = lab6_opts();
    int n = pl_world(), me = pl_rank(), iters = drv_opts()->iters > 0 ? drv_opts()->iters : 20;
    if (o->batch < n || o->batch % n) pl_usage_error("--batch %d is not a positive multiple of the world size %d", o->batch, n);
    uint64_t seed = pl_info()->seed;
    ds_dataset data;
    ds_synthetic(&data, (size_t)o->batch * 16 + 64, LAB6_IN, LAB6_CLASSES, seed);
    const plc_profile *prof = lab6_profile();
    for (int mode = 0; mode < 3; mode++) {
        mlp m;
        int local = o->batch / n;
        mlp_alloc(&m, LAB6_IN, o->hidden, LAB6_CLASSES, local);
        mlp_init_random(&m, seed);
        ddp_state d;
        lab6_caps k = lab6_caps_of(mode == DDP_NAIVE ? C_DEFAULT : C_THREE, o->hidden);
        ddp_init(&d, m.p, LAB6_NPARAMS, (ddp_mode)mode, k.cap, k.first, pl_comm_world());
        double t_sum = 0, calls = 0, frac = 0, pred_us = 0, pred_ov = 0;
        int measured = 0;
        for (int it = 0; it < iters + 2; it++) {
            /* contiguous shards of the synthetic set, wrapping around */
            size_t first = ((size_t)it * o->batch + (size_t)me * local) % (data.n - (size_t)o->batch);
            pl_barrier(pl_comm_world());
            pl_metrics_reset();
            pl_trace_clear();
            double t0 = pl_now();
            mlp_forward(&m, data.x + first * LAB6_IN, data.y + first, local);
            ddp_backward_begin(&d);
            mlp_backward(&m, &d, local, false);
            ddp_backward_end(&d);
            mlp_step(&m);
            pl_device_sync();
            double t = pl_now() - t0;
            if (it < 2) continue; /* warm-up and the rebuild */
            pl_metrics mm;
            pl_metrics_get(&mm);
            lab6_step rec;
            memset(&rec, 0, sizeof rec);
            lab6_scan_trace(&m, &rec);
            plc_prediction pp;
            if (lab6_predict(&pp)) pred_us += pp.step_time * 1e6, pred_ov += pp.comm_overlap;
            t_sum += drv_max(t), calls += (double)mm.coll_calls[PL_OP_ALLREDUCE], frac += rec.frac, measured++;
        }
        frac = drv_sum(frac / measured) / n;
        drv_say("bench06 np %d mode %-8s step_ms %8.3f allreduce_per_step %5.1f overlap_fraction %.3f "
                "pred_step_us %.2f pred_overlap %.3f profile %s\n",
                n, LAB6_MODE_NAMES[mode], 1e3 * t_sum / measured, calls / measured, frac, pred_us / measured,
                pred_ov / measured, prof ? prof->name : "-");
        ddp_free(&d);
        mlp_reset_grads(&m);
        mlp_free(&m);
    }
    ds_dataset_free(&data);
    return 0;
}

static void train(int epochs, int hidden, int batch, double lr) {
    int n = pl_world(), me = pl_rank();
    uint64_t seed = pl_info()->seed;
    char err[512];
    ds_dataset tr, te;
    const char *dir = ds_fashion_dir();
    if (ds_fashion_load(dir, "train", &tr, err, sizeof err) != 0) pl_usage_error("%s", err);
    if (ds_fashion_load(dir, "t10k", &te, err, sizeof err) != 0) pl_usage_error("%s", err);
    int local = batch / n;
    mlp m;
    mlp_alloc(&m, tr.dim, hidden, tr.classes, local > 1000 ? local : 1000);
    mlp_init_random(&m, seed);
    m.lr = (float)lr;
    ddp_state d;
    ddp_init(&d, m.p, LAB6_NPARAMS, DDP_OVERLAP, 0, 0, pl_comm_world());
    ds_sampler s;
    ds_sampler_init(&s, tr.n, n, me, seed, true, false);
    size_t *idx = malloc(s.num_samples * sizeof *idx);
    float *xb = malloc((size_t)local * tr.dim * sizeof(float));
    int *yb = malloc((size_t)local * sizeof(int));
    PL_CHECK(idx && xb && yb, "out of host memory");
    size_t steps = s.num_samples / (size_t)local;
    for (int ep = 0; ep < epochs; ep++) {
        ds_sampler_indices(&s, (uint64_t)ep, idx);
        double t0 = pl_now(), loss_sum = 0, step_time = 0;
        for (size_t st = 0; st < steps; st++) {
            for (int r = 0; r < local; r++) {
                size_t e = idx[st * local + r];
                memcpy(xb + (size_t)r * tr.dim, tr.x + e * tr.dim, tr.dim * sizeof(float));
                yb[r] = tr.y[e];
            }
            double ts = pl_now();
            loss_sum += mlp_forward(&m, xb, yb, local);
            ddp_backward_begin(&d);
            mlp_backward(&m, &d, local, false);
            ddp_backward_end(&d);
            mlp_step(&m);
            step_time += pl_now() - ts;
            if (me == 0 && (st % 20 == 0 || st + 1 == steps)) {
                int w = 30, filled = (int)((st + 1) * w / steps);
                double el = pl_now() - t0;
                fprintf(stderr, "\repoch %d/%d [%.*s%*s] %3d%% loss %.4f %7.0f img/s", ep + 1, epochs, filled,
                        "##############################", w - filled, "", (int)(100 * (st + 1) / steps),
                        loss_sum / (st + 1), (st + 1) * (double)batch / el);
            }
        }
        pl_device_sync();
        double el = pl_now() - t0;
        /* test accuracy: each rank scores a slice of the test set */
        size_t per = (te.n + n - 1) / n, lo = per * me, hi = lo + per < te.n ? lo + per : te.n;
        double correct = 0;
        float *logits = malloc(1000 * 10 * sizeof(float));
        PL_CHECK(logits != NULL, "out of host memory");
        for (size_t a = lo; a < hi; a += 1000) {
            int rows = (int)(hi - a < 1000 ? hi - a : 1000);
            mlp_forward(&m, te.x + a * te.dim, te.y + a, rows);
            pl_download(logits, m.logits, (size_t)rows * 10 * sizeof(float));
            for (int r = 0; r < rows; r++) {
                int best = 0;
                for (int c = 1; c < 10; c++)
                    if (logits[r * 10 + c] > logits[r * 10 + best]) best = c;
                correct += best == te.y[a + r];
            }
        }
        free(logits);
        double acc = drv_sum(correct) / te.n;
        double loss = drv_sum(loss_sum / steps) / n;
        double sm = drv_max(step_time / steps);
        if (me == 0) fprintf(stderr, "\n");
        drv_say("epoch %d np %d loss %.4f test_acc %.4f img_per_s %.0f step_ms %.3f\n", ep + 1, n, loss, acc,
                steps * (double)batch / el, 1e3 * sm);
    }
    free(idx), free(xb), free(yb);
    ddp_free(&d);
    mlp_reset_grads(&m);
    mlp_free(&m);
    ds_dataset_free(&tr);
    ds_dataset_free(&te);
}

int lab6_mode_train(void) {
    const lab6_flags *o = lab6_opts();
    if (o->train_batch % pl_world())
        pl_usage_error("--train-batch %d is not a multiple of the world size %d", o->train_batch, pl_world());
    train(o->epochs, o->train_hidden, o->train_batch, o->lr);
    return 0;
}
