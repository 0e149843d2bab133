/* lab06_modes.c - Lab 6's modes: `--run bench` (make bench LAB=6: naive, bucketed and
 * overlapped step times, measured and predicted) and `--run train` (make lab-6 RUN=train:
 * the MLP on Fashion-MNIST with the overlapped DDP, a progress bar, loss and test accuracy
 * per epoch; scripts/plot-train.sh plots them and checks the accuracy). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab06.h"

int g_epochs = 5, g_train_hidden = 256, g_train_batch = 64;
double g_lr = 0.05;

int mode_bench(void) {
    int iters = drv_opts()->iters > 0 ? drv_opts()->iters : 20;
    for (int mode = 0; mode < 3; mode++) {
        mlp m;
        int local = g_batch / g_n;
        mlp_init(&m, g_data.dim, g_hidden, g_data.classes, local, g_seed);
        ddp_state d;
        ddp_init(&d, m.p, NPARAMS, (ddp_mode)mode, mode == DDP_NAIVE ? 0 : 0.015, mode == DDP_NAIVE ? 0 : 0.001, g_comm); /* the "three" caps */
        double t_sum = 0, calls = 0, frac = 0, pred_us = 0, pred_ov = 0;
        int measured = 0;
        for (int it = 0; it < iters + 2; it++) {
            int rows, first;
            float *x;
            int *y;
            batch_rows(it, 0, g_me, g_n, &rows, &first);
            load_rows(first, &x, &y);
            pl_barrier(g_comm);
            pl_metrics_reset();
            pl_trace_clear();
            double t0 = pl_now();
            mlp_forward(&m, x, y, rows);
            ddp_backward_begin(&d);
            mlp_backward(&m, &d, rows, false);
            ddp_backward_end(&d);
            mlp_step(&m);
            pl_device_sync();
            double t = pl_now() - t0;
            if (it < 2) continue; /* warm-up and the rebuild */
            pl_metrics mm;
            pl_metrics_get(&mm);
            int nar;
            size_t sizes[32];
            double inb, f;
            scan_trace(&nar, sizes, 32, &inb, &f);
            plc_prediction pp;
            if (predict(0, &pp)) pred_us += pp.step_time * 1e6, pred_ov += pp.comm_overlap;
            t_sum += drv_max(t), calls += (double)mm.coll_calls[PL_OP_ALLREDUCE], frac += f, measured++;
        }
        frac = drv_sum(frac / measured) / g_n;
        drv_say("bench06 np %d mode %-8s step_ms %8.3f allreduce_per_step %5.1f overlap_fraction %.3f "
                  "pred_step_us %.2f pred_overlap %.3f profile %s\n", g_n, MODE_NAMES[mode], 1e3 * t_sum / measured,
                  calls / measured, frac, pred_us / measured, pred_ov / measured, g_have_prof ? g_prof.name : "-");
        ddp_free(&d);
        mlp_reset_grads(&m);
        mlp_free(&m);
    }
    return 0;
}

static void train(int epochs, int hidden, int batch, double lr) {
    char err[512];
    ds_dataset tr, te;
    const char *dir = ds_fashion_dir();
    if (ds_fashion_load(dir, "train", &tr, err, sizeof err) != 0) pl_usage_error("%s", err);
    if (ds_fashion_load(dir, "t10k", &te, err, sizeof err) != 0) pl_usage_error("%s", err);
    if (batch % g_n) pl_usage_error("--batch %d is not a multiple of the world size %d", batch, g_n);
    int local = batch / g_n;
    mlp m;
    mlp_init(&m, tr.dim, hidden, tr.classes, local > 1000 ? local : 1000, g_seed);
    m.lr = (float)lr;
    ddp_state d;
    ddp_init(&d, m.p, NPARAMS, DDP_OVERLAP, 0, 0, g_comm);
    ds_sampler s;
    ds_sampler_init(&s, tr.n, g_n, g_me, g_seed, true, false);
    size_t *idx = malloc(s.num_samples * sizeof *idx);
    float *xb = malloc((size_t)local * tr.dim * sizeof(float));
    int *yb = malloc((size_t)local * sizeof(int));
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
            if (g_me == 0 && (st % 20 == 0 || st + 1 == steps)) {
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
        size_t per = (te.n + g_n - 1) / g_n, lo = per * g_me, hi = lo + per < te.n ? lo + per : te.n;
        double correct = 0;
        float *logits = malloc(1000 * 10 * sizeof(float));
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
        double loss = drv_sum(loss_sum / steps) / g_n;
        double sm = drv_max(step_time / steps);
        if (g_me == 0) fprintf(stderr, "\n");
        drv_say("epoch %d np %d loss %.4f test_acc %.4f img_per_s %.0f step_ms %.3f\n", ep + 1, g_n, loss, acc,
                steps * (double)batch / el, 1e3 * sm);
    }
    free(idx), free(xb), free(yb);
    ddp_free(&d);
    mlp_reset_grads(&m);
    mlp_free(&m);
    ds_dataset_free(&tr);
    ds_dataset_free(&te);
}

int mode_train(void) {
    if (g_train_batch % g_n) pl_usage_error("--train-batch %d is not a multiple of the world size %d", g_train_batch, g_n);
    train(g_epochs, g_train_hidden, g_train_batch, g_lr);
    return 0;
}
