"""The cast fast paths of from_float / to_float give the specification's bits (``FloatFormat.encode``)."""

import ml_dtypes
import numpy as np
import pytest

from tcnumerics import _casts
from tcnumerics.formats import get_format

FORMATS = ("fp32", "bf16", "fp16", "tf32", "e8m13")


NARROW = ("e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e2m3", "e3m2", "e2m1")


def _spec_bits(fmt, x, overflow="ieee"):
    """from_float with the cast paths switched off: the integer encoder."""
    saved = _casts.from_float
    _casts.from_float = lambda *args: None
    try:
        return fmt.from_float(x, overflow=overflow)
    finally:
        _casts.from_float = saved


def _hard_values(fmt, rng) -> np.ndarray:
    """Ties, near-ties, subnormals, overflow boundaries, specials and random bit patterns for ``fmt``."""
    codes = rng.integers(0, 1 << (fmt.width - 1), 3000).astype(np.uint64) << np.uint64(fmt.pad_bits)
    v = fmt.to_float(codes.astype(fmt.container_dtype))
    v = v[np.isfinite(v)]
    ulp = np.ldexp(1.0, np.maximum(np.frexp(v)[1] - 1 - fmt.man_bits, fmt.emin - fmt.man_bits))
    mid = v + ulp / 2  # exact ties
    near = np.concatenate([np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf), mid + ulp * 2.0 ** -30,
                           mid - ulp * 2.0 ** -30, v + ulp * 2.0 ** -40])
    edges = [0.0, fmt.max_finite, fmt.max_finite + fmt.max_finite * 2.0 ** (-fmt.man_bits - 1),
             np.nextafter(fmt.max_finite * (1 + 2.0 ** (-fmt.man_bits - 1)), 0), fmt.min_subnormal,
             fmt.min_subnormal / 2, fmt.min_subnormal * 1.5, fmt.min_subnormal / 2 * (1 + 2.0 ** -40),
             fmt.min_normal * (1 - 2.0 ** -30), 3.4028235677973366e38, 3.5e38, 1e300, 2.0 ** -149 * 1.5,
             2.0 ** -150, 2.0 ** -1074, np.inf, np.nan]
    random64 = rng.integers(0, 1 << 63, 3000, dtype=np.int64).view(np.float64)
    everything = np.concatenate([v, mid, near, np.array(edges), random64])
    return np.concatenate([everything, -everything])


@pytest.mark.parametrize("name", FORMATS)
def test_from_float_casts_equal_the_encoder(name):
    fmt = get_format(name)
    x = _hard_values(fmt, np.random.default_rng(7))
    want = _spec_bits(fmt, x)
    assert np.array_equal(fmt.from_float(x), want)
    # the numpy lines (what CuPy runs on the GPU) without the compiled host kernels
    saved = _casts._KERNELS
    _casts._KERNELS = False
    try:
        assert np.array_equal(fmt.from_float(x), want)
    finally:
        _casts._KERNELS = saved


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_from_float_of_narrow_inputs_equals_the_encoder(name, dtype):
    fmt = get_format(name)
    x = _hard_values(fmt, np.random.default_rng(3))
    with np.errstate(over="ignore"):
        x = x.astype(dtype)
    assert np.array_equal(fmt.from_float(x), _spec_bits(fmt, x))


@pytest.mark.parametrize("name", ("bf16", "fp16"))
def test_to_float_casts_equal_the_decoder_on_every_pattern(name):
    fmt = get_format(name)
    bits = fmt.all_bits()
    d = fmt.decode(bits)
    mag = np.ldexp(d.significand.astype(np.float64), d.ulp_exponent.astype(np.int32))
    want = np.where(d.kind == 2, np.nan, np.where(d.kind == 1, np.inf, mag) * np.where(d.sign, -1, 1))
    got = fmt.to_float(bits)
    assert np.array_equal(got.view(np.uint64), want.view(np.uint64))  # canonical NaN and -0 included


@pytest.mark.parametrize("name", ("fp32", "tf32", "e8m13"))
def test_to_float_casts_equal_the_decoder_on_random_patterns(name):
    fmt = get_format(name)
    bits = np.random.default_rng(1).integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32)
    saved = _casts.to_float
    _casts.to_float = lambda f, b: None
    try:
        want = fmt.to_float(bits)
    finally:
        _casts.to_float = saved
    assert np.array_equal(fmt.to_float(bits).view(np.uint64), want.view(np.uint64))


def test_flush_to_zero_on_the_host_falls_back_to_the_encoder():
    torch = pytest.importorskip("torch")
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush denormals")
    try:
        assert not _casts._host_casts_ieee()
        x = np.array([1.5 * 2.0 ** -149, 2.0 ** -140, -3 * 2.0 ** -135])
        assert np.array_equal(get_format("fp32").from_float(x), _spec_bits(get_format("fp32"), x))
        assert get_format("bf16").to_float(np.array([1], np.uint16))[0] == 2.0 ** -133
    finally:
        torch.set_flush_denormal(False)
    assert _casts._host_casts_ieee()


def test_the_fast_paths_run_here(monkeypatch):
    """On an ordinary machine (no FTZ/DAZ) the casts serve the common conversions: the encoder is not called."""
    assert _casts._usable(np)
    fmt = get_format("bf16")

    def no_encoder(*a, **k):
        raise AssertionError("the integer encoder ran where a cast applies")
    monkeypatch.setattr(type(fmt), "encode", no_encoder)
    x = np.array([1 + 2.0 ** -9, 3.0, -2.0 ** -130, np.nan])  # a tie to even, exact, a subnormal, NaN
    assert fmt.from_float(x).tolist() == [0x3F80, 0x4040, 0x8008, 0x7FC0]
    assert get_format("fp32").round(np.array([1 + 2.0 ** -30])).tolist() == [1.0]


@pytest.mark.parametrize("name", FORMATS)
def test_the_integer_paths_equal_the_encoder_and_decoder(name):
    """What the GPU runs (CuPy flushes float32 subnormals): no float32 operation, the specification's bits."""
    fmt = get_format(name)
    x = _hard_values(fmt, np.random.default_rng(9))
    bits = _casts.rne_bits(fmt, x, np)
    assert np.array_equal(bits, _spec_bits(fmt, x))
    d = fmt.decode(bits)
    mag = np.ldexp(d.significand.astype(np.float64), d.ulp_exponent.astype(np.int32))
    want = np.where(d.kind == 2, np.nan, np.where(d.kind == 1, np.inf, mag) * np.where(d.sign, -1, 1))
    assert np.array_equal(_casts.exact_values(fmt, bits, np).view(np.uint64), want.view(np.uint64))


def test_the_fake_device_flushes_like_cupy_and_the_conversions_do_not_care(monkeypatch):
    import fake_cupy

    cupy = fake_cupy.install(monkeypatch)
    assert _casts.probe(cupy) == dict(f64_to_f32_tie=0, f32_subnormal=0, f32_to_f64=0.0, f32_to_f16_tie=2,
                                      f32_subnormal_add=0)  # what an H100 gave through CuPy 14.2
    for name in FORMATS:
        fmt = get_format(name)
        x = _hard_values(fmt, np.random.default_rng(2))
        assert np.array_equal(fmt.from_float(cupy.asarray(x)).get(), _spec_bits(fmt, x))
        assert np.array_equal(fmt.round(cupy.asarray(x)).get().view(np.uint64), fmt.round(x).view(np.uint64))
    tiny = np.array([2.0 ** -140, -3 * 2.0 ** -149], np.float32)
    assert np.array_equal(get_format("bf16").from_float(cupy.asarray(tiny)).get(),
                          get_format("bf16").from_float(tiny))


@pytest.mark.parametrize("name", NARROW + FORMATS)
@pytest.mark.parametrize("overflow", ["ieee", "saturate"])
def test_the_integer_path_of_every_signed_format_equals_the_encoder(name, overflow):
    """FP8 / FP6 / FP4 (FN, FNUZ, no specials) and both overflow policies: what quantisation runs, host and GPU."""
    fmt = get_format(name)
    x = _hard_values(fmt, np.random.default_rng(13))
    want = _spec_bits(fmt, x, overflow)
    assert np.array_equal(_casts.rne_bits(fmt, x, np, overflow), want)
    assert np.array_equal(fmt.from_float(x, overflow=overflow), want)
    if name in NARROW:  # every pattern's value, and narrow inputs, round trip
        codes = np.arange(1 << fmt.width, dtype=np.uint64).astype(fmt.container_dtype)
        values = fmt.to_float(codes)
        assert np.array_equal(fmt.from_float(values, overflow=overflow), _spec_bits(fmt, values, overflow))
        for dtype in (np.float32, np.float16, ml_dtypes.bfloat16):
            with np.errstate(over="ignore", invalid="ignore"):
                narrow = x.astype(dtype)
            assert np.array_equal(fmt.from_float(narrow, overflow=overflow), _spec_bits(fmt, narrow, overflow))


@pytest.mark.parametrize("overflow", ["ieee", "saturate"])
def test_narrow_formats_on_the_fake_device_equal_the_encoder(monkeypatch, overflow):
    import fake_cupy

    cupy = fake_cupy.install(monkeypatch)
    for name in NARROW:
        fmt = get_format(name)
        x = _hard_values(fmt, np.random.default_rng(4))
        want = _spec_bits(fmt, x, overflow)
        assert np.array_equal(fmt.from_float(cupy.asarray(x), overflow=overflow).get(), want), name
        with np.errstate(over="ignore"):
            x32 = x.astype(np.float32)
        assert np.array_equal(fmt.from_float(cupy.asarray(x32), overflow=overflow).get(),
                              _spec_bits(fmt, x32, overflow)), name


def test_large_arrays_convert_in_blocks_with_the_same_bits(monkeypatch):
    """Above ``_BLOCK`` elements the paths run block by block (bounded temporaries on a GPU): same bits."""
    fmt = get_format("e4m3")
    x = _hard_values(fmt, np.random.default_rng(3)).reshape(-1, 2)
    whole = (_casts.rne_bits(fmt, x, np, "saturate"), _casts.rne_bits(get_format("bf16"), x, np))
    with np.errstate(all="ignore"):
        whole_values = _casts.exact_values(fmt, whole[0], np)
    monkeypatch.setattr(_casts, "_BLOCK", 1000)
    assert x.size > 3 * 1000
    assert np.array_equal(_casts.rne_bits(fmt, x, np, "saturate"), whole[0])
    assert np.array_equal(_casts.rne_bits(get_format("bf16"), x, np), whole[1])
    with np.errstate(all="ignore"):
        assert np.array_equal(_casts.exact_values(fmt, whole[0], np).view(np.uint64), whole_values.view(np.uint64))
    assert np.array_equal(_casts.rne_bits(fmt, x.T, np, "saturate"), whole[0].T)  # strided input


def test_every_conversion_runs_as_one_fused_kernel_on_the_fake_device(monkeypatch):
    """``arrays.fused`` falls back silently where CuPy cannot fuse a body; here every format's RNE encode and decode
    must fuse (the fake refuses what CuPy 14.2 compiled wrongly: a ``where`` of two bare Python scalars) and keep
    the host's bits."""
    import fake_cupy

    from tcnumerics.arrays import _decode_ieee

    cupy = fake_cupy.install(monkeypatch)
    for name in NARROW + FORMATS:
        fmt = get_format(name)
        x = _hard_values(fmt, np.random.default_rng(6))
        for overflow in ("ieee", "saturate"):
            want = _spec_bits(fmt, x, overflow)
            assert np.array_equal(_casts.rne_bits(fmt, cupy.asarray(x), cupy, overflow).get(), want), name
        bits = _spec_bits(fmt, x)
        if name in NARROW:  # every pattern through FloatFormat.to_float: the device's fused decode, the host's own
            bits = np.arange(1 << fmt.width, dtype=np.uint64).astype(fmt.container_dtype)
        got, want = fmt.to_float(cupy.asarray(bits)).get(), fmt.to_float(bits)
        assert np.array_equal(np.isnan(got), np.isnan(want)), name
        if name in NARROW:  # the canonical NaN, as the host gives (IEEE formats: the GPU's own NaN, docs/gpu.md)
            assert not np.signbit(got[np.isnan(got)]).any(), name
        assert np.array_equal(got[~np.isnan(got)].view(np.uint64), want[~np.isnan(want)].view(np.uint64)), name
    for cache in (_casts._rne_code.kernels, _decode_ieee.kernels):  # (namespace, *params) -> kernel or False
        here = [kernel for key, kernel in cache.items() if key[0] is cupy]
        assert here and all(kernel is not False for kernel in here)
