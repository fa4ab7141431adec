"""The H200 presets (``h200_presets``; ``tc.library_gemm`` its deprecated alias): the plans they choose, their
arguments, and the fp8-accumulation experiment."""

import json
import os

import ml_dtypes
import numpy as np
import pytest

import tcnumerics as tc
from tcnumerics.library.presets import h200_presets
from tcnumerics.cli import main as cli_main
from tcnumerics.experiments.fp8_accumulation import accumulation_rows, exact_product


@pytest.mark.parametrize("shape", [(64, 64, 8192), (32, 48, 256)])
def test_library_gemm_is_a_deprecated_alias_of_the_presets(shape):
    from tcnumerics import library as lib

    M, N, K = shape
    rng = np.random.default_rng(M + K)
    A = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
    B = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    for entry in (tc.library_gemm, lib.library_gemm):  # both public names of the old entry warn
        with pytest.warns(DeprecationWarning, match="library_gemm is deprecated: use tcnumerics.library.matmul"):
            old = entry("torch.matmul", dtype="bf16")
        assert repr(old) == repr(h200_presets("torch.matmul", dtype="bf16"))
        got = old(A, B).view(np.uint16)
        assert np.array_equal(got, h200_presets("torch.matmul", dtype="bf16")(A, B).view(np.uint16))
        # the new entry, planned per GPU model, predicts the same bits for these H200-measured shapes
        assert np.array_equal(got, lib.matmul(A, B, gpu="h200").view(np.uint16))


def test_matmul_plans():
    mm = h200_presets("torch.matmul", dtype="bf16")
    common = mm.plan(512, 512, 1024)
    assert common.modelled and common.split_k is None and common.structure.instruction.endswith("bf16.bf16")
    split = mm.plan(16, 16, 16384)
    assert split.split_k == (1408,) * 12 and "splitK" in split.kernel
    odd = mm.plan(96, 80, 333)
    assert odd.modelled and odd.structure.k_residue == "first" and "cutlass_75" in odd.kernel
    assert odd.split_k == (72,) * 5  # 5 slices of ceil(333 / 5) rounded up to 8
    assert not mm.plan(96, 80, 335).modelled  # CUTLASS split count only known where measured
    tf32 = h200_presets("torch.matmul", dtype="tf32").plan(2048, 2048, 2048)
    assert tf32.structure.input_rounding == "rne" and tf32.structure.instruction.endswith("tf32.tf32")


def test_preset_plans_are_library_plans_that_explain_what_runs():
    from tcnumerics import library as lib

    mm = h200_presets("torch.matmul", dtype="bf16")
    plan = mm.plan(64, 64, 8192)
    assert isinstance(plan, lib.Plan) and plan.gpu == "h200" and plan.call.K == 8192
    text = plan.explain()
    assert text.startswith("matmul 64x64x8192 bf16 -> bf16 on h200: nvjet_sm90 (wgmma) splitK")
    assert "ordered sum (contiguous) of 6 terms" in text and text.count("chain hopper.wgmma") == 6
    assert "operands rounded to TF32 (RNA)" in h200_presets("torch.matmul", dtype="tf32").plan(128, 128, 256).explain()
    with pytest.warns(DeprecationWarning, match="GemmPlan is deprecated"):
        assert lib.GemmPlan is lib.Plan


def test_scaled_mm_plans():
    slow = h200_presets("torch._scaled_mm", dtype="e4m3", fast_accum=False)
    fast = h200_presets("torch._scaled_mm", dtype="e4m3", fast_accum=True)
    assert slow.plan(256, 256, 512).structure.promote_every == 128
    assert fast.plan(256, 256, 512).structure.promote_every is None
    assert fast.plan(64, 64, 8192).split_k == (2816,) * 3
    assert fast.plan(32, 32, 4096).split_k is None
    assert not slow.plan(64, 64, 8192, scales="blockwise").modelled
    with pytest.raises(ValueError, match="fast_accum"):
        fast.plan(256, 256, 512, scales="blockwise")
    with pytest.raises(ValueError, match="multiples of 16"):
        fast.plan(96, 80, 333)


def test_preset_call_matches_gemm_with_its_plan():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((16, 256)).astype(ml_dtypes.float8_e4m3fn)
    B = rng.standard_normal((256, 16)).astype(ml_dtypes.float8_e4m3fn)
    smm = h200_presets("torch._scaled_mm", dtype="e4m3", fast_accum=False)
    got = smm(A, B, out_dtype="fp32", scale_a=np.float32(0.5), scale_b=np.float32(3.0))
    want = tc.gemm(A, B, instruction="hopper.wgmma.m64n8k32.f32.e4m3.e4m3", promote_every=128,
                   scale_a=np.float32(0.5), scale_b=np.float32(3.0))
    assert np.array_equal(got, want)
    assert smm(A, B).dtype == ml_dtypes.bfloat16  # torch._scaled_mm's default output here


def test_unmodelled_call_warns():
    A = np.ones((4, 40), ml_dtypes.bfloat16)
    B = np.ones((40, 8), ml_dtypes.bfloat16)
    with pytest.warns(UserWarning, match="not modelled"):
        h200_presets("torch.matmul", dtype="tf32")(A.astype(np.float32), B.astype(np.float32))


@pytest.mark.parametrize("args, match", [
    (("torch.bmm",), "function"),
    (("torch.matmul",), None),
])
def test_function_names(args, match):
    if match:
        with pytest.raises(ValueError, match=match):
            h200_presets(*args)
    else:
        assert repr(h200_presets(*args)).startswith("h200_presets('torch.matmul'")


@pytest.mark.parametrize("kwargs, match", [
    (dict(arch="ampere"), "arch"),
    (dict(dtype="int8"), "dtype"),
    (dict(dtype="e4m3"), "dtype"),
])
def test_bad_matmul_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        h200_presets("torch.matmul", **kwargs)


def test_bad_scaled_mm_arguments():
    with pytest.raises(ValueError, match="dtype"):
        h200_presets("torch._scaled_mm", dtype="bf16")
    with pytest.raises(ValueError, match="b_dtype"):
        h200_presets("torch._scaled_mm", dtype="e4m3", b_dtype="bf16")
    with pytest.raises(TypeError, match="fast_accum"):
        h200_presets("torch._scaled_mm", dtype="e4m3", fast_accum="yes")
    with pytest.raises(ValueError, match="M"):
        h200_presets("torch._scaled_mm", dtype="e4m3").plan(0, 16, 16)


def test_exact_product_is_exact():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((3, 96)).astype(ml_dtypes.float8_e4m3fn)
    B = rng.standard_normal((96, 2)).astype(ml_dtypes.float8_e4m3fn)
    from fractions import Fraction
    want = [[sum(Fraction(float(A[i, k])) * Fraction(float(B[k, j])) for k in range(96)) for j in range(2)]
            for i in range(3)]
    got = exact_product(A, B)
    assert all(Fraction(float(got[i][j])) == want[i][j] for i in range(3) for j in range(2))


def test_accumulation_orders():
    rows = accumulation_rows([1024], size=4, dist="uniform", seed=3)
    err = {r["scheme"]: r["norm_rel_error"] for r in rows}
    # positive sums: the truncating 13-bit chain loses most; promotion limits the loss; a 25-bit
    # accumulator is close to exact
    assert err["fast"] > err["promote256"] > err["promote128"] > err["promote64"] > err["promote32"] > err["fp32acc"]
    assert err["fast"] > 1e-3 and err["fp32acc"] < 1e-5


def test_cli_json_and_errors(capsys, tmp_path):
    assert cli_main(["reproduce", "fp8-accumulation", "--k", "64", "--size", "2", "--json", "--quiet",
                     "--schemes", "fast", "promote32"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["scheme"] for r in rows] == ["fast", "promote32"] and rows[0]["K"] == 64
    assert cli_main(["reproduce", "fp8-accumulation", "--k", "48", "--quiet"]) == 2
    assert "multiple of 32" in capsys.readouterr().err
    target = tmp_path / "fig.txt"
    assert cli_main(["reproduce", "fp8-accumulation", "--k", "64", "--plot", str(target), "--quiet"]) == 2
    assert "--plot" in capsys.readouterr().err and not os.path.exists(target)
