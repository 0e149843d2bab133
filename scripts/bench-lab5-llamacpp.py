"""bench-lab5-llamacpp.py - llama.cpp's own tokens/s on Lab 5's bench (through llama-cpp-python):
the same GGUF file and the same prompt token ids as the kit's bench, one thread, greedy.
Prefill: the prompt evaluated in one batch, the fastest of 5 (the cache reset between);
decode: GEN tokens, one eval each, their median time (as the kit's bench: robust to a busy
machine). Prints one line scripts/bench-lab5.sh reads:

    llamacpp prefill TOK_S decode TOK_S cpu-time: prefill TOK_S decode TOK_S

Wall-clock and CPU-time rates both: on a machine shared with other jobs the CPU time (the
process's own, all its threads) is the work a step took, whoever else had the core.

    python3 bench-lab5-llamacpp.py MODEL.gguf GEN ID [ID ...]
"""
import sys
import time

import llama_cpp
import numpy as np


def main():
    model, gen, ids = sys.argv[1], int(sys.argv[2]), [int(t) for t in sys.argv[3:]]
    llm = llama_cpp.Llama(model_path=model, n_ctx=256, n_batch=512, n_threads=1, n_threads_batch=1, verbose=False)
    best, best_cpu = float("inf"), float("inf")
    for _ in range(5):
        llm.reset()
        t0, c0 = time.perf_counter(), time.process_time()
        llm.eval(ids)
        best, best_cpu = min(best, time.perf_counter() - t0), min(best_cpu, time.process_time() - c0)
    times, cpu = [], []
    for _ in range(gen):
        tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        t0, c0 = time.perf_counter(), time.process_time()
        llm.eval([tok])
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    print(f"llamacpp prefill {len(ids) / best:.1f} decode {1 / float(np.median(times)):.1f} "
          f"cpu-time: prefill {len(ids) / best_cpu:.1f} decode {1 / float(np.median(cpu)):.1f}")


if __name__ == "__main__":
    main()
