"""cuBLAS's CUTLASS 2.x fallback kernels on BF16/FP16 inputs: the structure read off the measured launch
(``library/cutlass_half.py``), replayed bit for bit on captured H100 calls of each family.

The full score (169 of 169 captured calls) is ``lab/device_library/fit_cutlass_half.py``; here a few calls per
kernel op and split kind go through the op functions with ``selection._measured`` answering from the rule (the
bit table is not consulted), on a corner of their sampled outputs.
"""

import os
import sys

import numpy as np
import pytest

from tcnumerics.library import cutlass_half, launches, selection
from tcnumerics.library.structure import Structure, run

HERE = os.path.dirname(__file__)
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(ROOT, "lab", "device_library"))
SIDE = 8

# (capture, id): what each call pins down
CASES = [
    ("survey", 983),       # s1688 + splitKreduce<float>, FP32 output: slices of ceil(333/5) rounded to 8 = 72
    ("survey", 171),       # s1688, 24 slices of 176 (K = 4097, z = 33)
    ("survey", 363),       # s1688 + splitKreduce<bf16> with a bias: cvt(cvt(sum) + bias)
    ("survey", 634),       # FP16 s1688 + splitKreduce<__half>: partials rounded to FP16
    ("ksample2", 192616),  # NT s1688 + splitKreduce<bf16>, S = 5
    ("survey", 597),       # FP16 wmma80 TT + splitKreduce<__half>
    ("survey", 136),       # s16816 TT + splitKreduce<float>, S = 9, K = 14336
    ("survey", 149),       # s16816 NT + splitKreduce<bf16>, 9 slices of 1224
    ("holdout", 84),       # s1688 in place (Memset), FP32 output: whole 32-element K-tiles
    ("survey", 384),       # addmm in place after torch's copy of C (Memcpy, Memset, GEMM): bx epilogue
    ("survey", 766),       # FP16 wmma75 in place with a bias, S = 5
    ("ksample2", 82648),   # s16816 in place, S = 2
    ("survey", 982),       # BF16 wmma80 32x32_128x2, FP32 output: K-tile 128 from the name
    ("survey", 1032),      # FP16 wmma80 32x32_64x1, FP32 output: K-tile 64 from the name
    ("holdout4", 146),     # s16816 bmm, batch 9 in grid z
    ("survey", 453),       # s1688 baddbmm (badd runs as bx)
]


@pytest.fixture(scope="module")
def captures():
    from replay_survey import load

    return {name: load(os.path.join(ROOT, "vectors", "library", f"hopper_op_{name}_h100.npz"))
            for name in sorted({c for c, _ in CASES})}


def _record(captures, cap, i):
    index, data = captures[cap]
    return next(r for r in index["records"] if r["id"] == i), data


@pytest.fixture
def rule(monkeypatch):
    from fit_cutlass_half import _patched_measured

    from tcnumerics.library import gpus

    monkeypatch.setattr(selection, "_measured", _patched_measured(selection._measured))
    gpus.tables_changed()  # plans cached by the op functions were made without the patch (and vice versa after)
    yield
    gpus.tables_changed()


@pytest.mark.parametrize("cap,i", CASES, ids=[f"{c}#{i}" for c, i in CASES])
def test_captured_call_replays(captures, rule, cap, i):
    from fit_table import call_of
    from replay_survey import replay

    c, data = _record(captures, cap, i)
    call = call_of(c)
    launch = launches.measured_launch(call)
    s, ok = cutlass_half.cutlass_half_structure(call, Structure("x", epilogue=selection.epilogue_of(call)), launch)
    assert s is not None and ok, cutlass_half.family_label(c["fmt"], cutlass_half.parse_name(launch.main), s)
    r = replay(c, data, side=SIDE)
    assert r["exact"] and r["modelled"], r


def test_other_granule_misses(captures):
    """The capture tells the granule apart: 16-element slices (80, 80, 80, 80, 13) miss survey 983."""
    from fit_table import call_of
    from replay_survey import lib_call, operands

    c, data = _record(captures, "survey", 983)
    call = call_of(c)
    s, _ = cutlass_half.cutlass_half_structure(call, Structure("x"), launches.measured_launch(call))
    ops = operands(c, data, side=SIDE)
    bits = lambda st: np.asarray(run(st, ops["A"][0], ops["B"][0], out_format="fp32"), np.float32).view(np.uint32)
    assert (bits(s) == ops["expected"][0]).all()
    assert (bits(s.with_(split_k=cutlass_half.parallel_slices(call.K, 5, 16))) != ops["expected"][0]).any()


def test_unpinned_parallel_granule_is_flagged():
    """holdout10 #67 (s1688 128x128 nn, 140 x 13653 x 5120, S = 6) cut 896-element slices where the rule of the
    other 45 captured parallel calls cuts 856: it was a silent miss.  Now the granule-64 guess replays it, flagged;
    holdout10 #50 (s1688 64x64, where captures chose 8 over 64) stays modelled."""
    from fit_table import call_of
    from replay_survey import load, operands

    index, data = load(os.path.join(ROOT, "vectors", "library", "hopper_op_holdout10_h100.npz"))
    for i, pinned, per in ((67, False, 896), (50, True, 1056)):
        c = next(r for r in index["records"] if r["id"] == i)
        call = call_of(c)
        s, ok = cutlass_half.cutlass_half_structure(call, Structure("x"), launches.measured_launch(call))
        assert ok == pinned and s.split_k[0] == per
        ops = operands(c, data, side=SIDE)
        A, B = ops["A"][0], ops["B"][0]
        bits = lambda st: cutlass_half_bits(st, A, B)
        assert (bits(s) == ops["expected"][0]).all()
        other = cutlass_half.parallel_slices(call.K, len(s.split_k), 64 if per == 1056 else 8)
        assert (bits(s.with_(split_k=other)) != ops["expected"][0]).any()


def cutlass_half_bits(st, A, B):
    import ml_dtypes

    return np.asarray(run(st, A, B, out_format="bf16")).astype(ml_dtypes.bfloat16).view(np.uint16)


def test_slices_and_names():
    assert cutlass_half.parallel_slices(4096, 12) == (344,) * 12
    assert cutlass_half.parallel_slices(100, 1) is None
    assert cutlass_half.tile_slices(4095, 4, 32) == (1024,) * 4
    f = cutlass_half.parse_name("cutlass_80_tensorop_bf16_s16816gemm_bf16_256x64_32x4_nt_align2")
    assert (f["op"], f["tile_k"], f["layout"], f["align"]) == ("s16816", 32, "nt", 2)
    assert cutlass_half.k_tile_of(f, "bf16") == 32
    assert cutlass_half.parse_name("nvjet_sm90_tst_64x16_64x16_4x1_v_bz_TNT") is None


def _launch(*names, z=1):
    return launches.Launch(tuple(names), 1, z)


GEMM = "void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1>(...)"


def test_launch_reading():
    call = selection.Call("matmul", "bf16", "bf16", 64, 50257, 1024)
    s, ok = cutlass_half.cutlass_half_structure(call, Structure("x"), _launch("Memset (Device)", GEMM, z=2))
    assert (s.split_k, s.split_reduce, ok) == ((512, 512), "serial", True)
    red = "void cublasLt::splitKreduce_kernel<32, 16, int, __half, __half, float>(...)"
    assert cutlass_half.partial_format(_launch(GEMM, red)) == "fp16"
    s, ok = cutlass_half.cutlass_half_structure(call, Structure("x"), _launch(GEMM, z=2))
    assert not ok  # grid z without a reduce kernel or a Memset: never captured
    assert cutlass_half.cutlass_half_structure(call, Structure("x"), _launch("nvjet_sm90_tst_64x16")) == (None, False)
    fp32 = selection.Call("matmul", "fp32", "fp32", 64, 50257, 1024)
    assert cutlass_half.cutlass_half_structure(fp32, Structure("x"), _launch(GEMM)) == (None, False)


def test_uncaptured_combination_flagged():
    """FP16 s16816 split-K was never captured: built, but not verified."""
    call = selection.Call("matmul", "fp16", "fp16", 6, 20480, 2560, a_t=True)
    gemm = "void cutlass::Kernel2<cutlass_80_tensorop_f16_s16816gemm_f16_256x64_32x4_nt_align2>(...)"
    red = "void cublasLt::splitKreduce_kernel<32, 16, int, __half, __half, float>(...)"
    s, ok = cutlass_half.cutlass_half_structure(call, Structure("x"), _launch(gemm, red, z=3))
    assert s.split_k == (856, 856, 856) and s.split_partial_format == "fp16" and not ok


def test_in_place_sm75_slices_with_a_residue_tile_are_pinned_only_where_the_two_rules_agree():
    """The H200's train_bits #118 (156 x 5120 x 13653 FP16, s1688 128x128 in place, S = 19) missed 49 of 64 outputs
    with whole K-tiles: with a residue tile, where whole K-tiles and ceil(K / S) rounded to 8 cut K differently, the
    call is flagged (the captures that chose whole K-tiles all had K a multiple of the tile)."""
    gemm = "void cutlass::Kernel2<cutlass_75_tensorop_f16_s1688gemm_f16_128x128_tn_align1>(...)"
    odd = selection.Call("linear", "fp16", "fp16", 156, 5120, 13653, b_t=True)
    s, ok = cutlass_half.cutlass_half_structure(odd, Structure("x"), _launch("Memset (Device)", gemm, z=19))
    assert s.split_reduce == "serial" and s.split_k[0] == 736 and not ok
    even = selection.Call("matmul", "bf16", "bf16", 64, 50257, 1024)
    _, ok = cutlass_half.cutlass_half_structure(even, Structure("x"), _launch("Memset (Device)", GEMM, z=2))
    assert ok  # 1024 / 2: both rules cut 512
    aligned = selection.Call("matmul", "bf16", "bf16", 26, 50257, 4096)
    _, ok = cutlass_half.cutlass_half_structure(aligned, Structure("x"), _launch("Memset (Device)", GEMM, z=5))
    assert ok  # the rules differ (832 vs 824), whole K-tiles captured there (holdout8 #16)
