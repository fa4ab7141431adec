"""Maximum reliability paths by max-mul squaring, checked against scipy on -log2 reliabilities.

Run: python examples/semiring_reliability.py [N] [SEED]       (needs scipy)

Each link works with probability p (FP16; 0: no link, 1 on the diagonal); a path works
with the product of its links' probabilities.  Max-mul squaring finds the most reliable
path between every pair.  Two checks:

* dyadic reliabilities p = 2**-k: every product is exact, and the answer is exactly
  ``2**-d`` for scipy's shortest path d on the integer weights k;
* general reliabilities: products are rounded once per squaring (FP32, RNE), so the answer
  agrees with ``2**-d`` (scipy on -log2 p in float64) to a few FP32 ulps.
"""

from __future__ import annotations

import sys

import numpy as np

from tcnumerics.semiring import semiring_closure


def random_links(n: int, seed: int, density: float = 0.15, dyadic: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dyadic:
        p = 2.0 ** -rng.integers(0, 5, size=(n, n))
    else:
        p = rng.uniform(0.5, 1.0, size=(n, n))
    P = np.where(rng.random((n, n)) < density, p, 0).astype(np.float16)
    np.fill_diagonal(P, 1)
    return P


def most_reliable(P: np.ndarray, engine: str = "auto") -> np.ndarray:
    return semiring_closure(P, op="max-mul", engine=engine)


def scipy_reliability(P: np.ndarray) -> np.ndarray:
    """2**-(shortest path on -log2 p), in float64."""
    from scipy.sparse.csgraph import shortest_path

    p = P.astype(np.float64)
    with np.errstate(divide="ignore"):
        cost = -np.log2(p)
    # a masked array marks missing links, so a sure link (p = 1) stays an arc of cost 0
    d = shortest_path(np.ma.masked_array(cost, mask=p == 0), method="D")
    return np.where(np.isfinite(d), 2.0 ** -d, 0.0)


def main(n: int = 80, seed: int = 0) -> int:
    dyadic = random_links(n, seed, dyadic=True)
    exact = np.array_equal(most_reliable(dyadic).astype(np.float64), scipy_reliability(dyadic))
    P = random_links(n, seed)
    R = most_reliable(P).astype(np.float64)
    ref = scipy_reliability(P)
    rel = np.abs(R - ref) / np.where(ref > 0, ref, 1)
    print(f"{n} nodes: dyadic reliabilities equal to 2**-(scipy shortest path): {exact}; general reliabilities: "
          f"largest relative difference {rel.max():.2e} ({rel.max() / 2**-24:.1f} FP32 ulps)")
    return 0 if exact and rel.max() < 2**-18 else 1


if __name__ == "__main__":
    raise SystemExit(main(*(int(a) for a in sys.argv[1:3])))
