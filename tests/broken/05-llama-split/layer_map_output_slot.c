// expect: wrong rules.layer.*
/* Broken on purpose: the output layer is not a slot of its own. Layers are placed by
 * il / n_layer instead of il / (n_layer + 1) and the output goes with the last layer, so
 * 30 layers at --tensor-split 1,1 become 15/15 instead of llama.cpp's 16/14. */
#define ls_layer_owner ls_layer_owner_solution
#include "../../../solutions/05-llama-split/llama_split.c"
#undef ls_layer_owner
int ls_layer_owner(const float *cuts, int n, int n_layer, int slot) {
    if (slot == n_layer) slot = n_layer - 1;
    float x = (float)slot / (float)n_layer;
    int r = 0;
    while (r < n - 1 && !(x < cuts[r + 1])) r++;
    return r;
}
