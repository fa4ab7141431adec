"""Maximum capacity (widest) paths by max-min squaring, checked against networkx.

Run: python examples/semiring_max_capacity.py [N] [SEED]      (needs networkx)

An undirected network with FP16 link capacities (0: no link, +inf on the diagonal).
Max-min squaring gives, for every pair, the largest bottleneck capacity over all paths.
The check uses a classical fact: the widest path between two nodes runs along a maximum
spanning tree, so its capacity is the smallest capacity on the tree path.
"""

from __future__ import annotations

import sys

import numpy as np

from tcnumerics.semiring import semiring_closure


def random_network(n: int, seed: int, density: float = 0.15) -> np.ndarray:
    rng = np.random.default_rng(seed)
    capacity = rng.uniform(0.5, 100, size=(n, n)).astype(np.float16)
    links = np.triu(rng.random((n, n)) < density, k=1)
    C = np.where(links, capacity, 0).astype(np.float16)
    C = np.maximum(C, C.T)
    np.fill_diagonal(C, np.inf)
    return C


def widest_paths(C: np.ndarray, engine: str = "auto") -> np.ndarray:
    return semiring_closure(C, op="max-min", engine=engine)


def networkx_widest_paths(C: np.ndarray) -> np.ndarray:
    import networkx as nx

    n = len(C)
    G = nx.Graph()
    G.add_nodes_from(range(n))
    for i, j in zip(*np.nonzero(np.triu(C > 0, k=1))):
        G.add_edge(int(i), int(j), weight=float(C[i, j]))
    tree = nx.maximum_spanning_tree(G)
    W = np.zeros((n, n))
    np.fill_diagonal(W, np.inf)
    for source, paths in nx.all_pairs_shortest_path(tree):
        for target, path in paths.items():
            if target != source:
                W[source, target] = min(tree[u][v]["weight"] for u, v in zip(path, path[1:]))
    return W


def main(n: int = 80, seed: int = 0) -> int:
    C = random_network(n, seed)
    W = widest_paths(C)
    same = np.array_equal(W.astype(np.float64), networkx_widest_paths(C))
    print(f"{n} nodes: widest-path capacities equal to the maximum-spanning-tree bottlenecks: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main(*(int(a) for a in sys.argv[1:3])))
