/* ds_idx.c - IDX parsing and (gzipped) file reading. Depends on libc and zlib only, so the
 * libFuzzer target (tests/datasets/fuzz_idx.c) links it without MPI. */
#include "ds_idx.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h> // defines: gzopen, gzread, gzerror

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int ds_idx_parse(const uint8_t *buf, size_t len, int want_rank, ds_idx *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (len < 4) return fail(err, errlen, "not an IDX file: %zu byte(s), shorter than the 4-byte magic", len);
    if (buf[0] != 0 || buf[1] != 0)
        return fail(err, errlen, "not an IDX file: magic 0x%02x%02x%02x%02x does not start with two zero bytes",
                    buf[0], buf[1], buf[2], buf[3]);
    if (buf[2] != 0x08)
        return fail(err, errlen, "unsupported IDX element type 0x%02x (expected 0x08, unsigned bytes)", buf[2]);
    int rank = buf[3];
    if (rank < 1 || rank > DS_IDX_MAX_RANK)
        return fail(err, errlen, "bad IDX rank %d (expected 1..%d)", rank, DS_IDX_MAX_RANK);
    if (want_rank > 0 && rank != want_rank)
        return fail(err, errlen, "IDX rank %d, expected %d (magic 0x%08x; images are 0x00000803, labels 0x00000801)",
                    rank, want_rank, be32(buf));
    size_t header = 4 + 4 * (size_t)rank;
    if (len < header) return fail(err, errlen, "truncated IDX header: %zu of %zu bytes", len, header);
    size_t count = 1;
    for (int d = 0; d < rank; d++) {
        uint32_t v = be32(buf + 4 + 4 * d);
        if (v == 0) return fail(err, errlen, "IDX dimension %d is 0", d);
        if (count > DS_IDX_MAX_BYTES / v)
            return fail(err, errlen, "IDX dimensions too large (more than %zu bytes of data)", DS_IDX_MAX_BYTES);
        count *= v;
        out->dims[d] = v;
    }
    if (len - header < count)
        return fail(err, errlen, "truncated IDX data: %zu of %zu bytes present", len - header, count);
    if (len - header > count)
        return fail(err, errlen, "IDX file has %zu trailing byte(s) after its %zu data bytes", len - header - count, count);
    out->rank = rank;
    out->count = count;
    out->data = buf + header;
    return 0;
}

int ds_read_file(const char *path, uint8_t **buf, size_t *len, char *err, size_t errlen) {
    *buf = NULL;
    *len = 0;
    FILE *probe = fopen(path, "rb");
    if (!probe) return fail(err, errlen, "%s: %s", path, strerror(errno));
    fclose(probe);
    gzFile f = gzopen(path, "rb");
    if (!f) return fail(err, errlen, "%s: cannot open", path);
    size_t cap = 1 << 16, n = 0;
    uint8_t *b = malloc(cap);
    if (!b) {
        gzclose(f);
        return fail(err, errlen, "%s: out of memory", path);
    }
    for (;;) {
        if (n == cap) {
            if (cap >= DS_IDX_MAX_BYTES + 64) {
                free(b);
                gzclose(f);
                return fail(err, errlen, "%s: larger than %zu bytes uncompressed", path, DS_IDX_MAX_BYTES);
            }
            cap *= 2;
            uint8_t *nb = realloc(b, cap);
            if (!nb) {
                free(b);
                gzclose(f);
                return fail(err, errlen, "%s: out of memory", path);
            }
            b = nb;
        }
        int got = gzread(f, b + n, (unsigned)(cap - n));
        if (got < 0) {
            int code;
            const char *why = gzerror(f, &code);
            int rc = fail(err, errlen, "%s: corrupt gzip data (%s)", path, why ? why : "zlib error");
            free(b);
            gzclose(f);
            return rc;
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    /* gzread stops quietly at a truncated stream; gzerror says so */
    int code = Z_OK;
    const char *why = gzerror(f, &code);
    if (code != Z_OK && code != Z_STREAM_END) {
        int rc = fail(err, errlen, "%s: truncated or corrupt gzip data (%s)", path, why ? why : "zlib error");
        free(b);
        gzclose(f);
        return rc;
    }
    gzclose(f);
    *buf = b;
    *len = n;
    return 0;
}
