"""The measured launch table (src/tcnumerics/library/launches.py) and the plans selection builds from it.

Replays use the bit captures of calls whose launches the table holds: the kernel-survey sample
(hopper_op_ksample_h100.npz) and the unseen-model holdout (hopper_op_holdout3_h100.npz, whose bits are
not in h100_measured.json).  Replays are 8 x 8 of the sampled outputs and K <= 16384 (CI time).
"""

import os
import sys
import zlib
from functools import lru_cache

import pytest

from tcnumerics.library import launches, select, unseen
from tcnumerics.library.cutlass_half import tile_slices
from tcnumerics.library.selection import Call, _bracketed, measured_table

HERE = os.path.dirname(__file__)
VEC = os.path.join(HERE, "..", "vectors", "library")
KSAMPLE = os.path.join(VEC, "hopper_op_ksample_h100.npz")
HOLDOUT3 = os.path.join(VEC, "hopper_op_holdout3_h100.npz")
KSAMPLE2 = os.path.join(VEC, "hopper_op_ksample2_h100.npz")  # bits for the second survey's kinds (transposed, addmm C, ...)
sys.path.insert(0, os.path.join(HERE, "..", "lab", "device_library"))

H100_TABLE = launches.gpus.table_path("h100", "launches")
needs_table = pytest.mark.skipif(not os.path.exists(H100_TABLE), reason="launch table not installed")
pytestmark = needs_table
MAX_K = 16384


@lru_cache(maxsize=None)
def _capture(path):
    from replay_survey import load

    return load(path)


def _records(path):
    if not os.path.exists(path):
        return []
    index, _ = _capture(path)
    return [r for r in index["records"] if "error" not in r]


def _record(path, call_id):
    return next(r for r in _records(path) if r["id"] == call_id)


def _by_crc(recs):
    return sorted(recs, key=lambda r: zlib.crc32(str(r["id"]).encode()))


# --- the table itself ---------------------------------------------------------------------------------------

def test_table_loads_with_the_survey_launches():
    assert launches.launch_count() > 300_000


def test_table_lists_every_kind_before_any_is_loaded():
    """The kinds load on first use; listing them must not depend on which were used (fit_unseen.py once found
    none: a dict iterates only the entries it holds)."""
    import numpy as np

    fresh = launches.load_table(H100_TABLE)
    with np.load(H100_TABLE, allow_pickle=False) as z:
        stored = [str(k) for k in z["kinds"]]
    assert list(fresh["kinds"]) == list(fresh["kinds"].keys()) == stored and len(fresh["kinds"]) == len(stored)
    assert stored[0] in fresh["kinds"] and "no|such|kind" not in fresh["kinds"]
    first = next(iter(fresh["kinds"].items()))
    assert first[0] == stored[0] and first[1].points()[0].size > 0



def test_a_written_table_reads_back_to_the_same_launches(tmp_path):
    """``write_table``'s file, read by ``load_table``, gives every launch written (CTAs, grid z, kernels) and no
    other: a token count inside a run but off its step stays unmeasured.  ``write_runs`` over kind-by-kind
    encoded runs (fold_gpu.py's way) writes the same members."""
    import numpy as np

    nvjet = "nvjet_sm90_tst_64x16_64x16_1x2_h_bz_splitK_TNT | splitKreduce_kernel"
    cutlass = "Memset (Device) | cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4"
    lin = Call("linear", "bf16", "bf16", 1, 1024, 14336, b_t=True)
    bmm = Call("bmm", "fp32", "fp32", 1, 64, 128, b=12)
    rows = [(lin, m, 1024, 14336, 1, 0, 8 * launches.nvjet_tiles(nvjet, Call("linear", "bf16", "bf16", m, 1024,
                                                                                  14336)), 1) for m in (16, 32, 48, 64)]
    rows += [(lin, 16, 4096, 4096, 1, 1, 96, 3), (lin, 20, 4096, 4096, 1, 1, 96, 3)]
    rows += [(bmm, m, 64, 128, 12, 1, 12, 1) for m in (1, 2, 3, 8)]
    cols = dict(kind=np.array([r[0].kind() for r in rows], object), M=np.array([r[1] for r in rows]),
                N=np.array([r[2] for r in rows]), K=np.array([r[3] for r in rows]), b=np.array([r[4] for r in rows]),
                sig=np.array([r[5] for r in rows]), ctas=np.array([r[6] for r in rows]),
                gz=np.array([r[7] for r in rows]))
    path = str(tmp_path / "t.npz")
    counts = launches.write_table(path, cols, [nvjet, cutlass], "test", grid=([1, 16], [64, 128]))
    assert counts == dict(launches=10, runs=4, kinds=2, signatures=2)  # bmm: M 1, 2, 3 and 8
    t = launches.load_table(path)
    assert t["launch_count"] == 10 and t["grid"] == ([1, 16], [64, 128]) and t["signatures"] == [nvjet, cutlass]
    for call, M, N, K, b, sig, ctas, gz in rows:
        got = launches.launch_in(t, Call(call.op, call.fmt, call.out, M, N, K, b=b, b_t=call.b_t))
        assert got == launches.Launch(tuple([nvjet, cutlass][sig].split(" | ")), ctas, gz)
    assert launches.launch_in(t, Call("linear", "bf16", "bf16", 24, 1024, 14336, b_t=True)) is None  # off the step
    assert launches.launch_in(t, Call("bmm", "fp32", "fp32", 5, 64, 128, b=12)) is None  # between two runs

    kinds = sorted(set(cols["kind"].tolist()))
    runs = [launches.encode_runs(np.full(int(s.sum()), k), *(cols[f][s] for f in ("N", "K", "b", "M", "sig", "ctas",
                                                                                  "gz")), [nvjet, cutlass])
            for k, s in ((k, cols["kind"] == kind) for k, kind in enumerate(kinds))]
    merged = {f: np.concatenate([r[f] for r in runs]) for f in runs[0]}
    launches.write_runs(str(tmp_path / "r.npz"), kinds, [nvjet, cutlass], merged, "test", grid=([1, 16], [64, 128]))
    with np.load(path, allow_pickle=False) as a, np.load(str(tmp_path / "r.npz"), allow_pickle=False) as b:
        assert sorted(a.files) == sorted(b.files)
        for f in a.files:
            assert a[f].dtype == b[f].dtype and np.array_equal(a[f], b[f]), f

def test_short_m_long_k_linear_reads_split_8_off_the_grid():
    c = Call("linear", "bf16", "bf16", 16, 1024, 14336, b_t=True)
    L = launches.measured_launch(c)
    assert L is not None
    assert L.main.startswith("nvjet_sm90") and "splitK" in L.main, L.text
    assert "splitKreduce" in L.text and not L.in_place
    tiles = launches.nvjet_tiles(L.main, c)
    assert tiles == 16 and L.ctas == 128, (tiles, L.ctas)
    assert launches.nvjet_split_count(L, c) == 8
    plan = select(c)
    assert plan.modelled and len(plan.structure.split_k) == 8 and sum(plan.structure.split_k) == 14336


def test_bias_is_a_different_launch_kind():
    plain = launches.measured_launch(Call("linear", "bf16", "bf16", 16, 1024, 14336, b_t=True))
    bias = launches.measured_launch(Call("linear", "bf16", "bf16", 16, 1024, 14336, b_t=True, bias=True))
    assert "_bias_" in bias.main and "_bias_" not in plain.main


@pytest.mark.parametrize("call", [Call("matmul", "bf16", "bf16", 4096, 4096, 4096),
                                  Call("linear", "bf16", "bf16", 4096, 4096, 4096, b_t=True)])
def test_large_call_is_unsplit_and_modelled(call):
    L = launches.measured_launch(call)
    assert L is not None and L.main.startswith("nvjet_sm90") and "splitK" not in L.main, L and L.text
    assert launches.nvjet_split_count(L, call) == 1
    plan = select(call)
    assert plan.modelled and plan.structure.split_k is None, plan.describe()


def test_launch_only_split_call_is_modelled_from_the_grid():
    """A split call that is in the launch table but not in the bit table: S comes from the grid alone."""
    c = Call("linear", "bf16", "bf16", 64, 1024, 14336, b_t=True)
    assert c.key() not in measured_table()["calls"]
    L = launches.measured_launch(c)
    S = launches.nvjet_split_count(L, c)
    assert S == L.ctas // launches.nvjet_tiles(L.main, c) and S > 1, (L.main, L.ctas, S)
    plan = select(c)
    sk = plan.structure.split_k  # S slices of whole 64-element K-tiles, the last one shorter (cut at K)
    assert plan.modelled and len(sk) == S and sum(sk[:-1]) < c.K <= sum(sk) and sk[0] % 64 == 0, plan.describe()
    assert plan.reason.startswith("launch measured"), plan.reason


def test_unreadable_grid_gives_no_split_count():
    c = Call("linear", "bf16", "bf16", 16, 1024, 14336, b_t=True)
    name = "nvjet_sm90_tst_64x16_64x16_2x1_v_bz_splitK_TNT"
    assert launches.nvjet_split_count(launches.Launch((name,), 130, 1), c) is None  # 130 CTAs over 16 tiles
    assert launches.nvjet_split_count(launches.Launch((name,), 16, 1), c) is None  # one CTA per tile: S < 2
    assert launches.nvjet_split_count(launches.Launch((name,), 48, 1), c) == 3
    assert launches.nvjet_tiles("void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>", c) is None


# --- calls outside the table ----------------------------------------------------------------------------------

ABSENT = [
    Call("linear", "bf16", "bf16", 1339, 4608, 18432, b_t=True),
    Call("linear", "bf16", "bf16", 19, 4096, 49152, b_t=True),  # (N, K) on the dense grid, M between its token counts
    Call("linear", "fp16", "fp16", 7, 1032, 20000, b_t=True, bias=True),
    Call("linear", "bf16", "bf16", 1339, 4608, 1544, b_t=True),  # short K: the no-split frontier may model it
    Call("matmul", "bf16", "bf16", 1339, 4608, 5000),
]


@pytest.mark.parametrize("call", ABSENT, ids=lambda c: f"{c.op}-{c.fmt}-{c.M}x{c.N}x{c.K}")
def test_unmeasured_call_is_predicted_and_flagged(call):
    assert launches.measured_launch(call) is None
    assert call.key() not in measured_table()["calls"]
    plan = select(call)
    if plan.modelled:  # only the short-K frontier of BF16/FP16/FP8 may model an unmeasured call
        assert call.K < 3072 and call.fmt in ("bf16", "fp16", "e4m3", "e5m2") and plan.structure.split_k is None, \
            plan.describe()
    else:
        assert "predicted" in plan.reason, plan.reason
    n = len(plan.structure.split_k or ()) or 1
    if _bracketed(call) or plan.modelled:  # agreeing launches of the same (N, K) on both sides of M (or the frontier)
        S, how = launches.predicted_nvjet_split(call)
        assert isinstance(S, int) and S >= 1 and how, (S, how)
    else:  # no agreeing bracket: the k-NN predicted launch (unseen.py)
        launch = unseen.predict_launch(call)
        S, how = launches.nvjet_split_count(launch, call), launch.main
        assert "unseen.py" in plan.reason, plan.reason
    assert n == (len(tile_slices(call.K, S, 64) or ()) or 1), (plan.describe(), S, how)


def test_unmeasured_split_call_predicted_from_its_neighbours():
    c = Call("linear", "bf16", "bf16", 19, 4096, 49152, b_t=True)  # a dense-grid pair measured at M = 16 and 20, not 19
    near, how = launches.bracketing_launches(c)
    assert len(near) == 2 and all(L is not None for _, L in near) and how, (near, how)
    assert sorted(cc.M for cc, _ in near)[0] < 19 < sorted(cc.M for cc, _ in near)[1]
    S, how = launches.predicted_nvjet_split(c)
    assert S > 1 and "agree" in how, (S, how)
    plan = select(c)
    assert not plan.modelled and "predicted" in plan.family and len(plan.structure.split_k) == S, plan.describe()
    (cc, L), how = launches.nearest_launch(c)
    assert L is not None and cc.N == c.N and cc.K == c.K and cc.M != c.M


# --- bit replays ------------------------------------------------------------------------------------------------

def _ksample_modelled(n):
    from fit_table import call_of

    picked = []
    for r in _by_crc(_records(KSAMPLE)):
        if r["K"] <= MAX_K and select(call_of(r)).modelled:
            picked.append(r["id"])
        if len(picked) == n:
            break
    return picked


@pytest.mark.parametrize("call_id", _ksample_modelled(12))
def test_ksample_modelled_calls_replay_bit_exactly(call_id):
    from fit_table import call_of
    from replay_survey import replay

    index, data = _capture(KSAMPLE)
    rec = _record(KSAMPLE, call_id)
    assert launches.measured_launch(call_of(rec)) is not None  # the sample is drawn from the launch table
    res = replay(rec, data, side=8)
    assert res["modelled"] and res["exact"], res


def _any_ids(n):
    return [(path, r["id"]) for path in (KSAMPLE, HOLDOUT3, KSAMPLE2)
            for r in _by_crc([r for r in _records(path) if r["K"] <= MAX_K])[:n]]


@pytest.mark.parametrize("path,call_id", _any_ids(16), ids=lambda v: os.path.basename(str(v)).split("_")[2]
                         if str(v).endswith(".npz") else str(v))
def test_no_silent_miss(path, call_id):
    """Modelled plans replay bit-exactly; an inexact replay must be flagged not modelled."""
    from replay_survey import replay

    index, data = _capture(path)
    res = replay(_record(path, call_id), data, side=8)
    assert res["exact"] or not res["modelled"], res


def _simt_split_ids():
    from fit_table import call_of

    ids = []
    for r in _records(KSAMPLE):
        if r["fmt"] != "fp32" or r["K"] > MAX_K:
            continue
        L = launches.measured_launch(call_of(r))
        if L and "cutlass_80_simt_sgemm" in L.main and "splitKreduce" in L.text and L.grid_z > 1:
            ids.append(r["id"])
    return ids


def test_fp32_simt_split_k_from_grid_z():
    from fit_table import call_of
    from replay_survey import replay

    ids = _simt_split_ids()
    if not ids:
        pytest.skip("no CUTLASS SIMT sgemm + splitKreduce launch with grid z > 1 among the ksample calls")
    index, data = _capture(KSAMPLE)
    for call_id in ids:
        rec = _record(KSAMPLE, call_id)
        c = call_of(rec)
        L = launches.measured_launch(c)
        plan = select(c)
        assert plan.modelled and plan.structure.split_k is not None, (call_id, plan.describe())
        assert len(plan.structure.split_k) == L.grid_z and sum(plan.structure.split_k) >= c.K, \
            (call_id, L.grid_z, plan.structure.split_k)
        res = replay(rec, data, side=8)
        assert res["exact"] and res["modelled"], res


# --- the call kind ----------------------------------------------------------------------------------------------

def test_kind_ignores_shape_only():
    a = Call("linear", "bf16", "bf16", 16, 1024, 14336, b_t=True)
    assert a.kind() == Call("linear", "bf16", "bf16", 4096, 4608, 18432, b_t=True).kind()
    assert Call("bmm", "bf16", "bf16", 8, 8, 64, b=4).kind() == Call("bmm", "bf16", "bf16", 64, 128, 64, b=32).kind()
    assert a.kind() != Call("linear", "bf16", "bf16", 16, 1024, 14336, b_t=True, bias=True).kind()
    assert a.kind() != Call("linear", "fp16", "fp16", 16, 1024, 14336, b_t=True).kind()
    mm = Call("addmm", "bf16", "bf16", 16, 1024, 4096)
    assert mm.kind() != Call("addmm", "bf16", "bf16", 16, 1024, 4096, c_kind="row", beta=1.0).kind()  # bias
    assert Call("addmm", "bf16", "bf16", 16, 1024, 4096, c_kind="full", beta=1.0).kind() != \
        Call("addmm", "bf16", "bf16", 16, 1024, 4096, c_kind="full", beta=0.5).kind()  # badd vs bx
    assert mm.kind() != Call("addmm", "bf16", "bf16", 16, 1024, 4096, alpha=2.0).kind()


def test_launch_lookup_is_by_exact_kind_and_shape():
    from dataclasses import replace

    c = Call("linear", "bf16", "bf16", 16, 1024, 14336, b_t=True)
    assert launches.measured_launch(c) is not None
    assert launches.measured_launch(replace(c, op="lineer")) is None  # an op torch does not have
    assert launches.measured_launch(replace(c, N=1025)) is None  # an unsurveyed shape of a surveyed kind
    assert launches.measured_launch(replace(c, b=2)) is None  # linear is never batched in the table


def test_short_k_frontier_never_models_a_surveyed_split():
    """With its launch hidden, no surveyed split or non-nvjet BF16/FP16/FP8 launch below K = 3072 may be modelled
    by the no-split frontier (it was, at K = 2816, before the bound came down to 2560: 531 would-be silent misses; the
    dense surveys found 3,373 at K = 2688, 2816 and 2944 under that old bound, none below 2561)."""
    from check_frontier import frontier_violations

    checked, bad = frontier_violations(every=16)  # all 1,023,152: check_frontier.py (0 modelled, docs/gemm.md)
    assert checked > 30000
    assert not bad, bad[:5]


def test_short_k_frontier_check_finds_the_old_bound(monkeypatch):
    from check_frontier import frontier_violations
    from tcnumerics.library import choice

    monkeypatch.setattr(choice, "SHORT_K", 3072)
    _, bad = frontier_violations(every=16)  # the same sample as above (built once)
    assert bad and 2816 in {row[3] for row in bad} and {row[3] for row in bad} <= {2688, 2816, 2944}
