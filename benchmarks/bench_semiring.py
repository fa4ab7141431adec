"""Semiring operations: the fast (numba) engine against a plain numpy baseline, in one process.

Run: python benchmarks/bench_semiring.py [SIZE] [REPEATS]      (default 384, best of 3)

For each operation on SIZE x SIZE x SIZE FP16 operands, prints the best wall time of
* numpy   -- the baseline: the obvious float64 numpy expression (broadcast ⊗, reduce over k,
             in row blocks; no unit numerics: a speed yardstick, not a model),
* fast    -- tcnumerics' numba kernels (bit-exact model, rounding included),
* reference -- tcnumerics' numpy specification engine,
and the ratios baseline/fast and baseline/reference (> 1: faster than numpy).
mul-plus is the catalogued Hopper unit through tcnumerics.gemm (engine "auto"), shown
beside the other ops so that "same speed class" can be read off.  The first call of each
engine is a warm-up (numba compiles or loads its cache there) and is not timed.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import tcnumerics as tc

BLOCK = 1 << 21  # elements per broadcast block in the baseline


def numpy_baseline(op: str, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    a, b = A.astype(np.float64), B.astype(np.float64)
    if op == "mul-plus":
        return a @ b
    if op == "or-and":
        return (a != 0).astype(np.float32) @ (b != 0).astype(np.float32) > 0
    combine = {"plus": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}
    reduce, _, rest = op.partition("-")
    out = np.empty((a.shape[0], b.shape[1]))
    rows = max(1, BLOCK // (a.shape[1] * b.shape[1]))
    for r0 in range(0, a.shape[0], rows):
        x = a[r0:r0 + rows, :, None]
        if op == "plus-norm":
            t = (x - b[None]) ** 2
            out[r0:r0 + rows] = t.sum(axis=1)
        else:
            t = combine[rest](x, b[None])
            out[r0:r0 + rows] = t.min(axis=1) if reduce == "min" else t.max(axis=1)
    return out.astype(np.float32)


def best_of(fn, repeats: int) -> float:
    fn()  # warm-up: numba compiles or loads its cache here
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(size: int = 384, repeats: int = 3) -> int:
    rng = np.random.default_rng(0)
    A = rng.uniform(0.5, 2, size=(size, size)).astype(np.float16)
    B = rng.uniform(0.5, 2, size=(size, size)).astype(np.float16)
    print(f"{size} x {size} x {size}, FP16 operands, best of {repeats}")
    print(f"{'op':<10} {'numpy':>9} {'fast':>9} {'reference':>10} {'numpy/fast':>11} {'numpy/ref':>10}")
    for op in tc.semiring.op_names():
        base = best_of(lambda: numpy_baseline(op, A, B), repeats)
        fast = best_of(lambda: tc.semiring_matmul(A, B, op=op, engine="fast" if op != "mul-plus" else "auto"),
                       repeats)
        ref = best_of(lambda: tc.semiring_matmul(A, B, op=op, engine="reference"), 1) if size <= 256 or \
            op not in ("plus-norm", "mul-plus") else float("nan")
        print(f"{op:<10} {base:9.4f} {fast:9.4f} {ref:10.4f} {base / fast:11.2f} {base / ref:10.2f}")
    print("(reference timings above 256 are skipped for mul-plus and plus-norm, whose exact "
          "integer reference takes minutes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*(int(a) for a in sys.argv[1:3])))
