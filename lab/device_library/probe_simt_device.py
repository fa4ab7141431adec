"""FPRev-style device probe of cuBLAS's SIMT M = 1 / small-M kernels the captures could not identify.

    python3 lab/device_library/probe_simt_device.py OUTDIR            # on the H100 (torch + CUDA), < 60 s
    PYTHONPATH=src:lab/device_library python3 lab/device_library/probe_simt_device.py --analyse OUTDIR

For each shape (the captured calls that ran ``internal::gemvx::kernel`` (std::enable_if), ``gemv2T_kernel_val``,
``gemvNSP_kernel`` or ``scal_kernel`` + ``sgemm_largek_lds64``), every output column n is one query (i, j):
the A rows are all ones and column n of B is ``+big`` at K position i, ``-big`` at j and ``small`` elsewhere,
with ``big`` so large that any partial sum of smalls merged into it is lost (FP32: 2**(26 + log2 K); FP16
inputs: 2**15 with FP16 subnormal smalls 2**-24).  The output is then ``small x`` (the smalls outside the
subtree in which i and j meet), so ``K - out / small`` is the size of the smallest subtree of the summation
tree that holds both i and j.  Queries: anchors i in a fixed set, j over all of K.  The kernel names
(torch.profiler) and a second run's bits (determinism: atomics?) are saved too.  ``--analyse`` prints, per
shape and anchor, the subtree sizes with the runs of j that join at each size.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

# (name, op, fmt, M, N, K, batch, bias, prec) -- the captured shapes that selected these kernels
SHAPES = [
    ("gemvx_1x1000x999", "matmul", "fp32", 1, 1000, 999, 1, False, "highest"),
    ("gemvx_1x28672x768", "matmul", "fp32", 1, 28672, 768, 1, False, "highest"),
    ("gemvx_1x128256x768", "matmul", "fp32", 1, 128256, 768, 1, False, "highest"),
    ("gemvx_1x50257x4096", "matmul", "fp32", 1, 50257, 4096, 1, False, "high"),
    ("gemvx_1x2560x5120", "matmul", "fp32", 1, 2560, 5120, 1, False, "high"),
    ("gemvx_lin_1x1024x2048", "linear", "fp32", 1, 1024, 2048, 1, True, "high"),
    ("gemvx_split_1x4096x65536", "matmul", "fp32", 1, 4096, 65536, 1, False, "highest"),
    ("gemvx_bmm_64x1x64", "bmm", "fp32", 64, 1, 64, 8, False, "highest"),
    ("gemvNSP_bmm_1x64x64", "bmm", "fp32", 1, 64, 64, 16, False, "highest"),
    ("gemv2T_lin_fp16_1x50257x3072", "linear", "fp16", 1, 50257, 3072, 1, False, "highest"),
    ("largek_8x5120x17920", "matmul", "fp32", 8, 5120, 17920, 1, False, "highest"),
    ("gemmSN_TN_tail_4x2048x1000", "linear", "fp32", 4, 2048, 1000, 1, True, "highest"),  # K % 256 != 0
]


def anchors(K: int) -> list[int]:
    """K positions whose partners are all probed: both ends, powers of two, their neighbours, the middle."""
    a = {0, 1, 2, 3, K // 2, K - 1}
    p = 4
    while p < K:
        a |= {p - 1, p}
        p *= 2
    return sorted(x for x in a if 0 <= x < K)


def queries(K: int, N: int) -> np.ndarray:
    """[n, 2] (i, j) pairs, one per output column (the first N; anchors in order, j over all of K)."""
    pairs = [(i, j) for i in anchors(K) for j in range(K) if j != i]
    return np.array(pairs[:N], np.int64).reshape(-1, 2)


def _levels(fmt: str, K: int) -> tuple[float, float]:
    if fmt == "fp16":
        return 2.0 ** 15, 2.0 ** -24
    return 2.0 ** (26 + int(np.ceil(np.log2(max(K, 2))))), 1.0


def run_device(outdir: str) -> int:
    import torch
    import torch.nn.functional as F

    os.makedirs(outdir, exist_ok=True)
    dev = "cuda"
    meta = {}
    for name, op, fmt, M, N, K, b, bias, prec in SHAPES:
        torch.backends.cuda.matmul.allow_tf32 = prec == "high"
        dt = {"fp32": torch.float32, "fp16": torch.float16}[fmt]
        big, small = _levels(fmt, K)
        ncol = N if not (op == "bmm" and N == 1) else M
        q = queries(K, ncol)
        Bm = torch.full((K, ncol), small, dtype=torch.float64)
        cols = torch.arange(len(q))
        Bm[torch.as_tensor(q[:, 0]), cols] = big
        Bm[torch.as_tensor(q[:, 1]), cols] = -big
        Bm = Bm.to(dt).to(dev)
        if op == "bmm" and N == 1:  # [b, M, K] @ [b, K, 1]: the query runs along M (rows of A)
            A = Bm.T.contiguous().unsqueeze(0).repeat(b, 1, 1)
            Bv = torch.ones(b, K, 1, dtype=dt, device=dev)
            fn = lambda: torch.bmm(A, Bv)
        elif op == "bmm":
            A = torch.ones(b, M, K, dtype=dt, device=dev)
            Bb = Bm.unsqueeze(0).repeat(b, 1, 1)
            fn = lambda: torch.bmm(A, Bb)
        elif op == "linear":
            A = torch.ones(M, K, dtype=dt, device=dev)
            W = Bm.T.contiguous()
            bz = torch.zeros(N, dtype=dt, device=dev) if bias else None
            fn = lambda: F.linear(A, W, bz)
        else:
            A = torch.ones(M, K, dtype=dt, device=dev)
            fn = lambda: A @ Bm
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            out1 = fn()
            torch.cuda.synchronize()
        kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        out2 = fn()
        # determinism check on random data too (atomics would show here)
        g = torch.Generator(device=dev).manual_seed(1)
        R1 = torch.randn(M, K, generator=g, device=dev, dtype=torch.float32).to(dt)
        R2 = torch.randn(K, N, generator=g, device=dev, dtype=torch.float32).to(dt)
        rnd = [(R1 @ R2).float().cpu().numpy() for _ in range(3)]
        first = (lambda o: o[0, :, 0]) if op == "bmm" and N == 1 else (lambda o: o.reshape(-1, o.shape[-1])[0])
        o1, o2 = (first(o.float()).cpu().numpy() for o in (out1, out2))  # one query per entry
        np.savez_compressed(os.path.join(outdir, f"{name}.npz"), queries=q, out=o1, out_again=o2, K=K,
                            big=big, small=small, random_runs=np.stack(rnd))
        meta[name] = dict(op=op, fmt=fmt, M=M, N=N, K=K, b=b, bias=bias, prec=prec, kernels=kernels,
                          deterministic_probe=bool((o1 == o2).all()),
                          deterministic_random=bool(all((r == rnd[0]).all() for r in rnd)))
        print(name, kernels[:3], meta[name]["deterministic_probe"], meta[name]["deterministic_random"], flush=True)
    with open(os.path.join(outdir, "meta.json"), "w") as fh:
        json.dump(meta, fh, indent=1)
    return 0


def subtree_sizes(path: str) -> dict[int, np.ndarray]:
    """{anchor i: [K] subtree size at which j meets i (-1 unprobed)} from one shape's npz (first row)."""
    z = np.load(path, allow_pickle=False)
    K, small = int(z["K"]), float(z["small"])
    q, vals = z["queries"], z["out"]
    res: dict[int, np.ndarray] = {}
    for n, (i, j) in enumerate(q[: len(vals)]):
        res.setdefault(int(i), -np.ones(K, np.int64))[j] = K - int(round(float(vals[n]) / small))
    return res


def analyse(outdir: str) -> int:
    with open(os.path.join(outdir, "meta.json")) as fh:
        meta = json.load(fh)
    for name, m in meta.items():
        print(f"\n{name}: {m['kernels'][:2]} deterministic probe={m['deterministic_probe']} "
              f"random={m['deterministic_random']}")
        for i, sizes in subtree_sizes(os.path.join(outdir, f"{name}.npz")).items():
            runs, start = [], 0
            for j in range(1, len(sizes) + 1):
                if j == len(sizes) or sizes[j] != sizes[start]:
                    runs.append(f"{start}..{j - 1}:{sizes[start]}" if j - 1 > start else f"{start}:{sizes[start]}")
                    start = j
            print(f"  anchor {i}: " + " ".join(runs[:40]) + (" ..." if len(runs) > 40 else ""))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--analyse", action="store_true")
    args = ap.parse_args(argv)
    return analyse(args.outdir) if args.analyse else run_device(args.outdir)


if __name__ == "__main__":
    sys.exit(main())
