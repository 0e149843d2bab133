"""bench-lab5-llamacpp.py - llama.cpp's own tokens/s on Lab 5's bench (through llama-cpp-python):
the same GGUF file and the same prompt token ids as the kit's bench, one thread, greedy.
Prefill: the prompt evaluated in one batch, the fastest of 3 (the cache reset between);
decode: GEN tokens, one eval each. Prints one line scripts/bench-lab5.sh reads:

    llamacpp prefill TOK_S decode TOK_S

    python3 bench-lab5-llamacpp.py MODEL.gguf GEN ID [ID ...]
"""
import sys
import time

import llama_cpp
import numpy as np


def main():
    model, gen, ids = sys.argv[1], int(sys.argv[2]), [int(t) for t in sys.argv[3:]]
    llm = llama_cpp.Llama(model_path=model, n_ctx=256, n_batch=512, n_threads=1, n_threads_batch=1, verbose=False)
    best = float("inf")
    for _ in range(3):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(ids)
        best = min(best, time.perf_counter() - t0)
    t_dec = 0.0
    for _ in range(gen):
        tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        t0 = time.perf_counter()
        llm.eval([tok])
        t_dec += time.perf_counter() - t0
    print(f"llamacpp prefill {len(ids) / best:.1f} decode {gen / t_dec:.1f}")


if __name__ == "__main__":
    main()
