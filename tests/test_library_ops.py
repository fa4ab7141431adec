"""The per-op library functions: signatures, layouts from strides, epilogues, honesty warnings, errors."""

import warnings

import ml_dtypes
import numpy as np
import pytest

import tcnumerics as tc
from tcnumerics import library as lib

BF16 = ml_dtypes.bfloat16


def _rand(shape, dtype=BF16, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_matmul_is_the_wgmma_chain_and_modelled_in_the_measured_frontier():
    A, B = _rand((16, 256)), _rand((256, 64), seed=1)
    plan = lib.matmul.plan(A, B)
    assert plan.modelled and plan.structure.split_k is None
    got = lib.matmul(A, B)
    ref = tc.gemm(A, B, instruction="hopper.wgmma.m64n8k16.f32.bf16.bf16", out_format="bf16")
    assert got.dtype == BF16 and np.array_equal(got.view(np.uint16), ref.view(np.uint16))


def test_not_modelled_warns_before_returning():
    A, B = _rand((3, 11)), _rand((11, 5), seed=1)  # an odd shape the survey did not measure
    assert not lib.matmul.plan(A, B).modelled
    with warnings.catch_warnings():
        warnings.simplefilter("error", lib.NotModelledWarning)
        with pytest.raises(lib.NotModelledWarning, match="not modelled"):
            lib.matmul(A, B)
    with pytest.warns(lib.NotModelledWarning, match="not modelled"):
        out = lib.matmul(A, B)
    assert out.shape == (3, 5)
    measured = lib.matmul.plan(_rand((3, 7)), _rand((7, 5), seed=1))  # 3 x 5 x 7 was measured: gemmSN replayed
    assert measured.modelled and "gemmSN" in measured.family


def test_layout_is_read_from_strides():
    A = _rand((64, 128))
    At = np.ascontiguousarray(A.T).T  # the same values, stored transposed
    B = _rand((128, 32), seed=2)
    assert lib.matmul.plan(At, B).call.a_t and not lib.matmul.plan(A, B).call.a_t
    assert np.array_equal(lib.matmul(At, B).view(np.uint16), lib.matmul(A, B).view(np.uint16))
    W = _rand((32, 128), seed=3)
    assert lib.linear.plan(A, W).call.b_t  # F.linear: W [N, K] row-major is cuBLAS's transposed operand


def test_linear_bias_is_fused_in_fp32_before_the_conversion():
    x, W = _rand((8, 64)), _rand((16, 64), seed=1)
    bias = _rand((16,), seed=2) * BF16(8)
    got = lib.linear(x, W, bias).astype(np.float64)
    acc = tc.gemm(x, W.T, instruction="hopper.wgmma.m64n8k16.f32.bf16.bf16").astype(np.float64)
    fused = tc.get_format("bf16").round(tc.get_format("fp32").round(acc + bias.astype(np.float64)))
    after = tc.get_format("bf16").round(tc.get_format("bf16").round(acc) + bias.astype(np.float64))
    assert np.array_equal(got, fused)
    assert not np.array_equal(fused, after)  # the two orders differ on these operands: the test can fail


@pytest.mark.parametrize("beta,alpha,row,epilogue", [(1, 1, False, "badd"), (1, 1, True, "bias"),
                                                     (0.5, 2, False, "bx"), (0, 1, False, "plain")])
def test_addmm_epilogue_follows_beta_alpha_and_c_shape(beta, alpha, row, epilogue):
    A, B = _rand((32, 64)), _rand((64, 32), seed=1)
    C = _rand((32,) if row else (32, 32), seed=2)
    plan = lib.addmm.plan(C, A, B, beta=beta, alpha=alpha)
    assert plan.structure.epilogue == epilogue
    assert lib.addmm(C, A, B, beta=beta, alpha=alpha).shape == (32, 32)


def test_bmm_baddbmm_and_broadcast_matmul_shapes():
    A, B = _rand((3, 16, 64)), _rand((3, 64, 8), seed=1)
    assert lib.bmm(A, B).shape == (3, 16, 8)
    assert lib.matmul(A, B).shape == (3, 16, 8)
    C = _rand((3, 16, 8), seed=2)
    assert lib.baddbmm(C, A, B, alpha=0.125).shape == (3, 16, 8)
    assert lib.matmul(A, B[0]).shape == (3, 16, 8)  # torch folds [b, M, K] @ [K, N] into one mm


def test_scaled_mm_and_fp32_precisions_return_torchs_types():
    A = _rand((16, 64), ml_dtypes.float8_e4m3fn)
    B = _rand((64, 16), ml_dtypes.float8_e4m3fn, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lib.NotModelledWarning)
        assert lib.scaled_mm(A, B, np.float32(1), np.float32(1)).dtype == BF16
        assert lib.scaled_mm(A, B, np.float32(1), np.float32(1), out_dtype="fp32").dtype == np.float32
        x = _rand((8, 32), np.float32)
        assert lib.matmul(x, x.T.copy(), fp32_precision="high").dtype == np.float32
        assert lib.matmul.plan(x, x.T.copy(), fp32_precision="high").structure.input_rounding == "rne"
        assert lib.matmul.plan(x, x.T.copy()).structure.instruction is None  # "highest": FFMA chain


def test_full_shape_changes_the_plan_and_is_checked():
    A, B = _rand((4, 16384)), _rand((16384, 4), seed=1)
    sampled = lib.matmul.plan(A, B, out_dtype="fp32", full_shape=(16, 16, 16384))
    assert sampled.modelled and len(sampled.structure.split_k) == 12  # measured: 12 slices of 22 K-tiles
    with pytest.raises(ValueError, match="full_shape"):
        lib.matmul.plan(A, B, full_shape=(16, 16, 8192))
    with pytest.raises(ValueError, match="full_shape"):
        lib.matmul.plan(A, B, full_shape=(2, 2, 16384))


def _fp8(shape):
    return np.zeros(shape, ml_dtypes.float8_e4m3fn)


@pytest.mark.parametrize("call,match", [
    (lambda: lib.matmul(np.ones((2, 3), np.int8), np.ones((3, 2), np.int8)), "expected bfloat16"),
    (lambda: lib.matmul(_rand((2, 3)), _rand((4, 2))), "expected"),
    (lambda: lib.matmul(_rand((2, 3)), _rand((3, 2)), arch="ampere"), "arch"),
    (lambda: lib.matmul(_rand((2, 3)), _rand((3, 2)), fp32_precision="low"), "fp32_precision"),
    (lambda: lib.linear(_rand((2, 3)), _rand((4, 3)), _rand((5,))), "bias"),
    (lambda: lib.matmul(_rand((2, 8)), _rand((8, 2)), out_dtype="int8"), "out_dtype"),
    # torch refuses these on the device (holdout10's 3200 x 5120 x 13653 call): K, then N, not divisible by 16
    (lambda: lib.scaled_mm(_fp8((4, 24)), _fp8((24, 16)), 1.0, 1.0), "divisible by 16"),
    (lambda: lib.scaled_mm(_fp8((4, 32)), _fp8((32, 40)), 1.0, 1.0), "divisible by 16"),
    (lambda: lib.scaled_mm.plan(_fp8((4, 32)), _fp8((32, 16)), 1.0, 1.0, full_shape=(64, 40, 32)), "divisible by 16"),
])
def test_bad_input_is_a_clear_error(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_serial_split_k_adds_the_bias_to_the_first_slice():
    """In-place split-K: fp32(fp32(bias + p0) + p1), not fp32(fp32(p0 + p1) + bias) (measured, docs/gemm.md)."""
    from tcnumerics.library.structure import Structure, run

    A = np.array([[2.0**-12, 2.0**-12]], np.float32)
    B = np.array([[2.0**-12], [2.0**-12]], np.float32)
    bias = np.array([1.0])
    parallel = Structure("simt", split_k=(1, 1), epilogue="bias")
    serial = parallel.with_(split_reduce="serial")
    assert float(run(parallel, A, B, out_format="fp32", bias=bias)[0, 0]) == 1.0 + 2.0**-23
    assert float(run(serial, A, B, out_format="fp32", bias=bias)[0, 0]) == 1.0


def test_interleaved_split_k_deals_k_tiles_round_robin():
    from tcnumerics.library.structure import Structure, run

    # K-tiles of 1: slice 0 = k 0, 2 (1 - 1 = 0); slice 1 = k 1, 3 (2^-23); contiguous halves lose one 2^-24.
    A = np.array([[1.0, 2.0**-24, -1.0, 2.0**-24]], np.float32)
    B = np.ones((4, 1), np.float32)
    inter = Structure("xmma", split_interleave=2, k_tile=1)
    contiguous = Structure("xmma", split_k=(2, 2))
    assert float(run(inter, A, B, out_format="fp32")[0, 0]) == 2.0**-23
    assert float(run(contiguous, A, B, out_format="fp32")[0, 0]) == 2.0**-24  # 1 + 2^-24 rounds to 1


def test_half_in_place_split_rounds_to_the_output_type_between_slices():
    """CUTLASS in-place split-K with a BF16 output: each slice adds to the BF16 value the last one wrote."""
    from tcnumerics.library.structure import Structure, run

    A = np.array([[1.0, 2.0**-9, 2.0**-9, 2.0**-9]], ml_dtypes.bfloat16)
    B = np.ones((4, 1), ml_dtypes.bfloat16)
    parallel = Structure("cutlass", instruction="hopper.mma.m16n8k8.f32.bf16.bf16.f32", split_k=(1, 1, 1, 1))
    serial = parallel.with_(split_reduce="serial")
    assert float(run(parallel, A, B, out_format="bf16")[0, 0]) == 1.0078125  # bf16(1 + 3 * 2^-9)
    assert float(run(serial, A, B, out_format="bf16")[0, 0]) == 1.0  # 2^-9 is below half a BF16 ulp each time


def test_stream_k_outputs_depend_on_their_tile_so_samples_give_their_positions():
    """TF32 stream-K (holdout4's 256 x 4096 x 4096, 120 CTAs): the last 8 of 128 tiles are shared by 15 CTAs each,
    the rest run one chain, so an output's bits depend on where it sits; sampled calls pass rows=/cols=."""
    from tcnumerics.library import streamk

    rng = np.random.default_rng(7)
    A = rng.standard_normal((2, 4096)).astype(np.float32)
    B = rng.standard_normal((4096, 2)).astype(np.float32)
    kw = dict(full_shape=(256, 4096, 4096), fp32_precision="high")
    blind = lib.matmul.plan(A, B, **kw)
    assert not blind.modelled and "rows=" in blind.reason
    sk = lib.matmul.plan(A, B, rows=np.array([0, 1]), cols=np.array([0, 1]), **kw).structure.stream_k
    p = streamk.plan(256, 4096, 4096, sk.ctas, sk.tile, sk.swizzle)
    tiles = [(tm, tn) for tm in range(p.tiles_m) for tn in range(p.tiles_n)]
    shared = next(t for t in tiles if len(p.segments(*t)) > 1)
    alone = next(t for t in tiles if len(p.segments(*t)) == 1)
    TM, TN, _ = sk.tile

    def at(tile):
        rows, cols = np.array([tile[1] * TN, tile[1] * TN + 1]), np.array([tile[0] * TM, tile[0] * TM + 1])
        plan = lib.matmul.plan(A, B, rows=rows, cols=cols, **kw)
        assert plan.modelled, plan.reason
        return lib.matmul(A, B, rows=rows, cols=cols, **kw)

    assert not np.array_equal(at(shared).view(np.uint32), at(alone).view(np.uint32))
    with pytest.raises(ValueError, match="rows: expected 2 integer positions"):
        lib.matmul(A, B, rows=np.array([0, 256]), cols=np.array([0, 1]), **kw)


@pytest.mark.parametrize("dtype, K, precision", [(BF16, 64, "highest"), (BF16, 4096, "highest"),
                                                 (np.float16, 200, "highest"), (np.float32, 96, "high"),
                                                 (np.float32, 96, "highest")], ids=str)
@pytest.mark.parametrize("with_c", [False, True])
def test_a_batched_op_runs_one_plan_with_the_items_bits(monkeypatch, dtype, K, precision, with_c):
    """bmm / baddbmm run a batch through one plan where the family allows it (ops.batchable): the same bits as
    the plan run item by item (the path stream-K, SIMT, FFMA and serial split-K families take)."""
    from tcnumerics.library import ops

    rng = np.random.default_rng(K)
    A = rng.standard_normal((5, 24, K)).astype(dtype)
    B = rng.standard_normal((5, K, 40)).astype(dtype)
    C = rng.standard_normal((5, 24, 40)).astype(dtype)
    call = (lambda: lib.baddbmm(C, A, B, beta=0.5, alpha=0.25, fp32_precision=precision)) if with_c else \
        (lambda: lib.bmm(A, B, fp32_precision=precision))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lib.NotModelledWarning)
        batched = call()
        monkeypatch.setattr(ops, "batchable", lambda structure: False)
        looped = call()
    assert batched.shape == (5, 24, 40) and batched.dtype == looped.dtype
    assert np.array_equal(batched.view(np.uint8), looped.view(np.uint8))


def test_a_large_batch_runs_in_blocks_of_items_with_the_same_bits(monkeypatch):
    """A batch whose outputs exceed one block (ops._BATCH_OUTPUTS) runs block by block: the same bits."""
    from tcnumerics.library import ops

    A, B = _rand((7, 16, 64)), _rand((7, 64, 24), seed=1)
    C = _rand((7, 16, 24), seed=2)
    whole = lib.baddbmm(C, A, B, beta=0.5)
    monkeypatch.setattr(ops, "_BATCH_OUTPUTS", 2 * 16 * 24)  # blocks of 2 items, the last one alone
    assert np.array_equal(lib.baddbmm(C, A, B, beta=0.5).view(np.uint16), whole.view(np.uint16))
