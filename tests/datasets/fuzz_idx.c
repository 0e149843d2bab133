/* fuzz_idx.c - libFuzzer target for the IDX parser: any byte string must either parse into
 * dimensions whose data lies inside the buffer, or fail with a one-line message.
 *   clang -fsanitize=fuzzer,address -Idatasets tests/datasets/fuzz_idx.c datasets/ds_idx.c -lz */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ds_idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a private copy: ASan then flags any read past the end of the input */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    char err[256];
    for (int want = 0; want <= 3; want++) {
        ds_idx idx;
        err[0] = 0;
        if (ds_idx_parse(buf, size, want, &idx, err, sizeof err) == 0) {
            unsigned sum = 0;
            for (size_t i = 0; i < idx.count; i++) sum += idx.data[i]; /* touch every byte */
            if (idx.data + idx.count != buf + size) abort();
            (void)sum;
        } else if (err[0] == 0 || strchr(err, '\n')) {
            abort(); /* every failure explains itself on one line */
        }
    }
    free(buf);
    return 0;
}
