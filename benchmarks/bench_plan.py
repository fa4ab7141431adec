"""The composition's hot paths, this tree against a baseline tree, timed in the same run (issue 30: building a plan
and running it through the one interpreter must not slow what users call).

Each case runs in a child process per tree (``PYTHONPATH`` names the tree's ``src``), warm (one untimed call first:
numba compiles there), then the best of ``--repeat`` timed calls, on ``--threads`` threads (default 1); the trees
alternate, ``--rounds`` times, and the best time of each is kept.  Prints one JSON line per case and a table of ratios (this tree / baseline: below 1 is
faster).

    git archive main src | tar -x -C /tmp/main_tree
    python benchmarks/bench_plan.py --baseline /tmp/main_tree/src

Cases: small and mid-size ``tcnumerics.gemm`` calls (composition overhead vs the chain), FP8 promotion with split-K,
``tcnumerics.library`` calls on the H100's tables (nvjet split-K, a linear with bias, a SIMT gemv), and with torch
installed, ``tcnumerics.torch`` unit and library mode on CPU tensors.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile

CHILD = r'''
import json, sys, time, warnings
import numpy as np, ml_dtypes
warnings.simplefilter("ignore")
import tcnumerics as tc
from tcnumerics import library as lib
BF16 = "hopper.wgmma.m64n8k16.f32.bf16.bf16"
E4M3 = "hopper.wgmma.m64n8k32.f32.e4m3.e4m3"
rng = np.random.default_rng(0)
def ops(M, K, N, dt=ml_dtypes.bfloat16):
    return rng.standard_normal((M, K)).astype(dt), rng.standard_normal((K, N)).astype(dt)
a64, b64 = ops(64, 64, 64)
a512, b512 = ops(512, 512, 512)
a8, b8 = ops(256, 4096, 256, ml_dtypes.float8_e4m3fn)
asp, bsp = ops(64, 8192, 64)
x, w = ops(16, 4096, 1024)
v, m = ops(1, 4096, 4096, np.float32)
CASES = {
    "gemm 64^3 bf16 (x50)": lambda: [tc.gemm(a64, b64, instruction=BF16, out_format="bf16") for _ in range(50)],
    "gemm 512^3 bf16": lambda: tc.gemm(a512, b512, instruction=BF16, out_format="bf16"),
    "gemm fp8 256x256x4096 promote 128, split 4": lambda: tc.gemm(a8, b8, instruction=E4M3, promote_every=128,
                                                                   split_k=4, out_format="bf16"),
    "library matmul 64x64x8192 (H100 split-K)": lambda: lib.matmul(asp, bsp, gpu="h100"),
    "library linear 16x1024x4096 + bias": lambda: lib.linear(x, w.T.copy(), np.ones(1024, ml_dtypes.bfloat16),
                                                              gpu="h100"),
    "library matmul fp32 1x4096x4096 (SIMT)": lambda: lib.matmul(v, m, gpu="h100"),
}
try:
    import torch
    import tcnumerics.torch as tct
    ta, tw = torch.randn(64, 512, dtype=torch.bfloat16), torch.randn(256, 512, dtype=torch.bfloat16)
    tb = torch.randn(256, dtype=torch.bfloat16)
    def emulated(**kw):
        def go():
            with tct.emulate(**kw):
                for _ in range(5):
                    torch.nn.functional.linear(ta, tw, tb)
        return go
    CASES["torch unit linear 64x256x512 (x5)"] = emulated(instruction=BF16)
    CASES["torch unit fp8 tensor-scaled (x5)"] = emulated(instruction=E4M3, scaling="tensor", promote_every=128)
    CASES["torch library linear 64x256x512 (x5)"] = emulated(library="hopper")
except ImportError:
    pass
repeat = int(sys.argv[1])
out = {}
for name, fn in CASES.items():
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter(); fn(); best = min(best, time.perf_counter() - t0)
    out[name] = best
print(json.dumps(out))
'''


def _run(src: str, repeat: int, threads: int) -> dict:
    cache = os.path.join(tempfile.gettempdir(), "tcnumerics-bench-plan-" + hashlib.sha1(src.encode()).hexdigest()[:12])
    env = dict(os.environ, PYTHONPATH=src, NUMBA_CACHE_DIR=cache,  # each tree's numba cache, outside both trees
               NUMBA_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    res = subprocess.run([sys.executable, "-c", CHILD, str(repeat)], env=env, capture_output=True, text=True,
                         check=False)
    if res.returncode:
        raise SystemExit(f"bench_plan: the child on {src} failed:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--baseline", required=True, help="the baseline tree's src folder (e.g. main's, git archive)")
    p.add_argument("--tree", default=str(pathlib.Path(__file__).resolve().parents[1] / "src"))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="numba / OpenMP threads of the children (default 1: on a "
                   "shared machine, spinning threads measure the neighbours)")
    a = p.parse_args(argv)
    for src in (a.baseline, a.tree):
        if not os.path.isdir(os.path.join(src, "tcnumerics")):
            p.error(f"{src}: no tcnumerics package there")
    best: dict[str, dict[str, float]] = {"baseline": {}, "tree": {}}
    for _ in range(a.rounds):
        for which, src in (("baseline", a.baseline), ("tree", a.tree)):
            for name, t in _run(src, a.repeat, a.threads).items():
                best[which][name] = min(best[which].get(name, float("inf")), t)
    print(f"{'case':48s} {'baseline s':>11s} {'this tree s':>11s} {'ratio':>7s}")
    for name, t in best["tree"].items():
        b = best["baseline"].get(name)
        ratio = t / b if b else float("nan")
        print(json.dumps({"case": name, "baseline_s": b, "tree_s": t, "ratio": ratio}), file=sys.stderr)
        print(f"{name:48s} {b:11.4f} {t:11.4f} {ratio:7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
