/* lab03.h - what the two files of Lab 3's driver share (lab03.c: the serial reference, the
 * config, forward, backward and comm cases; lab03_train.c: the memory and training cases,
 * the cost-model prediction and the lab's table). */
#ifndef LAB03_DRIVER_H
#define LAB03_DRIVER_H

#include "driver.h"
#include "megatron.h"

extern int g_T, g_B, g_C, g_H, g_F, g_L, g_iters; /* the flags */
extern int g_me, g_tp;
extern uint64_t g_seed;

typedef struct { float *t[MG_NTENSORS]; } host_block; /* master tensors, Lab 3's layout */

float *hz(size_t n); /* zeroed host floats */
size_t numel(const mg_config *c, mg_tensor w);
void host_block_alloc(host_block *h, const mg_config *c);
void host_block_free(host_block *h);
void host_block_master(host_block *h, const mg_config *c, int layer);
/* The serial block: y = block(x); with dy also dx and the gradients (+=, Lab 3's layout). */
void reference(const mg_config *c, const host_block *p, host_block *g, float *y, const float *x, float *dx,
               const float *dy);
/* Error of this rank's shard of w in p against the master (with base: of p - base). */
double shard_err(const mg_config *c, const mg_params *p, const host_block *want, mg_tensor w, const host_block *base);

mg_config config(bool sp, int T);
int seq_for(bool sp);                /* T, rounded up to a multiple of tp with sp */
int local_rows(const mg_config *c);  /* N, or N / tp with sp                      */
size_t row0(const mg_config *c);     /* this rank's first row                     */

/* The cases of lab03.c; arg[0] = sp. */
void config_check(drv_case *c);
void block_run_case(drv_case *c);
void forward_check(drv_case *c);
void backward_check(drv_case *c);
void comm_check(drv_case *c);
void comm_perf(drv_case *c);

#endif
