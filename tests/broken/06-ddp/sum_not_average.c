// expect: wrong equal.*
/* Broken on purpose: buckets are all-reduced with PL_SUM but never divided by the world
 * size, so every step moves n times too far. */
#define pl_scale pl_scale_unused
#include "../../../solutions/06-ddp/ddp.c"
#undef pl_scale
void pl_scale_unused(float *dev, float alpha, size_t count, pl_stream *s) {
    (void)dev, (void)alpha, (void)count, (void)s;
}
