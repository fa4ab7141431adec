"""Fast paths of ``FloatFormat.from_float`` / ``to_float`` through IEEE hardware casts, on numpy or CuPy.

``formats.FloatFormat.encode`` is the specification (exact integer arithmetic, any rounding); these
paths give the same bits for the conversions a GEMM epilogue does all the time, RNE to FP32, to the
FP32-exponent formats (BF16, TF32, E8M13) and to FP16, with IEEE overflow and subnormals kept:

* float64 -> float32 is the IEEE cast (RNE, gradual underflow, overflow to inf);
* narrower targets first round to float32 *to odd* (the RNE cast, then one ulp toward the exact
  value when it was inexact and landed on an even pattern), then RNE to the target.  Rounding to odd
  with at least two more bits than the target keeps the second rounding correct (Boldo & Melquiond,
  "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to odd", 2008), so
  there is no double rounding;
* FP32-exponent targets round the float32 pattern with the integer add-and-shift (RNE on the
  dropped bits), FP16 through the IEEE float32 -> float16 cast;
* decoding goes the other way, exactly, through the same casts.

NaN results are the format's canonical NaN, as ``encode`` gives.  On the host the casts obey the
x86 MXCSR: if flush-to-zero or denormals-are-zero is set (``torch.set_flush_denormal(True)``), the
probe below fails and ``formats`` falls back to ``encode``.  Equivalence with ``encode`` is tested on
ties, near-ties, subnormals, overflow and NaN (``tests/test_casts.py``).
"""

from __future__ import annotations

import contextlib

import numpy as np

from .arrays import decode_ieee, float64, fused, namespace

# (exp_bits, man_bits, bias, signed, specials, subnormals) of the formats the casts serve
_FP32_EXPONENT = (8, 127, True, "ieee", True)
_FP16 = (5, 10, 15, True, "ieee", True, 16, 0)
_PROBE_IN = np.array([1.5 * 2.0 ** -149, 2.0 ** -140, 1.5 * 2.0 ** -24], np.float64)


def _host_casts_ieee() -> bool:
    """The host's float casts are IEEE (no FTZ/DAZ in MXCSR right now): subnormal ties round to even."""
    f32 = _PROBE_IN.astype(np.float32)
    if f32.view(np.uint32)[:2].tolist() != [2, 512] or f32[1].astype(np.float64) != 2.0 ** -140:
        return False
    return int(f32[2:].astype(np.float16).view(np.uint16)[0]) == 2


def _route(fmt) -> str | None:
    """Which cast path serves ``fmt``: "fp32", "e8" (FP32 exponent, fewer fraction bits), "fp16" or None."""
    if (fmt.exp_bits, fmt.bias, fmt.signed, fmt.specials, fmt.subnormals) == _FP32_EXPONENT:
        if fmt.man_bits == 23 and fmt.container_bits == 32 and fmt.pad_bits == 0:
            return "fp32"
        if 1 <= fmt.man_bits <= 21 and fmt.pad_bits + fmt.width <= fmt.container_bits:
            return "e8"  # at least 2 bits below the target's last bit for the round-to-odd step
        return None
    if (fmt.exp_bits, fmt.man_bits, fmt.bias, fmt.signed, fmt.specials, fmt.subnormals, fmt.container_bits,
            fmt.pad_bits) == _FP16:
        return "fp16"
    return None


def _quiet(xp):
    return np.errstate(all="ignore") if xp is np else contextlib.nullcontext()


_DEVICE_IEEE: dict = {}


def probe(xp=np) -> dict:
    """What the casts and float32 arithmetic of namespace ``xp`` give on subnormal ties (want: 2, 512, 2^-140, 2, 4):
    a float64 -> float32 tie at 2^-149, a float32 subnormal, its float64 value, a float32 -> float16 tie at 2^-24,
    and a float32 subnormal sum."""
    def host(a):
        return a.get() if xp is not np else a
    f32 = xp.asarray(_PROBE_IN).astype(np.float32)
    pair = host(f32.view(np.uint32)[:2]).tolist()
    return dict(f64_to_f32_tie=pair[0], f32_subnormal=pair[1],
                f32_to_f64=float(host(f32[1:2].astype(np.float64))[0]),
                f32_to_f16_tie=int(host(f32[2:].astype(np.float16).view(np.uint16))[0]),
                f32_subnormal_add=int(host((f32[:1] + f32[:1]).view(np.uint32))[0]))


_IEEE = dict(f64_to_f32_tie=2, f32_subnormal=512, f32_to_f64=2.0 ** -140, f32_to_f16_tie=2, f32_subnormal_add=4)


def _device_casts_ieee(xp, fp16: bool) -> bool:
    """The same probe on the current GPU, once per device (kernels there have no run-time FTZ mode); ``fp16``: the
    float32 -> float16 cast is needed too."""
    device = xp.cuda.Device().id
    if device not in _DEVICE_IEEE:
        _DEVICE_IEEE[device] = {k: v == _IEEE[k] for k, v in probe(xp).items()}
    ok = _DEVICE_IEEE[device]
    return all(v for k, v in ok.items() if fp16 or k != "f32_to_f16_tie")


def _usable(xp, fp16: bool = False) -> bool:
    """IEEE float32 casts and arithmetic here.  Host: probed at every call (MXCSR can change).  GPU: never relied on
    -- CuPy compiles its kernels with ``-ftz=true`` (measured on an H100: ``probe(cupy)`` flushes every subnormal), so
    the device takes the integer paths below, which use no float32 operation."""
    if xp is np:
        return _host_casts_ieee() and _host_f32_add_ieee()
    return False


def _host_f32_add_ieee() -> bool:
    tiny = np.array([2.0 ** -149], np.float32)  # the smallest subnormal, pattern 1
    return int((tiny + tiny).view(np.uint32)[0]) == 2


def integer_route(fmt) -> bool:
    """Formats ``rne_bits`` serves: signed, with subnormals, at most 51 fraction bits (every float format but the
    unsigned scale formats and FP64)."""
    return fmt.signed and fmt.subnormals and fmt.man_bits <= 51 and fmt.exp_bits <= 11 and \
        fmt.specials in ("ieee", "fn", "fnuz", "none")


_BLOCK = 1 << 24  # elements per pass of the integer / float64 paths: ~10 temporaries of 128 MB, not of the array


def _in_blocks(fn):
    """Run ``fn(fmt, x, xp, *args)`` over blocks of ``_BLOCK`` elements of large arrays: the same elementwise
    result, with temporaries bounded (an LM head's weights as float64 are 4 GB; ten temporaries of that do not fit
    beside the model)."""
    def blocked(fmt, x, xp, *args):
        if getattr(x, "size", 1) <= _BLOCK:
            return fn(fmt, x, xp, *args)
        flat = x.reshape(-1)
        first = fn(fmt, flat[:_BLOCK], xp, *args)
        out = xp.empty(flat.shape, first.dtype)
        out[:_BLOCK] = first
        for i in range(_BLOCK, flat.size, _BLOCK):
            out[i:i + _BLOCK] = fn(fmt, flat[i:i + _BLOCK], xp, *args)
        return out.reshape(x.shape)
    blocked.__doc__, blocked.__name__, blocked.__wrapped__ = fn.__doc__, fn.__name__, fn
    return blocked


@_in_blocks
def rne_bits(fmt, x, xp, overflow: str = "ieee"):
    """``fmt`` patterns of float64 values ``x``, rounded to nearest even with subnormals kept, in integer arithmetic
    on the float64 patterns: no float32 operation, so flush-to-zero kernels (CuPy's) give IEEE bits.  ``overflow``:
    "ieee" (beyond the largest finite: inf, or NaN / the largest finite in formats without inf, as ``encode``) or
    "saturate"; inputs inf and NaN as ``FloatFormat.from_float``.  Formats: ``integer_route``.  One fused kernel
    on a GPU (``arrays.fused``)."""
    u = xp.asarray(x, dtype=np.float64).view(np.uint64)  # same width: any strides (and 0-d) view
    nan = fmt.nan_bits if fmt.has_nan else 0
    return _rne_code(u, xp, fmt.man_bits, fmt.bias, fmt.max_code, _overflow_code(fmt, overflow), fmt.specials == "fnuz",
                     fmt.width, fmt.pad_bits, nan, np.dtype(fmt.container_dtype).str)


@fused
def _rne_code(u, xp, p: int, bias: int, max_code: int, overflow_code: int, fnuz: bool, width: int, pad_bits: int,
              nan: int, container: str):
    sign = (u >> np.uint64(63)).astype(np.int64)
    e = ((u >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64)
    frac = (u & np.uint64((1 << 52) - 1)).astype(np.int64)
    sig = frac | ((e > 0).astype(np.int64) << 52)  # the hidden bit (no where of two scalars: see arrays.fused)
    E = xp.maximum(e, 1) - 1023  # exponent of the leading bit's place (float64 subnormals: far below any target)
    emin = 1 - bias
    shift = xp.minimum(52 - p + xp.maximum(emin - E, 0), 62)  # >= 54 leaves 0 (half exceeds any significand)
    q = sig >> shift
    rem = sig & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    q = q + ((rem > half) | ((rem == half) & ((q & 1) == 1))).astype(np.int64)
    code = xp.where(E >= emin, ((E + bias) << p) + q - (1 << p), q)  # a carry moves into the exponent field
    code = xp.where(code > max_code, np.int64(overflow_code), code)  # inf inputs land here too
    if fnuz:  # no -0; the one NaN is the "-0" pattern
        sign = xp.where(code < 0, np.int64(1), xp.where(code == 0, np.int64(0), sign))
        code = xp.maximum(code, 0)
    bits = ((sign << (width - 1)) | code) << pad_bits
    return xp.where(e == 0x7FF, xp.where(frac == 0, bits, np.int64(nan)), bits).astype(np.dtype(container))


def _overflow_code(fmt, overflow: str) -> int:
    """Magnitude code of an overflowing RNE result (-1: fnuz's NaN, packed with the sign bit by ``rne_bits``)."""
    if overflow == "saturate" or fmt.specials == "none":
        return fmt.max_code
    if fmt.specials == "ieee":
        return ((1 << fmt.exp_bits) - 1) << fmt.man_bits
    if fmt.specials == "fn":
        return (1 << (fmt.exp_bits + fmt.man_bits)) - 1
    return -1


@_in_blocks
def exact_values(fmt, bits, xp):
    """float64 values of ``fmt`` patterns (the formats of ``integer_route``), in integer arithmetic plus exact
    float64 scaling of subnormals: no float32 operation (see ``rne_bits``; ``arrays.decode_ieee``)."""
    return decode_ieee(bits, fmt.width, fmt.exp_bits, fmt.man_bits, fmt.bias, fmt.pad_bits, xp=xp,
                       specials=fmt.specials)


def fp32_values(fmt, bits):
    """float32 values of ``fmt`` patterns whose values are all FP32 numbers (FP32, BF16, TF32, E8M13, FP16), or
    None: the accumulator type in which FP32 additions are IEEE float32 additions."""
    route = _route(fmt)
    if route is None or bits.dtype != np.dtype(fmt.container_dtype):
        return None
    xp = namespace(bits)
    if not _usable(xp):
        return None
    if route == "fp32":
        return bits.view(np.float32)
    if route == "fp16":
        return bits.view(np.float16).astype(np.float32)
    keep = np.uint32(((1 << fmt.width) - 1) << fmt.pad_bits)
    return ((bits.astype(np.uint32) & keep) >> np.uint32(fmt.pad_bits) << np.uint32(23 - fmt.man_bits)).view(np.float32)


def fp32_add(x, y):
    """IEEE FP32 addition (RNE) of two float32 arrays where the hardware's float32 add is IEEE here, else None."""
    xp = namespace(x, y)
    if x.dtype != np.float32 or y.dtype != np.float32 or not _usable(xp):
        return None
    with _quiet(xp):
        return x + y


def fp32_round(fmt, x):
    """``fmt.round(x)`` (RNE, IEEE overflow) for FP32 targets by casts: float64 values of float32, or None."""
    if _route(fmt) != "fp32" or x.dtype.kind != "f":
        return None
    xp = namespace(x)
    if xp is not np:  # two fused kernels, no float32 operation (CuPy's flush to zero); NaN: the GPU's (docs/gpu.md)
        return exact_values(fmt, rne_bits(fmt, x if x.dtype == np.float64 else float64(x), xp), xp)
    if not _usable(xp):
        return None
    with _quiet(xp):
        v = x.astype(np.float32).astype(np.float64)
    return xp.where(xp.isnan(v), np.nan, v)


def _f32_bits_to_odd(x, xp):
    """float32 bit patterns of float64 values rounded to odd (NaN inputs give some NaN pattern)."""
    with _quiet(xp):
        y = x.astype(np.float32)
        bits = y.view(np.uint32)
        back = y.astype(np.float64)
        sticky = (back != x) & ((bits & np.uint32(1)) == 0) & ~xp.isnan(x)
        away = xp.abs(x) > xp.abs(back)  # one ulp toward x: the odd neighbour
    return xp.where(sticky, xp.where(away, bits + np.uint32(1), bits - np.uint32(1)), bits)


def _kernels():
    """(odd, e8): the host paths compiled with numba -- one pass instead of ~12 numpy ones -- or None."""
    global _KERNELS
    if _KERNELS is None:
        try:
            import numba
        except ImportError:
            _KERNELS = False
            return None

        @numba.njit(cache=True, nogil=True, inline="always")
        def odd_bits(xi, b):  # pragma: no cover - compiled; b: the RNE cast's pattern; the steps of _f32_bits_to_odd
            back = np.float64(np.float32(xi))
            if back != xi and (b & np.uint32(1)) == 0 and xi == xi:
                b = b + np.uint32(1) if abs(xi) > abs(back) else b - np.uint32(1)
            return b

        @numba.njit(cache=True, nogil=True)
        def odd(x, bits):  # pragma: no cover - compiled; in place
            for i in range(x.size):
                bits[i] = odd_bits(x[i], bits[i])

        @numba.njit(cache=True, nogil=True)
        def e8(x, bits, shift, pad, nan_bits):  # pragma: no cover - compiled; the "e8" lines of from_float, in place
            half = np.uint32((1 << (shift - 1)) - 1)
            for i in range(x.size):
                xi = x[i]
                if xi != xi:
                    bits[i] = nan_bits
                    continue
                b = odd_bits(xi, bits[i])
                bits[i] = ((b + half + ((b >> shift) & np.uint32(1))) >> shift) << pad

        _KERNELS = (odd, e8)
    return _KERNELS or None


_KERNELS = None


def _f32_bits(x, xp, exact_via_float32: bool):
    """float32 patterns holding x: the plain RNE cast for FP32 targets, rounded to odd for narrower ones."""
    if x.dtype == np.float32:
        return x.view(np.uint32)
    if x.dtype == np.float16 or (x.dtype.kind == "V" and x.dtype.itemsize <= 2):
        return x.astype(np.float32).view(np.uint32)  # FP16/BF16/FP8 values are exact in float32
    x = x.astype(np.float64)
    if exact_via_float32:
        with _quiet(xp):
            return x.astype(np.float32).view(np.uint32)
    kernels = _kernels() if xp is np else None
    if kernels is None:
        return _f32_bits_to_odd(x, xp)
    flat = np.ascontiguousarray(x).reshape(-1)
    with _quiet(xp):
        out = flat.astype(np.float32).view(np.uint32)  # the RNE cast; the kernel moves inexact even ones
    kernels[0](flat, out)
    return out.reshape(x.shape)


def _e8_host(fmt, x):
    """The "e8" route in one compiled pass over float64 host values, or None without numba."""
    kernels = _kernels()
    if kernels is None:
        return None
    flat = np.ascontiguousarray(x, np.float64).reshape(-1)
    with _quiet(np):
        out = flat.astype(np.float32).view(np.uint32)
    kernels[1](flat, out, np.uint32(23 - fmt.man_bits), np.uint32(fmt.pad_bits), np.uint32(fmt.nan_bits))
    return out.astype(fmt.container_dtype).reshape(x.shape)


def from_float(fmt, x, overflow: str = "ieee"):
    """Bits of ``fmt`` for values ``x`` rounded RNE (``overflow`` "ieee" or "saturate", subnormals kept), or None
    if no fast path applies.  IEEE casts where they are IEEE (the host) and serve the format with IEEE overflow;
    else the integer path (``rne_bits``), on the GPU always, on the host for the other formats (FP8, FP6, FP4)."""
    if x.dtype.kind not in "fV" or x.dtype.itemsize > 8 or overflow not in ("ieee", "saturate"):
        return None
    route = _route(fmt) if overflow == "ieee" else None
    xp = namespace(x)
    if (route is None or xp is not np) and integer_route(fmt):
        return rne_bits(fmt, x if x.dtype == np.float64 else float64(x), xp, overflow)  # exact on a GPU too
    if route is None or not _usable(xp, fp16=route == "fp16"):
        return None
    if route == "e8" and xp is np and x.dtype == np.float64:
        fast = _e8_host(fmt, x)
        if fast is not None:
            return fast
    nan = xp.isnan(x) if x.dtype.kind == "f" else xp.isnan(x.astype(np.float32))
    bits = _f32_bits(x, xp, exact_via_float32=route == "fp32")
    if route == "fp32":
        out = bits
    elif route == "fp16":
        with _quiet(xp):
            out = bits.view(np.float32).astype(np.float16).view(np.uint16)
    else:
        shift = 23 - fmt.man_bits
        lsb = (bits >> np.uint32(shift)) & np.uint32(1)
        kept = (bits + np.uint32((1 << (shift - 1)) - 1) + lsb) >> np.uint32(shift)  # RNE on the dropped bits
        out = (kept << np.uint32(fmt.pad_bits)).astype(fmt.container_dtype)
    return xp.where(nan, fmt.nan_bits, out).astype(fmt.container_dtype)


def to_float(fmt, bits):
    """Exact float64 values of ``fmt`` patterns (canonical NaN), or None if no cast applies.  On a GPU every format
    of ``integer_route`` (FP8, FP6 and FP4 included) decodes in one fused kernel."""
    if bits.dtype != np.dtype(fmt.container_dtype):
        return None
    xp = namespace(bits)
    if xp is not np and integer_route(fmt):
        values = exact_values(fmt, bits, xp)
        if _route(fmt) is None and fmt.has_nan:  # FP8: the canonical NaN (0x7FF8...) that the host gives
            values = xp.where(xp.isnan(values), np.float64(np.nan), values)
        return values
    route = _route(fmt)
    if route is None:
        return None
    if not _usable(xp):
        return None
    if route == "fp32":
        f32 = bits.view(np.float32)
    elif route == "fp16":
        f32 = bits.view(np.float16)
    else:
        keep = np.uint32(((1 << fmt.width) - 1) << fmt.pad_bits)
        f32 = ((bits.astype(np.uint32) & keep) >> np.uint32(fmt.pad_bits) << np.uint32(23 - fmt.man_bits)).view(
            np.float32)
    with _quiet(xp):  # signalling NaN patterns
        v = f32.astype(np.float64)
    return xp.where(xp.isnan(v), np.nan, v)
