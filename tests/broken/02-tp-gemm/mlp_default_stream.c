// expect: wrong mlp.fwd.*
// np: 2
/* Broken on purpose: the MLP's forward and backward ignore the stream they are given and
 * issue everything on the default one (NULL), as if there were only one stream. Nothing
 * in them waits for the device, so when the caller's stream is not the default one, its
 * next work reads y and dx before the layers have written them. */
#define tp_mlp_forward tp_mlp_forward_solution
#define tp_mlp_backward tp_mlp_backward_solution
#include "../../../solutions/02-tp-gemm/tp_linear.c"
#undef tp_mlp_forward
#undef tp_mlp_backward

int tp_mlp_forward(tp_mlp *m, pl_tensor x, pl_tensor y, pl_stream *s) {
    (void)s;
    return tp_mlp_forward_solution(m, x, y, NULL); /* the bug */
}

int tp_mlp_backward(tp_mlp *m, pl_tensor x, pl_tensor dy, pl_tensor dx, pl_stream *s) {
    (void)s;
    return tp_mlp_backward_solution(m, x, dy, dx, NULL); /* the bug */
}
