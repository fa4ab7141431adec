"""Device probe: which output tiles TF32 stream-K shares, to measure the schedule's band width (swizzle).

    python3 lab/device_library/probe_tf32_device.py OUTDIR            # on an H100 (< 60 s)
    PYTHONPATH=src python3 lab/device_library/probe_tf32_device.py --analyse OUTDIR   # anywhere

``tcnumerics.library.streamk`` reproduces every captured ``segment_k_on`` call, but the band width W of
the tile schedule (which tiles are the r shared ones when tiles > CTAs) is cuBLAS's per-call choice and
not readable from the kernel name or the CTA count; the captures needed W = 2, 4 and 8.  This probe
measures the shared tiles directly.  Inputs (FPRev-style): A[:, 0] = 2**30, A[:, k > 0] = 0.5, B = 1,
under ``allow_tf32``.  A data-parallel tile chains the 0.5s after 2**30 and truncates them all (the k8
group keeps 25 bits below 2**30), so its outputs are exactly 2**30; a shared tile's later segments start
from +0, sum their 0.5s exactly, and the fix-up adds them to 2**30: its outputs exceed 2**30.  Each
shape's outputs are saved subsampled every 16 rows and columns (tiles are >= 64), with the kernel names
from torch.profiler, in OUTDIR/probe_tf32_M_N_K.npz.  ``--analyse`` prints, per shape, the grid, the
shared-tile count against ``T mod C`` (needs the CTA count: taken from the launch table when the shape is
measured, else every C in 100..132 that fits is listed) and the band widths W consistent with the mask.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys

import numpy as np

# the captured stream-K shapes whose shared tiles depend on W, then a sweep around them
SHAPES = [(448, 5632, 4608), (400, 6144, 6144), (464, 27648, 5120), (1024, 1024, 8192), (864, 5120, 13824),
          (880, 5120, 13824), (4096, 8192, 4096), (256, 4096, 4096), (365, 32064, 5120), (1500, 3072, 768),
          (16384, 4096, 14336)]
SHAPES += [(m, n, k) for m in (384, 512, 768, 1024, 1536) for n in (4096, 5632, 8192, 11008) for k in (4096, 8192)]
STEP = 16


def run(outdir: str) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.backends.cuda.matmul.allow_tf32 = True
    os.makedirs(outdir, exist_ok=True)
    for M, N, K in SHAPES:
        A = torch.full((M, K), 0.5, device="cuda")
        A[:, 0] = 2.0 ** 30
        B = torch.ones((K, N), device="cuda")
        torch.matmul(A, B)  # warm-up: the heuristic's choice is cached
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            C = torch.matmul(A, B)
            torch.cuda.synchronize()
        names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        sub = C[::STEP, ::STEP].float().cpu().numpy()
        np.savez_compressed(os.path.join(outdir, f"probe_tf32_{M}_{N}_{K}.npz"), C=sub, step=STEP,
                            shape=np.array([M, N, K]), meta=json.dumps({"kernels": names}))
        print(M, N, K, names[-1][:110] if names else "?", "shared outputs:", int((sub != 2.0 ** 30).sum()),
              flush=True)
        del A, B, C
        torch.cuda.empty_cache()


def analyse(outdir: str) -> None:
    from tcnumerics.library.streamk import parse_tile, schedule_index

    try:
        sys.path.insert(0, os.path.dirname(__file__))
        from fit_table import call_of
        from tcnumerics.library.launches import measured_launch
    except ImportError:
        measured_launch = None
    for path in sorted(glob.glob(os.path.join(outdir, "probe_tf32_*.npz"))):
        z = np.load(path, allow_pickle=False)
        M, N, K = (int(x) for x in z["shape"])
        kernels = json.loads(str(z["meta"]))["kernels"]
        main = next((k for k in kernels if "sm90_xmma_gemm" in k), None)
        if main is None or "segment_k_on" not in main:
            print(f"{M}x{N}x{K}: not stream-K ({(main or kernels[-1] if kernels else '?')[:80]})")
            continue
        TM, TN, _ = parse_tile(main)
        step = int(z["step"])
        C = z["C"]
        tm_n, tn_n = -(-N // TM), -(-M // TN)
        shared = np.zeros((tm_n, tn_n), bool)  # a tile is shared when its sampled outputs exceed 2**30
        for i in range(C.shape[0]):
            for j in range(C.shape[1]):
                shared[(j * step) // TM, (i * step) // TN] |= C[i, j] != 2.0 ** 30
        r = int(shared.sum())
        ctas = None
        if measured_launch is not None:
            try:
                ctas = measured_launch(call_of({"op": "matmul", "fmt": "fp32", "prec": "high", "M": M, "N": N,
                                                "K": K, "out": "fp32"})).ctas
            except Exception:  # shape not in the launch table
                ctas = None
        T = tm_n * tn_n
        fits = [W for W in range(1, 65) if all(
            (schedule_index(a, b, tm_n, tn_n, W) >= T - r) == shared[a, b] for a in range(tm_n) for b in range(tn_n))]
        print(f"{M}x{N}x{K} tile {TM}x{TN} grid {tm_n}x{tn_n} tiles {T} shared {r} "
              f"(T mod C = {T % ctas if ctas else '?'}, C = {ctas}) W consistent: {fits[:12]}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--analyse", action="store_true")
    a = ap.parse_args()
    analyse(a.outdir) if a.analyse else run(a.outdir)
