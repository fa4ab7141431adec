"""The semiring graph examples at small sizes, each checked against scipy / networkx."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import tcnumerics as tc

pytest.importorskip("scipy")
pytest.importorskip("networkx")
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("seed", range(4))
def test_apsp_by_min_plus_squaring_equals_scipy(seed):
    """The acceptance check: FP16 weights (inf: no arc) squared through semiring_matmul, values out."""
    from scipy.sparse.csgraph import shortest_path

    rng = np.random.default_rng(seed)
    n = int(rng.integers(10, 60))
    weights = rng.uniform(0.5, 20, size=(n, n)).astype(np.float16)
    D = np.where(rng.random((n, n)) < rng.uniform(0.05, 0.4), weights, np.inf).astype(np.float16)
    np.fill_diagonal(D, 0)
    X = D
    for _ in range(int(np.ceil(np.log2(n - 1)))):
        X = tc.semiring_matmul(X, X, op="min-plus")
    assert X.dtype == np.float32
    assert np.array_equal(X.astype(np.float64), shortest_path(D.astype(np.float64)))


@pytest.mark.parametrize("engine", ["auto", "reference"])
def test_example_apsp(engine):
    ex = load("semiring_apsp")
    D = ex.random_digraph(40, seed=1, density=0.08)
    dist = ex.shortest_paths(D, engine=engine)
    ref = ex.scipy_shortest_paths(D)
    assert np.isinf(ref).any() and np.isfinite(ref).sum() > 40  # some pairs unreachable, many reachable
    assert np.array_equal(dist.astype(np.float64), ref)
    assert np.array_equal(ex.squaring_by_hand(D), dist)


def test_example_critical_path():
    ex = load("semiring_critical_path")
    D = ex.random_dag(40, seed=2)
    L = ex.longest_paths(D)
    assert np.array_equal(L.astype(np.float64), ex.scipy_longest_paths(D))
    assert float(L.max()) == ex.networkx_critical_path(D) > 0


def test_example_max_capacity():
    ex = load("semiring_max_capacity")
    C = ex.random_network(30, seed=3)
    W = ex.widest_paths(C)
    assert np.array_equal(W.astype(np.float64), ex.networkx_widest_paths(C))
    assert (W[~np.eye(30, dtype=bool)] > 0).mean() > 0.5


def test_example_reliability():
    ex = load("semiring_reliability")
    P = ex.random_links(30, seed=4, dyadic=True)
    assert np.array_equal(ex.most_reliable(P).astype(np.float64), ex.scipy_reliability(P))
    P = ex.random_links(30, seed=4)
    R = ex.most_reliable(P).astype(np.float64)
    ref = ex.scipy_reliability(P)
    assert np.array_equal(R > 0, ref > 0)
    assert np.allclose(R, ref, rtol=2**-18, atol=0)


def test_example_mst():
    ex = load("semiring_mst")
    W = ex.random_graph(40, seed=5)
    forest = ex.minimum_spanning_forest(W)
    assert forest == ex.scipy_forest(W)
    assert sum(float(W[i, j]) for i, j in forest) == ex.networkx_weight(W)


@pytest.mark.parametrize("engine", ["auto", "reference"])
def test_example_transitive_closure(engine):
    ex = load("semiring_transitive_closure")
    R = ex.random_relation(60, seed=6)
    T = ex.reachability(R, engine=engine)
    assert np.array_equal(T, ex.networkx_reachability(R))
    assert T.sum() > 2 * R.sum()  # the closure adds pairs


def test_example_knn():
    from scipy.spatial.distance import cdist

    ex = load("semiring_knn")
    Q, X = ex.integer_points(20, 150, 12, seed=7)
    D = ex.squared_distances(Q, X)
    assert np.array_equal(D.astype(np.float64), cdist(Q.astype(np.float64), X.astype(np.float64), "sqeuclidean"))
    _, ours = ex.nearest(Q, X, 4)
    _, theirs = ex.scipy_nearest(Q, X, 4)
    assert np.array_equal(ours.astype(np.float64), theirs)
    # Gaussian data: the unit's distances are within a few FP32 ulps of the exact ones
    Q, X = ex.gaussian_points(20, 150, 12, seed=7)
    idx, dist = ex.nearest(Q, X, 4)
    exact = ((Q.astype(np.float64)[:, None, :] - X.astype(np.float64)[idx]) ** 2).sum(axis=2)
    assert np.all(dist <= exact) and np.allclose(dist, exact, rtol=2**-20, atol=0)  # truncation: never above
    ref_idx, _ = ex.scipy_nearest(Q, X, 4)
    assert (np.sort(idx, axis=1) == np.sort(ref_idx, axis=1)).all(axis=1).mean() >= 0.9


@pytest.mark.parametrize("name", ["semiring_apsp", "semiring_critical_path", "semiring_max_capacity",
                                  "semiring_reliability", "semiring_mst", "semiring_transitive_closure",
                                  "semiring_knn"])
def test_example_main_reports_success(name, capsys):
    sizes = {"semiring_knn": 120}
    assert load(name).main(sizes.get(name, 24), 0) == 0
    assert capsys.readouterr().out.strip()
