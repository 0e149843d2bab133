// expect: wrong forward.nosp
/* Broken on purpose: rank r takes heads r, r+tp, r+2tp, ... for the QKV layer (strided)
 * while the output projection keeps the contiguous rows of heads [r*H/tp, (r+1)*H/tp), so
 * the attention outputs meet the wrong projection rows. */
#define mg_params_init mg_params_init_solution
#include "../../../solutions/03-megatron/megatron.c"
#undef mg_params_init

void mg_params_init(mg_params *p, const mg_config *c, int layer, uint64_t seed) {
    mg_params_init_solution(p, c, layer, seed);
    dims d = dims_of(c);
    for (int k = 0; k < d.Hl; k++) {
        int head = d.rank + k * d.tp; /* the bug: strided instead of r*H/tp + k */
        pl_tensor w = pl_tensor_cols(pl_tensor_view(p->qkv_w, d.C, 3 * d.Cl), (int64_t)3 * d.hs * k, 3 * d.hs);
        pl_tensor b = pl_tensor_view(p->qkv_b + (size_t)3 * d.hs * k, 1, 3 * d.hs);
        mg_fill_master(w, c, MG_QKV_W, layer, 0, (int64_t)3 * d.hs * head, seed);
        mg_fill_master(b, c, MG_QKV_B, layer, 0, (int64_t)3 * d.hs * head, seed);
    }
}
