/* lab00.c - the case table of Lab 0 (hello, parallel world): who runs where, which
 * backends and why, and a ping-pong sweep between every ordered pair of ranks.
 *
 * Nothing to implement: read it, run it, and read what it prints (labs/00-hello/README.md
 * explains each section). The player (grader/player/lab00.c) is the program on the
 * harness: it reports its backends, gathers every rank's card with one all-gather, and
 * plays ping-pong with send/recv, timing each round trip. The referee
 * (grader/referee/lab00.c) makes the messages, checks that every byte arrived, and prints
 * the tables. Case "topology" passes when every rank reported and all agree on the
 * backends; one case "p2p.<a>-<b>" per ordered pair passes when every byte of every size
 * arrived intact, both ways.
 *
 * Lab flags (besides the common -b/-e/-f/-w/-n/-q/--filter, see --help):
 *   --p2p-json FILE   also write the sweep as JSON (to calibrate a cost-model profile)
 */
#include <stdio.h>

#include "lab00.h"

/* ------------------------------------------------------------------ cards */

static void text_to_floats(const char *s, float *out, size_t n) {
    size_t i = 0;
    for (; i + 1 < n && s[i]; i++) out[i] = (float)(unsigned char)s[i];
    for (; i < n; i++) out[i] = 0.0f;
}

static void floats_to_text(const float *in, char *s, size_t n) {
    size_t i = 0;
    /* A poisoned (NaN) or out-of-range value ends the text: the rank never wrote it. */
    for (; i + 1 < n && in[i] >= 1.0f && in[i] <= 255.0f; i++) s[i] = (char)(unsigned char)in[i];
    s[i] = 0;
}

void lab0_card_pack(const lab0_card *c, float *f) {
    const int v[LAB0_CARD_INTS] = {c->rank, c->local_rank, c->local_world, c->nodes,
                                   c->device, c->comm, c->cuda_device, c->gpus};
    for (int i = 0; i < LAB0_CARD_INTS; i++) f[i] = (float)v[i];
    text_to_floats(c->host, f + LAB0_CARD_INTS, LAB0_HOST_CHARS);
    text_to_floats(c->gpu, f + LAB0_CARD_INTS + LAB0_HOST_CHARS, LAB0_GPU_CHARS);
}

void lab0_card_unpack(const float *f, lab0_card *c) {
    int *v[LAB0_CARD_INTS] = {&c->rank, &c->local_rank, &c->local_world, &c->nodes,
                              &c->device, &c->comm, &c->cuda_device, &c->gpus};
    for (int i = 0; i < LAB0_CARD_INTS; i++) *v[i] = f[i] == f[i] ? (int)f[i] : -1;
    floats_to_text(f + LAB0_CARD_INTS, c->host, LAB0_HOST_CHARS);
    floats_to_text(f + LAB0_CARD_INTS + LAB0_HOST_CHARS, c->gpu, LAB0_GPU_CHARS);
}

/* ------------------------------------------------------------------ the sweep */

size_t lab0_sizes(size_t *out) {
    size_t all[LAB0_MAX_SIZES], n = drv_sizes(all, LAB0_MAX_SIZES), k = 0;
    for (size_t i = 0; i < n; i++)
        if (all[i] > 0) out[k++] = all[i]; /* a 0-byte message is a no-op */
    return k;
}

size_t lab0_total(const size_t *sizes, size_t n) {
    size_t t = 0;
    for (size_t k = 0; k < n; k++) t += sizes[k];
    return t;
}

int lab0_warmup(void) { return drv_opts()->warmup >= 0 ? drv_opts()->warmup : LAB0_DEFAULT_WARMUP; }

int lab0_iters(size_t bytes) {
    if (drv_opts()->iters > 0) return drv_opts()->iters;
    size_t n = ((size_t)64 << 20) / (bytes ? bytes : 1); /* about 64 MiB moved per size */
    return n < 10 ? 10 : n > 50 ? 50 : (int)n;
}

/* Small integers (< 251 + rounds): every sum over the rounds is exact in float32. */
float lab0_message(const float *base, size_t n, int round, size_t i) {
    return base[(i + (size_t)round) % n] + (float)round;
}

/* ------------------------------------------------------------------ the table */

static void plan_pairs(const drv_test *t, drv_plan *p) {
    for (int s = 0; s < pl_world(); s++)
        for (int d = 0; d < pl_world(); d++)
            if (s != d) {
                drv_instance *in = drv_plan_add(p, t, "p2p.%d-%d", s, d);
                in->arg[0] = s, in->arg[1] = d;
            }
}

static const drv_test TESTS[] = {
    {.name = "topology", .setup = DRV_R(lab0_topology_setup), .check = DRV_R(lab0_topology_check),
     .play = DRV_P(lab0_topology_play)},
    {.name = "p2p", .plan = plan_pairs, .setup = DRV_R(lab0_p2p_setup), .check = DRV_R(lab0_p2p_check),
     .play = DRV_P(lab0_p2p_play)},
    {NULL},
};

static const char *g_p2p_json;
const char *lab0_p2p_json(void) { return g_p2p_json; }

static const drv_flag FLAGS[] = {
    {"--p2p-json", DRV_STR, &g_p2p_json, 0, 0, "FILE   also write the ping-pong sweep as JSON"},
    {NULL},
};
static const drv_options DEFAULTS = {.min_bytes = 4, .max_bytes = LAB0_DEFAULT_MAX_BYTES, .factor = 2.0,
                                     .warmup = -1, .iters = -1};
static const drv_lab LAB = {
    .name = "00-hello",
    .title = "Lab 0: who runs where, which backends and why, and a ping-pong sweep between every "
             "ordered pair of ranks (default sizes 4 B .. 4 MiB)",
    .flags = FLAGS,
    .tests = TESTS,
    .defaults = &DEFAULTS,
    .init = DRV_R(lab0_init),
    .player_init = DRV_P(lab0_player_init),
    .finish = DRV_R(lab0_finish),
};

int main(int argc, char **argv) { return drv_main(&LAB, argc, argv); }
