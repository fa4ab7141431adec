"""Transitive closure (reachability) by or-and squaring, checked against networkx.

Run: python examples/semiring_transitive_closure.py [N] [SEED]        (needs networkx)
"""

from __future__ import annotations

import sys

import numpy as np

from tcnumerics.semiring import semiring_closure


def random_relation(n: int, seed: int, density: float | None = None) -> np.ndarray:
    """A sparse random digraph as a boolean matrix, reflexive (True on the diagonal)."""
    rng = np.random.default_rng(seed)
    R = rng.random((n, n)) < (density if density is not None else 1.2 / n)
    np.fill_diagonal(R, True)
    return R


def reachability(R: np.ndarray, engine: str = "auto") -> np.ndarray:
    return semiring_closure(R, op="or-and", engine=engine)


def networkx_reachability(R: np.ndarray) -> np.ndarray:
    import networkx as nx

    G = nx.DiGraph()
    G.add_nodes_from(range(len(R)))
    G.add_edges_from((int(i), int(j)) for i, j in zip(*np.nonzero(R)) if i != j)
    T = nx.transitive_closure(G, reflexive=True)
    out = np.zeros(R.shape, bool)
    for i, j in T.edges():
        out[i, j] = True
    return out


def main(n: int = 300, seed: int = 0) -> int:
    R = random_relation(n, seed)
    T = reachability(R)
    same = np.array_equal(T, networkx_reachability(R))
    print(f"{n} nodes, {int(R.sum()) - n} arcs: {int(T.sum())} reachable pairs; equal to networkx: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main(*(int(a) for a in sys.argv[1:3])))
