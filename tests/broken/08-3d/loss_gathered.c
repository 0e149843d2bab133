// expect: wrong xent.*
/* Broken on purpose: the loss gathers the logits instead of reducing three numbers per
 * row: an all-gather of [N, V/t] per rank brings every rank the whole [N, V] logits (t
 * times the traffic of the three all-reduces, and the memory the vocabulary split was
 * meant to save). The losses and gradients come out right; the traffic does not. */
#define td_xent td_xent_solution
#include "../../../solutions/08-3d/threed.c"
#undef td_xent

void td_xent(float *dlogits, double *losses, const float *logits, const int *targets, int N, int V, float scale,
             pl_comm *tensor, pl_stream *s) {
    int t = pl_comm_size(tensor), r = pl_comm_rank(tensor), Vt = V / t;
    size_t n = (size_t)N * Vt;
    float *all = pl_malloc_floats(n * (size_t)t), *h = malloc(n * (size_t)t * sizeof *h), *row = malloc((size_t)V * sizeof *row);
    pl_allgather(logits, all, n, tensor, s); /* the bug */
    pl_download(h, all, n * (size_t)t * sizeof *h);
    float *mine = malloc(n * sizeof *mine);
    for (int i = 0; i < N; i++) {
        for (int q = 0; q < t; q++) memcpy(row + (size_t)q * Vt, h + ((size_t)q * N + i) * Vt, (size_t)Vt * sizeof *row);
        double mx = row[0], sum = 0;
        for (int j = 1; j < V; j++) mx = row[j] > mx ? row[j] : mx;
        for (int j = 0; j < V; j++) sum += exp(row[j] - mx);
        losses[i] = log(sum) + mx - row[targets[i]];
        for (int j = 0; j < Vt; j++)
            mine[(size_t)i * Vt + j] = (float)(scale * (exp(row[r * Vt + j] - mx) / sum - (r * Vt + j == targets[i] ? 1.0 : 0.0)));
    }
    pl_upload(dlogits, mine, n * sizeof *mine);
    pl_free(all), free(h), free(row), free(mine);
}
