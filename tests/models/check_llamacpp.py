"""check_llamacpp.py - the kit's single-device llama against llama.cpp itself (through the
llama-cpp-python package), on SmolLM2. Run by tests/models/check_llamacpp.sh, which checks that
llama_cpp imports and builds the helper; prints ok / not ok lines and '#' notes.

    python3 check_llamacpp.py MODEL.gguf DUMP_HELPER MPIRUN [WORKDIR]

Three comparisons per prompt:
  1. token ids: the kit's byte-level BPE (datasets/ds_bpe.c) against llama.cpp's tokenizer;
  2. the GGUF file as it is (Q4_1), llama.cpp's defaults: its CPU backend multiplies Q4_1
     weights with activations it first rounds to 8 bits (Q8_1 blocks, ggml's vec_dot_type of
     Q4_1) and keeps the KV cache in F16, where the kit keeps activations and KV cache in
     float32 (its products on the Q4_1 blocks are the dequantised weights' products). So the
     logits differ by about 5 % (relative Frobenius) with the weights dequantised alike;
     the bound is on what must survive that: the argmax of at least 80 % of the positions
     and the last position's choice in llama.cpp's top 5, relative error at most 0.15;
  3. the same weights dequantised to float32 by llama.cpp's own quantiser (ftype ALL_F32),
     with an F32 KV cache: now both sides compute in float32 and differ only by the order
     of their sums over 30 layers (measured: about 1e-6), so the bound is 1e-4 relative and
     every argmax equal - a wrong constant, layout or kernel is far above it.
"""
import ctypes
import os
import subprocess
import sys

import numpy as np
import llama_cpp

PROMPTS = [
    "The capital of France is",
    "In a distant galaxy, a small robot named Pip discovered that the stars were singing. "
    "Every night it listened, and slowly it learned the melody of",
    "One, two, three: 1234 apples, 56 pears and the rest! Don't stop.",
]
LLAMA_FTYPE_ALL_F32 = 0
GGML_TYPE_F32 = 0
failed = 0


def report(ok, what):
    global failed
    failed += not ok
    print(("ok - " if ok else "not ok - ") + what, flush=True)


def ours(dump, mpirun, model, prompt, out):
    subprocess.run(mpirun + ["-np", "1", dump, model, prompt, out], check=True,
                   stdout=subprocess.DEVNULL)
    with open(out, "rb") as f:
        n, vocab = np.frombuffer(f.read(8), dtype="<i4")
        ids = np.frombuffer(f.read(4 * n), dtype="<i4")
        logits = np.frombuffer(f.read(4 * n * vocab), dtype="<f4").reshape(n, vocab)
    return ids.tolist(), logits.astype(np.float64)


def theirs(llm, prompt):
    ids = llm.tokenize(prompt.encode(), add_bos=False, special=False)
    llm.reset()
    llm.eval(ids)
    return ids, np.array(llm.scores[: len(ids)], dtype=np.float64)


def compare(a, b):
    rel = np.linalg.norm(a - b) / np.linalg.norm(b)
    agree = float(np.mean(np.argmax(a, 1) == np.argmax(b, 1)))
    top5 = int(np.argmax(a[-1])) in np.argsort(-b[-1])[:5]
    return rel, float(np.abs(a - b).max()), agree, top5


def main():
    model, dump, mpirun = sys.argv[1], sys.argv[2], sys.argv[3].split()
    work = sys.argv[4] if len(sys.argv) > 4 else "/tmp"
    f32 = os.path.join(work, "llamacpp-check-f32.gguf")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.allow_requantize, params.nthread = LLAMA_FTYPE_ALL_F32, True, 2
    made = llama_cpp.llama_model_quantize(model.encode(), f32.encode(), ctypes.byref(params)) == 0
    report(made, "llama.cpp dequantises the model to an all-F32 GGUF")
    q41 = llama_cpp.Llama(model_path=model, n_ctx=256, logits_all=True, verbose=False, n_threads=2)
    exact = llama_cpp.Llama(model_path=f32, n_ctx=256, logits_all=True, verbose=False, n_threads=2,
                            type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32) if made else None
    try:
        for i, prompt in enumerate(PROMPTS):
            mine_ids, mine = ours(dump, mpirun, model, prompt, os.path.join(work, "llamacpp-check.bin"))
            ids, ref = theirs(q41, prompt)
            name = f"prompt {i + 1} ({len(ids)} tokens)"
            report(mine_ids == ids, f"{name}: the kit's tokenizer gives llama.cpp's token ids")
            if mine_ids != ids:
                print(f"# kit {mine_ids}\n# llama.cpp {ids}")
                continue
            rel, mx, agree, top5 = compare(mine, ref)
            print(f"# {name}, Q4_1 file, llama.cpp's defaults: max |diff| {mx:.3g} (largest logit "
                  f"{np.abs(ref).max():.1f}), relative {rel:.2e}, argmax agrees at {100 * agree:.0f}% of positions")
            report(rel <= 0.15 and agree >= 0.8 and top5,
                   f"{name}: Q4_1 logits within llama.cpp's 8-bit-activation rounding (relative {rel:.2e} <= 0.15, "
                   f"argmax {100 * agree:.0f}% >= 80%, last choice in its top 5)")
            if exact is None:
                continue
            _, ref32 = theirs(exact, prompt)
            rel, mx, agree, _ = compare(mine, ref32)
            print(f"# {name}, F32 weights and KV cache: max |diff| {mx:.3g}, relative {rel:.2e}, "
                  f"argmax agrees at {100 * agree:.0f}%")
            report(rel <= 1e-4 and agree == 1.0,
                   f"{name}: float32 logits as llama.cpp's (relative {rel:.2e} <= 1e-4, every argmax equal)")
    finally:
        if os.path.exists(f32):
            os.remove(f32)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
