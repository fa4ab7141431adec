"""The generators behind the input families (``families.generate``): per family, operand and accumulator bit
patterns for one instruction, floating-point and integer; their building blocks."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..formats import FloatFormat, Format, IntFormat
from ..model import InstructionSpec


# --------------------------------------------------------------------------------------------
# building blocks

class _Ctx:
    """What every family generator needs: the instruction, the shape and the generator."""

    def __init__(self, spec: InstructionSpec, n: int, k: int, rng: np.random.Generator):
        self.spec, self.n, self.k, self.rng = spec, n, k, rng
        self.fa, self.fb, self.fc, self.fd = spec.a_format, spec.b_format, spec.c_format, spec.d_format


def _lo(fmt: FloatFormat) -> int:
    """Exponent of the smallest positive value (the least subnormal)."""
    return fmt.emin - fmt.man_bits if fmt.subnormals else fmt.emin


def _vals(fmt: FloatFormat, x: np.ndarray, rounding: str = "rne") -> np.ndarray:
    """Round finite float64 values into ``fmt`` bit patterns, saturating instead of overflowing."""
    return fmt.from_float(np.asarray(x, dtype=np.float64), rounding, overflow="saturate")


def _scaled(rng: np.random.Generator, fmt: FloatFormat, exps: np.ndarray, signs: np.ndarray | None = None,
            mantissa: bool = True) -> np.ndarray:
    """Bits of ``±(1 + u) * 2**exps`` (random u, or 0), truncated into ``fmt``.

    Exponents are clipped to the format's range; below its normal range the value
    becomes a (truncated) subnormal, keeping the requested scale.
    """
    exps = np.clip(np.asarray(exps, dtype=np.int64), _lo(fmt), fmt.emax)
    frac = rng.random(exps.shape) if mantissa else np.zeros(exps.shape)
    if signs is None:
        signs = rng.random(exps.shape) < 0.5
    v = np.ldexp(1.0 + frac, exps.astype(np.int32))
    return _vals(fmt, np.where(signs, -v, v), "rz")


def _uniform_bits(rng: np.random.Generator, fmt: Format, shape) -> np.ndarray:
    """Uniform bit patterns over the format's value bits (container padding left zero)."""
    width = fmt.width
    raw = rng.integers(0, 1 << width, size=shape, dtype=np.uint64)
    pad = getattr(fmt, "pad_bits", 0)
    return (raw << np.uint64(pad)).astype(fmt.container_dtype)


def _product_split(rng: np.random.Generator, fa: FloatFormat, fb: FloatFormat, t: np.ndarray):
    """Exponents (ea, eb) with ea + eb = t, each within its format's range (t clipped to fit)."""
    t = np.clip(t, _lo(fa) + _lo(fb), fa.emax + fb.emax)
    lo = np.maximum(_lo(fa), t - fb.emax)
    hi = np.minimum(fa.emax, t - _lo(fb))
    ea = lo + np.floor(rng.random(t.shape) * (hi - lo + 1)).astype(np.int64)
    return ea, t - ea


def _product_range(ctx: _Ctx) -> tuple[int, int]:
    return _lo(ctx.fa) + _lo(ctx.fb), ctx.fa.emax + ctx.fb.emax


def _special_bits(fmt: FloatFormat, kind: str, negative: np.ndarray | bool = False,
                  rng: np.random.Generator | None = None, shape=()) -> np.ndarray:
    """Bit patterns of a special value of ``fmt``: zero, inf, nan (random payloads), max, subnormal.

    A format without NaN (FP6, FP4) gets its largest finite magnitude where a NaN is asked for.
    """
    neg = np.broadcast_to(np.asarray(negative, dtype=bool), shape)
    sign = (neg.astype(np.uint64) << np.uint64(fmt.width - 1)) if fmt.signed else np.zeros(shape, np.uint64)
    ones_e = (1 << fmt.exp_bits) - 1
    if kind == "zero":
        code = np.zeros(shape, np.uint64)
        if not fmt.has_negative_zero:
            sign = np.zeros(shape, np.uint64)
    elif kind == "max":
        code = np.full(shape, fmt.max_code, np.uint64)
    elif kind == "inf":
        if not fmt.has_inf:
            raise ValueError(f"format {fmt.name} has no infinity")
        code = np.full(shape, ones_e << fmt.man_bits, np.uint64)
    elif kind == "nan" and not fmt.has_nan:
        code = np.full(shape, fmt.max_code, np.uint64)  # FP6/FP4 have no NaN: their extreme instead
    elif kind == "nan":
        if fmt.specials == "ieee" and rng is not None and fmt.man_bits:
            payload = rng.integers(1, 1 << fmt.man_bits, size=shape, dtype=np.uint64)
            code = (np.uint64(ones_e << fmt.man_bits) | payload).astype(np.uint64)
        else:
            return np.broadcast_to(np.asarray(fmt.nan_bits, dtype=fmt.container_dtype), shape).copy()
    elif kind == "subnormal":
        if not fmt.subnormals or fmt.man_bits == 0:
            code = np.full(shape, 1 << fmt.man_bits, np.uint64)  # the least normal instead
        else:
            code = rng.integers(1, 1 << fmt.man_bits, size=shape, dtype=np.uint64)
    else:
        raise ValueError(f"kind: unknown special {kind!r}")
    return ((sign | code) << np.uint64(fmt.pad_bits)).astype(fmt.container_dtype)


def _nudge(rng: np.random.Generator, fmt: FloatFormat, bits: np.ndarray, prob: float) -> np.ndarray:
    """Move a fraction ``prob`` of finite nonzero values by one unit in the last place (either way)."""
    step = np.uint64(1 << fmt.pad_bits)
    raw = bits.astype(np.uint64)
    mag_mask = np.uint64(((1 << (fmt.exp_bits + fmt.man_bits)) - 1) << fmt.pad_bits)
    code = (raw & mag_mask) // step
    move = np.where(rng.random(bits.shape) < prob, rng.choice(np.array([-1, 1]), bits.shape), 0)
    new = code.astype(np.int64) + move
    ok = (code > 0) & (code <= fmt.max_code) & (new > 0) & (new <= fmt.max_code)
    moved = (raw & ~mag_mask) | (new.astype(np.uint64) * step)
    return np.where(ok, moved, raw).astype(bits.dtype)


# --------------------------------------------------------------------------------------------
# floating-point families

def _f_int(ctx: _Ctx):
    rng = ctx.rng

    def ints(fmt: FloatFormat, shape, cap: int) -> np.ndarray:
        bound = min(1 << (fmt.man_bits + 1), cap)  # every integer up to here is exact in fmt
        return _vals(fmt, rng.integers(-bound, bound + 1, size=shape).astype(np.float64))

    return ints(ctx.fa, (ctx.n, ctx.k), 8), ints(ctx.fb, (ctx.n, ctx.k), 8), ints(ctx.fc, ctx.n, 256)


def _f_normal(ctx: _Ctx):
    rng = ctx.rng
    return (_vals(ctx.fa, rng.standard_normal((ctx.n, ctx.k))), _vals(ctx.fb, rng.standard_normal((ctx.n, ctx.k))),
            _vals(ctx.fc, rng.standard_normal(ctx.n)))


def _finite_rows(fmt: FloatFormat, bits: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """In the chosen rows, turn inf/NaN patterns finite by clearing their top exponent bit."""
    special = fmt.decode(bits).kind != 0
    flip = np.uint64(1 << (fmt.pad_bits + fmt.man_bits + fmt.exp_bits - 1))
    cleared = (bits.astype(np.uint64) & ~flip).astype(bits.dtype)
    return np.where(rows[:, None] & special, cleared, bits)


def _f_bits(ctx: _Ctx):
    rng, n = ctx.rng, ctx.n
    # uniform patterns; half the vectors keep their operands finite, or NaN would hide the rest
    finite = rng.random(n) < 0.5
    a = _finite_rows(ctx.fa, _uniform_bits(rng, ctx.fa, (n, ctx.k)), finite)
    b = _finite_rows(ctx.fb, _uniform_bits(rng, ctx.fb, (n, ctx.k)), finite)
    # C: half uniform patterns, a quarter signed zeros (the zero exponent decides the
    # alignment), a quarter scaled into the products' range so both sides matter
    c = _uniform_bits(rng, ctx.fc, n)
    pick = rng.integers(0, 4, n)
    zeros = _special_bits(ctx.fc, "zero", rng.random(n) < 0.5, shape=(n,))
    plo, phi = _product_range(ctx)
    scaled = _scaled(rng, ctx.fc, rng.integers(plo, phi + 1, n))
    c = np.where(pick == 2, zeros, np.where(pick == 3, scaled, c))
    return a, b, c


def _f_cancel(ctx: _Ctx):
    rng, n, k = ctx.rng, ctx.n, ctx.k
    a = _vals(ctx.fa, rng.standard_normal((n, k)))
    b = _vals(ctx.fb, rng.standard_normal((n, k)))
    paired = rng.random(n) < 0.5
    if k >= 2:
        # half the vectors: the second half of the products negates the first, with a
        # quarter of those b's moved by one unit in the last place so a small residue remains
        h = k // 2
        a2 = _vals(ctx.fa, -ctx.fa.to_float(a[:, :h]))
        b2 = _nudge(rng, ctx.fb, b[:, :h], 0.25)
        a[:, h:2 * h] = np.where(paired[:, None], a2, a[:, h:2 * h])
        b[:, h:2 * h] = np.where(paired[:, None], b2, b[:, h:2 * h])
    # C cancels the (float64-rounded) sum of the products
    s = (ctx.fa.to_float(a) * ctx.fb.to_float(b)).sum(axis=1)
    s = np.where(np.isfinite(s), s, 0.0)
    c = _vals(ctx.fc, -s)
    c = np.where(paired & (rng.random(n) < 0.5), _vals(ctx.fc, rng.standard_normal(n) * 2.0 ** -20), c)
    return a, b, c


def _f_align(ctx: _Ctx):
    rng, n, k = ctx.rng, ctx.n, ctx.k
    plo, phi = _product_range(ctx)
    clo, chi = _lo(ctx.fc), ctx.fc.emax
    # half: one big term (C or the first product) at 2**E, the rest 4..45 binades below it
    e_lo, e_hi = max(plo + 8, clo), min(phi, chi)
    if e_lo > e_hi:
        e_lo = e_hi
    E = rng.integers(e_lo, e_hi + 1, n)
    gaps = rng.integers(4, 46, (n, k))
    c_big = rng.random(n) < 0.5
    t = E[:, None] - gaps
    t[:, 0] = np.where(c_big, t[:, 0], E)
    ea, eb = _product_split(rng, ctx.fa, ctx.fb, t)
    a = _scaled(rng, ctx.fa, ea)
    b = _scaled(rng, ctx.fb, eb)
    c = _scaled(rng, ctx.fc, np.where(c_big, E, E - rng.integers(4, 46, n)))
    # other half: every exponent uniform over a range whose products stay finite in D
    spread = rng.random(n) < 0.5
    half_d = ctx.fd.emax // 2 if isinstance(ctx.fd, FloatFormat) else 0
    ua = _scaled(rng, ctx.fa, rng.integers(_lo(ctx.fa), min(ctx.fa.emax, half_d) + 1, (n, k)))
    ub = _scaled(rng, ctx.fb, rng.integers(_lo(ctx.fb), min(ctx.fb.emax, half_d) + 1, (n, k)))
    uc = _scaled(rng, ctx.fc, rng.integers(clo, min(chi, ctx.fd.emax) + 1, n))
    return (np.where(spread[:, None], ua, a), np.where(spread[:, None], ub, b), np.where(spread, uc, c))


def _f_cdom(ctx: _Ctx):
    rng, n, k = ctx.rng, ctx.n, ctx.k
    plo, phi = _product_range(ctx)
    # j: the precision (bits below C's leading bit) at which the products make a tie
    j = rng.integers(1, ctx.fd.man_bits + 4, n)
    cmin = ctx.fc.emin
    e_lo = np.maximum(cmin, plo + j + 1)
    e_hi = np.minimum(ctx.fc.emax - 1, phi + j + 1)
    e_hi = np.maximum(e_hi, e_lo)
    E = e_lo + np.floor(rng.random(n) * (e_hi - e_lo + 1)).astype(np.int64)
    c = _scaled(rng, ctx.fc, E)
    c_neg = ctx.fc.decode(c).sign
    # first product: half an ulp at precision j (a tie), or 1/4, 3/4 of it, with either sign
    t0 = E - j - 1
    ea, eb = _product_split(rng, ctx.fa, ctx.fb, t0)
    mult = rng.choice(np.array([1.0, 1.0, 1.5, 0.5]), n)
    sign0 = np.where(rng.random(n) < 0.7, c_neg, ~c_neg)
    a0 = _vals(ctx.fa, np.where(sign0, -1.0, 1.0) * mult * np.ldexp(1.0, ea.astype(np.int32)), "rz")
    b0 = _scaled(rng, ctx.fb, eb, signs=np.zeros(n, bool), mantissa=False)
    # the other products: zeros of either sign, or tiny sticky terms far below the tie
    zero_a = _special_bits(ctx.fa, "zero", rng.random((n, k)) < 0.5, shape=(n, k))
    tiny_t = t0[:, None] - rng.integers(2, 40, (n, k))
    ta, tb = _product_split(rng, ctx.fa, ctx.fb, tiny_t)
    tiny_a = _scaled(rng, ctx.fa, ta)
    tiny_b = _scaled(rng, ctx.fb, tb)
    use_tiny = rng.random((n, k)) < 0.15
    a = np.where(use_tiny, tiny_a, zero_a)
    b = np.where(use_tiny, tiny_b, _vals(ctx.fb, rng.standard_normal((n, k))))
    pos = rng.integers(0, k, n)
    rows = np.arange(n)
    a[rows, pos] = a0
    b[rows, pos] = b0
    return a, b, c


def _f_special(ctx: _Ctx):
    rng, n, k = ctx.rng, ctx.n, ctx.k
    fa, fb, fc = ctx.fa, ctx.fb, ctx.fc
    a = _vals(fa, rng.standard_normal((n, k)))
    b = _vals(fb, rng.standard_normal((n, k)))
    c = _vals(fc, rng.standard_normal(n))
    rows = np.arange(n)
    scenario = rng.permutation(np.arange(n) % 12)
    p = rng.integers(0, k, n)
    q = (p + 1 + rng.integers(0, max(k - 1, 1), n)) % k
    neg = rng.random((n, k)) < 0.5

    def put(arr, fmt, sel, cols, kind, negative):
        idx = np.flatnonzero(sel)
        if idx.size:
            arr[idx, cols[idx]] = _special_bits(fmt, kind, np.asarray(negative)[idx] if np.ndim(negative) else negative,
                                                rng, shape=(idx.size,))

    def inf_or(fmt, other="max"):
        return "inf" if fmt.has_inf else other

    s = scenario
    # 0: all zeros of random signs, C a signed zero -> the sign of an exact zero result
    z = s == 0
    a = np.where(z[:, None], _special_bits(fa, "zero", neg, shape=(n, k)), a)
    b = np.where(z[:, None], _special_bits(fb, "zero", ~neg, shape=(n, k)), b)
    c = np.where(z, _special_bits(fc, "zero", rng.random(n) < 0.5, shape=(n,)), c)
    # 1: zero products against a negative-zero C
    z1 = s == 1
    a = np.where(z1[:, None] & (rng.random((n, k)) < 0.7), _special_bits(fa, "zero", neg, shape=(n, k)), a)
    c = np.where(z1, _special_bits(fc, "zero", True, shape=(n,)), c)
    b = np.where(z1[:, None], _special_bits(fb, "zero", neg, shape=(n, k)), b)
    # 2: subnormal operands and C
    sub = s == 2
    a = np.where(sub[:, None] & (rng.random((n, k)) < 0.6), _special_bits(fa, "subnormal", neg, rng, (n, k)), a)
    b = np.where(sub[:, None] & (rng.random((n, k)) < 0.6), _special_bits(fb, "subnormal", ~neg, rng, (n, k)), b)
    c = np.where(sub, _special_bits(fc, "subnormal", rng.random(n) < 0.5, rng, (n,)), c)
    # 3: largest finite magnitudes
    mx = s == 3
    a = np.where(mx[:, None] & (rng.random((n, k)) < 0.5), _special_bits(fa, "max", neg, shape=(n, k)), a)
    b = np.where(mx[:, None] & (rng.random((n, k)) < 0.5), _special_bits(fb, "max", neg, shape=(n, k)), b)
    c = np.where(mx & (rng.random(n) < 0.5), _special_bits(fc, "max", rng.random(n) < 0.5, shape=(n,)), c)
    # 4: an infinite operand (formats without inf: their NaN)
    put(a, fa, s == 4, p, inf_or(fa, "nan"), neg[rows, p])
    # 5: a NaN operand with a random payload, in a or b
    put(a, fa, (s == 5) & (p % 2 == 0), p, "nan", neg[rows, p])
    put(b, fb, (s == 5) & (p % 2 == 1), p, "nan", neg[rows, p])
    # 6: a NaN accumulator
    c = np.where(s == 6, _special_bits(fc, "nan", rng.random(n) < 0.5, rng, (n,)), c)
    # 7: inf * 0
    put(a, fa, s == 7, p, inf_or(fa, "nan"), neg[rows, p])
    put(b, fb, s == 7, p, "zero", neg[rows, q])
    # 8: +inf and -inf products
    put(a, fa, s == 8, p, inf_or(fa, "max"), False)
    put(a, fa, s == 8, q, inf_or(fa, "max"), True)
    put(b, fb, s == 8, p, "max" if not fa.has_inf else "subnormal", False)
    put(b, fb, s == 8, q, "max" if not fa.has_inf else "subnormal", False)
    # 9: an infinite C against an infinite product of the other sign
    c_neg = rng.random(n) < 0.5
    if fc.has_inf:
        c = np.where(s == 9, _special_bits(fc, "inf", c_neg, shape=(n,)), c)
    put(a, fa, s == 9, p, inf_or(fa, "max"), ~c_neg)
    put(b, fb, s == 9, p, "max", False)
    # 10: an infinite C with finite products
    if fc.has_inf:
        c = np.where(s == 10, _special_bits(fc, "inf", c_neg, shape=(n,)), c)
    # 11: products of negative zeros (exact zero sums from signed zeros) and C = +0
    z11 = s == 11
    a = np.where(z11[:, None], _special_bits(fa, "zero", True, shape=(n, k)), a)
    c = np.where(z11, _special_bits(fc, "zero", False, shape=(n,)), c)
    return a, b, c


def _f_tf32(ctx: _Ctx):
    rng, n, k = ctx.rng, ctx.n, ctx.k

    def garbage(fmt: FloatFormat, vals: np.ndarray) -> np.ndarray:
        if fmt.pad_bits == 0:
            return vals
        junk = rng.integers(0, 1 << fmt.pad_bits, size=vals.shape, dtype=np.uint64)
        return (vals.astype(np.uint64) | junk).astype(fmt.container_dtype)

    def operand(fmt: FloatFormat) -> np.ndarray:
        v = _vals(fmt, rng.standard_normal((n, k)))
        # some infinities and zeros: garbage below an inf pattern must not make it a NaN
        pick = rng.random((n, k))
        neg = rng.random((n, k)) < 0.5
        if fmt.has_inf:
            v = np.where(pick < 0.03, _special_bits(fmt, "inf", neg, shape=(n, k)), v)
        v = np.where((pick >= 0.03) & (pick < 0.08), _special_bits(fmt, "zero", neg, shape=(n, k)), v)
        return garbage(fmt, v)

    return operand(ctx.fa), operand(ctx.fb), _vals(ctx.fc, rng.standard_normal(n))


def _f_overflow(ctx: _Ctx):
    rng, n, k = ctx.rng, ctx.n, ctx.k
    fd, fc = ctx.fd, ctx.fc
    plo, phi = _product_range(ctx)
    neg = rng.random(n) < 0.5
    # C in the output's top binade (60%), the largest finite (20%) or zero (20%: products alone)
    pick = rng.random(n)
    c = _scaled(rng, fc, np.full(n, min(fc.emax, fd.emax)), signs=neg)
    c = np.where(pick >= 0.6, _special_bits(fc, "max", neg, shape=(n,)), c)
    c = np.where(pick >= 0.8, _special_bits(fc, "zero", neg, shape=(n,)), c)
    # a random number of products, each up to 12 binades below the top the output (or the
    # operands) allow, mostly of C's sign: sums land below, between and beyond the largest
    # finite and, for cut outputs such as E8M13, between that format's and D's largest
    top = min(phi, fd.emax)
    t = top - rng.integers(0, 13, (n, k))
    ea, eb = _product_split(rng, ctx.fa, ctx.fb, t)
    same = rng.random((n, k)) < 0.85
    a = _scaled(rng, ctx.fa, ea, signs=np.where(same, neg[:, None], ~neg[:, None]))
    b = _scaled(rng, ctx.fb, eb, signs=np.zeros((n, k), bool))
    active = rng.random((n, k)) < rng.random((n, 1))
    a = np.where(active, a, _special_bits(ctx.fa, "zero", False, shape=(n, k)))
    return a, b, c


# --------------------------------------------------------------------------------------------
# integer families

def _i_range(fmt: IntFormat) -> tuple[int, int]:
    return fmt.min_value, fmt.max_value


def _i_vals(fmt: IntFormat, x) -> np.ndarray:
    lo, hi = _i_range(fmt)
    return fmt.encode_int(np.clip(np.asarray(x, dtype=np.int64), lo, hi))


def _i_int(ctx: _Ctx):
    rng = ctx.rng

    def small(fmt: IntFormat, shape, bound: int):
        lo = max(fmt.min_value, -bound)
        return _i_vals(fmt, rng.integers(lo, min(fmt.max_value, bound) + 1, size=shape))

    return small(ctx.fa, (ctx.n, ctx.k), 8), small(ctx.fb, (ctx.n, ctx.k), 8), small(ctx.fc, ctx.n, 1000)


def _i_normal(ctx: _Ctx):
    rng = ctx.rng

    def gauss(fmt: IntFormat, shape):
        lo, hi = _i_range(fmt)
        centre = 0 if fmt.signed else (hi + 1) // 2
        return _i_vals(fmt, np.rint(centre + rng.standard_normal(shape) * (hi - lo) / 8).astype(np.int64))

    c = _i_vals(ctx.fc, np.rint(rng.standard_normal(ctx.n) * 1e4).astype(np.int64))
    return gauss(ctx.fa, (ctx.n, ctx.k)), gauss(ctx.fb, (ctx.n, ctx.k)), c


def _i_bits(ctx: _Ctx):
    rng = ctx.rng
    return (_uniform_bits(rng, ctx.fa, (ctx.n, ctx.k)), _uniform_bits(rng, ctx.fb, (ctx.n, ctx.k)),
            _uniform_bits(rng, ctx.fc, ctx.n))


def _i_cancel(ctx: _Ctx):
    rng, n = ctx.rng, ctx.n
    a, b, _ = _i_normal(ctx)
    s = (ctx.fa.decode_int(a) * ctx.fb.decode_int(b)).sum(axis=1)
    c = _i_vals(ctx.fc, -s + np.where(rng.random(n) < 0.5, rng.integers(-2, 3, n), 0))
    return a, b, c


def _i_special(ctx: _Ctx):
    rng, n, k = ctx.rng, ctx.n, ctx.k

    def extremes(fmt: IntFormat, shape):
        lo, hi = _i_range(fmt)
        choices = np.array(sorted({lo, hi, 0, 1, max(lo, -1), lo + 1, hi - 1}), dtype=np.int64)
        return _i_vals(fmt, rng.choice(choices, size=shape))

    return extremes(ctx.fa, (n, k)), extremes(ctx.fb, (n, k)), extremes(ctx.fc, n)


def _i_overflow(ctx: _Ctx):
    rng, n, k = ctx.rng, ctx.n, ctx.k
    fa, fb, fc = ctx.fa, ctx.fb, ctx.fc
    # products near their largest magnitude, all of one sign: positive (crossing the top of
    # the accumulator's range) or, where a signed operand allows, negative (the bottom)
    down = (rng.random(n) < 0.5)[:, None] & (fa.signed or fb.signed)
    a_down, b_down = (down, np.zeros_like(down)) if fa.signed else (np.zeros_like(down), down)
    jitter = rng.integers(0, 4, (n, k))
    a = _i_vals(fa, np.where(a_down, fa.min_value + jitter, fa.max_value - jitter))
    jitter = rng.integers(0, 4, (n, k))
    b = _i_vals(fb, np.where(b_down, fb.min_value + jitter, fb.max_value - jitter))
    total = (fa.decode_int(a) * fb.decode_int(b)).sum(axis=1)
    # C inside the range on the side the products push towards: about half the sums cross
    margin = rng.integers(0, 2 * np.abs(total) + 2)
    c_val = np.where(total >= 0, fc.max_value - margin, fc.min_value + margin)
    return a, b, _i_vals(fc, c_val)


_FLOAT_GENERATORS: dict[str, Callable] = {
    "int": _f_int, "normal": _f_normal, "bits": _f_bits, "cancel": _f_cancel, "align": _f_align,
    "cdom": _f_cdom, "special": _f_special, "tf32": _f_tf32, "overflow": _f_overflow,
}
_INT_GENERATORS: dict[str, Callable] = {
    "int": _i_int, "normal": _i_normal, "bits": _i_bits, "cancel": _i_cancel, "special": _i_special,
    "overflow": _i_overflow,
}
