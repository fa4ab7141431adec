"""The dot-product families the strategies draw, and their building blocks: one code path on hypothesis draws
(shrinking) or numpy (bulk sampling).  Names: ``tcnumerics.family_names``."""

from __future__ import annotations

from typing import Callable

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from .formats import FloatFormat, Format, IntFormat, get_format
from .model import InstructionSpec


# ---------------------------------------------------------------------------------------
# randomness sources: the same family code runs on hypothesis draws (shrinking) or numpy (bulk)
# ---------------------------------------------------------------------------------------
class _NumpySource:
    def __init__(self, rng: np.random.Generator, n: int):
        self.rng, self.n = rng, n

    def ints(self, lo: int, hi: int, shape: tuple = ()) -> np.ndarray:
        """Integers in [lo, hi] of shape (n, *shape)."""
        return self.rng.integers(lo, hi, size=(self.n, *shape), endpoint=True, dtype=np.int64)

    def normals(self, shape: tuple = ()) -> np.ndarray:
        return self.rng.standard_normal((self.n, *shape))

    def chance(self, percent: int, shape: tuple = ()) -> np.ndarray:
        return self.ints(0, 99, shape) >= 100 - percent


class _DrawSource(_NumpySource):
    """Hypothesis draws; every value shrinks toward ``lo`` (and ``chance`` toward False)."""

    def __init__(self, draw: Callable, n: int):
        self.draw, self.n = draw, n

    def ints(self, lo: int, hi: int, shape: tuple = ()) -> np.ndarray:
        if hi <= lo:
            return np.full((self.n, *shape), lo, dtype=np.int64)
        return self.draw(hnp.arrays(np.int64, (self.n, *shape), elements=st.integers(int(lo), int(hi))))

    def normals(self, shape: tuple = ()) -> np.ndarray:
        return self.draw(hnp.arrays(np.float64, (self.n, *shape),
                                    elements=st.floats(-4.0, 4.0, allow_nan=False, allow_subnormal=False)))


def _around(src, lo: int, hi: int, mid: int, shape: tuple = ()) -> np.ndarray:
    """Integers in [lo, hi] that shrink toward ``mid`` (then upward, wrapping)."""
    lo, hi = int(lo), int(max(lo, hi))
    mid = int(min(max(mid, lo), hi))
    return lo + (src.ints(0, hi - lo, shape) + (mid - lo)) % (hi - lo + 1)


# ---------------------------------------------------------------------------------------
# building blocks on formats
# ---------------------------------------------------------------------------------------
def _exp_range(fmt: FloatFormat, subnormals: bool = True) -> tuple[int, int]:
    """Lowest and highest exponent of a nonzero finite value (subnormals reach below emin)."""
    lo = fmt.emin - fmt.man_bits if (fmt.subnormals and subnormals) else fmt.emin
    return lo, fmt.emax


def _encode(fmt: Format, negative: np.ndarray, magnitude: np.ndarray, exponent) -> np.ndarray:
    """Bits of ``(-1)**negative * magnitude * 2**exponent`` (truncated, saturated: always finite)."""
    negative = np.asarray(negative, bool)
    magnitude = np.asarray(magnitude, np.int64)
    if isinstance(fmt, IntFormat):
        value = np.where(negative & fmt.signed, -magnitude, magnitude) << np.asarray(exponent, np.int64)
        return fmt.encode_int(value, "saturate")
    return fmt.encode(negative & fmt.signed, magnitude.astype(np.uint64), exponent, "rz", overflow="saturate")


def _floats_at(src, fmt: FloatFormat, exponent: np.ndarray, negative=None, frac=None) -> np.ndarray:
    """Bits of random significands at given exponents (below emin they become subnormal)."""
    shape = exponent.shape[1:]
    man = fmt.man_bits
    if frac is None:
        frac = src.ints(0, (1 << man) - 1, shape)
    if negative is None:
        negative = _signs(src, fmt, shape)
    exponent, frac, negative = np.broadcast_arrays(np.asarray(exponent, np.int64), np.asarray(frac, np.int64),
                                                   np.asarray(negative, bool))
    # normal binades are packed directly (fast); the rest go through the general encoder
    normal = (exponent >= fmt.emin) & (exponent <= fmt.emax)
    code = np.minimum(((exponent + fmt.bias) << man) | frac, fmt.max_code)
    sign = (negative & bool(fmt.signed)).astype(np.int64) << (fmt.width - 1)
    bits = ((sign | code).astype(np.uint64) << np.uint64(fmt.pad_bits)).astype(fmt.container_dtype)
    if not normal.all():
        rest = ~normal
        bits[rest] = _encode(fmt, negative[rest], (np.int64(1) << man) | frac[rest], exponent[rest] - man)
    return bits


def _signs(src, fmt: Format, shape: tuple, percent: int = 50) -> np.ndarray:
    neg = src.chance(percent, shape)
    return neg & bool(fmt.signed)


def _uniform(src, fmt: Format, shape: tuple) -> np.ndarray:
    """Uniformly random finite patterns (every binade, subnormals included)."""
    if isinstance(fmt, IntFormat):
        return src.ints(0, (1 << fmt.bits) - 1, shape).astype(fmt.container_dtype)
    code = src.ints(0, fmt.max_code, shape)
    neg = _signs(src, fmt, shape)
    if not fmt.has_negative_zero:
        neg &= code != 0  # fnuz: the "negative zero" pattern is the NaN
    bits = (neg.astype(np.int64) << (fmt.width - 1)) | code
    return (bits.astype(np.uint64) << np.uint64(fmt.pad_bits)).astype(fmt.container_dtype)


def _negate(fmt: Format, bits: np.ndarray) -> np.ndarray:
    """Bits of the negated values (unsigned formats and fnuz zero stay as they are)."""
    if isinstance(fmt, IntFormat):
        return fmt.encode_int(-fmt.decode_int(bits), "wrap")
    if not fmt.signed:
        return bits
    flipped = bits ^ fmt.container_dtype(1 << (fmt.width - 1 + fmt.pad_bits))
    if not fmt.has_negative_zero:
        flipped = np.where(fmt.decode(bits).is_zero, bits, flipped)
    return flipped.astype(fmt.container_dtype)


def special_patterns(fmt: "Format | str") -> np.ndarray:
    """Bit patterns of a format's special and extreme values, +0 first.

    Zeros, the largest finite values, the smallest subnormal, infinities and NaNs
    (canonical, negative, signalling, all-ones payload) -- whichever the format has.

    >>> [hex(int(x)) for x in special_patterns("e4m3")]
    ['0x0', '0x80', '0x7e', '0xfe', '0x1', '0x7f', '0xff']
    """
    fmt = get_format(fmt)
    if isinstance(fmt, IntFormat):
        return fmt.encode_int(np.array(sorted({0, fmt.max_value, fmt.min_value, 1, fmt.max_value - 1})), "wrap")
    sign = (1 << (fmt.width - 1)) if fmt.signed else 0
    codes = [0]
    if fmt.has_negative_zero:
        codes.append(sign)
    codes += [fmt.max_code, sign | fmt.max_code] if fmt.signed else [fmt.max_code]
    if fmt.subnormals and fmt.man_bits:
        codes.append(1)
    if fmt.has_inf:
        codes += [fmt.inf_bits >> fmt.pad_bits, sign | (fmt.inf_bits >> fmt.pad_bits)]
    if fmt.has_nan:
        nan = fmt.nan_bits >> fmt.pad_bits
        codes.append(nan)
        if fmt.specials in ("ieee", "fn") and fmt.signed:
            codes.append(sign | nan)
        if fmt.specials == "ieee" and fmt.man_bits > 1:
            top = fmt.inf_bits >> fmt.pad_bits
            codes += [top | 1, top | ((1 << fmt.man_bits) - 1)]  # signalling, all-ones payload
    out = list(dict.fromkeys(codes))  # unique, order kept
    return (np.array(out, np.uint64) << np.uint64(fmt.pad_bits)).astype(fmt.container_dtype)


# ---------------------------------------------------------------------------------------
# dot-product families; each returns a [n, K], b [n, K], c [n] bits
# ---------------------------------------------------------------------------------------
def _fam_int(src, spec: InstructionSpec, K: int):
    def small(fmt, shape, hi):
        return _encode(fmt, _signs(src, fmt, shape), src.ints(0, hi, shape), 0)

    return small(spec.a_format, (K,), 4), small(spec.b_format, (K,), 4), small(spec.c_format, (), 64)


def _from_values(fmt: Format, x: np.ndarray) -> np.ndarray:
    if isinstance(fmt, IntFormat):
        return fmt.encode_int(np.round(x).astype(np.int64), "saturate")
    return fmt.from_float(x if fmt.signed else np.abs(x), "rne", overflow="saturate")


def _fam_normal(src, spec, K):
    return (_from_values(spec.a_format, src.normals((K,))), _from_values(spec.b_format, src.normals((K,))),
            _from_values(spec.c_format, 4.0 * src.normals()))


def _fam_uniform(src, spec, K):
    return _uniform(src, spec.a_format, (K,)), _uniform(src, spec.b_format, (K,)), _uniform(src, spec.c_format, ())


def _fam_cancellation(src, spec, K):
    A, B, C = spec.a_format, spec.b_format, spec.c_format
    if isinstance(A, IntFormat):
        a, b = _uniform(src, A, (K,)), _uniform(src, B, (K,))
        total = (A.decode_int(a) * B.decode_int(b)).sum(axis=1)
        return a, b, C.encode_int(-total + src.ints(-4, 4), "wrap")
    a = _floats_at(src, A, _around(src, max(A.emin, -3), min(A.emax, 3), 0, (K,)))
    b = _floats_at(src, B, _around(src, max(B.emin, -3), min(B.emax, 3), 0, (K,)))
    idx = np.arange(K)
    pairings = np.stack([idx ^ 1, (idx + K // 2) % K, K - 1 - idx])
    pairings = np.where(pairings < K, pairings, idx)  # odd K: the last element stays unpaired
    partner = pairings[src.ints(0, 2)]  # [n, K]
    follower = partner < idx
    lead_a = np.take_along_axis(a, partner, axis=1)
    lead_b = np.take_along_axis(b, partner, axis=1)
    neg_a = _negate(A, lead_a)
    if A.man_bits:  # some pairs miss by one ulp, leaving a small residual
        nudged = neg_a ^ A.container_dtype(1 << A.pad_bits)
        nudge = src.chance(25, (K,)) & (A.decode(nudged).kind == 0)
        neg_a = np.where(nudge, nudged, neg_a)
    a = np.where(follower, neg_a, a).astype(A.container_dtype)
    b = np.where(follower, lead_b, b).astype(B.container_dtype)
    mode = src.ints(0, 2)
    product = A.to_float(a[:, 0]) * B.to_float(b[:, 0])
    c_cancel = C.from_float(-product, "rz", overflow="saturate")
    c_small = _floats_at(src, C, np.full(len(mode), -12))
    c = np.where(mode == 0, 0, np.where(mode == 1, c_cancel, c_small))
    return a, b, c.astype(C.container_dtype)


def _split(t: np.ndarray, A: FloatFormat, B: FloatFormat):
    """Operand exponents (ea, eb) with ea + eb = t where the formats allow."""
    a_lo, a_hi = _exp_range(A)
    b_lo, b_hi = _exp_range(B)
    ea = np.clip(-((-t) // 2), a_lo, a_hi)
    eb = np.clip(t - ea, b_lo, b_hi)
    ea = np.clip(t - eb, a_lo, a_hi)
    return ea, eb


def _frac_bits_of(spec) -> int:
    f = getattr(spec.model, "frac_bits", None)
    return 30 if f is None else int(f)


def _fam_wide_alignment(src, spec, K):
    A, B, C = spec.a_format, spec.b_format, spec.c_format
    (a_lo, a_hi), (b_lo, b_hi), (c_lo, c_hi) = _exp_range(A), _exp_range(B), _exp_range(C)
    p_lo, p_hi = a_lo + b_lo, a_hi + b_hi
    span = int(min(_frac_bits_of(spec) + A.man_bits + B.man_bits + 4, p_hi - p_lo))
    top = _around(src, p_lo + span, p_hi, span // 2)  # [n] exponent of the largest product
    t = top[:, None] - src.ints(0, span, (K,))
    ea, eb = _split(t, A, B)
    a, b = _floats_at(src, A, ea), _floats_at(src, B, eb)
    mode = src.ints(0, 2)  # c competes for emax, is far below it, or is zero
    c_exp = np.where(mode == 0, top + src.ints(-2, 2), top - src.ints(0, span))
    c = _floats_at(src, C, np.clip(c_exp, c_lo, c_hi))
    return a, b, np.where(mode == 2, 0, c).astype(C.container_dtype)


def _output_format(spec) -> Format:
    return getattr(spec.model, "output_format", spec.d_format)


def _fam_accumulator_dominant(src, spec, K):
    A, B, C = spec.a_format, spec.b_format, spec.c_format
    out = _output_format(spec)
    p_out = out.man_bits
    (a_lo, a_hi), (b_lo, b_hi) = _exp_range(A), _exp_range(B)
    e_lo = max(C.emin, a_lo + b_lo + p_out + 3)
    e_hi = min(C.emax, a_hi + b_hi + p_out - 1)
    if e_lo > e_hi:
        e_lo = e_hi = min(C.emax, max(C.emin, e_hi))
    E = _around(src, e_lo, e_hi, p_out + 1)  # exponent of c
    frac = src.ints(0, (1 << C.man_bits) - 1)
    if C.man_bits > p_out:  # c on the output grid, so ties are reachable
        frac &= ~((1 << (C.man_bits - p_out)) - 1)
    c = _floats_at(src, C, E, frac=frac)
    half_ulp = E - p_out - 1
    t = half_ulp[:, None] + _around(src, -2, 1, 0, (K,))
    ea, eb = _split(t, A, B)

    def coarse(fmt, e):  # significands 1 or 1.5: product sums land on multiples of a quarter ulp
        frac = src.chance(50, (K,)).astype(np.int64) << (fmt.man_bits - 1) if fmt.man_bits else np.zeros_like(e)
        return _floats_at(src, fmt, e, frac=frac)

    a = np.where(src.chance(30, (K,)), 0, coarse(A, ea)).astype(A.container_dtype)
    return a, coarse(B, eb), c


def _fam_subnormal(src, spec, K):
    def tiny(fmt, shape):
        if not (fmt.subnormals and fmt.man_bits):
            return _floats_at(src, fmt, fmt.emin + src.ints(0, 2, shape))
        frac = src.ints(1, (1 << fmt.man_bits) - 1, shape)
        sub = _encode(fmt, _signs(src, fmt, shape), frac, fmt.emin - fmt.man_bits)
        normal = _floats_at(src, fmt, fmt.emin + src.ints(0, 3, shape))
        return np.where(src.chance(40, shape), normal, sub).astype(fmt.container_dtype)

    c = tiny(spec.c_format, ())
    return tiny(spec.a_format, (K,)), tiny(spec.b_format, (K,)), np.where(src.chance(20), 0, c).astype(c.dtype)


def _fam_special(src, spec, K):
    a, b, c = _fam_normal(src, spec, K)
    position = np.arange(K)

    def sprinkle(fmt, x, percent):
        # one special at a random position in most rows, occasionally more (inf - inf, inf * 0)
        options = special_patterns(fmt)
        one = src.chance(percent)[:, None] & (position == src.ints(0, K - 1)[:, None])
        hit = one | src.chance(3, (K,))
        return np.where(hit, options[src.ints(0, len(options) - 1, (K,))], x).astype(fmt.container_dtype)

    c_options = special_patterns(spec.c_format)
    c = np.where(src.chance(30), c_options[src.ints(0, len(c_options) - 1)], c)
    return sprinkle(spec.a_format, a, 70), sprinkle(spec.b_format, b, 40), c.astype(spec.c_format.container_dtype)


def _fam_overflow(src, spec, K):
    A, B, C = spec.a_format, spec.b_format, spec.c_format
    negative = src.chance(50)
    if isinstance(A, IntFormat):
        def extreme(fmt, shape):
            options = np.array([fmt.max_value, fmt.min_value, fmt.max_value - 1, fmt.min_value + 1])
            return fmt.encode_int(options[src.ints(0, 3, shape)], "wrap")

        c = np.where(negative, C.min_value + src.ints(0, 1 << 16), C.max_value - src.ints(0, 1 << 16))
        return extreme(A, (K,)), extreme(B, (K,)), C.encode_int(c, "wrap")
    flip = src.chance(10, (K,))
    a = _floats_at(src, A, _around(src, A.emax - 2, A.emax, A.emax, (K,)), negative=negative[:, None] ^ flip)
    b = _floats_at(src, B, _around(src, B.emax - 2, B.emax, B.emax, (K,)), negative=np.zeros((len(negative), K), bool))
    c = _floats_at(src, C, _around(src, C.emax - 3, C.emax, C.emax), negative=negative)
    return a, b, c


_FAMILY_FUNCS = {
    "int": _fam_int, "normal": _fam_normal, "bits": _fam_uniform, "cancel": _fam_cancellation,
    "align": _fam_wide_alignment, "cdom": _fam_accumulator_dominant,
    "subnormal": _fam_subnormal, "special": _fam_special, "overflow": _fam_overflow,
}
