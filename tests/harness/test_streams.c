/* Stream and event ordering: communication on the comm stream stays in flight until an
 * event or a sync needs it, and work that waits for the event sees its result. */
#include <stdlib.h>

#include "tap.h"

int main(int argc, char **argv) {
    pl_init(&argc, &argv);
    int n = pl_world();
    size_t cnt = 1 << 16;
    float *a = pl_malloc_floats(cnt), *b = pl_malloc_floats(cnt);
    float *h = malloc(cnt * 4);
    pl_stream *comm = pl_stream_comm(), *comp = pl_stream_compute();
    pl_event *ready = pl_event_create(), *t0 = pl_event_create(), *t1 = pl_event_create();

    pl_fill(a, 1.0f, cnt, comp);
    pl_event_record(t0, comp);
    pl_stream_wait_event(comm, t0); /* the allreduce reads what the fill wrote */
    pl_allreduce(a, a, cnt, PL_SUM, pl_comm_world(), comm);
    pl_event_record(ready, comm);
    pl_stream_wait_event(comp, ready);
    pl_copy(b, a, cnt * 4, comp);     /* must see the reduced values */
    pl_scale(b, 2.0f, cnt, comp);
    pl_event_record(t1, comp);
    pl_stream_sync(comp);
    pl_download(h, b, cnt * 4);
    int ok = 1;
    for (size_t i = 0; i < cnt; i++) if (h[i] != 2.0f * n) ok = 0;
    tap_check(ok, "compute work after pl_stream_wait_event sees the comm stream's allreduce");
    tap_check(pl_event_done(ready) && pl_event_done(t1), "events are complete after a sync");
    tap_check(pl_event_elapsed_ms(t0, t1) >= 0, "elapsed time between events is non-negative");

    /* Ordering within one stream: allreduce, then scale, then allreduce again. */
    pl_fill(a, 1.0f, cnt, comm);
    pl_allreduce(a, a, cnt, PL_SUM, pl_comm_world(), comm);
    pl_scale(a, 0.5f, cnt, comm);
    pl_allreduce(a, a, cnt, PL_SUM, pl_comm_world(), comm);
    pl_stream_sync(comm);
    pl_download(h, a, cnt * 4);
    ok = 1;
    for (size_t i = 0; i < cnt; i++) if (h[i] != 0.5f * n * n) ok = 0;
    tap_check(ok, "operations on one stream run in issue order");

    /* Nested groups post together: a ring exchange in two nested groups completes. */
    if (n > 1) {
        int me = pl_rank(), right = (me + 1) % n, left = (me + n - 1) % n;
        pl_fill(a, (float)me, 16, NULL);
        pl_group_start();
        pl_group_start();
        pl_send(a, 16, right, pl_comm_world(), NULL);
        pl_group_end();
        pl_recv(b, 16, left, pl_comm_world(), NULL);
        pl_group_end();
        pl_download(h, b, 16 * 4);
        tap_check(h[0] == (float)left && h[15] == (float)left, "nested groups: a ring exchange completes");
    }
    pl_event_destroy(ready);
    pl_event_destroy(t0);
    pl_event_destroy(t1);
    pl_free(a);
    pl_free(b);
    tap_check(pl_mem_in_use() == 0 && pl_mem_peak() >= 2 * cnt * 4, "memory accounting: all freed, peak seen");
    free(h);
    return tap_finish();
}
