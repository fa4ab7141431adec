"""The unmeasured-shape launch predictor (src/tcnumerics/library/unseen.py), held out by (N, K) pair.

A small fixed sample of the table's model-projection launches, each predicted with its whole (N, K) pair
hidden: the new predictor must get more (epilogue, S) / kernel-class right than the current one
(``launches.bracketing_launches`` grid corners), as ``lab/device_library/fit_unseen.py`` finds at scale.
"""

import os
import sys
from functools import lru_cache

import pytest

from tcnumerics.library import launches, unseen
from tcnumerics.library.selection import Call

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "lab", "device_library"))

pytestmark = pytest.mark.skipif(not os.path.exists(launches.gpus.table_path("h100", "launches")),
                                reason="launch table not installed")
KINDS = ("matmul|bf16||bf16|0|0|plain|1|||0", "linear|fp16||fp16|0|1|bias|1|||0", "mm_out|fp16||fp32|0|0|plain|1|||0",
         "matmul|fp32||fp32|0|0|plain|1|high||0")


@lru_cache(maxsize=None)
def held_out() -> tuple[int, int, int]:
    """(launches, bits right by the current predictor, by unseen's) over 40 sampled launches per kind."""
    import fit_unseen as F

    gm, gnk = launches.table("h100")["grid"]
    n = old = new = 0
    for kind in KINDS:
        kd = unseen.kind_data(kind)
        rows, _ = F.test_rows(kd, set(gnk), 40, seed=1)
        index = {(int(m), int(nn), int(k)): j for j, (m, nn, k, b) in enumerate(zip(kd.M, kd.N, kd.K, kd.b)) if b == 1}
        for r in rows.tolist():
            M, N, K = int(kd.M[r]), int(kd.N[r]), int(kd.K[r])
            truth = F.bits_class(kd, int(kd.main[r]), int(kd.S[r]))
            cur = F.current(kd, index, (gm, gnk), M, N, K, kind.split("|")[0])
            j, S = unseen.predict_index(kd, M, N, K, 1, hide=(N, K))
            n += 1
            old += cur[0] >= 0 and F.bits_class(kd, *cur) == truth
            new += F.bits_class(kd, int(kd.main[j]), S) == truth
    return n, old, new


def test_beats_current_predictor_held_out_by_pair():
    n, old, new = held_out()
    assert n == 160
    assert new > old and new >= 0.75 * n, (n, old, new)


def test_measured_neighbours_of_a_hidden_pair_exclude_it():
    kd = unseen.kind_data(KINDS[0])
    idx, d = unseen.neighbours(kd, 64, 7168, 28672, 1, 16, 1.0, hide=(7168, 28672))
    assert len(idx) == 16 and not any((kd.N[i], kd.K[i]) == (7168, 28672) for i in idx)
    assert list(d) == sorted(d)


@pytest.mark.parametrize("kind", KINDS)
def test_pair_indexed_search_equals_the_scan_of_every_launch(kind):
    """``neighbours`` reads only the (N, K) pairs and M windows within the k-th distance; the scan reads all."""
    import numpy as np

    kd, rng = unseen.kind_data(kind), np.random.default_rng(7)
    for _ in range(25):
        j = int(rng.integers(len(kd.M)))
        M = max(1, int(kd.M[j]) + int(rng.integers(-9, 10)))
        N, K = int(kd.N[rng.integers(len(kd.M))]), int(kd.K[j])  # often an unmeasured (N, K) pair
        args = (kd, M, N, K, int(kd.b[j]), int(rng.integers(1, 17)), float(rng.choice([0.0, 0.5, 1.0, 4.0])),
                (N, K) if rng.random() < 0.5 else None, bool(rng.random() < 0.3), bool(rng.random() < 0.5))
        fast, scan = unseen.neighbours(*args), unseen.neighbours_by_scan(*args)
        assert len(fast[0]) == args[5]
        assert np.array_equal(fast[0], scan[0]) and np.array_equal(fast[1], scan[1]), args[1:]


def test_predicted_launch_is_consistent():
    c = Call("mm_out", "bf16", "fp32", 64, 7168, 19200)
    L = unseen.predict_launch(c, hide=(c.N, c.K))
    S = launches.nvjet_split_count(L, c)
    assert L.main.startswith("nvjet") and "splitK" in L.main and S and S > 1
    assert "splitKreduce" in L.text or L.in_place  # the voter's whole launch: reduction or in-place memset
    for i in range(5):  # the same call, the same prediction (speed: benchmarks, not tests)
        c = Call("matmul", "bf16", "bf16", 1 + 37 * i, 5000 + 8 * i, 7000)
        assert unseen.predict_launch(c) == unseen.predict_launch(c)


def test_unknown_kind_or_batch_gives_none():
    c = Call("bmm", "bf16", "bf16", 8, 64, 64, b=3, alpha=2.0)
    assert c.kind() not in launches.table("h100")["kinds"] and unseen.predict_launch(c) is None
    # no launch of that batch in the kind
    assert unseen.predict_launch(Call("matmul", "bf16", "bf16", 8, 1024, 1024, b=999)) is None
