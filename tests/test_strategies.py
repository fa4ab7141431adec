"""The property-test kit: strategies draw what they promise, each family hits its feature,
arguments are checked, and failures shrink to small examples."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

import tcnumerics as tc
from tcnumerics import strategies as tcs
from tcnumerics.catalog import all_instructions, get_instruction
from tcnumerics.engines import oracle, reference
from tcnumerics.formats import FloatFormat, IntFormat, format_names, get_format

FLOAT_FORMATS = [n for n in format_names() if isinstance(get_format(n), FloatFormat)]
BF16 = "hopper.wgmma.m64n8k16.f32.bf16.bf16"
FP16_OUT = "hopper.wgmma.m64n8k16.f16.f16.f16"
FP8 = "hopper.wgmma.m64n8k32.f32.e4m3.e5m2"
S8 = "hopper.mma.m16n8k32.s32.s8.s8.s32"
FIND = settings(max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck))


def _kinds(fmt, bits):
    d = fmt.decode(np.asarray(bits, dtype=np.uint64).astype(fmt.container_dtype))
    subnormal = (d.kind == 0) & (d.significand != 0) & (d.significand < (1 << fmt.man_bits)) if fmt.subnormals \
        else np.zeros(d.kind.shape, bool)
    return d.kind, subnormal


# --- bit_patterns / special_patterns / values ---------------------------------------------------
@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_bit_patterns_respect_their_options(name):
    fmt = get_format(name)

    @settings(max_examples=60, deadline=None)
    @given(st.data())
    def check(data):
        specials, subnormals, low = data.draw(st.booleans()), data.draw(st.booleans()), data.draw(st.booleans())
        x = data.draw(tcs.bit_patterns(fmt, specials, subnormals=subnormals, low_bits=low))
        assert 0 <= x < 1 << fmt.container_bits
        if not low:
            assert x & ((1 << fmt.pad_bits) - 1) == 0
        kind, subnormal = _kinds(fmt, [x])
        if not specials:
            assert kind[0] == 0
        if not subnormals:
            assert not subnormal[0]

    check()


@pytest.mark.parametrize("name", ["fp16", "e4m3", "tf32", "e4m3fnuz"])
def test_bit_patterns_reach_specials_and_shrink_to_zero(name):
    fmt = get_format(name)
    assert find(tcs.bit_patterns(fmt), lambda x: True, settings=FIND) == 0
    nan = find(tcs.bit_patterns(fmt), lambda x: np.isnan(fmt.to_float(np.array([x], fmt.container_dtype)))[0],
               settings=FIND)
    assert np.isnan(fmt.to_float(np.array([nan], fmt.container_dtype)))[0]
    if fmt.subnormals:
        sub = find(tcs.bit_patterns(fmt), lambda x: bool(_kinds(fmt, [x])[1][0]), settings=FIND)
        assert sub >> fmt.pad_bits == 1  # shrinks to the smallest subnormal


def test_special_patterns_follow_each_format():
    values = {n: get_format(n).to_float(tcs.special_patterns(n)) for n in ("fp16", "e4m3", "e4m3fnuz", "e2m1")}
    assert np.isinf(values["fp16"]).sum() == 2 and np.isnan(values["fp16"]).sum() == 4  # +-, signalling, payload
    assert not np.isinf(values["e4m3"]).any() and np.isnan(values["e4m3"]).sum() == 2
    fnuz = tcs.special_patterns("e4m3fnuz")
    assert 0x80 in fnuz.tolist() and np.isnan(values["e4m3fnuz"]).sum() == 1  # the only NaN, no -0
    assert not np.isnan(values["e2m1"]).any() and 6.0 in values["e2m1"].tolist()
    assert tcs.special_patterns("fp16")[0] == 0
    assert set(tcs.special_patterns("s8").tolist()) >= {0x7F, 0x80}


@pytest.mark.parametrize("name", ["bf16", "e5m2", "e2m1", "tf32", "fp32"])
def test_exact_values_are_representable(name):
    fmt = get_format(name)

    @settings(max_examples=80, deadline=None)
    @given(tcs.values(fmt, specials=True))
    def check(x):
        assert np.array_equal(fmt.round(np.array([x])), np.array([x]), equal_nan=True)

    check()


def test_values_honour_their_range():
    fmt = get_format("e4m3")

    @settings(max_examples=80, deadline=None)
    @given(tcs.values(fmt, min_value=-2.0, max_value=0.5), tcs.values("bf16", exact=False, min_value=1, max_value=8))
    def check(x, y):
        assert -2.0 <= x <= 0.5 and fmt.round(np.array([x]))[0] == x
        assert 1 <= y <= 8

    check()


def test_inexact_values_hit_ties_and_overflow():
    fp16 = get_format("fp16")

    def is_tie(x):
        lo = fp16.round(np.array([x]), "rd")[0]
        hi = fp16.round(np.array([x]), "ru")[0]
        return lo != hi and x - lo == hi - x

    tie = find(tcs.values(fp16, exact=False), is_tie, settings=FIND)
    assert fp16.round(np.array([tie]))[0] != tie
    big = find(tcs.values(fp16, exact=False), lambda x: abs(x) > fp16.max_finite, settings=FIND)
    assert fp16.from_float(np.array([big]), overflow="saturate")[0] & 0x7FFF == 0x7BFF
    assert find(tcs.values("s8", exact=False), lambda v: v > 127, settings=FIND) == 128


def test_values_and_strategy_arguments_are_checked():
    with pytest.raises(ValueError, match="min_value"):
        tcs.values("fp16", min_value=2.0, max_value=1.0)
    with pytest.raises(ValueError, match="min_value"):
        tcs.values("fp16", min_value=float("nan"))
    with pytest.raises(ValueError, match="exact"):
        tcs.values("fp64", exact=False)
    with pytest.raises(ValueError, match="format"):
        tcs.bit_patterns("fp17")
    with pytest.raises(TypeError, match="specials"):
        tcs.bit_patterns("fp16", specials="yes")
    with pytest.raises(TypeError, match="elements"):
        tcs.matrices("fp16", (2, 2), elements=[1, 2])
    with pytest.raises(ValueError, match="family"):
        tcs.dot_products(BF16, family="gaussian")
    with pytest.raises(ValueError, match="family"):
        tcs.dot_products(S8, family="subnormal")  # integer units have none
    with pytest.raises(ValueError, match="k_steps"):
        unchainable = next(s for s in all_instructions() if s.c_format != s.d_format)
        tcs.dot_products(unchainable, k_steps=2)  # C and D formats differ: no chaining
    with pytest.raises(ValueError, match="batch"):
        tcs.dot_products(BF16, batch=0)
    with pytest.raises(TypeError, match="batch"):
        tcs.dot_products(BF16, batch="4")
    with pytest.raises(TypeError, match="seed"):
        tcs.sample_dot_products(BF16, 10, seed="x")
    with pytest.raises(ValueError, match="instruction"):
        tcs.sample_dot_products("hopper.nope", 10)
    with pytest.raises(ValueError, match="max_m"):
        tcs.mma_operands(BF16, max_m=0)


# --- dot_products: shapes, families ---------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(st.data())
def test_dot_products_have_the_promised_shape(data):
    name = data.draw(st.sampled_from([BF16, FP8, S8, "hopper.mma.m16n8k8.f32.tf32.tf32.f32",
                                      "hopper.mma.m16n8k32.f32.e4m3.e5m2.f32"]))
    spec = get_instruction(name)
    steps, batch = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 5))
    case = data.draw(tcs.dot_products(tc.instruction(name), k_steps=steps, batch=batch))
    assert case.a.shape == case.b.shape == (batch, steps * spec.k)
    assert case.c.shape == (batch,) and len(case) == batch
    assert case.a.dtype == spec.a_format.container_dtype and case.c.dtype == spec.c_format.container_dtype
    assert set(case.family) <= set(tcs.families(spec)) and len(set(case.family)) == 1
    assert tc.instruction(name, engine="reference").dot_bits(case.a, case.b, case.c).shape == (batch,)


def test_every_family_samples_valid_bits_for_every_operand_combination():
    seen = set()
    for spec in all_instructions():
        key = (spec.a_format, spec.b_format, spec.c_format, spec.k, getattr(spec.model, "frac_bits", None))
        if key in seen:
            continue
        seen.add(key)
        for family in tcs.families(spec):
            batch = tcs.sample_dot_products(spec, 40, family=family, seed=1)
            for fmt, bits in ((spec.a_format, batch.a), (spec.b_format, batch.b), (spec.c_format, batch.c)):
                assert bits.dtype == fmt.container_dtype, (spec.name, family)
                if isinstance(fmt, IntFormat):
                    assert int(bits.max()) < 1 << fmt.bits, (spec.name, family)
                elif family != "special":
                    assert (_kinds(fmt, bits)[0] == 0).all(), (spec.name, family, "non-finite outside 'special'")


def _results(name, family, n=3000, seed=0):
    spec = get_instruction(name)
    batch = tcs.sample_dot_products(spec, n, family=family, seed=seed)
    return spec, batch, reference.dot_bits(spec, batch.a, batch.b, batch.c)


def test_special_family_produces_nan_inf_and_finite_results():
    spec, _, d = _results(BF16, "special")
    v = spec.d_format.to_float(d)
    assert 0.2 < np.isnan(v).mean() < 0.9
    assert np.isinf(v).mean() > 0.02 and np.isfinite(v).mean() > 0.05


def test_overflow_family_overflows():
    for name in (FP16_OUT, BF16):
        spec, _, d = _results(name, "overflow")
        v = spec.d_format.to_float(d)
        assert np.isinf(v).mean() > 0.5, name
    spec, _, d = _results(S8, "overflow")
    assert (np.abs(spec.d_format.decode_int(d)) > 1 << 30).mean() > 0.5  # at the int32 limits: wraps


def test_subnormal_family_feeds_subnormals():
    spec, batch, d = _results(BF16, "subnormal", n=500)
    assert _kinds(spec.a_format, batch.a)[1].mean() > 0.3
    assert _kinds(spec.c_format, batch.c)[1].mean() > 0.3


def _true_sums(spec, batch, rows):
    return oracle.true_dot(spec, batch.a[rows], batch.b[rows], batch.c[rows])


def test_cancellation_family_cancels():
    spec, batch, d = _results(BF16, "cancel", n=300)
    rows = np.arange(len(batch))
    exact = _true_sums(spec, batch, rows)
    largest = np.abs(spec.a_format.to_float(batch.a) * spec.b_format.to_float(batch.b)).max(axis=1)
    tiny = [abs(float(s)) <= 2.0 ** -8 * m for s, m in zip(exact, largest)]
    assert np.mean(tiny) > 0.3


def test_wide_alignment_family_spreads_exponents_beyond_frac_bits():
    spec, batch, _ = _results(FP16_OUT, "align", n=500)
    p = np.abs(spec.a_format.to_float(batch.a) * spec.b_format.to_float(batch.b))
    with np.errstate(divide="ignore"):
        e = np.where(p > 0, np.floor(np.log2(np.where(p > 0, p, 1))), np.nan)
    spread = np.nanmax(e, axis=1) - np.nanmin(e, axis=1)
    assert (spread > spec.model.frac_bits).mean() > 0.5


def test_accumulator_dominant_family_hits_rounding_ties():
    # exact sums exactly halfway between two neighbouring outputs: RNE must pick the even one
    spec, batch, d = _results(FP16_OUT, "cdom", n=400)
    out = spec.model.output_format
    exact = _true_sums(spec, batch, np.arange(len(batch)))
    ties = 0
    for s in exact:
        lo = out.to_float(out.from_float(np.array([float(s)]), "rd"))[0]
        hi = out.to_float(out.from_float(np.array([float(s)]), "ru"))[0]
        ties += lo != hi and Fraction(s) - Fraction(lo) == Fraction(hi) - Fraction(s)
    assert ties >= 10
    big_c = np.abs(spec.c_format.to_float(batch.c)) > np.abs(spec.a_format.to_float(batch.a)).max(axis=1)
    assert big_c.mean() > 0.75


def test_int_family_is_exact():
    for name in (BF16, FP8, S8):
        spec, batch, d = _results(name, "int", n=200)
        exact = _true_sums(spec, batch, np.arange(len(batch)))
        assert np.array_equal(spec.d_format.to_float(d), np.array([float(s) for s in exact])), name


def test_tf32_containers_carry_garbage_low_bits():
    spec = get_instruction("hopper.mma.m16n8k8.f32.tf32.tf32.f32")
    batch = tcs.sample_dot_products(spec, 500, seed=2)
    assert ((batch.a & 0x1FFF) != 0).mean() > 0.2


def test_sampling_is_seeded():
    one = tcs.sample_dot_products(FP8, 300, seed=11)
    two = tcs.sample_dot_products(FP8, 300, seed=11)
    other = tcs.sample_dot_products(FP8, 300, seed=12)
    assert np.array_equal(one.a, two.a) and np.array_equal(one.c, two.c)
    assert not np.array_equal(one.a, other.a)
    assert len(one) == 300 and len(one[:5]) == 5 and len(tcs.DotProducts.concat([one, two])) == 600


def test_failures_shrink_to_small_cases():
    # a NaN result needs one special operand: the shrunk case has (almost) nothing else
    inst = tc.instruction(BF16)

    def gives_nan(case):
        return bool(np.isnan(inst.d_format.to_float(inst.dot_bits(case.a, case.b, case.c))).any())

    # derandomized: about 1 random search in 8 ends at a special in every position of b (hypothesis's array fill
    # draws them as one value, so no single step removes all but one) -- found in CI 2026-11-26; a fill-free
    # DrawSource shrinks every search but costs ~1.5x the strategy tests and trips health checks at K = 256
    case = find(tcs.dot_products(inst, family="special"), gives_nan, settings=settings(FIND, derandomize=True))
    assert np.count_nonzero(case.a) + np.count_nonzero(case.b) <= 2, case
    # a wrapped integer sum: the shrunk case is far simpler than random data
    s8 = tc.instruction(S8)

    def wraps(case):
        exact = oracle.true_dot(s8.spec, case.a, case.b, case.c)[0]
        return exact != int(s8.d_format.decode_int(s8.dot_bits(case.a, case.b, case.c))[0])

    case = find(tcs.dot_products(s8, family=["int", "overflow"]), wraps, settings=FIND)
    assert case.family[0] == "overflow"


# --- matrices / mma_operands -----------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(tcs.matrices("e4m3", st.tuples(st.integers(1, 3), st.integers(1, 3)), specials=True),
       tcs.matrices("s8", (2, 2)), tcs.matrices("tf32", (1, 4)))
def test_matrices_come_in_the_format_array_type(x, y, z):
    import ml_dtypes

    assert x.dtype == ml_dtypes.float8_e4m3fn and 1 <= x.shape[0] <= 3
    assert y.dtype == np.int8
    assert z.dtype == np.float32


@settings(max_examples=8, deadline=None)
@given(tcs.mma_operands(S8, family="overflow", max_m=3, max_n=2, max_k_steps=2))
def test_mma_operands_fit_mma(ops):
    A, B, C = ops
    inst = tc.instruction(S8)
    assert A.shape[1] == B.shape[0] and A.shape[1] % 32 == 0 and C.shape == (A.shape[0], B.shape[1])
    assert inst.mma(A, B, C).shape == C.shape


def test_block_scaled_instructions_get_scales():
    from tcnumerics import blockscale

    spec = next(s for s in all_instructions() if getattr(s.model, "scale_block", None))
    batch = tcs.sample_dot_products(spec, 200, seed=4)
    blocks = batch.a.shape[1] // spec.model.scale_block
    assert batch.scale_a.shape == batch.scale_b.shape == (200, blocks)
    assert len(set(batch.scale_a.ravel().tolist())) > 3  # not only unit scales
    d = blockscale.dot_bits(spec.name, batch.a, batch.b, batch.c, scale_a=batch.scale_a, scale_b=batch.scale_b)
    assert np.isnan(spec.d_format.to_float(d[batch.family == "special"])).any()  # NaN scales reach the result
    plain = tcs.sample_dot_products(BF16, 5)
    assert plain.scale_a is None and plain.scale_b is None
