"""check_quant_gguf.py - the quantised products checked against gguf-py, llama.cpp's own Python
package: its GGUF reader opens the file test_kernels_quant --gguf-out wrote, its dequantiser
(gguf.quants.dequantize) turns each weight matrix into float32, and numpy's float64 product
of those weights with x must be within the stated bound of the kit's y, element by element
(kern_qmatmul.h: gamma_k * sum (|d q| + |m|) |x|, k = cols + 2). Run by test_kernels.sh.

    python3 check_quant_gguf.py CASES.gguf
"""
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def main():
    reader = GGUFReader(sys.argv[1])
    tensors = {t.name: t for t in reader.tensors}
    n = int(reader.fields["paralab.cases"].parts[-1][0])
    failed = 0
    for i in range(n):
        w = tensors[f"W_{i}"]
        rows, cols = int(w.shape[1]), int(w.shape[0])
        wd = dequantize(w.data, w.tensor_type).reshape(rows, cols).astype(np.float64)
        x = np.array(tensors[f"x_{i}"].data, dtype=np.float64).reshape(-1, cols)
        y = np.array(tensors[f"y_{i}"].data, dtype=np.float64).reshape(-1, rows)
        bound = np.array(tensors[f"bound_{i}"].data, dtype=np.float64).reshape(-1, rows)
        worst = float(np.max(np.abs(y - x @ wd.T) / bound))
        ok = worst <= 1.0
        failed += not ok
        print(f"{'ok' if ok else 'not ok'} - gguf-py: {w.tensor_type.name} {rows} x {cols}, {x.shape[0]} token(s): "
              f"the kit's product within the bound of gguf-py's dequantised weights (worst {worst:.3f} of it)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
