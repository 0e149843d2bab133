/* lab00.c (referee) - Lab 0's messages, checks and report: the ranks table, the sweep's
 * lines, the latency and bandwidth matrices and the JSON that `make calibrate` reads.
 *
 * Every message of a pair's sweep derives from a base only referees know (a seed of the
 * run's key); the player sends it round after round and returns, per size, the sum of
 * what arrived. The referees of both ends compute the sums that intact messages give and
 * count the elements that differ. Latencies are the player's own measurements, reported
 * as they come (lab 0 scores none of them).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab00.h"

typedef struct {
    size_t bytes;
    int iters;
    double latency_us;     /* one way: half the median round trip (the player's clock) */
    double bandwidth_gbps; /* bytes / one-way time, 1 GB = 1e9 bytes */
    double wrong_bytes;    /* 4 x the wrong elements of the sums, both directions */
} p2p_point;

typedef struct {
    int src, dst;
    bool same_host;
    int n;
    p2p_point pt[LAB0_MAX_SIZES];
} p2p_pair;

/* The lab's state on the referee side, for the whole run. */
static struct {
    size_t sizes[LAB0_MAX_SIZES], nsizes, total;
    char (*hosts)[LAB0_HOST_CHARS]; /* every referee's host (each shares its player's) */
    p2p_pair *pairs;
    int npairs;
    bool header_done;
} g;

/* Every rank's host, through the referees' own relay: the p2p cases need it even when the
 * topology case is filtered out. Every referee calls it in the same (first) case. */
static void know_hosts(void) {
    if (g.hosts) return;
    char mine[LAB0_HOST_CHARS];
    memset(mine, 0, sizeof mine);
    snprintf(mine, sizeof mine, "%s", pl_info()->host);
    g.hosts = calloc((size_t)pl_world(), sizeof *g.hosts);
    PL_CHECK(g.hosts != NULL, "out of host memory");
    drv_allgather(mine, sizeof mine, g.hosts);
    for (int r = 0; r < pl_world(); r++) g.hosts[r][LAB0_HOST_CHARS - 1] = 0;
}

static int count_hosts(void) {
    int hosts = 0;
    for (int r = 0; r < pl_world(); r++) {
        bool first = true;
        for (int q = 0; q < r; q++) first &= strcmp(g.hosts[q], g.hosts[r]) != 0;
        hosts += first;
    }
    return hosts;
}

void lab0_init(void) {
    int world = pl_world();
    g.nsizes = lab0_sizes(g.sizes);
    g.total = lab0_total(g.sizes, g.nsizes);
    if (world > 1 && g.nsizes == 0) pl_usage_error("no message size between -b and -e is at least 4 bytes");
    g.pairs = calloc((size_t)world * (size_t)world, sizeof *g.pairs);
    PL_CHECK(g.pairs != NULL, "out of host memory");
    drv_print("Lab 0: hello from %d rank(s)\n", world);
}

/* ------------------------------------------------------------------ topology */

void lab0_topology_setup(drv_case *c) {
    know_hosts();
    drv_slot_new(c, "cards", (size_t)c->world * LAB0_CARD_FLOATS * sizeof(float), DRV_OUT);
    drv_slot_new(c, "why", 2 * LAB0_WHY_CHARS, DRV_OUT | DRV_ZEROED);
    drv_slot_new(c, "links", LAB0_LINKS_CHARS, DRV_OUT | DRV_ZEROED);
}

/* Names of what a card says (a poisoned or garbled entry reads "?"). */
static const char *dev_name(int d) { return d >= 0 && d <= PL_DEVICE_CUDA ? pl_device_name((pl_device_kind)d) : "?"; }
static const char *comm_name(int k) { return k >= 0 && k <= PL_COMM_NCCL ? pl_comm_name((pl_comm_kind)k) : "?"; }

/* The table; the verdict's message, or NULL. */
static const char *judge_cards(const lab0_card *cards, int world, char *why, size_t n) {
    drv_print("== ranks ==\n");
    drv_print("  %4s  %-20s %5s  %-6s %-4s  %s\n", "rank", "host", "local", "device", "comm", "GPU");
    int hosts = 0;
    for (int r = 0; r < world; r++) {
        const lab0_card *k = &cards[r];
        drv_print("  %4d  %-20s %2d/%-2d  %-6s %-4s  %s\n", r, k->host, k->local_rank, k->local_world,
                  dev_name(k->device), comm_name(k->comm), k->gpu);
        bool first_on_host = true;
        for (int q = 0; q < r; q++) first_on_host &= strcmp(cards[q].host, k->host) != 0;
        hosts += first_on_host;
    }
    drv_print("  %d rank(s) on %d host(s)\n", world, hosts);
    /* every rank answered, and they agree on the backends and the node count */
    for (int r = 0; r < world; r++) {
        const lab0_card *k = &cards[r];
        if (k->rank != r || !k->host[0]) return snprintf(why, n, "rank %d did not report (its entry is empty)", r), why;
        if (k->device != cards[0].device || k->comm != cards[0].comm)
            return snprintf(why, n, "rank %d runs %s+%s but rank 0 runs %s+%s", r, dev_name(k->device),
                            comm_name(k->comm), dev_name(cards[0].device), comm_name(cards[0].comm)), why;
        if (k->device == PL_DEVICE_AUTO || k->comm == PL_COMM_AUTO)
            return snprintf(why, n, "rank %d has no backend chosen (still 'auto')", r), why;
        if (k->device == PL_DEVICE_CUDA && k->cuda_device < 0)
            return snprintf(why, n, "rank %d runs on cuda without a GPU assigned", r), why;
        if (k->local_rank < 0 || k->local_rank >= k->local_world)
            return snprintf(why, n, "rank %d: local rank %d of %d", r, k->local_rank, k->local_world), why;
    }
    if (hosts != cards[0].nodes)
        return snprintf(why, n, "the ranks name %d distinct hosts but the runtime counted %d nodes", hosts,
                        cards[0].nodes), why;
    return NULL;
}

void lab0_topology_check(drv_case *c) {
    if (!c->ran) return;
    int world = c->world;
    lab0_card *cards = calloc((size_t)world, sizeof *cards);
    PL_CHECK(cards != NULL, "out of host memory");
    const float *all = drv_slot_host(c, "cards");
    for (int r = 0; r < world; r++) lab0_card_unpack(all + (size_t)r * LAB0_CARD_FLOATS, &cards[r]);
    char bad[200];
    const char *verdict = judge_cards(cards, world, bad, sizeof bad);
    char *links = drv_slot_host(c, "links");
    links[LAB0_LINKS_CHARS - 1] = 0;
    if (links[0])
        drv_print("== GPU links on %s (rank 0's node) ==\n%s%s", cards[0].host, links,
                  links[strlen(links) - 1] != '\n' ? "\n" : "");
    char *why = drv_slot_host(c, "why");
    why[LAB0_WHY_CHARS - 1] = why[2 * LAB0_WHY_CHARS - 1] = 0;
    pl_device_kind dev;
    pl_comm_kind comm;
    drv_player_backends(&dev, &comm);
    drv_num(c, "world", world);
    drv_num(c, "nodes", cards[0].nodes);
    drv_note(c, "%s+%s: %s; %s", pl_device_name(dev), pl_comm_name(comm), why, why + LAB0_WHY_CHARS);
    if (verdict) drv_fail(c, "%s", verdict);
    free(cards);
}

/* ------------------------------------------------------------------ p2p */

/* The base of a pair's messages: integers 0..250 from the sender's seed. */
static void make_base(uint64_t seed, float *base, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint64_t h = (seed ^ (i * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
        base[i] = (float)((h >> 33) % 251);
    }
}

void lab0_p2p_setup(drv_case *c) {
    know_hosts();
    int src = (int)c->arg[0], dst = (int)c->arg[1];
    if (!g.header_done) {
        g.header_done = true;
        drv_print("== point-to-point: ping-pong between every ordered pair ==\n");
        drv_print("  one-way latency = median round trip / 2; bandwidth = bytes / latency;"
                  " wrong = bytes that arrived altered\n");
        drv_print("  %-8s %12s %6s %12s %14s %8s\n", "pair", "bytes", "iters", "latency_us", "bandwidth_GB/s", "wrong");
    }
    if (c->rank == src) {
        size_t max = g.sizes[g.nsizes - 1];
        float *base = drv_slot_new(c, "base", max * sizeof(float), DRV_IN | DRV_CONST);
        make_base(drv_case_seed(c, src, 0), base, max);
        drv_slot_new(c, "back", g.total * sizeof(float), DRV_OUT);
        drv_slot_new(c, "lat", g.nsizes * sizeof(double), DRV_OUT | DRV_ZEROED);
    } else if (c->rank == dst) {
        drv_slot_new(c, "fwd", g.total * sizeof(float), DRV_OUT);
    }
}

/* Wrong elements per size of what arrived here (summed over the rounds) against the sums
 * intact messages give. */
static void count_wrong(drv_case *c, const float *got, double *wrong) {
    size_t max = g.sizes[g.nsizes - 1], off = 0;
    float *base = malloc(max * sizeof(float));
    PL_CHECK(base != NULL, "out of host memory");
    make_base(drv_case_seed(c, (int)c->arg[0], 0), base, max);
    int rounds_warm = lab0_warmup();
    for (size_t k = 0; k < g.nsizes; k++) {
        size_t n = g.sizes[k];
        int rounds = rounds_warm + lab0_iters(n * sizeof(float));
        for (size_t i = 0; i < n; i++) {
            float want = 0;
            for (int r = 0; r < rounds; r++) want += lab0_message(base, n, r, i);
            wrong[k] += memcmp(&want, &got[off + i], sizeof want) != 0;
        }
        off += n;
    }
    free(base);
}

void lab0_p2p_check(drv_case *c) {
    if (!c->ran) return;
    int src = (int)c->arg[0], dst = (int)c->arg[1];
    struct {
        double wrong[LAB0_MAX_SIZES], lat[LAB0_MAX_SIZES];
    } mine, *all = calloc((size_t)c->world, sizeof *all);
    PL_CHECK(all != NULL, "out of host memory");
    memset(&mine, 0, sizeof mine);
    if (c->rank == src) {
        count_wrong(c, drv_slot_host(c, "back"), mine.wrong);
        memcpy(mine.lat, drv_slot_host(c, "lat"), g.nsizes * sizeof(double));
    } else if (c->rank == dst) {
        count_wrong(c, drv_slot_host(c, "fwd"), mine.wrong);
    }
    drv_allgather(&mine, sizeof mine, all);
    p2p_pair *p = &g.pairs[g.npairs++];
    p->src = src, p->dst = dst, p->n = (int)g.nsizes;
    p->same_host = !strcmp(g.hosts[src], g.hosts[dst]);
    double wrong = 0, checked = 0, peak = 0;
    for (size_t k = 0; k < g.nsizes; k++) {
        p2p_point *pt = &p->pt[k];
        pt->bytes = g.sizes[k] * sizeof(float);
        pt->iters = lab0_iters(pt->bytes);
        pt->latency_us = isfinite(all[src].lat[k]) ? all[src].lat[k] : 0;
        pt->bandwidth_gbps = pt->latency_us > 0 ? (double)pt->bytes / (pt->latency_us * 1e-6) / 1e9 : 0;
        pt->wrong_bytes = 4 * (all[src].wrong[k] + all[dst].wrong[k]);
        char pair[24];
        snprintf(pair, sizeof pair, "%d->%d", src, dst);
        drv_print("  %-8s %12zu %6d %12.2f %14.3f %8.0f\n", pair, pt->bytes, pt->iters, pt->latency_us,
                  pt->bandwidth_gbps, pt->wrong_bytes);
        wrong += pt->wrong_bytes;
        checked += 2.0 * (double)pt->bytes * (lab0_warmup() + pt->iters); /* both ends check */
        if (pt->bandwidth_gbps > peak) peak = pt->bandwidth_gbps;
    }
    free(all);
    const p2p_point *small = &p->pt[0], *large = &p->pt[p->n - 1];
    drv_num(c, "src", src);
    drv_num(c, "dst", dst);
    drv_num(c, "same_host", p->same_host);
    if (count_hosts() > 1)
        drv_note(c, "%s (%s -> %s)", p->same_host ? "same host" : "across hosts", g.hosts[src], g.hosts[dst]);
    drv_num(c, "latency_us", small->latency_us);
    drv_num(c, "latency_bytes", (double)small->bytes);
    drv_num(c, "bandwidth_GBps", large->bandwidth_gbps);
    drv_num(c, "peak_bandwidth_GBps", peak);
    drv_num(c, "bytes", (double)large->bytes);
    drv_num(c, "time_us", large->latency_us); /* the fields the engine shows (nccl-tests') */
    drv_num(c, "algbw", large->bandwidth_gbps);
    drv_num(c, "busbw", large->bandwidth_gbps);
    drv_num(c, "wrong", wrong);
    drv_num(c, "count", checked);
    drv_check_count(c, "bytes that arrived altered between the pair (the table's wrong column, size by size)", wrong, 0);
}

/* ------------------------------------------------------------------ the report */

/* Latency at the smallest size and bandwidth at the largest, as src x dst matrices. */
static void print_matrices(void) {
    int world = pl_world();
    if (g.npairs == 0 || world > 16) return;
    bool hosts = g.hosts && count_hosts() > 1; /* mark the pairs whose messages leave their node */
    if (hosts) {
        drv_print("== hosts (a * marks a pair on two hosts: its messages cross the network) ==\n");
        for (int r = 0; r < world; r++) {
            bool first = true;
            for (int q = 0; q < r; q++) first &= strcmp(g.hosts[q], g.hosts[r]) != 0;
            if (!first) continue;
            drv_print("  %-20s ranks", g.hosts[r]);
            for (int q = r; q < world; q++)
                if (!strcmp(g.hosts[q], g.hosts[r])) drv_print(" %d", q);
            drv_print("\n");
        }
    }
    for (int which = 0; which < 2; which++) {
        const p2p_pair *p0 = &g.pairs[0];
        drv_print("== %s, %zu-byte messages (row: sender, column: receiver) ==\n",
                  which == 0 ? "latency in us" : "bandwidth in GB/s", p0->pt[which == 0 ? 0 : p0->n - 1].bytes);
        drv_print("  %6s", "");
        for (int d = 0; d < world; d++) drv_print(" %9d", d);
        drv_print("\n");
        for (int s = 0; s < world; s++) {
            drv_print("  %6d", s);
            for (int d = 0; d < world; d++) {
                const p2p_pair *p = NULL;
                for (int i = 0; i < g.npairs; i++)
                    if (g.pairs[i].src == s && g.pairs[i].dst == d) p = &g.pairs[i];
                if (!p) {
                    drv_print(" %9s", s == d ? "." : "-");
                    continue;
                }
                const p2p_point *pt = which == 0 ? &p->pt[0] : &p->pt[p->n - 1];
                drv_print(hosts && !p->same_host ? " %8.2f*" : " %9.2f", which == 0 ? pt->latency_us : pt->bandwidth_gbps);
            }
            drv_print("\n");
        }
    }
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

/* The sweep as JSON, for calibrating a "this machine" cost-model profile (rank 0 writes). */
static void write_p2p_json(const char *path) {
    if (pl_rank() != 0) return;
    FILE *f = fopen(path, "w");
    if (!f) {
        pl_log("cannot write --p2p-json %s", path);
        return;
    }
    pl_device_kind dev;
    pl_comm_kind comm;
    drv_player_backends(&dev, &comm);
    int world = pl_world();
    fprintf(f, "{\n  \"lab\": \"00-hello\",\n  \"world\": %d,\n  \"nodes\": %d,\n", world, g.hosts ? count_hosts() : 1);
    fprintf(f, "  \"device\": \"%s\",\n  \"comm\": \"%s\",\n  \"hosts\": [", pl_device_name(dev), pl_comm_name(comm));
    for (int r = 0; r < world; r++) {
        if (r) fputs(", ", f);
        json_string(f, g.hosts ? g.hosts[r] : "?");
    }
    fputs("],\n  \"latency\": \"one-way, half the median round trip, microseconds\",\n", f);
    fputs("  \"bandwidth\": \"bytes / one-way time, GB/s (1e9 bytes)\",\n  \"pairs\": [", f);
    for (int i = 0; i < g.npairs; i++) {
        const p2p_pair *p = &g.pairs[i];
        fprintf(f, "%s\n    {\"src\": %d, \"dst\": %d, \"same_host\": %s, \"points\": [", i ? "," : "", p->src, p->dst,
                p->same_host ? "true" : "false");
        for (int k = 0; k < p->n; k++) {
            const p2p_point *pt = &p->pt[k];
            fprintf(f, "%s\n      {\"bytes\": %zu, \"iters\": %d, \"latency_us\": %.3f, \"bandwidth_GBps\": %.6f, "
                       "\"wrong_bytes\": %.0f}",
                    k ? "," : "", pt->bytes, pt->iters, pt->latency_us, pt->bandwidth_gbps, pt->wrong_bytes);
        }
        fputs("\n    ]}", f);
    }
    fputs("\n  ]\n}\n", f);
    if (fclose(f) != 0) pl_log("error writing --p2p-json %s", path);
    else drv_print("p2p results written to %s\n", path);
}

void lab0_finish(void) {
    if (pl_world() == 1) drv_print("== point-to-point ==\n  one rank: no pairs to measure (run with NP=2 or more)\n");
    else print_matrices();
    if (lab0_p2p_json()) write_p2p_json(lab0_p2p_json());
    free(g.pairs);
    free(g.hosts);
}
