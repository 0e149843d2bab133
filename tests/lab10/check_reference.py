#!/usr/bin/env python3
"""check_reference.py DUMP - Lab 10's ring attention and Ulysses (forward and backward)
against references outside the kit: attention and its gradients in float64, written here
in plain Python from the textbook formulas (the full softmax, no blocks, no log-sum-exp
merge), and, where PyTorch imports, torch.nn.functional.scaled_dot_product_attention in
float64 with autograd. DUMP is the output of `lab10 --run dump` (grader/player/lab10_modes.c).
Prints one "ok - ..." or "not ok - ..." line per comparison; exits 1 on a failure."""
import math
import sys

TOL = 1e-5  # relative Frobenius error, the grader's tolerance


def parse(path):
    head, toks = None, {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if w[:1] == ["dump"]:
                head = dict(zip(w[1::2], map(int, w[2::2])))
            elif w[:1] == ["tok"]:
                toks[int(w[1])] = [float(x) for x in w[2:]]
    if head is None or len(toks) != head["S"]:
        sys.exit("check_reference.py: %s is not a complete dump (%s tokens)" % (path, len(toks)))
    return head, toks


def split(row, H, Hkv, d):
    """one token's line into its named tensors, in lab10_modes.c's order"""
    widths = [("q", H * d), ("k", Hkv * d), ("v", Hkv * d), ("g", H * d), ("ro", H * d), ("rl", H),
              ("rdq", H * d), ("rdk", Hkv * d), ("rdv", Hkv * d), ("uo", H * d), ("udq", H * d),
              ("udk", Hkv * d), ("udv", Hkv * d)]
    out, at = {}, 0
    for name, w in widths:
        out[name] = row[at:at + w]
        at += w
    if at != len(row):
        sys.exit("check_reference.py: a token line has %d numbers, expected %d" % (len(row), at))
    return out


def reference(T, S, H, Hkv, d):
    """float64 causal attention and the gradients of sum(o * g): full softmax per row"""
    grp, sc = H // Hkv, 1.0 / math.sqrt(d)
    o = [[0.0] * (H * d) for _ in range(S)]
    lse = [[0.0] * H for _ in range(S)]
    dq = [[0.0] * (H * d) for _ in range(S)]
    dk = [[0.0] * (Hkv * d) for _ in range(S)]
    dv = [[0.0] * (Hkv * d) for _ in range(S)]
    for i in range(S):
        for h in range(H):
            kh = h // grp
            qi = T[i]["q"][h * d:(h + 1) * d]
            gi = T[i]["g"][h * d:(h + 1) * d]
            s = [sc * sum(a * b for a, b in zip(qi, T[j]["k"][kh * d:(kh + 1) * d])) for j in range(i + 1)]
            m = max(s)
            e = [math.exp(x - m) for x in s]
            z = sum(e)
            p = [x / z for x in e]
            lse[i][h] = m + math.log(z)
            for x in range(d):
                o[i][h * d + x] = sum(p[j] * T[j]["v"][kh * d + x] for j in range(i + 1))
            dp = [sum(a * b for a, b in zip(gi, T[j]["v"][kh * d:(kh + 1) * d])) for j in range(i + 1)]
            dot = sum(a * b for a, b in zip(p, dp))
            for j in range(i + 1):
                ds = p[j] * (dp[j] - dot) * sc
                for x in range(d):
                    dq[i][h * d + x] += ds * T[j]["k"][kh * d + x]
                    dk[j][kh * d + x] += ds * qi[x]
                    dv[j][kh * d + x] += p[j] * gi[x]
    return {"o": o, "lse": lse, "dq": dq, "dk": dk, "dv": dv}


def rel(got, want):
    num = den = 0.0
    for gr, wr in zip(got, want):
        for a, b in zip(gr, wr):
            if not math.isfinite(a):
                return math.inf
            num += (a - b) ** 2
            den += b * b
    return math.sqrt(num / den) if den > 0 else math.sqrt(num)


def torch_reference(T, S, H, Hkv, d):
    import torch  # noqa: the caller checked that it imports
    import torch.nn.functional as F
    def t(name, heads):
        return torch.tensor([T[i][name] for i in range(S)], dtype=torch.float64).view(S, heads, d).transpose(0, 1)
    q, k, v, g = t("q", H).requires_grad_(), t("k", Hkv).requires_grad_(), t("v", Hkv).requires_grad_(), t("g", H)
    grp = H // Hkv
    o = F.scaled_dot_product_attention(q.unsqueeze(0), k.repeat_interleave(grp, 0).unsqueeze(0),
                                       v.repeat_interleave(grp, 0).unsqueeze(0), is_causal=True).squeeze(0)
    (o * g).sum().backward()
    def rows(x, heads):
        return x.detach().transpose(0, 1).reshape(S, heads * d).tolist()
    return {"o": rows(o, H), "dq": rows(q.grad, H), "dk": rows(k.grad, Hkv), "dv": rows(v.grad, Hkv)}


def main():
    head, toks = parse(sys.argv[1])
    S, H, Hkv, d, n = head["S"], head["H"], head["Hkv"], head["d"], head["n"]
    T = [split(toks[p], H, Hkv, d) for p in range(S)]
    refs = [("float64 (plain Python, full softmax)", reference(T, S, H, Hkv, d))]
    try:
        import torch  # noqa: F401
        refs.append(("torch %s scaled_dot_product_attention (float64, autograd)" % torch.__version__,
                     torch_reference(T, S, H, Hkv, d)))
    except ImportError:
        print("# torch not importable (pip install torch): the comparison with PyTorch's "
              "scaled_dot_product_attention is skipped")
    bad = 0
    for label, ref in refs:
        for mine, key in [("ro", "o"), ("rl", "lse"), ("rdq", "dq"), ("rdk", "dk"), ("rdv", "dv"),
                          ("uo", "o"), ("udq", "dq"), ("udk", "dk"), ("udv", "dv")]:
            if key not in ref:
                continue
            e = rel([T[p][mine] for p in range(S)], ref[key])
            what = ("ring" if mine[0] == "r" else "Ulysses") + " " + key
            ok = e <= TOL
            bad += not ok
            print("%s - lab 10 at %d rank(s), S %d, H %d, Hkv %d, causal zig-zag: %s against %s "
                  "(rel err %.2e <= %.0e)" % ("ok" if ok else "not ok", n, S, H, Hkv, what, label, e, TOL))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
