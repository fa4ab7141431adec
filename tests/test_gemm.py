"""tcnumerics.gemm: chain, promotion, split-K, scales, C roles and K padding, each against an
independent composition (instructions one at a time, numpy float32 IEEE arithmetic, Fractions)."""

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tcnumerics as tc
from tcnumerics.engines.oracle import round_exact
from tcnumerics.gemm import split_bounds
from tcnumerics.plan.rules import fp32_fma as _fp32_fma

BF16 = "hopper.wgmma.m64n8k16.f32.bf16.bf16"
FP8 = "hopper.wgmma.m64n8k32.f32.e4m3.e4m3"
F32 = tc.get_format("fp32")


def _mats(rng, M, K, N, dtype, scale=1.0):
    A = (rng.standard_normal((M, K)) * scale).astype(dtype)
    B = (rng.standard_normal((K, N)) * scale).astype(dtype)
    return A, B


def _chain(inst, A, B):
    """One instruction chain from +0 through the instruction API (reference engine)."""
    return tc.instruction(inst, engine="reference").mma(A, B).astype(np.float32)


def test_plain_chain_equals_the_instruction_chain():
    rng = np.random.default_rng(1)
    A, B = _mats(rng, 5, 64, 3, ml_dtypes.bfloat16)
    got = tc.gemm(A, B, instruction=BF16)
    assert got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), _chain(BF16, A, B).view(np.uint32))


def test_promotion_adds_block_chains_into_fp32_in_order():
    rng = np.random.default_rng(2)
    A, B = _mats(rng, 4, 320, 3, ml_dtypes.float8_e4m3fn)
    got = tc.gemm(A, B, instruction=FP8, promote_every=128)
    main = np.zeros((4, 3), np.float32)
    for k0 in range(0, 320, 128):  # 128, 128, then a 64-element tail
        main = main + _chain(FP8, A[:, k0:k0 + 128], B[k0:k0 + 128])  # numpy float32: IEEE RNE
    assert np.array_equal(got.view(np.uint32), main.view(np.uint32))
    assert not np.array_equal(got, tc.gemm(A, B, instruction=FP8))  # the 13-bit chain differs


def test_split_k_sums_slices_in_order():
    rng = np.random.default_rng(3)
    A, B = _mats(rng, 3, 256, 4, ml_dtypes.bfloat16)
    got = tc.gemm(A, B, instruction=BF16, split_k=[96, 96, 64])
    parts = [_chain(BF16, A[:, a:b], B[a:b]) for a, b in ((0, 96), (96, 192), (192, 256))]
    assert np.array_equal(got.view(np.uint32), ((parts[0] + parts[1]) + parts[2]).view(np.uint32))
    assert split_bounds(256, 3, 16) == [(0, 96), (96, 192), (192, 256)]


def test_per_tensor_and_rowwise_scales_follow_the_measured_order():
    rng = np.random.default_rng(4)
    A, B = _mats(rng, 6, 64, 5, ml_dtypes.float8_e4m3fn)
    acc = _chain(FP8, A, B)
    sa, sb = np.float32(0.7 + 2**-20), np.float32(1.3 + 2**-19)
    got = tc.gemm(A, B, instruction=FP8, scale_a=sa, scale_b=sb)
    assert np.array_equal(got, acc * (sa * sb))
    ra = (1 + rng.random(6)).astype(np.float32)
    rb = (1 + rng.random(5)).astype(np.float32)
    got = tc.gemm(A, B, instruction=FP8, scale_a=ra[:, None], scale_b=rb[None, :])
    assert np.array_equal(got, (acc * rb[None, :]) * ra[:, None])


def test_blockwise_scales_enter_by_fma_per_block():
    rng = np.random.default_rng(5)
    M, K, N = 3, 256, 130  # two K blocks, two 128-column blocks of B
    A, B = _mats(rng, M, K, N, ml_dtypes.float8_e4m3fn)
    sa = (0.5 + rng.random((M, 2))).astype(np.float32)
    sb = (0.5 + rng.random((2, 2))).astype(np.float32)
    got = tc.gemm(A, B, instruction=FP8, scale_a=sa, scale_b=sb, scale_block=128)
    parts = [_chain(FP8, A[:, kb * 128:(kb + 1) * 128], B[kb * 128:(kb + 1) * 128]) for kb in range(2)]
    for m in range(M):
        for n in range(N):
            main = Fraction(0)
            for kb in range(2):
                p = Fraction(float(parts[kb][m, n]))
                s = Fraction(float(np.float32(sa[m, kb] * sb[kb, n // 128])))
                main = Fraction(float(F32.to_float(np.array([round_exact(p * s + main, F32, "rne", "ieee", True)],
                                                                     np.uint32))[0]))
            assert float(got[m, n]) == float(main), (m, n)


def test_fp32_fma_is_correctly_rounded_at_midpoints():
    # x*y = 1 + 2**-23 + 2**-46 +- tiny: the float64 sum lands on an FP32 midpoint; the tiny
    # remainder must decide the rounding
    x = np.array([1 + 2.0**-23, 1 + 2.0**-23, 1 - 2.0**-24])
    y = np.array([1 + 2.0**-23, 1.0, 1 + 2.0**-23])
    z = np.array([-2.0**-23 - 2.0**-46 + 2.0**-24, 2.0**-24, 0.0])
    for i in range(3):
        exact = Fraction(x[i]) * Fraction(y[i]) + Fraction(z[i])
        want = round_exact(exact, F32, "rne", "ieee", True)
        assert F32.from_float(_fp32_fma(x[i:i + 1], y[i:i + 1], z[i:i + 1]))[0] == want, i


@settings(max_examples=300, deadline=None)
@given(st.floats(-1e6, 1e6, width=32), st.floats(-1e6, 1e6, width=32), st.floats(-2.0**40, 2.0**40, width=32))
def test_fp32_fma_matches_exact_rounding(x, y, z):
    exact = Fraction(x) * Fraction(y) + Fraction(z)
    if exact == 0:
        return
    want = round_exact(exact, F32, "rne", "ieee", True)
    assert F32.from_float(_fp32_fma(np.array([x]), np.array([y]), np.array([z])))[0] == want


def test_k_tail_is_zero_padded_last_or_first():
    rng = np.random.default_rng(6)
    A, B = _mats(rng, 3, 20, 2, ml_dtypes.bfloat16)
    z = ml_dtypes.bfloat16(0)
    pad_last = tc.gemm(np.concatenate([A, np.full((3, 12), z)], 1), np.concatenate([B, np.full((12, 2), z)]),
                       instruction=BF16)
    assert np.array_equal(tc.gemm(A, B, instruction=BF16), pad_last)
    # residue first with a 16-element tile: the 4 leading elements form their own padded group
    first = np.concatenate([A[:, :4], np.full((3, 12), z), A[:, 4:]], 1)
    first_b = np.concatenate([B[:4], np.full((12, 2), z), B[4:]])
    assert np.array_equal(tc.gemm(A, B, instruction=BF16, k_tile=16, k_residue="first"),
                          tc.gemm(first, first_b, instruction=BF16))


def test_c_roles():
    rng = np.random.default_rng(7)
    A, B = _mats(rng, 4, 32, 3, ml_dtypes.bfloat16)
    C = rng.standard_normal((4, 3)).astype(np.float32)
    fused = tc.instruction(BF16, engine="reference").mma(A, B, C)
    assert np.array_equal(tc.gemm(A, B, C, instruction=BF16), fused)
    acc = _chain(BF16, A, B)
    assert np.array_equal(tc.gemm(A, B, C, instruction=BF16, c_role="epilogue"), acc + C)
    Cb = C.astype(ml_dtypes.bfloat16)
    out = tc.gemm(A, B, Cb, instruction=BF16, c_role="output", out_format="bf16")
    want = (acc.astype(ml_dtypes.bfloat16).astype(np.float32) + Cb.astype(np.float32)).astype(ml_dtypes.bfloat16)
    assert out.dtype == ml_dtypes.bfloat16 and np.array_equal(out.view(np.uint16), want.view(np.uint16))


def test_output_rounding_modes():
    A = np.ones((1, 16), ml_dtypes.bfloat16)
    B = np.ones((16, 1), ml_dtypes.bfloat16)
    B[0, 0] = 1 + 2**-7  # sum 16 + 2**-7: between bf16 16 and 16.125
    assert float(tc.gemm(A, B, instruction=BF16, out_format="bf16", out_rounding="rz")[0, 0]) == 16.0
    assert float(tc.gemm(A, B, instruction=BF16, out_format="bf16", out_rounding="ru")[0, 0]) == 16.125


def test_engines_agree_on_a_composed_gemm():
    rng = np.random.default_rng(8)
    A, B = _mats(rng, 3, 200, 2, ml_dtypes.float8_e4m3fn)
    kw = dict(instruction=FP8, promote_every=64, split_k=2, out_format="bf16")
    assert np.array_equal(tc.gemm(A, B, engine="reference", **kw), tc.gemm(A, B, engine="auto", **kw))


@pytest.mark.parametrize("kwargs, match", [
    (dict(promote_every=24), "promote_every"),
    (dict(promote_every=1.5), "promote_every"),
    (dict(split_k=0), "split_k"),
    (dict(split_k=[16]), "split_k"),
    (dict(split_k="x"), "split_k"),
    (dict(c_role="bias"), "c_role"),
    (dict(k_tile=24), "k_tile"),
    (dict(k_residue="middle"), "k_residue"),
    (dict(out_format="s32"), "out_format"),
    (dict(out_format="nope"), "nope"),
    (dict(scale_a=np.ones(7)), "scale_a"),
    (dict(scale_a=np.ones((2, 2)), scale_b=np.ones((1, 3))), "scale"),
    (dict(engine="gpu"), "engine"),
])
def test_bad_arguments_name_the_argument(kwargs, match):
    A = np.ones((2, 32), ml_dtypes.bfloat16)
    B = np.ones((32, 3), ml_dtypes.bfloat16)
    with pytest.raises((ValueError, TypeError), match=match):
        tc.gemm(A, B, instruction=BF16, **kwargs)


def test_bad_shapes():
    A = np.ones((2, 32), ml_dtypes.bfloat16)
    with pytest.raises(ValueError, match="inner dimensions"):
        tc.gemm(A, np.ones((16, 3), ml_dtypes.bfloat16), instruction=BF16)
    with pytest.raises(ValueError, match="C"):
        tc.gemm(A, np.ones((32, 3), ml_dtypes.bfloat16), np.ones((3, 3), np.float32), instruction=BF16)
    with pytest.raises(ValueError, match="instruction"):
        tc.gemm(A, np.ones((32, 3), ml_dtypes.bfloat16), instruction="hopper.nope")


@pytest.mark.parametrize("options", [
    dict(),
    dict(promote_every=128),
    dict(split_k=3, out_format="bf16"),
    dict(promote_every=64, split_k=2, c_role="epilogue"),
    dict(c_role="output", out_format="bf16"),
    dict(k_tile=64, k_residue="first"),
], ids=str)
@pytest.mark.parametrize("scales", [None, "tensor", "row", "mixed"])
def test_a_batch_is_the_loop_over_its_items(options, scales):
    """gemm on [batch, M, K] @ [batch, K, N] gives item i's bits as gemm(A[i], B[i], ...): the plan is the same,
    only the array has one more axis."""
    rng = np.random.default_rng(len(str(options)) + len(str(scales)))
    batch, M, K, N = 4, 6, 300, 5
    spread = np.exp2(rng.integers(-8, 8, (batch, 1, 1)))  # items far apart: per-item scales matter
    A = (rng.standard_normal((batch, M, K)) * spread).astype(ml_dtypes.float8_e4m3fn)
    B = rng.standard_normal((batch, K, N)).astype(ml_dtypes.float8_e4m3fn)
    C = rng.standard_normal((batch, M, N)).astype(np.float32)
    sa = sb = None
    if scales == "tensor":
        sa, sb = rng.uniform(0.5, 2, batch), rng.uniform(0.5, 2, batch)
    elif scales == "row":
        sa, sb = rng.uniform(0.5, 2, (batch, M)), rng.uniform(0.5, 2, (batch, N))
    elif scales == "mixed":  # one scalar for every item, row scales for B: the row rule, as for a single GEMM
        sa, sb = 3.0, rng.uniform(0.5, 2, (batch, N))
    got = tc.gemm(A, B, C, instruction=FP8, scale_a=sa, scale_b=sb, **options)
    assert got.shape == (batch, M, N)
    for i in range(batch):
        want = tc.gemm(A[i], B[i], C[i], instruction=FP8, scale_a=sa if np.ndim(sa) == 0 else sa[i],
                       scale_b=sb if np.ndim(sb) == 0 else sb[i], **options)
        assert np.array_equal(got[i].view(np.uint8), want.view(np.uint8)), i


def test_a_batch_names_bad_shapes_and_scales():
    A, B = np.ones((2, 3, 32), ml_dtypes.bfloat16), np.ones((2, 32, 4), ml_dtypes.bfloat16)
    with pytest.raises(ValueError, match="batch sizes differ"):
        tc.gemm(A, np.ones((3, 32, 4), ml_dtypes.bfloat16), instruction=BF16)
    with pytest.raises(ValueError, match="3-D batches"):
        tc.gemm(A, B[0], instruction=BF16)
    with pytest.raises(ValueError, match=r"C: expected shape \(2, 3, 4\)"):
        tc.gemm(A, B, np.ones((3, 4), np.float32), instruction=BF16)
    with pytest.raises(ValueError, match=r"scale_a: a batch of 2 takes a scalar, shape \(2,\) or \(2, 3\)"):
        tc.gemm(A, B, instruction=BF16, scale_a=np.ones(3), scale_b=1.0)
    with pytest.raises(ValueError, match="scale_b: scales must be finite and nonzero"):
        tc.gemm(A, B, instruction=BF16, scale_a=1.0, scale_b=np.array([1.0, 0.0]))
