// expect: wrong layer.weights
/* Broken on purpose: every block is loaded dequantised to float32, as if the model's blocks
 * were only a file format: the logits are right, but each rank holds 4 bytes per weight
 * where the file stores 0.56 (Q4_1) or 1.06 (Q8_0), and a decode step reads them all. */
#include "llama_split.h"

static int ls_type_float32(llm_tensor which, int layer) {
    (void)which, (void)layer;
    return LLM_F32;
}
#define ls_type ls_type_float32
#include "../../../solutions/05-llama-split/llama_split.c"
