// expect: wrong train.bf16.*
/* Broken on purpose: in a bf16 run the fp32 master weights start from the rounded bf16
 * parameters instead of the fp32 initial values, so every master is off by up to half a
 * bf16 unit from the first step on. After a few AdamW steps the difference hides under the
 * bf16 bound; the masters right after zero_init show it exactly. */
#define zero_init zero_init_solution
#include "../../../solutions/07-zero/zero.c"
#undef zero_init
void zero_init(zero_state *z, const zero_model *m, const zero_config *cfg, pl_comm *comm, float *const *init);

void zero_init(zero_state *z, const zero_model *m, const zero_config *cfg, pl_comm *comm, float *const *init) {
    zero_init_solution(z, m, cfg, comm, init);
    if (cfg->param_dtype != ZERO_BF16) return;
    zero_piece pc[64];
    int np = zero_pieces(z, pc, 64);
    for (int j = 0; j < np; j++) { /* the bug: the master through bf16 and back */
        float *h = malloc(pc[j].count * 4 + 4);
        pl_download(h, pc[j].master, pc[j].count * 4);
        for (size_t i = 0; i < pc[j].count; i++) h[i] = pl_bf16_to_float(pl_bf16_from_float(h[i]));
        pl_upload(pc[j].master, h, pc[j].count * 4);
        free(h);
    }
}
