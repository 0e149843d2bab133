/* lab90.c (referee) - Lab 90's inputs, expected outputs and traffic model.
 *
 * Rank r's input at index i is an integer in [-1023, 1023] from a seed only the referees
 * know, so every order of the sum gives the same bits: the output must be bit-identical to
 * the prefix sum. Every referee derives every rank's seed, so each checks its own rank. */
#include <stdlib.h>

#include "lab90.h"

typedef struct {
    size_t count;
    bool ip;
    float *want; /* this rank's expected output */
} lab90_case;

static float input(uint64_t seed, size_t i) {
    uint64_t h = (seed ^ (i * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
    return (float)((int)((h >> 33) % 2047) - 1023);
}

void lab90_setup(drv_case *c) {
    lab90_case *st = drv_state(c, sizeof *st);
    st->count = (size_t)c->arg[0], st->ip = c->arg[1] != 0;
    st->want = calloc(st->count + 1, sizeof *st->want);
    PL_CHECK(st->want != NULL, "out of host memory");
    for (int r = 0; r <= c->rank; r++) {
        uint64_t seed = drv_case_seed(c, r, 0);
        for (size_t i = 0; i < st->count; i++) st->want[i] += input(seed, i);
    }
    size_t bytes = st->count * sizeof(float);
    float *in = st->ip ? drv_slot_new(c, "buf", bytes, DRV_INOUT) : drv_slot_new(c, "send", bytes, DRV_IN | DRV_CONST);
    if (!st->ip) drv_slot_new(c, "recv", bytes, DRV_OUT);
    uint64_t mine = drv_case_seed(c, c->rank, 0);
    for (size_t i = 0; i < st->count; i++) in[i] = input(mine, i);
}

void lab90_check(drv_case *c) {
    lab90_case *st = c->state;
    size_t n = c->ran ? st->count : 0;
    drv_num(c, "bytes", (double)(st->count * sizeof(float)));
    drv_check_floats(c, "the prefix sum", n ? drv_slot_host(c, st->ip ? "buf" : "recv") : st->want, st->want, n,
                     true);
}

/* Recursive doubling: rank r sends count floats to r + 2^k for every k with r + 2^k < n,
 * nothing else, and no library collective. */
void lab90_model(drv_case *c, drv_model *m) {
    lab90_case *st = c->state;
    int msgs = 0;
    for (int d = 1; d < c->world; d *= 2) msgs += c->rank + d < c->world;
    m->no_collectives = true;
    m->exact_p2p = true;
    m->p2p_msgs = st->count ? msgs : 0;
    m->p2p_bytes = (double)m->p2p_msgs * (double)(st->count * sizeof(float));
    m->no_leak = true;
}

void lab90_teardown(drv_case *c) {
    lab90_case *st = c->state;
    free(st->want);
}
