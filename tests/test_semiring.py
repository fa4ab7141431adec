"""SIMD2 semiring operations: every op and engine against the exact oracle, hand-worked cases, errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import tcnumerics as tc
from tcnumerics.formats import get_format
from tcnumerics.model import UnitModel
from tcnumerics.semiring import (DEFAULT_UNIT, OPS, get_op, op_names, semiring_closure, semiring_instruction,
                                 semiring_matmul)

SELECT_OPS = [name for name, op in OPS.items() if op.kind == "select"]
FP32_NAN = 0x7FFFFFFF  # the Hopper unit's canonical NaN, which min/max ops share


# -- operand families ----------------------------------------------------------------------------

def operand_bits(fmt, shape, family: str, rng) -> np.ndarray:
    """Bit patterns of ``fmt``: 'normal' N(0,1); 'wide' every finite pattern alike (subnormals, max);
    'special' wide plus zeros of both signs, infinities and a few NaNs; 'ties' small integers."""
    if family == "normal":
        return fmt.from_float(rng.normal(size=shape))
    if family == "ties":
        return fmt.from_float(rng.integers(-3, 4, size=shape).astype(np.float64))
    raw = rng.integers(0, 1 << fmt.width, size=shape).astype(np.uint64)
    if fmt.pad_bits:  # TF32: garbage in the low container bits the unit ignores
        raw = (raw << np.uint64(fmt.pad_bits)) | rng.integers(0, 1 << fmt.pad_bits, size=shape).astype(np.uint64)
    bits = raw.astype(fmt.container_dtype)
    value = fmt.to_float(bits)
    finite = fmt.from_float(np.where(np.isfinite(value), value, 1.0))
    bits = np.where(np.isfinite(value), bits, finite)
    if family == "special":
        pick = rng.random(shape)
        zero = fmt.from_float(np.where(rng.random(shape) < 0.5, 0.0, -0.0))
        bits = np.where(pick < 0.15, zero, bits)
        if fmt.has_inf:
            inf = fmt.from_float(np.where(rng.random(shape) < 0.5, np.inf, -np.inf))
            bits = np.where((pick >= 0.15) & (pick < 0.22), inf, bits)
        bits = np.where(pick > 0.995, fmt.nan_bits, bits)
    return bits.astype(fmt.container_dtype)


def run_engines(unit, A, B, C, engines=("reference", "fast")):
    expected = unit.matmul_bits(A, B, C, engine="exact")
    for engine in engines:
        got = unit.matmul_bits(A, B, C, engine=engine)
        assert got.dtype == expected.dtype
        bad = np.argwhere(got != expected)
        assert bad.size == 0, (f"{unit!r} engine={engine}: {len(bad)} of {got.size} outputs differ from the "
                               f"oracle, first at {tuple(bad[0])}: {int(got[tuple(bad[0])]):#x} vs "
                               f"{int(expected[tuple(bad[0])]):#x}")
    return expected


# -- the operation table ------------------------------------------------------------------------

def test_nine_operations_with_simd2_names():
    assert op_names() == ["mul-plus", "min-plus", "max-plus", "min-mul", "max-mul", "min-max", "max-min", "or-and",
                          "plus-norm"]
    assert get_op("plus-mul").name == "mul-plus" and get_op("MIN_PLUS").name == "min-plus"
    with pytest.raises(ValueError, match="op: unknown semiring operation 'min-pluss'.*min-plus"):
        get_op("min-pluss")
    with pytest.raises(TypeError, match="op:"):
        get_op(3)


# -- selecting operations: exact ⊗, exact min/max, one rounding --------------------------------------

@pytest.mark.parametrize("op", SELECT_OPS)
@pytest.mark.parametrize("in_format", ["fp16", "bf16", "fp32", "tf32", "e4m3", "e5m2"])
def test_select_ops_equal_the_oracle(op, in_format):
    rng = np.random.default_rng(abs(hash((op, in_format))) % 2**32)
    unit = semiring_instruction(op, in_format)
    for family in ("normal", "wide", "special", "ties"):
        M, K, N = 4, int(rng.integers(1, 24)), 5
        A = operand_bits(unit.a_format, (M, K), family, rng)
        B = operand_bits(unit.b_format, (K, N), family, rng)
        C = None if family == "ties" else operand_bits(unit.c_format, (M, N), family, rng)
        run_engines(unit, A, B, C)


@pytest.mark.parametrize("rounding", ["rne", "rna", "rz", "ru", "rd", "rto"])
@pytest.mark.parametrize("out_format", ["fp32", "fp16", "bf16", "fp64"])
def test_select_rounding_modes_and_output_formats(rounding, out_format):
    rng = np.random.default_rng(7)
    for op, in_format in (("min-plus", "fp32"), ("max-mul", "fp32"), ("min-mul", "bf16"), ("max-plus", "fp16")):
        unit = semiring_instruction(op, in_format, out_format, rounding=rounding)
        A = operand_bits(unit.a_format, (3, 9), "wide", rng)
        B = operand_bits(unit.b_format, (9, 4), "wide", rng)
        run_engines(unit, A, B, None)


def test_select_sums_beyond_53_bits_are_ordered_and_rounded_exactly():
    # 1 - 2**-100 and 1 + 2**-100 are both 1.0 in float64; only the exact remainder tells them apart
    A = np.array([[1.0, 1.0]], np.float32)
    B = np.array([[2.0**-100], [-(2.0**-100)]], np.float32)
    for engine in ("reference", "fast", "exact"):
        down = semiring_matmul(A, B, op="min-plus", rounding="rd", engine=engine)
        up = semiring_matmul(A, B, op="max-plus", rounding="ru", engine=engine)
        assert down.view(np.uint32)[0, 0] == 0x3F7FFFFF  # round down (1 - 2**-100) = 1 - 2**-24
        assert up.view(np.uint32)[0, 0] == 0x3F800001  # round up (1 + 2**-100) = 1 + 2**-23
        nearest = semiring_matmul(A, B, op="min-plus", engine=engine)
        assert nearest.view(np.uint32)[0, 0] == 0x3F800000


def test_select_specials():
    inf, nan = np.inf, np.nan
    cases = [  # (op, a row, b column, expected fp32 bits)
        ("min-plus", [inf, 1.0], [-inf, 5.0], FP32_NAN),  # inf + -inf is NaN, and NaN wins over 6
        ("min-plus", [inf, 1.0], [1.0, inf], 0x7F800000),  # unreachable: +inf
        ("max-plus", [-inf, 2.0], [3.0, -inf], 0xFF800000),
        ("min-mul", [0.0, 2.0], [inf, 3.0], FP32_NAN),  # 0 * inf
        ("min-mul", [-0.0, 2.0], [1.0, 3.0], 0x00000000),  # -0 is written +0
        ("max-min", [nan, 2.0], [1.0, 3.0], FP32_NAN),
        ("min-max", [-inf, 2.0], [-inf, 3.0], 0xFF800000),
        ("min-plus", [-0.0, 1.0], [-0.0, 1.0], 0x00000000),
    ]
    for op, a, b, want in cases:
        A = np.array([a], np.float16)
        B = np.array(b, np.float16)[:, None]
        for engine in ("reference", "fast", "exact"):
            got = int(semiring_matmul(A, B, op=op, engine=engine).view(np.uint32)[0, 0])
            assert got == want, (op, a, b, engine, hex(got))
    # other output formats use their own quiet NaN
    got = semiring_matmul(np.array([[inf]], np.float16), np.array([[-inf]], np.float16), op="min-plus",
                          out_format="fp16")
    assert got.view(np.uint16)[0, 0] == 0x7E00


def test_select_accumulator_joins_the_reduction():
    A = np.array([[1.0, 2.0]], np.float16)
    B = np.array([[1.0], [1.0]], np.float16)
    assert semiring_matmul(A, B, np.array([[0.5]], np.float32), op="min-plus")[0, 0] == 0.5
    assert semiring_matmul(A, B, np.array([[9.0]], np.float32), op="min-plus")[0, 0] == 2.0
    assert semiring_matmul(A, B, np.array([[9.0]], np.float32), op="max-plus")[0, 0] == 9.0


@given(data=st.data())
def test_select_chaining_over_k_is_invisible(data):
    """C ⊕ (terms of K) equals the same op on the second half with the first half's result as C."""
    op = data.draw(st.sampled_from(SELECT_OPS))
    in_format = data.draw(st.sampled_from(["fp16", "fp32"]))
    rounding = data.draw(st.sampled_from(["rne", "rz", "ru", "rd"]))
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    unit = semiring_instruction(op, in_format, rounding=rounding)
    K = data.draw(st.integers(2, 12))
    split = data.draw(st.integers(1, K - 1))
    a = operand_bits(unit.a_format, (3, K), "wide", rng)
    b = operand_bits(unit.b_format, (3, K), "wide", rng)
    whole = unit.dot_bits(a, b, engine="reference")
    first = unit.dot_bits(a[:, :split], b[:, :split], engine="reference")
    assert np.array_equal(unit.dot_bits(a[:, split:], b[:, split:], first, engine="reference"), whole)
    assert np.array_equal(unit.dot_bits(a, b, engine="exact"), whole)


@pytest.mark.parametrize("op", SELECT_OPS + ["or-and"])
def test_fast_equals_reference_on_larger_matrices(op):
    rng = np.random.default_rng(11)
    for in_format, family in (("fp16", "normal"), ("fp16", "special"), ("bf16", "wide"), ("fp32", "special")):
        if op == "or-and":
            unit = semiring_instruction(op)
            A = rng.random((37, 45)) < 0.05
            B = rng.random((45, 29)) < 0.05
            C = rng.random((37, 29)) < 0.05
            A, B, C = (x.astype(np.uint8) for x in (A, B, C))
        else:
            unit = semiring_instruction(op, in_format)
            A = operand_bits(unit.a_format, (37, 45), family, rng)
            B = operand_bits(unit.b_format, (45, 29), family, rng)
            C = operand_bits(unit.c_format, (37, 29), family, rng)
        assert np.array_equal(unit.matmul_bits(A, B, C, engine="fast"), unit.matmul_bits(A, B, C, engine="reference"))


# -- plus-norm: exact squared differences through the unit's fused truncating groups ---------------

NORM_UNITS = [
    (DEFAULT_UNIT, "fp16"),
    ("hopper.wgmma.m64n8k16.f16.f16.f16", "fp16"),  # FP16 output, RNE, zero exponent -21
    ("hopper.wgmma.m64n8k32.f32.e4m3.e4m3", "e4m3"),  # L=32, 13 fraction bits, E8M13 output
    ("hopper.wgmma.m64n8k32.f32.e5m2.e5m2", "e5m2"),
    (UnitModel(a_format="fp16", b_format="fp16", c_format="fp32", d_format="fp32", group_size=4, frac_bits=23,
               zero_exponent=-130, output_rounding="ru", output_overflow="ieee"), "fp16"),
]


@pytest.mark.parametrize("unit, in_format", NORM_UNITS, ids=lambda x: x if isinstance(x, str) else "custom")
def test_plus_norm_equals_the_oracle(unit, in_format):
    rng = np.random.default_rng(5)
    u = semiring_instruction("plus-norm", in_format, unit=unit)
    for family in ("normal", "wide", "special"):
        for K in (5, 16, 37):
            A = operand_bits(u.a_format, (3, K), family, rng)
            B = operand_bits(u.b_format, (K, 4), family, rng)
            C = operand_bits(u.c_format, (3, 4), family, rng) if family != "normal" else None
            run_engines(u, A, B, C)
            # the pair form runs the same kernels
            a = np.repeat(A, 4, axis=0)
            b = np.tile(B.T, (3, 1))
            c = None if C is None else C.reshape(-1)
            want = u.matmul_bits(A, B, C, engine="reference").reshape(-1)
            for engine in ("reference", "fast"):
                assert np.array_equal(u.dot_bits(a, b, c, engine=engine), want)


@pytest.mark.parametrize("rounding", ["rne", "rna", "rz", "ru", "rd", "rto"])
def test_plus_norm_rounding_what_if(rounding):
    rng = np.random.default_rng(9)
    u = semiring_instruction("plus-norm", "fp16", unit="hopper.wgmma.m64n8k16.f16.f16.f16", rounding=rounding)
    assert u.model.output_rounding.value == rounding
    A = operand_bits(u.a_format, (4, 20), "wide", rng)
    B = operand_bits(u.b_format, (20, 3), "wide", rng)
    run_engines(u, A, B, operand_bits(u.c_format, (4, 3), "wide", rng))


def test_plus_norm_wide_formats_run_on_the_reference():
    rng = np.random.default_rng(3)
    for in_format in ("bf16", "fp32"):
        u = semiring_instruction("plus-norm", in_format)
        A = operand_bits(u.a_format, (3, 18), "wide", rng)
        B = operand_bits(u.b_format, (18, 2), "wide", rng)
        run_engines(u, A, B, None, engines=("reference", "auto"))
        with pytest.raises(ValueError, match="engine: the fast plus-norm kernel cannot run"):
            u.matmul_bits(A, B, engine="fast")
    exact_unit = UnitModel(a_format="fp16", b_format="fp16", c_format="fp32", d_format="fp32", group_size=8,
                           frac_bits=None, output_rounding="rne")
    u = semiring_instruction("plus-norm", unit=exact_unit)
    A = operand_bits(u.a_format, (3, 10), "wide", rng)
    B = operand_bits(u.b_format, (10, 2), "wide", rng)
    run_engines(u, A, B, None, engines=("reference", "auto"))


def test_plus_norm_truncates_like_the_unit():
    # 1 + fifteen terms of 2**-26: each falls below the 25 fraction bits kept under 2**0 and is
    # truncated away, so the unit says 1.0, where the exact sum rounded toward zero is 1 + 2**-23
    A = np.array([[1.0] + [2.0**-13] * 15], np.float16)
    B = np.zeros((16, 1), np.float16)
    for engine in ("reference", "fast", "exact"):
        assert semiring_matmul(A, B, op="plus-norm", engine=engine).view(np.uint32)[0, 0] == 0x3F800000
    exact = 1 + 15 * 2.0**-26
    assert get_format("fp32").from_float(np.array([exact]), "rz")[0] == 0x3F800001


def test_plus_norm_zero_exponent_takes_part_in_the_maximum():
    # FP16-output unit: a zero term (here the zero C) takes exponent -21, so the terms are cut
    # 25 bits below 2**-21: 2**-26 + 2**-26 + 2**-48 loses its 2**-48 and lands exactly on
    # the midpoint 2**-25 between FP16's 0 and 2**-24, which RNE sends to 0.  Without a zero
    # exponent the sum aligns on 2**-26, keeps 2**-48, and rounds up to 2**-24.
    spec = tc.instruction("hopper.wgmma.m64n8k16.f16.f16.f16").spec
    A = np.array([[2.0**-13, 2.0**-13, 2.0**-24]], np.float16)
    B = np.zeros((3, 1), np.float16)
    for zero_exponent, want in ((-21, 0x0000), (None, 0x0001)):
        unit = spec.model.with_(zero_exponent=zero_exponent)
        for engine in ("reference", "fast", "exact"):
            got = semiring_matmul(A, B, op="plus-norm", unit=unit, engine=engine)
            assert int(got.view(np.uint16)[0, 0]) == want, (zero_exponent, engine)


def test_plus_norm_specials():
    inf = np.inf
    cases = [  # (a row, b column, C, expected fp32 bits)
        ([inf, 1.0], [inf, 0.0], None, FP32_NAN),  # inf - inf
        ([inf, 1.0], [-inf, 0.0], None, 0x7F800000),
        ([2.0, 1.0], [inf, 0.0], None, 0x7F800000),
        ([2.0, 1.0], [1.0, 0.0], -inf, 0xFF800000),
        ([inf, 1.0], [1.0, 0.0], -inf, FP32_NAN),
        ([3.0, -1.0], [1.0, 1.0], None, 0x41000000),  # 4 + 4
        ([1.0, 1.0], [1.0, 1.0], None, 0x00000000),
    ]
    for a, b, c, want in cases:
        C = None if c is None else np.array([[c]], np.float32)
        for engine in ("reference", "fast", "exact"):
            got = semiring_matmul(np.array([a], np.float16), np.array(b, np.float16)[:, None], C, op="plus-norm",
                                  engine=engine)
            assert int(got.view(np.uint32)[0, 0]) == want, (a, b, c, engine)


@given(seed=st.integers(0, 2**32 - 1), K=st.integers(1, 40), in_format=st.sampled_from(["fp16", "e5m2"]))
def test_plus_norm_pairs_property(seed, K, in_format):
    rng = np.random.default_rng(seed)
    u = semiring_instruction("plus-norm", in_format)
    family = ["normal", "wide", "special"][seed % 3]
    a = operand_bits(u.a_format, (2, K), family, rng)
    b = operand_bits(u.b_format, (2, K), family, rng)
    c = operand_bits(u.c_format, (2,), family, rng)
    want = u.dot_bits(a, b, c, engine="exact")
    assert np.array_equal(u.dot_bits(a, b, c, engine="reference"), want)
    assert np.array_equal(u.dot_bits(a, b, c, engine="fast"), want)


# -- mul-plus is the catalogued unit ---------------------------------------------------------------

def test_mul_plus_is_the_unit_through_gemm():
    rng = np.random.default_rng(2)
    A = rng.normal(size=(5, 32)).astype(np.float16)
    B = rng.normal(size=(32, 3)).astype(np.float16)
    C = rng.normal(size=(5, 3)).astype(np.float32)
    for engine in ("reference", "fast"):
        got = semiring_matmul(A, B, C, op="mul-plus", engine=engine)
        assert np.array_equal(got.view(np.uint32), tc.gemm(A, B, C, instruction=DEFAULT_UNIT).view(np.uint32))
    # K = 20 is padded with zero products, which change nothing
    A20, B20 = A[:, :20], B[:20]
    padded = tc.gemm(np.pad(A20, ((0, 0), (0, 12))), np.pad(B20, ((0, 12), (0, 0))), C, instruction=DEFAULT_UNIT)
    assert np.array_equal(semiring_matmul(A20, B20, C, op="mul-plus").view(np.uint32), padded.view(np.uint32))
    # the pair form is the instruction's dot_bits, and the exact engine agrees
    u = semiring_instruction("mul-plus")
    a, b = u.a_format.bits_of(A20[:2]), u.b_format.bits_of(B20[:, :2].T)
    c = u.c_format.bits_of(C[:2, 0])
    assert np.array_equal(u.dot_bits(a, b, c), u.dot_bits(a, b, c, engine="exact"))
    # a bf16 unit, an FP16-output epilogue and a rounding what-if
    Ab, Bb = A.astype(np.float32), B.astype(np.float32)
    bf = semiring_matmul(Ab, Bb, op="mul-plus", unit="hopper.wgmma.m64n8k16.f32.bf16.bf16")
    assert np.array_equal(bf, tc.gemm(Ab, Bb, instruction="hopper.wgmma.m64n8k16.f32.bf16.bf16"))
    half = semiring_matmul(A, B, op="mul-plus", out_format="fp16")
    assert half.dtype == np.float16 and np.array_equal(half, tc.gemm(A, B, instruction=DEFAULT_UNIT,
                                                                     out_format="fp16"))
    assert "rne" in semiring_instruction("mul-plus", rounding="rne").model.output_rounding.value


# -- or-and --------------------------------------------------------------------------------------

def test_or_and_booleans():
    rng = np.random.default_rng(4)
    A = rng.random((6, 9)) < 0.3
    B = rng.random((9, 7)) < 0.3
    C = rng.random((6, 7)) < 0.1
    want = (A.astype(int) @ B.astype(int) > 0) | C
    for engine in ("reference", "fast", "exact"):
        got = semiring_matmul(A, B, C, op="or-and", engine=engine)
        assert got.dtype == bool and np.array_equal(got, want)
    assert np.array_equal(semiring_matmul(A.astype(float), B.astype(np.int8), op="or-and"),
                          A.astype(int) @ B.astype(int) > 0)  # numbers: nonzero is true
    u = semiring_instruction("or-and")
    assert u.dot_bits(np.array([[0, 1]], np.uint8), np.array([[1, 1]], np.uint8)).tolist() == [1]
    with pytest.raises(ValueError, match="a: boolean bit patterns must be 0 or 1"):
        u.dot_bits(np.array([[2]], np.uint8), np.array([[1]], np.uint8))
    with pytest.raises(ValueError, match="A: NaN is neither true nor false"):
        semiring_matmul(np.array([[np.nan]]), np.array([[1.0]]), op="or-and")


# -- formats, description, closure -----------------------------------------------------------------

def test_auto_formats_follow_the_operands():
    A32 = np.array([[1 + 2.0**-20]], np.float32)
    one = np.array([[0.0]], np.float16)
    assert semiring_matmul(A32, one, op="min-plus")[0, 0] == np.float32(1 + 2.0**-20)  # not rounded to FP16
    assert semiring_matmul(np.array([[3.0]]), np.array([[0.25]]), op="min-plus")[0, 0] == 3.25  # float64 held in FP16
    with pytest.raises(ValueError, match="A: some float64 values are exact in neither FP16 nor FP32"):
        semiring_matmul(np.array([[0.1]]), np.array([[0.25]]), op="min-plus")
    assert semiring_matmul(np.array([[0.1]]), np.array([[0.0]]), op="min-plus", in_format="fp16")[0, 0] == \
        np.float32(np.float16(0.1))
    # plus-type ops read the unit's formats, as tcnumerics.gemm does
    assert semiring_matmul(A32, np.array([[1.0]], np.float32), op="plus-norm")[0, 0] == 0.0


def test_describe_and_repr():
    assert "one rounding to fp32 (RNE)" in semiring_instruction("min-plus").describe()
    assert "fused" in semiring_instruction("plus-norm").describe()
    assert "mul-plus" in repr(semiring_instruction("mul-plus"))
    assert "booleans" in semiring_instruction("or-and").describe()


def test_closure():
    inf = np.inf
    D = np.array([[0, 4, inf], [inf, 0, 1], [1, inf, 0]], np.float16)
    assert semiring_closure(D, op="min-plus").tolist() == [[0, 4, 5], [2, 0, 1], [1, 5, 0]]
    assert semiring_closure(D, op="min-plus", max_squarings=0) is not None
    with pytest.raises(ValueError, match="D: expected a square matrix"):
        semiring_closure(np.zeros((2, 3), np.float16), op="min-plus")
    with pytest.raises(ValueError, match="op: plus-norm accumulates"):
        semiring_closure(D, op="plus-norm")


# -- bad input -----------------------------------------------------------------------------------

@pytest.mark.parametrize("call, error, message", [
    (lambda: semiring_matmul(np.ones((2, 3)), np.ones((4, 2)), op="min-plus"), ValueError, "A, B: inner dimensions"),
    (lambda: semiring_matmul(np.ones(3), np.ones((3, 2)), op="min-plus"), ValueError, "A: expected a 2-D matrix"),
    (lambda: semiring_matmul(np.ones((2, 2)), np.ones((2, 2)), np.ones((3, 3)), op="min-plus"), ValueError,
     "C: expected shape"),
    (lambda: semiring_matmul(np.array([["x"]]), np.ones((1, 1)), op="min-plus"), TypeError, "A: expected numbers"),
    (lambda: semiring_matmul(np.ones((1, 1)), np.ones((1, 1)), op="min-plus", engine="gpu"), ValueError, "engine:"),
    (lambda: semiring_matmul(np.ones((1, 1)), np.ones((1, 1)), op="min-plus", out_format="e4m3"), ValueError,
     "out_format: e4m3 has no ±infinity"),
    (lambda: semiring_matmul(np.ones((1, 1)), np.ones((1, 1)), op="min-plus", in_format="s8"), ValueError,
     "in_format: s8 is not a floating-point format"),
    (lambda: semiring_matmul(np.ones((1, 1)), np.ones((1, 1)), op="min-plus", in_format="fp64"), ValueError,
     "in_format: fp64 is wider than 32 bits"),
    (lambda: semiring_matmul(np.ones((1, 1)), np.ones((1, 1)), op="min-plus", in_format="fp17"), ValueError,
     "in_format: format: unknown format"),
    (lambda: semiring_matmul(np.ones((1, 1)), np.ones((1, 1)), op="min-plus", rounding="sr"), ValueError,
     "rounding: stochastic"),
    (lambda: semiring_matmul(np.ones((1, 1)), np.ones((1, 1)), op="min-plus", rounding="up"), ValueError,
     "rounding: unknown mode"),
    (lambda: semiring_matmul(np.ones((1, 1)), np.ones((1, 1)), op="mul-plus", in_format="bf16"), ValueError,
     "in_format: mul-plus runs on hopper.wgmma.m64n8k16.f32.f16.f16"),
    (lambda: semiring_matmul(np.ones((1, 1)), np.ones((1, 1)), op="or-and", in_format="fp16"), ValueError,
     "in_format: or-and works on booleans"),
    (lambda: semiring_matmul(np.ones((1, 1)), np.ones((1, 1)), op="plus-norm", out_format="fp99"), ValueError,
     "out_format: format: unknown format 'fp99'"),
    (lambda: semiring_matmul(np.ones((1, 1)), np.ones((1, 1)), op="mul-plus", out_format="s8"), ValueError,
     "out_format: cannot convert fp32 results to integer format s8"),
    (lambda: semiring_matmul(np.ones((1, 1)), np.ones((1, 1)), op="plus-norm",
                             unit="hopper.mma.m16n8k32.s32.s8.s8.s32"), ValueError, "unit: plus-norm needs a fused floating-point unit"),
    (lambda: semiring_matmul(np.ones((1, 1)), np.ones((1, 1)), op="plus-norm", unit="hopper.nope"), ValueError,
     "unit: instruction: unknown name"),
    (lambda: semiring_matmul(np.ones((1, 1)), np.ones((1, 1)), op="plus-norm", unit=3), TypeError, "unit: expected"),
    (lambda: semiring_instruction("min-plus").dot_bits(np.ones((1, 2)), np.ones((1, 2), np.uint16)), TypeError,
     "a: expected unsigned integer bit patterns"),
    (lambda: semiring_instruction("min-plus").dot_bits(np.ones((1, 2), np.uint16), np.ones((1, 3), np.uint16)),
     ValueError, "a, b: shapes differ"),
    (lambda: semiring_instruction("min-plus").dot_bits(np.ones((2, 2), np.uint16), np.ones((2, 2), np.uint16),
                                                       np.ones(3, np.uint32)), ValueError, r"c: expected shape \(2,\)"),
    (lambda: semiring_instruction("min-plus").dot_bits(np.full((1, 1), 70000), np.ones((1, 1), np.uint16)),
     ValueError, "a: bit patterns must lie in"),
])
def test_bad_input_names_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


# -- the fast kernels' exact arithmetic helpers, on their whole domain ---------------------------------

def test_fast_floor_of_scaled_square():
    from fractions import Fraction

    from tcnumerics.semiring.fast import floor_scaled_square

    # (2**30 - 9)**2 = 2**60 - 18*2**30 + 81 rounds up to a multiple of 2**7 in float64: the
    # exact square is below that integer and the floor must step down
    d = 2.0**30 - 9
    assert floor_scaled_square(d, 2.0**-7) == (int(d) ** 2) // 128 == float(d * d) / 128 - 1
    rng = np.random.default_rng(8)
    for _ in range(2000):
        d = float(rng.integers(1, 2**41)) * 2.0 ** int(rng.integers(-30, 5)) * (1 if rng.random() < 0.5 else -1)
        exact = Fraction(d) ** 2
        shift = int(np.floor(np.log2(float(exact)))) - int(rng.integers(1, 50))
        scale = 2.0 ** -shift
        want = exact * Fraction(scale)
        assert floor_scaled_square(d, scale) == want.numerator // want.denominator


@pytest.mark.parametrize("rounding", ["rne", "rna", "rz", "ru", "rd", "rto"])
@pytest.mark.parametrize("overflow", ["inf", "ieee", "saturate"])
def test_fast_round_scaled_equals_encode(rounding, overflow):
    from tcnumerics.semiring.fast import OVERFLOW_CODES, ROUNDING_CODES, round_scaled

    rng = np.random.default_rng(6)
    for name in ("fp32", "fp16", "bf16"):
        fmt = get_format(name)
        total = rng.integers(-(2**40), 2**40, size=300) >> rng.integers(0, 40, size=300)
        q = rng.integers(fmt.emin - fmt.man_bits - 45, fmt.emax - 20, size=300)
        want = fmt.encode(total < 0, np.abs(total), q, rounding, overflow=overflow)
        want = np.where(want == (1 << (fmt.width - 1)), 0, want)  # -0 is written +0
        got = [round_scaled(int(t), int(e), fmt.man_bits, fmt.emin, fmt.max_finite, ROUNDING_CODES[rounding],
                            OVERFLOW_CODES[overflow]) for t, e in zip(total, q)]
        assert np.array_equal(fmt.from_float(np.array(got)), want)
