"""cuBLAS's SIMT kernels (gemmSN, gemvx, gemvNSP, gemv2T, sgemm_largek): captured H100 calls replayed bit for bit.

Every captured call whose main kernel ``library.simt`` models (the committed capture files, the sealed
holdout5 left out) is replayed on a corner of its sampled outputs (``SIDE`` rows x columns) with the kernel
name the profiler recorded and, for gemvx and largek, the lanes / slices its measured launch gives; the
structures were found with ``lab/device_library/probe_simt.py`` (captures) and
``lab/device_library/probe_simt_device.py`` (FPRev device probe).  The order tests build inputs whose
FP32 result tells the identified order from its nearest alternatives.
"""

import glob
import json
import os
import sys

import numpy as np
import pytest

import tcnumerics as tc
from tcnumerics.library.simt import family, gemmsn_nn_tiles, gemvx_lanes, is_simt_kernel, modelled, parse, simt_reduce
from tcnumerics.library.structure import simt_gemm

HERE = os.path.dirname(__file__)
CAPTURES = sorted(p for p in glob.glob(os.path.join(HERE, "..", "vectors", "library", "hopper_op_*_h100.npz"))
                  if "holdout5" not in p)  # sealed held-out set: never opened here
sys.path.insert(0, os.path.join(HERE, "..", "lab", "device_library"))
SIDE = 4
BIG = 2.0 ** 24  # 2**24 + 1 rounds back to 2**24 (a tie to even): a 1.0 added to it is lost


def _calls():
    out = []
    for path in CAPTURES:
        with np.load(path, allow_pickle=False) as z:
            records = json.loads(str(z["meta"]))["records"]
        for r in records:
            if "error" in r:
                continue
            name = next((k for k in r["kernels"] if is_simt_kernel(k)), None)
            if name is not None:
                out.append((path, r, name))
    return out


CALLS = _calls()


def _survey_launch(path, r, name):
    """The launch the capture's own kernel survey recorded for this call (``kernel_survey_h100/<set>.json.gz``,
    grids from ``graph_survey.py``), for a call the launch table does not hold."""
    import gzip
    from types import SimpleNamespace

    stem = os.path.basename(path)[len("hopper_op_"):-len("_h100.npz")]
    survey = os.path.join(HERE, "..", "vectors", "library", "kernel_survey_h100", f"{stem}.json.gz")
    if not os.path.exists(survey):
        return None
    with gzip.open(survey) as fh:
        d = json.load(fh)
    for index, grid, _ in d["calls"].get(str(r["id"]), []):
        if d["names"][index] == name or d["names"][index].startswith(name[:60]):
            return SimpleNamespace(ctas=int(np.prod(grid)), grid_z=int(grid[2]))
    return None


def _geometry(path, r, name):
    """(lanes, slices) of the call's measured launch (gemvx, largek); (None, 1) otherwise."""
    fam = family(name)
    if fam not in ("gemvx_N", "gemvx_T", "largek"):
        return None, 1
    from fit_table import call_of
    from tcnumerics.library.launches import measured_launch

    L = measured_launch(call_of(r)) or _survey_launch(path, r, name)
    if fam == "largek":
        return None, L.grid_z
    split = any("splitKreduce" in k for k in r["kernels"])
    n_out = r["N"] if r["M"] == 1 else r["M"]
    return gemvx_lanes(name, n_out, L.ctas // L.grid_z), L.grid_z if split else 1


def _replay(path, r, name):
    from replay_survey import load, operands

    _, data = load(path)
    ops = operands(r, data, side=SIDE)
    fmt = tc.get_format(r["out"])
    lanes, slices = _geometry(path, r, name)
    got = []
    for b in range(len(ops["batches"])):
        C = ops["C"][b] if ops["C"] else None
        y = simt_gemm(name, ops["A"][b], ops["B"][b], out_format=r["out"], alpha=float(r.get("alpha", 1) or 1),
                      beta=float(r.get("beta", 0) or 0), C=C, bias=ops["bias"], lanes=lanes, slices=slices)
        got.append(fmt.bits_of(np.asarray(y, np.float64)))
    return np.stack(got).reshape(ops["expected"].shape), ops["expected"]


def _count(fam, fp32_only=False):
    return sum(family(n) == fam and (r["out"] == "fp32" or not fp32_only) for _, r, n in CALLS)


def test_every_captured_simt_call_is_collected():
    assert _count("gemmSN_NN") + _count("gemmSN_TN") >= 30 and _count("gemmSN_TN") >= 7
    assert _count("gemvx_N") >= 15 and _count("gemvx_N", True) >= 11
    assert _count("gemvx_T") >= 6 and _count("gemvx_T", True) >= 4
    assert _count("gemvNSP", True) >= 2 and _count("gemv2T") >= 2 and _count("largek", True) >= 5
    # the unidentified gemvx instantiation (first flag true, std::enable_if<true>) stays out
    assert not is_simt_kernel("std::enable_if<true, void>::type internal::gemvx::kernel<int, int, __nv_bfloat16, "
                              "__nv_bfloat16, __nv_bfloat16, float, true, true, false, false, 7, false, x>")


# captured calls the structures do not reproduce yet (the library flags them: not silent); strict, so a fix shows
_LANES16 = "gemvx at 16 lanes, K = 200..257: no run length reproduces it"
_NSP = "gemvNSP at K = 100..129: only K <= 64 identified"
UNREPRODUCED = {("narrow_bits", 15): _LANES16, ("narrow_bits", 16): _LANES16, ("narrow_bits", 17): _LANES16,
                ("narrow_bits", 18): _LANES16, ("narrow_bits", 56): _NSP, ("narrow_bits", 57): _NSP,
                ("narrow_bits", 58): _NSP,
                ("holdout13", 181): "gemvx + splitKreduce at 16 lanes, 3 slices of K = 4096"}


def _params():
    out = []
    for p, r, n in CALLS:
        key = (os.path.basename(p)[10:-9], r["id"])
        marks = [pytest.mark.xfail(strict=True, reason=UNREPRODUCED[key])] if key in UNREPRODUCED else []
        out.append(pytest.param(p, r, n, marks=marks, id=f"{family(n)}-{key[0]}#{key[1]}"))
    return out


@pytest.mark.parametrize("path,r,name", _params())
def test_captured_call_reproduces_bit_exactly(path, r, name):
    got, expected = _replay(path, r, name)
    assert (got == expected).all(), f"{int((got != expected).sum())}/{expected.size} outputs differ"


def test_the_unreproduced_calls_are_flagged():
    """Each captured call the structures miss is one the library does not claim (``modelled`` False)."""
    for path, r, name in CALLS:
        if (os.path.basename(path)[10:-9], r["id"]) in UNREPRODUCED:
            lanes, slices = _geometry(path, r, name)
            assert not modelled(name, r["K"], slices, lanes), (path, r["id"])


def test_nn_tiles_cover_k_in_contiguous_thread_ranges():
    for K in (1, 7, 9, 600, 1023, 11008):
        for threads in (2, 4):
            tiles = [seg for th in gemmsn_nn_tiles(K, threads) for seg in th]
            assert [s for s, _ in tiles] == sorted(s for s, _ in tiles)
            assert sum(e - s for s, e in tiles) == K and all(e - s <= 512 // threads for s, e in tiles)


def _column(K, entries):
    b = np.zeros((K, 1), np.float32)
    for k, v in entries.items():
        b[k, 0] = v
    return b


def test_order_is_not_a_plain_chain():
    # a left-to-right FFMA chain loses every 1.0 term after 2**24 and then cancels it to 0; the identified
    # orders sum the 1.0 terms in a fresh tile chain first
    K = 1024
    a = np.ones((1, K), np.float32)
    nn = np.zeros((K, 1), np.float32)
    nn[0, 0], nn[128:144, 0], nn[256, 0] = BIG, 1.0, -BIG  # P = 4: thread 0 tiles [0,128), [128,256)
    assert simt_reduce("gemmSN_NN_kernel<float, 256, 4, 2, 8, 4, 4, false, x>", a, nn)[0, 0] == 16.0
    tn = np.zeros((K, 1), np.float32)
    tn[0, 0], tn[256:512:16, 0], tn[513, 0] = BIG, 1.0, -BIG  # lane 0: group 0 {0}, group 1 {256, ..}
    assert simt_reduce("gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4, true, x>", a, tn)[0, 0] == 16.0
    chain = np.float32(0)
    for k in range(K):
        chain = np.float32(chain + nn[k, 0])
    assert chain == 0.0


def test_gemmsn_tn_partial_tile():
    # K = 1000 (device probe): the tail is dealt k -> lane k % 16 as the full tiles are
    K = 1000
    b = _column(K, {8: BIG, 776: -BIG, 24: 1.0})  # lane 8: group 0 {8, 24, ..}, group 3 {776, ..}
    assert simt_reduce("gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4, true, x>", np.ones((1, K)), b)[0, 0] == 0.0
    assert modelled("gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4, true, x>", 1000)


GX_N = "internal::gemvx::kernel<int, int, float, float, float, float, false, true, false, false, 9, false, x>"
GX_NL = "internal::gemvx::kernel<long, long, float, float, float, float, false, true, false, false, 9, false, x>"
GX_T = "internal::gemvx::kernel<int, int, float, float, float, float, false, true, true, false, 7, false, x>"


def test_gemvx_n_order():
    # lanes own 64-element runs (k // 64) % 4, a halving tree: lane 0 + lane 2 cancel before lane 1's 1.0
    K = 512
    b = _column(K, {0: BIG, 64: 1.0, 128: -BIG})
    a = np.ones((1, K), np.float32)
    assert simt_reduce(GX_N, a, b, lanes=4)[0, 0] == 1.0
    assert simt_reduce(GX_NL, a, b, lanes=4)[0, 0] == 0.0  # long indices: k % 4, one chain holds all three
    assert gemvx_lanes(GX_N, 28672, 224) == 4 and gemvx_lanes(GX_N, 2560, 80) == 16


def test_gemvx_n_short_dots_deal_runs_of_four():
    # K = 7 (H100 captures, 2 and 8 lanes): (k0..k3) + (k4..k6); one chain would lose the 1.0 to BIG first
    a = np.ones((1, 7), np.float32)
    b = _column(7, {0: BIG, 4: 1.0, 5: -BIG})  # lane 1: 1 - BIG, exact; one chain: BIG + 1 loses the 1.0
    assert simt_reduce(GX_N, a, b, lanes=2)[0, 0] == 1.0 and simt_reduce(GX_N, a, b, lanes=8)[0, 0] == 1.0
    b = _column(7, {4: BIG, 5: 1.0, 0: 1.0, 1: 1.0})  # lane 0 holds 2.0, lane 1 BIG (+1.0 lost): 2 + BIG exact
    assert simt_reduce(GX_N, a, b, lanes=2)[0, 0] == BIG + 2.0  # one chain: BIG + 3 rounds to BIG + 4
    # two halves up to K = 65 (captured at 2 and 8 lanes): k 0..32 and 33..64 meet only at the end
    b = _column(65, {0: BIG, 32: 1.0, 33: -BIG})  # 1.0 lost in the first half (runs of 32 would keep it)
    assert simt_reduce(GX_N, np.ones((1, 65)), b, lanes=2)[0, 0] == 0.0
    b = _column(65, {0: BIG, 33: 1.0, 34: -BIG})  # kept in the second half (runs of 64: one chain, lost)
    assert simt_reduce(GX_N, np.ones((1, 65)), b, lanes=2)[0, 0] == 1.0
    # pinned: short dots at up to 8 lanes, 64 or more per lane below a warp; a guess elsewhere (flagged)
    assert modelled(GX_N, 7, lanes=8) and modelled(GX_N, 65, lanes=2) and modelled(GX_N, 512, lanes=8)
    assert modelled(GX_N, 768, lanes=4) and not modelled(GX_N, 100, lanes=4) and not modelled(GX_N, 768)
    assert not modelled(GX_N, 200, lanes=16) and not modelled(GX_N, 4096, lanes=32)
    assert modelled(GX_NL, 100, lanes=4)  # long indices deal element by element: no run to pin


def test_gemvx_split_slices_in_order():
    # 2 slices of 256: slice 0 = BIG (its 1.0 lost), slice 1 = 16 - BIG (exact): the reduce gives 16
    K = 512
    entries = {0: BIG, 1: 1.0, 511: -BIG}
    entries.update({256 + 64 * i: 1.0 for i in range(4)})  # slice 1, one per lane: 4 lanes x 1.0
    b = _column(K, entries)
    got = simt_reduce(GX_N, np.ones((1, K)), b, lanes=4, slices=2)[0, 0]
    assert got == 4.0
    assert simt_reduce(GX_N, np.ones((1, K)), b, lanes=4)[0, 0] != got
    assert modelled(GX_N, 65536, slices=5, lanes=16) and not modelled(GX_N, 65545, slices=5, lanes=16)


def test_gemvx_t_order():
    # lane k % 32, xor-shuffle halving from offset 16: lanes 0 and 16 cancel first
    K = 2048
    b = _column(K, {0: BIG, 16: -BIG, 1: 1.0})
    assert simt_reduce(GX_T, np.ones((1, K)), b, lanes=32)[0, 0] == 1.0
    b = _column(K, {0: BIG, 1: -BIG, 16: 1.0})  # lanes 0 and 1 meet last: 1.0 lost in lane 0 + lane 16
    assert simt_reduce(GX_T, np.ones((1, K)), b, lanes=32)[0, 0] == 0.0
    assert modelled(GX_T, 2048, lanes=32) and not modelled(GX_T, 2048) and not modelled(GX_T, 1024, lanes=32)
    # short dots (H100 captures at K = 64, 100, 256): each lane one contiguous run of 2, 4, 8 elements
    b = _column(64, {0: BIG, 1: 1.0, 2: -BIG})  # lane 0 holds k 0, 1 (BIG + 1 loses the 1.0); lane 1 k 2, 3
    assert simt_reduce(GX_T, np.ones((1, 64)), b, lanes=32)[0, 0] == 0.0
    b = _column(64, {0: BIG, 1: -BIG, 2: 1.0})  # lane 0 cancels to 0, lane 1 keeps 1.0 (element-wise: 1.0 lost)
    assert simt_reduce(GX_T, np.ones((1, 64)), b, lanes=32)[0, 0] == 1.0
    assert modelled(GX_T, 100, lanes=32) and modelled(GX_T, 256, lanes=32) and not modelled(GX_T, 200, lanes=32)
    # bias after the reduction: acc + bias with one rounding
    y = simt_gemm(GX_T, np.ones((1, 4), np.float32), np.ones((4, 1), np.float32), out_format="fp32", lanes=32,
                  bias=np.array([0.5]))
    assert y.tolist() == [[4.5]]


def test_gemvnsp_order():
    name = "void gemvNSP_kernel<float, float, float, float, 1, 32, 4, 1024, false, x>"
    K = 64
    b = _column(K, {0: BIG, 32: -BIG, 4: 1.0})  # lanes 0 (k 0..3), 8 (k 32..35) meet first; lane 1 holds 1.0
    assert simt_reduce(name, np.ones((1, K)), b)[0, 0] == 1.0
    b = _column(K, {0: BIG, 4: -BIG, 32: 1.0})  # lanes 0 and 1 meet last
    assert simt_reduce(name, np.ones((1, K)), b)[0, 0] == 0.0
    assert modelled(name, 64) and not modelled(name, 256)


def test_gemv2t_order():
    name = "void gemv2T_kernel_val<int, int, __half, __half, __half, float, 128, 16, 4, 4, false, false, x>"
    K = 3072
    a = np.ones((1, K), np.float32)
    fresh = {0: BIG, 1024: -BIG}
    fresh.update({512 + 16 * i: 1.0 for i in range(16)})  # lane 0, group 1 (a fresh chain): kept
    assert simt_reduce(name, a, _column(K, fresh))[0, 0] == 16.0
    same = {0: BIG, 1024: -BIG}
    same.update({256 + 16 * i: 1.0 for i in range(16)})  # lane 0, still group 0: lost
    assert simt_reduce(name, a, _column(K, same))[0, 0] == 0.0
    assert modelled(name, 3072) and not modelled(name, 3000)


def test_largek_slices():
    name = "void sgemm_largek_lds64<false, false, 6, 3, 4, 5, 2, 64>(float*, x)"
    K = 64
    entries = {0: BIG, 48: -BIG}
    entries.update({k: 1.0 for k in range(1, 17)})  # slice 0: lost after BIG
    entries.update({k: 1.0 for k in range(32, 48)})  # slice 1: 16 - BIG, exact
    b = _column(K, entries)
    assert simt_reduce(name, np.ones((1, K)), b, slices=2)[0, 0] == 16.0
    assert simt_reduce(name, np.ones((1, K)), b, slices=1)[0, 0] == 0.0
    # slices of ceil(K / S) rounded up to 8: K = 66, S = 2 -> [0, 40), [40, 66)
    b = _column(66, {0: BIG, 34: 1.0, 35: 1.0, 40: -BIG})
    assert simt_reduce(name, np.ones((1, 66)), b, slices=2)[0, 0] == 0.0


def test_parse_rejects_other_kernels():
    with pytest.raises(ValueError):
        parse("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT")
    assert parse("void gemmSN_NN_kernel<float, 128, 2, 4, 8, 3, 4, false, y>").tile == 256
    assert not is_simt_kernel("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT")
    with pytest.raises(ValueError):
        simt_reduce(GX_N, np.ones((1, 4)), np.ones((4, 1)))  # gemvx needs its launch's lanes
