/* lab90.c (player) - Lab 90's call: the student's scan on the case's slots, on the comm
 * stream, its output read on that stream. */
#include "lab90.h"
#include "scan.h" // defines: lab_scan

void lab90_play(drv_case *c) {
    size_t count = (size_t)c->arg[0];
    bool ip = c->arg[1] != 0;
    float *out = drv_slot_f(c, ip ? "buf" : "recv");
    lab_scan(ip ? out : drv_slot_f(c, "send"), out, count, pl_comm_world(), pl_stream_comm());
    drv_consume(c, pl_stream_comm(), ip ? "buf" : "recv", NULL);
}
