"""Formats: exhaustive round trips, every rounding mode against mpmath, agreement with ml_dtypes."""

import ml_dtypes
import mpmath
import numpy as np
import pytest

from tcnumerics.formats import FloatFormat, Rounding, format_names, get_format

SMALL_FLOATS = [n for n in format_names() if isinstance(get_format(n), FloatFormat) and get_format(n).width <= 16]
DIRECTED = [Rounding.RNE, Rounding.RNA, Rounding.RZ, Rounding.RU, Rounding.RD, Rounding.RTO]


@pytest.mark.parametrize("name", SMALL_FLOATS)
def test_every_pattern_round_trips(name):
    fmt = get_format(name)
    bits = fmt.all_bits()
    values = fmt.to_float(bits)
    back = fmt.from_float(values)
    nan = np.isnan(values)
    assert np.array_equal(back[~nan], bits[~nan])
    # NaNs come back as a NaN pattern of the format
    assert np.all(np.isnan(fmt.to_float(back[nan])))
    # decode agrees with to_float: significand * 2**ulp_exponent
    d = fmt.decode(bits)
    finite = d.kind == 0
    mags = np.ldexp(d.significand[finite].astype(float), d.ulp_exponent[finite].astype(np.int32))
    assert np.array_equal(np.where(d.sign[finite], -mags, mags), values[finite])


@pytest.mark.parametrize("name", SMALL_FLOATS)
def test_patterns_are_ordered_by_value(name):
    """Positive codes increase with value: the encoder's overflow test relies on it."""
    fmt = get_format(name)
    codes = np.arange(fmt.max_code + 1, dtype=np.uint64) << np.uint64(fmt.pad_bits)
    v = fmt.to_float(codes.astype(fmt.container_dtype))
    assert np.all(np.diff(v) > 0)


def _mp_round(x: float, fmt: FloatFormat, mode: Rounding) -> float:
    """Reference rounding with mpmath: scale to the quantum of the target binade, round an integer."""
    mpmath.mp.prec = 200
    X = mpmath.mpf(x)
    if X == 0:
        return x
    p, emin = fmt.man_bits, fmt.emin
    e = int(mpmath.floor(mpmath.log(abs(X), 2)))
    while mpmath.mpf(2) ** e > abs(X):
        e -= 1
    while mpmath.mpf(2) ** (e + 1) <= abs(X):
        e += 1
    q = max(e - p, emin - p)
    n = X / mpmath.mpf(2) ** q
    fl, ce = mpmath.floor(n), mpmath.ceil(n)
    if mode is Rounding.RZ:
        r = fl if X > 0 else ce
    elif mode is Rounding.RU:
        r = ce
    elif mode is Rounding.RD:
        r = fl
    elif mode is Rounding.RTO:
        t = fl if X > 0 else ce
        r = t if t == n or int(abs(t)) % 2 == 1 else t + (1 if X > 0 else -1)
    else:
        diff = n - fl
        if diff > 0.5 or (diff == 0.5 and (mode is Rounding.RNA and X > 0 or mode is Rounding.RNE and int(fl) % 2)):
            r = ce
        elif diff == 0.5 and mode is Rounding.RNA and X < 0:
            r = fl
        else:
            r = fl
    return float(r * mpmath.mpf(2) ** q)


def _cases(fmt: FloatFormat, rng: np.random.Generator, count: int) -> np.ndarray:
    """Random values across the format's range, plus exact ties and near-ties."""
    exps = rng.integers(fmt.emin - fmt.man_bits - 2, fmt.emax + 1, count)
    random = rng.uniform(1, 2, count) * np.exp2(exps) * rng.choice([-1, 1], count)
    reps = fmt.to_float(rng.integers(0, fmt.max_code, count).astype(np.uint64) << np.uint64(fmt.pad_bits))
    reps = reps.astype(np.float64)
    ulp = np.exp2(np.maximum(np.floor(np.log2(np.abs(reps) + 1e-300)), fmt.emin) - fmt.man_bits)
    ties = (reps + ulp / 2) * rng.choice([-1, 1], count)
    near = (reps + ulp / 2 * (1 + 2.0 ** -30)) * rng.choice([-1, 1], count)
    return np.concatenate([random, ties, near])


@pytest.mark.parametrize("name", ["fp16", "bf16", "e4m3", "e5m2", "e4m3fnuz", "e2m3", "e3m2", "e2m1", "tf32", "fp32"])
@pytest.mark.parametrize("mode", DIRECTED, ids=lambda m: m.value)
def test_rounding_modes_match_mpmath(name, mode):
    fmt = get_format(name)
    rng = np.random.default_rng(hash((name, mode.value)) % 2**32)
    x = _cases(fmt, rng, 300)
    got = fmt.to_float(fmt.from_float(x, mode, overflow="saturate"))
    for xi, gi in zip(x, got):
        want = _mp_round(float(xi), fmt, mode)
        want = float(np.clip(want, -fmt.max_finite, fmt.max_finite))
        if want == 0:
            assert gi == 0, (xi, gi)
        else:
            assert gi == want, f"{name} {mode.value}: {xi!r} -> {gi!r}, mpmath says {want!r}"


def test_correct_rounding_from_float64_not_via_float32():
    bf16 = get_format("bf16")
    x = np.array([1 + 2.0**-8 + 2.0**-40])
    assert bf16.round(x)[0] == 1.0078125
    # ml_dtypes goes through float32 and double-rounds to 1.0 here
    assert float(x.astype(ml_dtypes.bfloat16)[0]) == 1.0


@pytest.mark.parametrize("name", ["fp16", "bf16", "e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e2m3", "e3m2", "e2m1",
                                  "ue8m0"])
def test_agrees_with_ml_dtypes_from_float32(name):
    """From float32 ml_dtypes rounds once (correctly): there we must agree bit for bit."""
    fmt = get_format(name)
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(20000) * np.exp2(rng.integers(-30, 30, 20000))).astype(np.float32)
    x = np.concatenate([x, np.float32([0.0, -0.0, np.inf, -np.inf, 3.0, 0.75, 1e-40, 65520.0, 464.0, 57344.0])])
    if name == "ue8m0":
        x = np.abs(x[np.isfinite(x) & (x != 0)])
    ours = fmt.from_float(x.astype(np.float64))
    with np.errstate(over="ignore"):
        theirs = x.astype(fmt.dtype).view(fmt.container_dtype)
    both_nan = np.isnan(fmt.to_float(ours)) & np.isnan(fmt.to_float(theirs))
    assert np.array_equal(ours[~both_nan], theirs[~both_nan])


def test_stochastic_rounding_is_reproducible_and_unbiased():
    fp16 = get_format("fp16")
    x = np.full(200000, 1 + 2.0**-12)  # a quarter of an ulp above 1
    rnd = np.random.default_rng(3).integers(0, 2**32, x.size, dtype=np.uint64)
    a = fp16.round(x, "sr", random_bits=rnd)
    b = fp16.round(x, "sr", random_bits=rnd)
    assert np.array_equal(a, b)
    assert set(np.unique(a)) == {1.0, 1 + 2.0**-10}
    assert abs(np.mean(a == 1 + 2.0**-10) - 0.25) < 0.01
    with pytest.raises(ValueError, match="random_bits"):
        fp16.round(x, "sr")


@pytest.mark.parametrize("overflow,expected", [("ieee", np.inf), ("inf", np.inf), ("saturate", 65504.0)])
def test_overflow_policies(overflow, expected):
    fp16 = get_format("fp16")
    assert fp16.round(np.array([1e6]), overflow=overflow)[0] == expected
    assert np.isnan(fp16.round(np.array([1e6]), overflow="nan")[0])


def test_ieee_overflow_depends_on_direction():
    fp16 = get_format("fp16")
    x = np.array([1e6, -1e6])
    assert fp16.round(x, "rz").tolist() == [65504.0, -65504.0]
    assert fp16.round(x, "ru").tolist() == [np.inf, -65504.0]
    assert fp16.round(x, "rd").tolist() == [65504.0, -np.inf]


def test_formats_without_inf():
    e4m3 = get_format("e4m3")
    assert np.isnan(e4m3.round(np.array([1e4]))[0])  # FN: overflow to NaN under the IEEE policy
    assert e4m3.round(np.array([1e4]), overflow="saturate")[0] == 448.0
    assert get_format("e2m1").round(np.array([100.0]))[0] == 6.0  # no NaN either: saturate
    fnuz = get_format("e4m3fnuz")
    assert int(fnuz.from_float(np.array([-0.0]))[0]) == 0  # no negative zero
    assert int(fnuz.from_float(np.array([np.nan]))[0]) == 0x80


def test_subnormal_flush_policy():
    fp16 = get_format("fp16")
    x = np.array([2.0**-20, -(2.0**-20), 2.0**-14])
    assert fp16.round(x, subnormals="flush").tolist() == [0.0, -0.0, 2.0**-14]
    assert fp16.round(x).tolist() == [2.0**-20, -(2.0**-20), 2.0**-14]


def test_tf32_lives_in_the_upper_19_bits():
    tf32 = get_format("tf32")
    bits = tf32.from_float(np.array([1 + 2.0**-10 + 2.0**-11]))  # a tie: RNE goes to even (up here)
    assert int(bits[0]) & 0x1FFF == 0
    assert tf32.to_float(np.array([0x3F801FFF], np.uint32))[0] == 1.0  # low 13 bits are ignored


def test_unknown_format_names_suggest():
    with pytest.raises(ValueError, match="bf16"):
        get_format("bf61")
    with pytest.raises(TypeError):
        get_format(3)


def test_integer_formats_wrap_and_saturate():
    s8 = get_format("s8")
    assert s8.decode_int(s8.encode_int(np.array([127, 128, -129]))).tolist() == [127, -128, 127]
    assert s8.decode_int(s8.encode_int(np.array([300, -300]), "saturate")).tolist() == [127, -128]
    with pytest.raises(ValueError, match="out of range"):
        s8.encode_int(np.array([200]), "error")
    s4 = get_format("s4")
    assert s4.decode_int(np.arange(16, dtype=np.uint8)).tolist() == list(range(8)) + list(range(-8, 0))
