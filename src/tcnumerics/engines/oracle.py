"""The exact oracle: the unit model from first principles, one vector at a time.

Written independently of the numpy engines: bit fields are read here with plain Python
integers, values are ``fractions.Fraction``, truncation is ``int()`` of an exact quotient,
and the single rounding is done by its own routine.  Slow (thousands of vectors per
second) and obviously right; the tests use it to check the reference engine.

``true_dot`` gives the mathematically exact ``sum(a*b) + c`` for error studies.

Example:
    >>> import numpy as np
    >>> from tcnumerics.engines.oracle import dot_bits, true_dot
    >>> a = np.array([[0x3C00, 0x1400]], np.uint16)   # fp16 1.0 and 2**-10
    >>> true_dot("hopper.wgmma.m64n8k16.f32.f16.f16", np.pad(a, ((0, 0), (0, 14))),
    ...          np.pad(a, ((0, 0), (0, 14))), np.zeros(1, np.uint32))
    [Fraction(1048577, 1048576)]
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..formats import FloatFormat, IntFormat, Rounding
from ..model import InstructionSpec, UnitModel

__all__ = ["dot_bits", "true_dot", "value_of", "round_exact"]

NAN = "nan"


def value_of(fmt, bits: int):
    """Exact value of one bit pattern: a Fraction, ``float('inf')``/``-inf``, or ``"nan"``."""
    if isinstance(fmt, IntFormat):
        v = bits & ((1 << fmt.bits) - 1)
        return v - (1 << fmt.bits) if fmt.signed and v >> (fmt.bits - 1) else v
    v = (bits >> fmt.pad_bits) & ((1 << fmt.width) - 1)
    negative = fmt.signed and (v >> (fmt.width - 1)) & 1
    e_field = (v >> fmt.man_bits) & ((1 << fmt.exp_bits) - 1)
    m_field = v & ((1 << fmt.man_bits) - 1)
    top_e = (1 << fmt.exp_bits) - 1
    if fmt.specials == "ieee" and e_field == top_e:
        return NAN if m_field else (float("-inf") if negative else float("inf"))
    if fmt.specials in ("fn", "nan_only") and e_field == top_e and m_field == (1 << fmt.man_bits) - 1:
        return NAN
    if fmt.specials == "fnuz" and negative and e_field == 0 and m_field == 0:
        return NAN
    if fmt.subnormals and e_field == 0:
        mag = Fraction(m_field, 1 << fmt.man_bits) * Fraction(2) ** (1 - fmt.bias)
    else:
        mag = (1 + Fraction(m_field, 1 << fmt.man_bits)) * Fraction(2) ** (e_field - fmt.bias)
    return -mag if negative else mag


def _align_exponent(fmt: FloatFormat, x: Fraction) -> int:
    """The exponent a unit aligns a nonzero operand on (subnormals: the minimum normal one)."""
    e = _floor_log2(abs(x))
    return max(e, 1 - fmt.bias if fmt.subnormals else -fmt.bias)


def _floor_log2(x: Fraction) -> int:
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** e > x:
        e -= 1
    return e


def round_exact(x: Fraction, fmt: FloatFormat, rounding: Rounding, overflow: str, negative_zero: bool) -> int:
    """Round an exact value into ``fmt`` bits with one rounding (independent of formats.encode)."""
    rounding = Rounding.parse(rounding)
    negative = x < 0
    mag = -x if negative else x
    p = fmt.man_bits
    emin = 1 - fmt.bias if fmt.subnormals else -fmt.bias
    if mag == 0:
        n, q = 0, emin - p
    else:
        q = max(_floor_log2(mag) - p, emin - p)
        scaled = mag / Fraction(2) ** q
        n = scaled.numerator // scaled.denominator
        rest = scaled - n
        if rounding is Rounding.RNE:
            n += 1 if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2) else 0
        elif rounding is Rounding.RNA:
            n += 1 if rest >= Fraction(1, 2) else 0
        elif rounding is Rounding.RU:
            n += 1 if rest and not negative else 0
        elif rounding is Rounding.RD:
            n += 1 if rest and negative else 0
        elif rounding is Rounding.RTO:
            n |= 1 if rest else 0
        elif rounding is not Rounding.RZ:
            raise ValueError("the oracle has no stochastic rounding")
        if n == 1 << (p + 1):
            n, q = n >> 1, q + 1
    value = Fraction(n) * Fraction(2) ** q
    max_finite = value_of(fmt, fmt.max_code << fmt.pad_bits)
    sign_bit = (1 << (fmt.width - 1)) if (negative and fmt.signed) else 0
    if value > max_finite:
        to_inf = overflow == "inf" or (overflow == "ieee" and (
            rounding in (Rounding.RNE, Rounding.RNA) or (rounding is Rounding.RU and not negative)
            or (rounding is Rounding.RD and negative)))
        if to_inf:
            return (sign_bit | (((1 << fmt.exp_bits) - 1) << p)) << fmt.pad_bits
        return (sign_bit | fmt.max_code) << fmt.pad_bits
    if n == 0:
        return (sign_bit if negative_zero else 0) << fmt.pad_bits
    if n >= 1 << p:
        code = ((q + p + fmt.bias) << p) | (n - (1 << p))
    else:
        code = n  # subnormal
    return (sign_bit | code) << fmt.pad_bits


def _group(model: UnitModel, a_vals, b_vals, c_val, c_fmt):
    """One fused truncating group on exact values; returns d bits."""
    d = model.d_format
    terms = []  # (value, align exponent)
    specials = []
    for x, y in zip(a_vals, b_vals):
        if NAN in (x, y) or (isinstance(x, float) and y == 0) or (isinstance(y, float) and x == 0):
            return model.nan_bits
        if isinstance(x, float) or isinstance(y, float):
            specials.append(1 if (x > 0) == (y > 0) else -1)
            continue
        if x == 0 or y == 0:
            terms.append((Fraction(0), model.zero_exponent))
        else:
            terms.append((x * y, _align_exponent(model.a_format, x) + _align_exponent(model.b_format, y)))
    if c_val == NAN:
        return model.nan_bits
    if isinstance(c_val, float):
        specials.append(1 if c_val > 0 else -1)
    elif c_val == 0:
        terms.append((Fraction(0), model.zero_exponent))
    else:
        terms.append((c_val, _align_exponent(c_fmt, c_val)))
    if specials:
        if 1 in specials and -1 in specials:
            return model.nan_bits
        return (((1 << (d.width - 1)) if specials[0] < 0 else 0) << d.pad_bits) | d.inf_bits
    emax = max(e for _, e in terms)
    if model.frac_bits is None:
        total = sum(v for v, _ in terms)
    else:
        ulp = Fraction(2) ** (emax - model.frac_bits)
        total = sum(int(v / ulp) * ulp for v, _ in terms)  # int() truncates toward zero
    return round_exact(total, model.output_format, model.output_rounding, model.output_overflow, False)


def _datapath(model: UnitModel, a_vals, b_vals, c_bits: int, c_fmt) -> int:
    if model.algorithm == "integer":
        total = sum(x * y for x, y in zip(a_vals, b_vals)) + value_of(c_fmt, c_bits)
        lo, hi = -(1 << 31), (1 << 31) - 1
        if model.saturate:
            total = min(max(total, lo), hi)
        return total & 0xFFFFFFFF
    if model.algorithm != "fused":
        raise NotImplementedError(f"oracle: algorithm {model.algorithm!r}")
    acc, acc_fmt = c_bits, c_fmt
    size = model.group_size
    for start in range(0, len(a_vals), size):
        acc = _group(model, a_vals[start:start + size], b_vals[start:start + size], value_of(acc_fmt, acc), acc_fmt)
        acc_fmt = model.d_format
    return acc


# --- algorithms beyond the fused group: each written from its definition ------------------

def _sign_bit(fmt, bits: int) -> int:
    return (bits >> (fmt.pad_bits + fmt.width - 1)) & 1 if fmt.signed else 0


def _ieee_round(fmt: FloatFormat, x, negative_zero: bool, rounding=Rounding.RNE) -> int:
    """IEEE bits of a Fraction / +-inf (``negative_zero`` decides the sign of an exact zero)."""
    if isinstance(x, float):
        return ((1 << (fmt.width - 1) if x < 0 else 0) << fmt.pad_bits) | fmt.inf_bits
    if x == 0:
        return ((1 << (fmt.width - 1)) << fmt.pad_bits) if negative_zero else 0
    bits = round_exact(x, fmt, rounding, "ieee", True)
    if value_of(fmt, bits) == 0:  # underflow to zero keeps the sign of x
        return ((1 << (fmt.width - 1)) << fmt.pad_bits) if x < 0 else 0
    return bits


def _ieee_mul_add_oracle(model: UnitModel, a_bits, b_bits, c_bits: int, c_fmt) -> int:
    """acc = RNE(acc + RNE(a*b)) in d_format, one operation at a time, IEEE 754 signed zeros."""
    d = model.d_format
    x = value_of(c_fmt, c_bits)
    if x == NAN:
        return model.nan_bits
    acc_bits = _ieee_round(d, x, bool(_sign_bit(c_fmt, c_bits)))
    for ab, bb in zip(a_bits, b_bits):
        x, y = value_of(model.a_format, int(ab)), value_of(model.b_format, int(bb))
        acc = value_of(d, acc_bits)
        if NAN in (x, y, acc):
            return model.nan_bits
        p_neg = bool(_sign_bit(model.a_format, int(ab)) ^ _sign_bit(model.b_format, int(bb)))
        if isinstance(x, float) or isinstance(y, float):
            if x == 0 or y == 0:
                return model.nan_bits
            p = float("-inf") if p_neg else float("inf")
        else:
            p = x * y
        p_bits = _ieee_round(d, p, p_neg)
        p = value_of(d, p_bits)
        if isinstance(p, float) or isinstance(acc, float):
            if isinstance(p, float) and isinstance(acc, float) and p != acc:
                return model.nan_bits
            acc_bits = _ieee_round(d, p if isinstance(p, float) else acc, False)
            continue
        total = acc + p
        both_neg = _sign_bit(d, acc_bits) and _sign_bit(d, p_bits)
        acc_bits = _ieee_round(d, total, bool(both_neg) if total == 0 else False)
    return acc_bits


def _binary_oracle(model: UnitModel, a_bits, b_bits, c_bits: int, c_fmt) -> int:
    count = 0
    for x, y in zip(a_bits, b_bits):
        x, y = int(x) & 1, int(y) & 1
        count += (x and y) if model.bit_op == "and" else (x != y)
    return (value_of(c_fmt, c_bits) + count) & ((1 << model.d_format.bits) - 1)


def _floor_to(x: Fraction, quantum_exp: int) -> Fraction:
    """The largest multiple of 2**quantum_exp not above x (floor, toward -inf)."""
    q = Fraction(2) ** quantum_exp
    return (x / q).__floor__() * q


def _trunc_to(x: Fraction, quantum_exp: int) -> Fraction:
    q = Fraction(2) ** quantum_exp
    return int(x / q) * q  # int() truncates toward zero


def _special_products(model, a_vals, b_vals):
    """(any NaN, set of infinity signs) among the products a_k*b_k."""
    nan, infs = False, set()
    for x, y in zip(a_vals, b_vals):
        if NAN in (x, y) or (isinstance(x, float) and y == 0) or (isinstance(y, float) and x == 0):
            nan = True
        elif isinstance(x, float) or isinstance(y, float):
            infs.add((x > 0) == (y > 0))
    return nan, infs


_X86_DEFAULT_NAN = 0xFFC00000  # the FP32 NaN an invalid x86 operation returns


def _x86_nan32(fmt, bits: int) -> int:
    """A NaN of ``fmt`` as the quiet FP32 NaN an x86 conversion makes of it (payload top-aligned)."""
    v = (bits >> fmt.pad_bits) & ((1 << fmt.width) - 1)
    sign = v >> (fmt.width - 1)
    frac = v & ((1 << fmt.man_bits) - 1)
    return (sign << 31) | 0x7FC00000 | (frac << (23 - fmt.man_bits))


def _x86_product_nan(model: UnitModel, a_bits: int, b_bits: int):
    """NaN bits of MMA-Sim's product (b's NaN before a's; inf*0 the default NaN), None if not NaN."""
    x, y = value_of(model.a_format, a_bits), value_of(model.b_format, b_bits)
    if y == NAN:
        return _x86_nan32(model.b_format, b_bits)
    if x == NAN:
        return _x86_nan32(model.a_format, a_bits)
    if (isinstance(x, float) and y == 0) or (isinstance(y, float) and x == 0):
        return _X86_DEFAULT_NAN
    return None


def _exact_sum_oracle(model: UnitModel, a_bits, b_bits, c_bits: int, c_fmt) -> int:
    """CDNA1: sum(a*b) + c exactly, one RNE rounding; NaN results compared as NaN only."""
    a_vals = [value_of(model.a_format, int(x)) for x in a_bits]
    b_vals = [value_of(model.b_format, int(x)) for x in b_bits]
    c = value_of(c_fmt, c_bits)
    nan, infs = _special_products(model, a_vals, b_vals)
    if isinstance(c, float):
        infs.add(c > 0)
    if nan or c == NAN or len(infs) == 2:
        if model.nan_policy != "x86":
            return model.nan_bits
        # MMA-Sim's reduction keeps, with two products, the first NaN of (p0, p1, c); with
        # more, the last product's NaN, C's only when no product is NaN
        prods = [_x86_product_nan(model, int(x), int(y)) for x, y in zip(a_bits, b_bits)]
        order = prods if len(prods) <= 2 else prods[::-1]
        order.append(_x86_nan32(c_fmt, c_bits) if c == NAN else None)
        return next((n for n in order if n is not None), _X86_DEFAULT_NAN)
    if infs:
        return _ieee_round(model.d_format, float("inf") if True in infs else float("-inf"), False)
    total = sum(x * y for x, y in zip(a_vals, b_vals)) + c
    return round_exact(total, model.d_format, Rounding.RNE, "inf", False)


def _staged_sum_oracle(model: UnitModel, a_bits, b_bits, c_bits: int, c_fmt) -> int:
    """CDNA3, from its description: truncated product sums, floors, one RNE rounding."""
    F, F2 = model.frac_bits, model.sum_frac_bits
    a_vals = [value_of(model.a_format, int(x)) for x in a_bits]
    b_vals = [value_of(model.b_format, int(x)) for x in b_bits]
    c = value_of(c_fmt, c_bits)
    nan, infs = _special_products(model, a_vals, b_vals)
    terms = []  # (index, value, alignment exponent) of nonzero finite products
    for i, (x, y) in enumerate(zip(a_vals, b_vals)):
        if isinstance(x, float) or isinstance(y, float) or NAN in (x, y) or x == 0 or y == 0:
            continue
        e = _align_exponent(model.a_format, x) + _align_exponent(model.b_format, y)
        if not model.split_even_odd and (abs(x * y) >= Fraction(2) ** 128 or e >= 128):
            infs.add(x * y > 0)  # the product overflows FP32's exponent range
            continue
        terms.append((i, x * y, e))
    halves = [terms[0::1]] if not model.split_even_odd else [[t for t in terms if t[0] % 2 == h] for h in (0, 1)]
    sums = []
    for half in halves:
        if half:
            e_h = max(e for _, _, e in half)
            sums.append((sum(_trunc_to(v, e_h - F) for _, v, _ in half), e_h))
    e_dot = max((e for _, e in sums), default=None)
    dot = sum((_floor_to(t, e_dot - F) for t, _ in sums), Fraction(0)) if model.split_even_odd and sums else \
        sum((t for t, _ in sums), Fraction(0))
    c_special = c == NAN or isinstance(c, float)
    e_c = -1 if c_special else _align_exponent(c_fmt, c) if c != 0 else 1 - c_fmt.bias
    e_max = e_c if e_dot is None else max(e_dot, e_c)
    if c_special and model.split_even_odd and e_c < e_max - F - 1:
        c_special, c = False, Fraction(0)  # dropped below the window, as MMA-Sim aligns it
    if nan or c == NAN:
        return model.nan_bits
    if isinstance(c, float):
        infs.add(c > 0)
    if len(infs) == 2:
        return model.nan_bits
    if infs:
        return _ieee_round(model.d_format, float("inf") if True in infs else float("-inf"), False)
    part_c = _floor_to(c, e_max - F)
    if model.split_even_odd and e_c < e_max - F - 1:
        part_c = Fraction(0)
    x = _floor_to(dot, e_max - F2 - 1) + part_c
    if x == 0:
        return 0
    lead = max(_floor_log2(abs(x)), -126)
    return round_exact(_floor_to(x, lead - F2), model.d_format, Rounding.RNE, "ieee", False)


def _ftz_mul_add_oracle(model: UnitModel, a_bits, b_bits, c_bits: int, c_fmt) -> int:
    """CDNA2: flushed inputs, FP32-rounded products, FP32 RNE additions in pairs, IEEE zeros."""
    f32 = model.d_format
    tiny = Fraction(2) ** -126

    x86 = model.nan_policy == "x86"

    def operand(fmt, bits):
        v = value_of(fmt, int(bits))
        neg = bool(_sign_bit(fmt, int(bits)))
        if v == NAN:
            return NAN, _x86_nan32(fmt, int(bits))  # a NaN carries its FP32 payload as "sign"
        if isinstance(v, Fraction) and abs(v) < Fraction(2) ** fmt.emin:
            return Fraction(0), False  # flushed to +0
        return v, neg

    def rounded(v, neg_zero):  # (value, sign) of an FP32 RNE result with flushing
        if v == NAN:
            return NAN, False
        bits = _ieee_round(f32, v, neg_zero)
        r = value_of(f32, bits)
        neg = bool(bits >> 31)
        if isinstance(r, Fraction) and abs(r) < tiny:
            return Fraction(0), neg
        return r, neg

    def mul(x, y):
        (xv, xn), (yv, yn) = x, y
        if NAN in (xv, yv):  # the second operand's NaN first
            return (NAN, yn) if yv == NAN else (NAN, xn)
        if (isinstance(xv, float) and yv == 0) or (isinstance(yv, float) and xv == 0):
            return NAN, _X86_DEFAULT_NAN
        if isinstance(xv, float) or isinstance(yv, float):
            return float("-inf") if xn ^ yn else float("inf"), xn ^ yn
        return rounded(xv * yv, xn ^ yn)

    def add(x, y):
        (xv, xn), (yv, yn) = x, y
        if NAN in (xv, yv):
            return (NAN, yn) if yv == NAN else (NAN, xn)
        if isinstance(xv, float) or isinstance(yv, float):
            if isinstance(xv, float) and isinstance(yv, float) and xv != yv:
                return NAN, _X86_DEFAULT_NAN
            inf = xv if isinstance(xv, float) else yv
            return inf, inf < 0
        total = xv + yv
        return rounded(total, (xn and yn) if total == 0 else False)

    prods = [mul(operand(model.a_format, x), operand(model.b_format, y)) for x, y in zip(a_bits, b_bits)]
    acc = operand(c_fmt, c_bits)
    step = model.pair_tree
    for k in range(0, len(prods), step):
        part = add(prods[k], prods[k + 1])
        if step == 4:
            part = add(part, add(prods[k + 2], prods[k + 3]))
        acc = add(acc, part)
    if acc[0] == NAN:
        return acc[1] if x86 else model.nan_bits
    return _ieee_round(f32, acc[0], acc[1]) if acc[0] != 0 else (0x80000000 if acc[1] else 0)


def _fma_chain_oracle(model: UnitModel, a_bits, b_bits, c_bits: int, c_fmt) -> int:
    """Sequential IEEE FMA acc = RN(a*b + acc) with IEEE signed zeros; NaNs canonical or x86
    (first NaN of a, b, acc quieted; an invalid operation gives the negative default NaN)."""
    d = model.d_format
    quiet = 1 << (d.man_bits - 1)
    default = (1 << (d.width - 1)) | (((1 << (d.exp_bits + 1)) - 1) << (d.man_bits - 1))
    acc, acc_fmt = c_bits, c_fmt
    for xb, yb in zip(a_bits, b_bits):
        xb, yb = int(xb), int(yb)
        x, y, z = value_of(model.a_format, xb), value_of(model.b_format, yb), value_of(acc_fmt, acc)
        invalid = (isinstance(x, float) and y == 0) or (isinstance(y, float) and x == 0)
        p_inf = None if invalid or NAN in (x, y) or not (isinstance(x, float) or isinstance(y, float)) else \
            float("inf") if (x > 0) == (y > 0) else float("-inf")
        if not invalid and p_inf is not None and isinstance(z, float) and z != p_inf:
            invalid = True
        if NAN in (x, y, z) or invalid:
            if model.nan_policy != "x86":
                acc = model.nan_bits
            else:
                first = next((bits for v, bits in ((x, xb), (y, yb), (z, acc)) if v == NAN), None)
                acc = (first | quiet) if first is not None else default
        elif p_inf is not None or isinstance(z, float):
            acc = _ieee_round(d, p_inf if p_inf is not None else z, False)
        else:
            p = x * y
            total = p + z
            if total == 0:
                p_neg = _sign_bit(model.a_format, xb) ^ _sign_bit(model.b_format, yb)
                both_neg = p == 0 and p_neg and _sign_bit(acc_fmt, acc)
                acc = _ieee_round(d, Fraction(0), bool(both_neg))
            else:
                acc = _ieee_round(d, total, total < 0, model.output_rounding)
        acc_fmt = d
    return acc


_BITWISE = {"ieee_mul_add": _ieee_mul_add_oracle, "fma_chain": _fma_chain_oracle, "binary": _binary_oracle, "exact_sum": _exact_sum_oracle,
            "staged_sum": _staged_sum_oracle, "ftz_mul_add": _ftz_mul_add_oracle}


def _scaled_terms(model: UnitModel, a_vals, b_vals, sa_vals, sb_vals):
    """Block-scaled terms: list of (value, alignment exponent), or the special outcome."""
    sf = model.scale_format
    if any(v == NAN for v in list(sa_vals) + list(sb_vals)):
        return NAN
    terms, specials = [], []
    if model.algorithm == "scaled_fused":
        for x, y, s, t in zip(a_vals, b_vals, sa_vals, sb_vals):
            if NAN in (x, y) or (isinstance(x, float) and y == 0) or (isinstance(y, float) and x == 0):
                return NAN
            if isinstance(x, float) or isinstance(y, float):
                specials.append(1 if (x > 0) == (y > 0) else -1)
            elif x == 0 or y == 0:
                terms.append((Fraction(0), model.zero_exponent))
            else:
                e = (_align_exponent(model.a_format, x) + _align_exponent(model.b_format, y)
                     + _align_exponent(sf, s) + _align_exponent(sf, t))
                terms.append((x * y * s * t, e))
        return terms, specials
    G = model.subgroup_size
    for j in range(0, len(a_vals), G):
        prods = [x * y for x, y in zip(a_vals[j:j + G], b_vals[j:j + G])]
        s, t = sa_vals[j], sb_vals[j]
        if all(p == 0 for p in prods) or s * t == 0:
            terms.append((sum(prods) * s * t, model.zero_exponent))
        else:
            terms.append((sum(prods) * s * t, _align_exponent(sf, s) + _align_exponent(sf, t)))
    return terms, specials


def scaled_dot_bits(spec, a: np.ndarray, b: np.ndarray, c: np.ndarray, scale_a: np.ndarray,
                    scale_b: np.ndarray) -> np.ndarray:
    """Exact-oracle result bits of a block-scaled instruction (scales [N, K'/scale_block])."""
    from ..catalog import get_instruction

    spec = get_instruction(spec)
    model = spec.model
    d = model.d_format
    out = np.empty(len(c), dtype=d.container_dtype)
    for i in range(len(c)):
        acc, acc_fmt = int(c[i]), spec.c_format
        for start in range(0, a.shape[1], model.group_size):
            sl = slice(start, start + model.group_size)
            a_vals = [value_of(spec.a_format, int(x)) for x in a[i, sl]]
            b_vals = [value_of(spec.b_format, int(x)) for x in b[i, sl]]
            blocks = [k // model.scale_block for k in range(start, start + model.group_size)]
            sa_vals = [value_of(model.scale_format, int(scale_a[i, j])) for j in blocks]
            sb_vals = [value_of(model.scale_format, int(scale_b[i, j])) for j in blocks]
            found = _scaled_terms(model, a_vals, b_vals, sa_vals, sb_vals)
            c_val = value_of(acc_fmt, acc)
            if found == NAN or c_val == NAN:
                acc = model.nan_bits
            else:
                terms, specials = found
                if isinstance(c_val, float):
                    specials.append(1 if c_val > 0 else -1)
                if specials:
                    acc = model.nan_bits if len(set(specials)) == 2 else _ieee_round(d, float(specials[0]) * float("inf"), False)
                else:
                    terms.append((c_val, _align_exponent(acc_fmt, c_val) if c_val != 0 else model.zero_exponent))
                    emax = max(e for _, e in terms)
                    total = sum(_trunc_to(v, emax - model.frac_bits) for v, _ in terms)
                    acc = round_exact(total, model.output_format, model.output_rounding, model.output_overflow, False)
            acc_fmt = d
        out[i] = acc
    return out


def _instruction(spec: InstructionSpec, a_bits, b_bits, c_bits: int) -> int:
    model = spec.model
    if model.algorithm in _BITWISE:
        if spec.a_format != model.a_format or spec.b_format != model.b_format or spec.k_order or spec.c_entry != "fused":
            raise NotImplementedError(f"oracle: {model.algorithm} with operand conversion or reordering")
        step = _BITWISE[model.algorithm]
        acc, acc_fmt = c_bits, spec.c_format
        for start in range(0, spec.k, model.group_size):
            acc = step(model, a_bits[start:start + model.group_size], b_bits[start:start + model.group_size],
                       acc, acc_fmt)
            acc_fmt = model.d_format
        return acc
    a_vals = [value_of(spec.a_format, int(x)) for x in a_bits]
    b_vals = [value_of(spec.b_format, int(x)) for x in b_bits]
    if spec.k_order is not None:
        a_vals = [a_vals[i] for i in spec.k_order]
        b_vals = [b_vals[i] for i in spec.k_order]
    chunk = spec.chunk or spec.k
    acc, acc_fmt = (c_bits, spec.c_format) if spec.c_entry == "fused" else (0, model.c_format)
    if spec.chunk_combine == "ieee_add":  # every chunk from +0, the results summed in K order by IEEE additions
        parts = [_datapath(model, a_vals[s:s + chunk], b_vals[s:s + chunk], 0, model.c_format)
                 for s in range(0, spec.k, chunk)]
        acc = parts[0]
        for part in parts[1:]:
            acc = _ieee_add(model, spec.c_add_rounding, acc, model.d_format, part, model.d_format)
    else:
        for start in range(0, spec.k, chunk):
            acc = _datapath(model, a_vals[start:start + chunk], b_vals[start:start + chunk], acc, acc_fmt)
            acc_fmt = model.d_format
    if spec.c_entry == "ieee_add":
        return _ieee_add(model, spec.c_add_rounding, acc, model.d_format, c_bits, spec.c_format)
    return acc


def _ieee_add(model, rounding, x_bits: int, x_fmt, y_bits: int, y_fmt) -> int:
    """x + y as one IEEE addition into the model's D format (canonical NaN)."""
    x, y = value_of(x_fmt, x_bits), value_of(y_fmt, y_bits)
    if NAN in (x, y) or (isinstance(x, float) and isinstance(y, float) and x != y):
        return model.nan_bits
    if isinstance(x, float) or isinstance(y, float):
        inf = x if isinstance(x, float) else y
        return (((1 << (model.d_format.width - 1)) if inf < 0 else 0) << model.d_format.pad_bits) | model.d_format.inf_bits
    s = x + y
    if s == 0:  # IEEE: exact zero sum is +0 in round-to-nearest unless both addends are -0
        both_neg = (x_bits >> (x_fmt.container_bits - 1)) & (y_bits >> (y_fmt.container_bits - 1))
        return (1 << (model.d_format.container_bits - 1)) if both_neg else 0
    return round_exact(s, model.d_format, rounding, "ieee", True)


def dot_bits(spec, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Exact-oracle result bits for [N, K'] operand bits and [N] accumulator bits."""
    from ..catalog import get_instruction

    spec = get_instruction(spec)
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    if spec.model.is_block_scaled:  # unit scales; scaled_dot_bits takes explicit ones
        unit = spec.model.scale_format.from_float(np.array([1.0]))[0]
        scales = np.full((len(c), a.shape[1] // spec.model.scale_block), unit)
        return scaled_dot_bits(spec, a, b, c, scales, scales)
    out = np.empty(len(c), dtype=spec.d_format.container_dtype)
    for i in range(len(c)):
        acc = int(c[i])
        for start in range(0, a.shape[1], spec.k):
            acc = _instruction(spec, a[i, start:start + spec.k], b[i, start:start + spec.k], acc)
        out[i] = acc
    return out


def true_dot(spec, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> list:
    """The mathematically exact ``sum_k a_k*b_k + c`` per vector (Fractions; NaN/inf as floats)."""
    from ..catalog import get_instruction

    spec = get_instruction(spec)
    out = []
    for i in range(len(c)):
        vals = [value_of(spec.c_format, int(c[i]))]
        vals += [(value_of(spec.a_format, int(x)), value_of(spec.b_format, int(y))) for x, y in zip(a[i], b[i])]
        try:
            total = vals[0] + sum(x * y for x, y in vals[1:])
        except TypeError:
            total = float("nan")
        out.append(total)
    return out
