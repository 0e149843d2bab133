/* siphash.h - SipHash-2-4 (Aumasson and Bernstein, 2012), a keyed 64-bit hash: the
 * signature every record of the results channel carries (docs/grader.md, "The driver
 * protocol"). The engine makes a fresh 128-bit key per driver run; the driver signs, the
 * engine checks, so a line written into the channel by anything that does not hold the key
 * - a student's code that found the socket's file descriptor, say - is not a record.
 * Shared by the referee (grader/referee/), the engine (grader/engine_protocol.c) and the
 * engine's test driver; static inline, so each includes its own copy. */
#ifndef PL_SIPHASH_H
#define PL_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

#define SIPHASH_KEY_BYTES 16
#define SIPHASH_HEX 16 /* the signature in hex digits */

static inline uint64_t siphash_rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

static inline uint64_t siphash_load(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i]; /* little-endian, whatever the host */
    return v;
}

#define SIPHASH_ROUND(v0, v1, v2, v3)                                                      \
    do {                                                                                   \
        v0 += v1, v1 = siphash_rotl(v1, 13), v1 ^= v0, v0 = siphash_rotl(v0, 32);          \
        v2 += v3, v3 = siphash_rotl(v3, 16), v3 ^= v2;                                     \
        v0 += v3, v3 = siphash_rotl(v3, 21), v3 ^= v0;                                     \
        v2 += v1, v1 = siphash_rotl(v1, 17), v1 ^= v2, v2 = siphash_rotl(v2, 32);          \
    } while (0)

/* SipHash-2-4 of the message seq (8 bytes, little-endian) followed by data[0 .. n). */
static inline uint64_t siphash_record(const unsigned char key[SIPHASH_KEY_BYTES], uint64_t seq, const char *data,
                                      size_t n) {
    uint64_t k0 = siphash_load(key), k1 = siphash_load(key + 8);
    uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
    size_t total = n + 8;
    unsigned char block[8];
    uint64_t b = (uint64_t)total << 56;
    for (size_t off = 0; off + 8 <= total; off += 8) { /* whole 8-byte words */
        for (int i = 0; i < 8; i++) block[i] = off + i < 8 ? (unsigned char)(seq >> (8 * (off + i))) : (unsigned char)data[off + i - 8];
        uint64_t m = siphash_load(block);
        v3 ^= m;
        SIPHASH_ROUND(v0, v1, v2, v3);
        SIPHASH_ROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    for (size_t i = total & ~(size_t)7; i < total; i++) /* the tail (never the seq: 8 <= total) */
        b |= (uint64_t)(unsigned char)data[i - 8] << (8 * (i & 7));
    v3 ^= b;
    SIPHASH_ROUND(v0, v1, v2, v3);
    SIPHASH_ROUND(v0, v1, v2, v3);
    v0 ^= b;
    v2 ^= 0xff;
    for (int r = 0; r < 4; r++) SIPHASH_ROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}

/* A signed line is TEXT TAB SIG (SIG: 16 lowercase hex digits; TEXT is JSON, which holds no
 * raw tab). The length of TEXT, with SIG in *sig; -1 when the line has no such tail. */
static inline long siphash_split_signed(const char *line, size_t len, uint64_t *sig) {
    if (len < SIPHASH_HEX + 1 || line[len - SIPHASH_HEX - 1] != '\t') return -1;
    uint64_t v = 0;
    for (size_t i = len - SIPHASH_HEX; i < len; i++) {
        char c = line[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v << 4 | (uint64_t)d;
    }
    *sig = v;
    return (long)(len - SIPHASH_HEX - 1);
}

/* The 32 hex digits of a key into its 16 bytes; 0 on success, -1 when malformed. */
static inline int siphash_key_from_hex(const char *hex, unsigned char key[SIPHASH_KEY_BYTES]) {
    for (int i = 0; i < 2 * SIPHASH_KEY_BYTES; i++) {
        char c = hex[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        key[i / 2] = (unsigned char)(i % 2 ? (key[i / 2] | d) : d << 4);
    }
    return hex[2 * SIPHASH_KEY_BYTES] == '\0' ? 0 : -1;
}

#endif
