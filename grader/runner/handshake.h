/* handshake.h - how a referee and the grading engine open the results channel (protocol 4),
 * on one host (a Unix socket) or across hosts (TCP). Compiled into both.
 *
 * The engine makes two random values per run: the secret, which reaches every referee
 * through the launcher's environment (PL_ENGINE_SECRET; each referee wipes it before its
 * player exists), and the run's key, which never leaves the engine in the clear.
 *
 *   engine -> referee   {"event":"challenge","protocol":4,"nonce":NE}
 *   referee -> engine   {"event":"hello","protocol":4,...,"nonce":NR} TAB mac(HELLO)
 *   engine -> referee   {"event":"key","key":KEY xor pad} TAB mac(KEY)
 *
 * NE and NR are fresh per connection (16 random bytes as hex). mac(tag) is SipHash-2-4 under
 * the secret of NE, NR and the JSON text, numbered by tag: a hello proves its sender holds
 * the secret and answers this connection's challenge (a replayed one fails), the key line
 * proves the engine does. The key travels XORed with a pad that only a holder of the secret
 * can compute (SipHash of NE and NR under the secret, twice, 128 bits), so someone who reads
 * the network sees neither the key nor anything to compute it from. */
#ifndef PL_HANDSHAKE_H
#define PL_HANDSHAKE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "siphash.h"  // defines: siphash_record, siphash_key_from_hex, SIPHASH_KEY_BYTES

#define HS_PROTOCOL 4
#define HS_NONCE_HEX 32 /* 16 random bytes */
#define HS_TAG_HELLO 0x48454c4c4f34ull
#define HS_TAG_KEY 0x4b45593434ull
#define HS_TAG_PAD 0x5041443434ull

/* SipHash under `secret`, numbered `tag`, of ne, nr and text[0 .. n). */
static inline uint64_t hs_mac(const unsigned char secret[SIPHASH_KEY_BYTES], uint64_t tag, const char *ne,
                              const char *nr, const char *text, size_t n) {
    size_t a = strlen(ne), b = strlen(nr);
    char *buf = malloc(a + b + n + 1);
    if (!buf) return 0; /* no match: the handshake fails, as it should on no memory */
    memcpy(buf, ne, a);
    memcpy(buf + a, nr, b);
    memcpy(buf + a + b, text, n);
    uint64_t m = siphash_record(secret, tag, buf, a + b + n);
    free(buf);
    return m;
}

/* The 32 hex digits of key XOR pad(secret, ne, nr): the same call both ways. */
static inline int hs_crypt_key(const unsigned char secret[SIPHASH_KEY_BYTES], const char *ne, const char *nr,
                               const char *hex_in, char hex_out[2 * SIPHASH_KEY_BYTES + 1]) {
    unsigned char k[SIPHASH_KEY_BYTES];
    if (siphash_key_from_hex(hex_in, k) != 0) return -1;
    for (int half = 0; half < 2; half++) {
        uint64_t pad = hs_mac(secret, HS_TAG_PAD + (uint64_t)half, ne, nr, "", 0);
        for (int i = 0; i < 8; i++) k[8 * half + i] ^= (unsigned char)(pad >> (8 * i));
    }
    for (int i = 0; i < SIPHASH_KEY_BYTES; i++) snprintf(hex_out + 2 * i, 3, "%02x", k[i]);
    memset(k, 0, sizeof k);
    return 0;
}

/* The value of "name":"..." in a one-line JSON record we wrote (hex digits only), into
 * out (cap bytes); 0 when found whole. */
static inline int hs_field(const char *line, const char *name, char *out, size_t cap) {
    char pat[40];
    snprintf(pat, sizeof pat, "\"%s\":\"", name);
    const char *p = strstr(line, pat);
    if (!p) return -1;
    p += strlen(pat);
    size_t n = strspn(p, "0123456789abcdef");
    if (p[n] != '"' || n + 1 > cap) return -1;
    memcpy(out, p, n);
    out[n] = '\0';
    return 0;
}

#endif
