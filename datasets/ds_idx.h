/* ds_idx.h - the IDX format (MNIST, Fashion-MNIST): parse a buffer, read a (gzipped) file.
 *
 * IDX: a big-endian header 0x00 0x00 TYPE RANK, then RANK big-endian uint32 dimensions,
 * then the data, row-major. Only TYPE 0x08 (unsigned bytes) is used here. Every problem
 * is reported as one line in `err`, never by aborting, so the parser can be fuzzed and the
 * caller decides how to fail (a lab: pl_usage_error, exit code 2).
 */
#ifndef DS_IDX_H
#define DS_IDX_H

#include <stddef.h>
#include <stdint.h>

#define DS_IDX_MAX_RANK 4
#define DS_IDX_MAX_BYTES ((size_t)256 << 20) /* refuse larger payloads (and zip bombs) */

typedef struct {
    int rank;
    uint32_t dims[DS_IDX_MAX_RANK];
    size_t count;        /* product of dims                               */
    const uint8_t *data; /* count bytes; points into the parsed buffer    */
} ds_idx;

/* Parse buf[0 .. len). want_rank > 0 demands that rank. Returns 0, or -1 with err set.
 * The buffer must hold exactly the header and count bytes (no more, no less). */
int ds_idx_parse(const uint8_t *buf, size_t len, int want_rank, ds_idx *out, char *err, size_t errlen);

/* Read a whole file, gunzipping it when it is gzip (plain files pass through).
 * On success *buf is malloc'ed (free it) and *len set. Returns 0, or -1 with err set. */
int ds_read_file(const char *path, uint8_t **buf, size_t *len, char *err, size_t errlen);

#endif
