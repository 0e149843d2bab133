// expect: wrong xent.large.*
/* Broken on purpose: the row maxima are combined with an all-reduce SUM instead of MAX.
 * Any shift cancels in exact arithmetic, so ordinary logits give right losses; logits
 * around 100 at t > 1 shift every exp() below a float's range: the sums become 0 and the
 * losses infinite. */
#define td_xent td_xent_solution
#include "../../../solutions/08-3d/threed.c"
#undef td_xent
void td_xent(float *dlogits, double *losses, const float *logits, const int *targets, int N, int V, float scale,
             pl_comm *tensor, pl_stream *s);

void td_xent(float *dlogits, double *losses, const float *logits, const int *targets, int N, int V, float scale,
             pl_comm *tensor, pl_stream *s) {
    int t = pl_comm_size(tensor), Vt = V / t, v0 = pl_comm_rank(tensor) * Vt;
    size_t n = (size_t)N * Vt;
    float *L = malloc(n * sizeof *L), *mx = malloc((size_t)N * sizeof *mx), *tl = malloc((size_t)N * sizeof *tl);
    float *se = malloc((size_t)N * sizeof *se);
    pl_download(L, logits, n * sizeof *L);
    for (int i = 0; i < N; i++) {
        const float *row = L + (size_t)i * Vt;
        mx[i] = row[0];
        for (int j = 1; j < Vt; j++) mx[i] = row[j] > mx[i] ? row[j] : mx[i];
        int k = targets[i] - v0;
        tl[i] = k >= 0 && k < Vt ? row[k] : 0.0f;
    }
    reduce_host(mx, N, PL_SUM, tensor, s); /* the bug: a sum of the maxima */
    for (int i = 0; i < N; i++) {
        double sum = 0;
        for (int j = 0; j < Vt; j++) sum += exp((double)L[(size_t)i * Vt + j] - mx[i]);
        se[i] = (float)sum;
    }
    reduce_host(se, N, PL_SUM, tensor, s);
    reduce_host(tl, N, PL_SUM, tensor, s);
    for (int i = 0; i < N; i++) {
        losses[i] = log((double)se[i]) + mx[i] - tl[i];
        for (int j = 0; j < Vt; j++) {
            float *v = L + (size_t)i * Vt + j;
            double prob = exp((double)*v - mx[i]) / se[i];
            *v = (float)(scale * (prob - (j + v0 == targets[i] ? 1.0 : 0.0)));
        }
    }
    pl_upload(dlogits, L, n * sizeof *L);
    free(L), free(mx), free(tl), free(se);
}
