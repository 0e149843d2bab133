/* relay.c - what referees tell each other.
 *
 * Referees have no network of their own: a value every rank's referee needs (a sum of
 * wrong elements, the slowest rank's time, a verdict) travels through the players, over
 * their private host communicator (never the student's traffic). Each contribution carries
 * the referee's signature - SipHash-2-4 under the run's key of the relay's number, the rank
 * and the bytes - so a player can delay or drop it (a timeout) but not alter, swap or replay
 * it: a contribution that does not check out ends the run as tampered. By hand (no engine)
 * the key is zero: nothing is graded, the signatures only catch accidents. Where the
 * referees move the players' messages (transport.c), they have MPI of their own and the
 * values go straight between them. */
#include <stdlib.h>
#include <string.h>

#include "referee.h"

typedef struct {
    uint64_t seq;
    uint32_t rank;
    uint32_t bytes;
} relay_head;

static uint64_t sign(const relay_head *h, const void *data) {
    size_t n = sizeof *h + h->bytes;
    char *buf = malloc(n);
    PL_CHECK(buf != NULL, "out of host memory");
    memcpy(buf, h, sizeof *h);
    memcpy(buf + sizeof *h, data, h->bytes);
    uint64_t s = siphash_record(g_ref.key, 0x5E1A7ull ^ h->seq, buf, n);
    free(buf);
    return s;
}

void drv_allgather(const void *mine, size_t bytes, void *out) {
    PL_CHECK(bytes <= WIRE_RELAY_MAX, "a relay contribution over 1 MiB");
    if (transport_on()) { /* the referees have MPI of their own: no player in between */
        transport_allgather(mine, bytes, out);
        return;
    }
    size_t one = sizeof(relay_head) + bytes + sizeof(uint64_t);
    relay_head h = {.seq = g_ref.relay_seq++, .rank = (uint32_t)g_ref.rank, .bytes = (uint32_t)bytes};
    char *blob = malloc(one);
    PL_CHECK(blob != NULL, "out of host memory");
    memcpy(blob, &h, sizeof h);
    memcpy(blob + sizeof h, mine, bytes);
    uint64_t s = sign(&h, mine);
    memcpy(blob + sizeof h + bytes, &s, sizeof s);
    if (!wire_send(g_ref.ctl_fd, CMD_RELAY, 0, blob, one)) referee_tampered("the player stopped answering");
    free(blob);

    wire_msg m;
    void *all = NULL;
    if (wire_recv(g_ref.ctl_fd, &m, &all, (uint64_t)one * (uint64_t)g_ref.world) != 1 || m.cmd != REP_RELAY ||
        m.len != (uint64_t)one * (uint64_t)g_ref.world)
        referee_tampered("the player did not relay the referees' values");
    for (int r = 0; r < g_ref.world; r++) {
        const char *b = (const char *)all + (size_t)r * one;
        relay_head got;
        uint64_t sig;
        memcpy(&got, b, sizeof got);
        memcpy(&sig, b + sizeof got + bytes, sizeof sig);
        if (got.seq != h.seq || got.rank != (uint32_t)r || got.bytes != h.bytes || sig != sign(&got, b + sizeof got))
            referee_tampered("rank %d's referee value arrived altered through the players (relay %llu)", r,
                             (unsigned long long)h.seq);
        memcpy((char *)out + (size_t)r * bytes, b + sizeof got, bytes);
    }
    free(all);
}
