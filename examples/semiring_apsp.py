"""All-pairs shortest paths by min-plus squaring on the SIMD2 model, checked against scipy.

Run: python examples/semiring_apsp.py [N] [SEED]        (default 200 nodes; needs scipy)

Distances start as FP16 edge weights (+inf: no edge, 0 on the diagonal); each squaring
``D <- min_k (D[i,k] + D[k,j])`` is exact sums, exact min, one rounding to FP32, and the
FP32 result is fed back as it is.  The answer equals scipy's float64 Dijkstra bit for bit
whenever every shortest-path length is an FP32 number -- here the weights are multiples of
1/16 below 16, so any path of fewer than 2**20 edges qualifies.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import tcnumerics as tc
from tcnumerics.semiring import semiring_closure


def random_digraph(n: int, seed: int, density: float = 0.1) -> np.ndarray:
    """FP16 distance matrix: weights k/16 (k = 1..255) on a random ~``density`` of the arcs."""
    rng = np.random.default_rng(seed)
    weights = (rng.integers(1, 256, size=(n, n)) / 16).astype(np.float16)
    D = np.where(rng.random((n, n)) < density, weights, np.inf).astype(np.float16)
    np.fill_diagonal(D, 0)
    return D


def shortest_paths(D: np.ndarray, engine: str = "auto") -> np.ndarray:
    """All-pairs shortest path lengths (FP32) by repeated min-plus squaring."""
    return semiring_closure(D, op="min-plus", engine=engine)


def scipy_shortest_paths(D: np.ndarray) -> np.ndarray:
    from scipy.sparse.csgraph import shortest_path

    return shortest_path(D.astype(np.float64), method="D")  # dense input: inf marks a missing arc


def squaring_by_hand(D: np.ndarray) -> np.ndarray:
    """The same as :func:`shortest_paths`, spelled out with ``tcnumerics.semiring_matmul``."""
    for _ in range(int(np.ceil(np.log2(max(len(D) - 1, 2))))):
        D = tc.semiring_matmul(D, D, op="min-plus")
    return D


def main(n: int = 200, seed: int = 0) -> int:
    D = random_digraph(n, seed)
    t0 = time.perf_counter()
    dist = shortest_paths(D)
    t1 = time.perf_counter()
    ref = scipy_shortest_paths(D)
    same = np.array_equal(dist.astype(np.float64), ref)
    reachable = np.isfinite(ref)
    print(f"{n} nodes, {int(np.isfinite(D).sum()) - n} arcs: min-plus closure in {t1 - t0:.2f} s; "
          f"{int(reachable.sum())} reachable pairs, longest shortest path {ref[reachable].max():g}")
    print(f"equal to scipy.sparse.csgraph.shortest_path bit for bit: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main(*(int(a) for a in sys.argv[1:3])))
