"""Minimum spanning tree from min-max (minimax) squaring, checked against scipy and networkx.

Run: python examples/semiring_mst.py [N] [SEED]       (needs scipy, networkx)

Min-max squaring of an undirected weight matrix (+inf: no edge, -inf on the diagonal)
gives every pair's minimax distance: the least possible largest edge on a path between
them.  With distinct weights an edge belongs to the minimum spanning tree exactly when its
weight equals the minimax distance of its ends (the cycle property), so the tree falls out
of one comparison.
"""

from __future__ import annotations

import sys

import numpy as np

from tcnumerics.semiring import semiring_closure


def random_graph(n: int, seed: int, density: float = 0.2) -> np.ndarray:
    """Symmetric FP16 weights, all distinct (k/4 for distinct k); +inf: no edge; -inf on the diagonal."""
    rng = np.random.default_rng(seed)
    iu = np.triu_indices(n, k=1)
    weights = (rng.permutation(len(iu[0])) + 1) / 4  # distinct multiples of 1/4, exact in FP16 up to 512
    keep = rng.random(len(iu[0])) < density
    W = np.full((n, n), np.inf)
    W[iu[0][keep], iu[1][keep]] = weights[keep]
    W = np.minimum(W, W.T).astype(np.float16)
    np.fill_diagonal(W, -np.inf)
    return W


def minimum_spanning_forest(W: np.ndarray, engine: str = "auto") -> set[tuple[int, int]]:
    """Edges (i < j) of the minimum spanning forest."""
    minimax = semiring_closure(W, op="min-max", engine=engine)
    edges = np.isfinite(W) & (W.astype(np.float64) == minimax) & np.triu(np.ones(W.shape, bool), k=1)
    return {(int(i), int(j)) for i, j in zip(*np.nonzero(edges))}


def scipy_forest(W: np.ndarray) -> set[tuple[int, int]]:
    from scipy.sparse.csgraph import minimum_spanning_tree

    dense = np.where(np.isfinite(W), W.astype(np.float64), 0.0)  # dense input: 0 marks no edge
    tree = minimum_spanning_tree(np.triu(dense)).tocoo()
    return {(min(int(i), int(j)), max(int(i), int(j))) for i, j in zip(tree.row, tree.col)}


def networkx_weight(W: np.ndarray) -> float:
    import networkx as nx

    G = nx.Graph()
    for i, j in zip(*np.nonzero(np.isfinite(W) & np.triu(np.ones(W.shape, bool), k=1))):
        G.add_edge(int(i), int(j), weight=float(W[i, j]))
    return float(sum(d["weight"] for _, _, d in nx.minimum_spanning_edges(G, data=True)))


def main(n: int = 100, seed: int = 0) -> int:
    W = random_graph(n, seed)
    forest = minimum_spanning_forest(W)
    weight = sum(float(W[i, j]) for i, j in forest)
    same = forest == scipy_forest(W)
    print(f"{n} nodes: {len(forest)} tree edges of total weight {weight:g} (networkx {networkx_weight(W):g}); "
          f"same edges as scipy: {same}")
    return 0 if same and weight == networkx_weight(W) else 1


if __name__ == "__main__":
    raise SystemExit(main(*(int(a) for a in sys.argv[1:3])))
