"""Input families: shapes, determinism, and that each family really has the property it names."""

from fractions import Fraction

import numpy as np
import pytest

import tcnumerics as tc
from tcnumerics.catalog import get_instruction
from tcnumerics.engines import oracle
from tcnumerics.formats import FloatFormat, IntFormat
from tcnumerics.vectors.families import FAMILIES, expected_d, families_for, generate


def _one_per_signature():
    """One instruction per operand/accumulator format combination (families depend on nothing else)."""
    seen = {}
    for name in tc.instructions():
        spec = get_instruction(name)
        key = (spec.a_format.name, spec.b_format.name, spec.c_format.name, spec.d_format.name, spec.k)
        seen.setdefault(key, name)
    return sorted(seen.values())


SIGNATURES = _one_per_signature()
BF16 = "hopper.wgmma.m64n8k16.f32.bf16.bf16"
FP16_OUT = "hopper.mma.m16n8k16.f16.f16.f16.f16"
FP8 = "hopper.wgmma.m64n8k32.f32.e4m3.e5m2"
TF32 = "hopper.wgmma.m64n8k8.f32.tf32.tf32"
S8 = "hopper.mma.m16n8k32.s32.s8.s8.s32"


def _rng(seed=0):
    return np.random.default_rng(seed)


@pytest.mark.parametrize("name", SIGNATURES)
def test_every_format_combination_every_family_shapes_and_replay(name):
    spec = get_instruction(name)
    fams = families_for(spec)
    assert fams and set(fams) <= set(FAMILIES)
    for fam in fams:
        a, b, c = generate(spec, fam, 9, _rng(1))
        assert a.shape == (9, spec.k) and b.shape == (9, spec.k) and c.shape == (9,)
        assert a.dtype == spec.a_format.container_dtype and b.dtype == spec.b_format.container_dtype
        assert c.dtype == spec.c_format.container_dtype
        with np.errstate(all="ignore"):
            d = expected_d(spec, a, b, c, engine="reference")
        assert d.shape == (9,) and d.dtype == spec.d_format.container_dtype


@pytest.mark.parametrize("name", [BF16, FP16_OUT, FP8, TF32, S8, "hopper.mma.m16n8k32.f32.e4m3.e5m2.f32"])
def test_model_d_agrees_with_exact_oracle(name):
    # the d written into generated files equals the independent Fraction-based oracle
    for fam in families_for(name):
        a, b, c = generate(name, fam, 24, _rng(2))
        with np.errstate(all="ignore"):
            ref = expected_d(name, a, b, c, engine="reference")
            exact = expected_d(name, a, b, c, engine="exact")
        assert np.array_equal(ref, exact), fam


def test_seeded_generation_is_deterministic_and_seed_sensitive():
    x = generate(BF16, "align", 50, _rng(7))
    y = generate(BF16, "align", 50, _rng(7))
    z = generate(BF16, "align", 50, _rng(8))
    assert all(np.array_equal(p, q) for p, q in zip(x, y))
    assert not np.array_equal(x[0], z[0])


def test_chained_k():
    a, b, c = generate(BF16, "normal", 5, _rng(), k=64)
    assert a.shape == (5, 64)
    d = expected_d(BF16, a, b, c, engine="reference")
    assert d.shape == (5,)
    with pytest.raises(ValueError, match="k: 40 is not a positive multiple"):
        generate(BF16, "normal", 5, _rng(), k=40)
    mixed = next(n for n in tc.instructions() if get_instruction(n).c_format != get_instruction(n).d_format)
    with pytest.raises(ValueError, match="chains"):
        generate(mixed, "normal", 5, _rng(), k=2 * get_instruction(mixed).k)


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="family: unknown 'gauss'"):
        generate(BF16, "gauss", 3, _rng())
    with pytest.raises(ValueError, match="'tf32' does not apply"):
        generate(BF16, "tf32", 3, _rng())
    with pytest.raises(ValueError, match="'align' does not apply"):
        generate(S8, "align", 3, _rng())
    with pytest.raises(ValueError, match="count"):
        generate(BF16, "int", -1, _rng())
    with pytest.raises(TypeError, match="rng"):
        generate(BF16, "int", 3, 42)
    with pytest.raises(ValueError, match="unknown name"):
        generate("hopper.nope", "int", 3, _rng())


def test_families_for():
    assert "tf32" in families_for(TF32) and "tf32" not in families_for(BF16)
    assert families_for(S8) == ["int", "normal", "bits", "cancel", "special", "overflow"]


# --- each family has its property ----------------------------------------------------------

def _values(fmt, bits):
    return fmt.to_float(bits)


@pytest.mark.parametrize("name", [BF16, FP16_OUT, FP8, TF32])
def test_int_family_is_exact(name):
    spec = get_instruction(name)
    a, b, c = generate(spec, "int", 200, _rng(3))
    av, bv, cv = _values(spec.a_format, a), _values(spec.b_format, b), _values(spec.c_format, c)
    assert np.all(av == np.round(av)) and np.all(bv == np.round(bv)) and np.all(cv == np.round(cv))
    d = _values(spec.d_format, expected_d(spec, a, b, c, engine="reference"))
    assert np.array_equal(d, (av * bv).sum(axis=1) + cv)  # small integers: every result exact
    assert len(np.unique(d)) > 50


def test_int_family_integer_instruction_is_small():
    spec = get_instruction(S8)
    a, b, c = generate(spec, "int", 100, _rng())
    assert np.abs(spec.a_format.decode_int(a)).max() <= 8 and np.abs(spec.c_format.decode_int(c)).max() <= 1000


@pytest.mark.parametrize("name", [BF16, FP16_OUT, FP8])
def test_normal_family_looks_normal(name):
    spec = get_instruction(name)
    a, _, _ = generate(spec, "normal", 2000, _rng(4))
    v = _values(spec.a_format, a)
    assert abs(v.mean()) < 0.05 and 0.9 < v.std() < 1.1


@pytest.mark.parametrize("name", [BF16, FP16_OUT, FP8, TF32])
def test_bits_family_covers_specials_and_subnormals(name):
    spec = get_instruction(name)
    a, b, c = generate(spec, "bits", 2000, _rng(5))
    dec = spec.a_format.decode(a)
    subnormal = (dec.kind == 0) & (dec.significand > 0) & (dec.significand < (1 << spec.a_format.man_bits))
    assert subnormal.any() and dec.is_nan.any()
    if spec.a_format.width <= 16:  # zero is one pattern in 2**19 for TF32
        assert dec.is_zero.any()
    d = _values(spec.d_format, expected_d(spec, a, b, c, engine="reference"))
    assert np.isfinite(d).mean() > 0.05  # not swamped by NaN


@pytest.mark.parametrize("name", [BF16, FP16_OUT, FP8, TF32])
def test_cancel_family_cancels(name):
    spec = get_instruction(name)
    a, b, c = generate(spec, "cancel", 500, _rng(6))
    p = _values(spec.a_format, a) * _values(spec.b_format, b)
    scale = np.abs(p).sum(axis=1) + np.abs(_values(spec.c_format, c))
    d = _values(spec.d_format, expected_d(spec, a, b, c, engine="reference"))
    assert np.mean(np.abs(d) < scale * 2.0 ** -6) > 0.8


@pytest.mark.parametrize("name", [BF16, FP16_OUT, FP8, TF32])
def test_align_family_spans_many_binades(name):
    spec = get_instruction(name)
    a, b, c = generate(spec, "align", 500, _rng(7))
    p = np.abs(_values(spec.a_format, a) * _values(spec.b_format, b))
    terms = np.concatenate([p, np.abs(_values(spec.c_format, c))[:, None]], axis=1)
    with np.errstate(divide="ignore"):
        e = np.where(terms > 0, np.floor(np.log2(np.where(terms > 0, terms, 1))), np.nan)
    span = np.nanmax(e, axis=1) - np.nanmin(e, axis=1)
    assert np.mean(span >= 12) > 0.7
    # the boundary half puts terms around 2**-13 and 2**-25 below the largest: both truncation points
    gaps = np.nanmax(e, axis=1)[:, None] - e
    assert np.any((gaps >= 12) & (gaps <= 14)) and np.any((gaps >= 24) & (gaps <= 26))


@pytest.mark.parametrize("name", [BF16, FP16_OUT, FP8, TF32])
def test_cdom_family_is_accumulator_dominant_with_ties(name):
    spec = get_instruction(name)
    a, b, c = generate(spec, "cdom", 500, _rng(8))
    p = _values(spec.a_format, a) * _values(spec.b_format, b)
    cv = _values(spec.c_format, c)
    assert np.mean(np.abs(p).sum(axis=1) < np.abs(cv) / 2) > 0.95
    # the biggest product is an exact power-of-two fraction of C's leading binade: a tie candidate
    top = np.abs(p).max(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log2(top / 2.0 ** np.floor(np.log2(np.abs(cv))))
    with np.errstate(invalid="ignore"):
        frac = ratio - np.floor(ratio)
    assert np.mean(np.isclose(frac, 0) | np.isclose(frac, 1) | np.isclose(frac, np.log2(1.5))) > 0.9


@pytest.mark.parametrize("name", [BF16, FP16_OUT, FP8, TF32])
def test_special_family_has_every_special(name):
    spec = get_instruction(name)
    fa = spec.a_format
    a, b, c = generate(spec, "special", 600, _rng(9))
    A, B, C = fa.decode(a), spec.b_format.decode(b), spec.c_format.decode(c)
    assert (A.is_zero & A.sign).any() and (A.is_zero & ~A.sign).any()
    assert (C.is_zero & C.sign).any() and A.is_nan.any() and C.is_nan.any()
    assert (a == (fa.max_code << fa.pad_bits)).any()
    if fa.has_inf:
        assert A.is_inf.any() and (A.is_inf & B.is_zero).any()  # inf * 0
        both = (A.is_inf & A.sign).any(axis=1) & (A.is_inf & ~A.sign).any(axis=1)
        assert both.any()  # +inf and -inf in one vector
    d = spec.d_format.decode(expected_d(spec, a, b, c, engine="reference"))
    assert d.is_nan.any() and d.is_inf.any() and d.is_zero.any()


def test_tf32_family_puts_garbage_below_the_unit():
    spec = get_instruction(TF32)
    a, b, c = generate(spec, "tf32", 400, _rng(10))
    low = (1 << 13) - 1
    assert np.mean((a & low) != 0) > 0.9 and np.mean((b & low) != 0) > 0.9
    # garbage below an infinity pattern must still read as infinity, never NaN
    assert (spec.a_format.decode(a).is_inf & ((a & low) != 0)).any()


@pytest.mark.parametrize("name,lo", [(BF16, 0.2), (FP16_OUT, 0.2), ("hopper.wgmma.m64n8k16.f32.f16.f16", 0.1)])
def test_overflow_family_reaches_the_output_limit(name, lo):
    spec = get_instruction(name)
    a, b, c = generate(spec, "overflow", 500, _rng(11))
    d = spec.d_format.decode(expected_d(spec, a, b, c, engine="reference"))
    top = d.is_inf | ((d.kind == 0) & (d.exponent == spec.d_format.emax))
    assert top.mean() > lo and (~d.is_inf).any()


@pytest.mark.parametrize("name", [S8, "hopper.mma.m16n8k32.satfinite.s32.u8.s8.s32", "hopper.wgmma.m64n8k32.s32.u8.u8"])
def test_integer_overflow_family_crosses_int32(name):
    spec = get_instruction(name)
    a, b, c = generate(spec, "overflow", 400, _rng(12))
    exact = (spec.a_format.decode_int(a) * spec.b_format.decode_int(b)).sum(axis=1) + spec.c_format.decode_int(c)
    out = (exact > 2**31 - 1) | (exact < -2**31)
    assert 0.2 < out.mean() < 0.9


def test_int_cancel_family_cancels_exactly():
    spec = get_instruction(S8)
    a, b, c = generate(spec, "cancel", 200, _rng())
    d = spec.d_format.decode_int(expected_d(spec, a, b, c, engine="reference"))
    assert np.abs(d).max() <= 2 and (d == 0).any()


def test_true_value_of_int_family_matches_oracle():
    # a cross-check through the exact oracle's true_dot on the fp8 mixed-format unit
    a, b, c = generate(FP8, "int", 20, _rng(13))
    true = tc.true_dot(FP8, a, b, c)
    spec = get_instruction(FP8)
    d = _values(spec.d_format, expected_d(FP8, a, b, c, engine="reference"))
    assert [Fraction(float(x)) for x in d] == list(true)
