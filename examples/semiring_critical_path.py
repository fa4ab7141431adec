"""Critical path of a task graph by max-plus squaring, checked against networkx and scipy.

Run: python examples/semiring_critical_path.py [N] [SEED]     (needs networkx, scipy)

A random DAG: arc i -> j (i < j) with an FP16 duration, -inf for no arc, 0 on the
diagonal.  Max-plus squaring gives the longest path between every pair; the largest entry
is the critical path length (networkx ``dag_longest_path_length``), and every entry equals
minus scipy's shortest path on negated durations (Bellman-Ford; no cycles in a DAG).
"""

from __future__ import annotations

import sys

import numpy as np

from tcnumerics.semiring import semiring_closure


def random_dag(n: int, seed: int, density: float = 0.15) -> np.ndarray:
    """FP16 matrix of durations k/8 (k = 1..127) on arcs i -> j, i < j; -inf elsewhere, 0 on the diagonal."""
    rng = np.random.default_rng(seed)
    durations = (rng.integers(1, 128, size=(n, n)) / 8).astype(np.float16)
    arcs = np.triu(rng.random((n, n)) < density, k=1)
    D = np.where(arcs, durations, -np.inf).astype(np.float16)
    np.fill_diagonal(D, 0)
    return D


def longest_paths(D: np.ndarray, engine: str = "auto") -> np.ndarray:
    """Longest path length between every pair (FP32; -inf where j is not reachable from i)."""
    return semiring_closure(D, op="max-plus", engine=engine)


def networkx_critical_path(D: np.ndarray) -> float:
    import networkx as nx

    G = nx.DiGraph()
    G.add_nodes_from(range(len(D)))
    for i, j in zip(*np.nonzero(np.isfinite(D) & ~np.eye(len(D), dtype=bool))):
        G.add_edge(int(i), int(j), weight=float(D[i, j]))
    return float(nx.dag_longest_path_length(G, weight="weight"))


def scipy_longest_paths(D: np.ndarray) -> np.ndarray:
    from scipy.sparse.csgraph import shortest_path

    negated = np.where(np.isfinite(D), -D.astype(np.float64), 0.0)  # dense input: 0 marks a missing arc
    return -shortest_path(negated, method="BF")


def main(n: int = 150, seed: int = 0) -> int:
    D = random_dag(n, seed)
    L = longest_paths(D)
    critical = float(L.max())
    nx_len = networkx_critical_path(D)
    same = np.array_equal(L.astype(np.float64), scipy_longest_paths(D))
    print(f"{n} tasks: critical path {critical:g} (networkx {nx_len:g}); all pairs equal to scipy: {same}")
    return 0 if same and critical == nx_len else 1


if __name__ == "__main__":
    raise SystemExit(main(*(int(a) for a in sys.argv[1:3])))
