"""The semiring exact oracle: every operation from first principles, one output at a time.

Independent of the numpy and numba engines: operand values are ``fractions.Fraction``
(read by :func:`tcnumerics.engines.oracle.value_of`), infinities are floats, NaN is the
string ``"nan"``, min/max compare exact values, truncation is ``int()`` of an exact
quotient and the one rounding is :func:`tcnumerics.engines.oracle.round_exact`.  Slow
and obviously right; the tests hold both engines to it.

Example:
    >>> from fractions import Fraction
    >>> from tcnumerics.semiring.oracle import select_exact
    >>> select_exact("min", "plus", [Fraction(1), float("inf")], [Fraction(1, 2), Fraction(0)], None)
    Fraction(3, 2)
"""

from __future__ import annotations

from fractions import Fraction

from ..engines.oracle import NAN, round_exact, value_of
from ..formats import FloatFormat, Rounding
from ..model import UnitModel

__all__ = ["combine_exact", "select_exact", "select_bits", "norm_bits", "boolean_exact"]


def _is_inf(x) -> bool:
    return isinstance(x, float)  # value_of gives floats only for ±inf


def combine_exact(combine: str, x, y):
    """``x ⊗ y`` exactly (Fractions; ±inf floats; ``"nan"``)."""
    if x == NAN or y == NAN:
        return NAN
    if combine == "plus":
        if _is_inf(x) and _is_inf(y) and x != y:
            return NAN
        return x if _is_inf(x) else y if _is_inf(y) else x + y
    if combine == "mul":
        if (_is_inf(x) and y == 0) or (_is_inf(y) and x == 0):
            return NAN
        if _is_inf(x) or _is_inf(y):
            return float("inf") if (x > 0) == (y > 0) else float("-inf")
        return x * y
    if combine == "min":
        return min(x, y)
    if combine == "max":
        return max(x, y)
    raise ValueError(f"combine: {combine!r} is not a selecting ⊗")


def select_exact(reduce: str, combine: str, a_vals, b_vals, c_val):
    """Exact ``c ⊕ (⊕_k a_k ⊗ b_k)`` for ⊕ = min/max (``c_val`` None: no C); NaN if any term is NaN."""
    values = [combine_exact(combine, x, y) for x, y in zip(a_vals, b_vals)]
    if c_val is not None:
        values.append(c_val)
    if NAN in values:
        return NAN
    return min(values) if reduce == "min" else max(values)


def select_bits(reduce: str, combine: str, a_fmt: FloatFormat, b_fmt: FloatFormat, a_bits, b_bits,
                c_bits, c_fmt: FloatFormat, out_fmt: FloatFormat, rounding: Rounding, nan_bits: int) -> int:
    """One output of a selecting operation, from bits to bits."""
    a_vals = [value_of(a_fmt, int(x)) for x in a_bits]
    b_vals = [value_of(b_fmt, int(y)) for y in b_bits]
    c_val = None if c_bits is None else value_of(c_fmt, int(c_bits))
    v = select_exact(reduce, combine, a_vals, b_vals, c_val)
    if v == NAN:
        return nan_bits
    if _is_inf(v):
        return ((1 << (out_fmt.width - 1)) << out_fmt.pad_bits if v < 0 else 0) | out_fmt.inf_bits
    return round_exact(v, out_fmt, rounding, "ieee", negative_zero=False)


def _floor_log2(x: Fraction) -> int:
    e = x.numerator.bit_length() - x.denominator.bit_length()
    return e - 1 if Fraction(2) ** e > x else e


def _norm_group(model: UnitModel, a_vals, b_vals, c_val, c_fmt: FloatFormat) -> int:
    d = model.d_format
    infinities, terms = [], []  # terms: (exact value, alignment exponent)
    for x, y in zip(a_vals, b_vals):
        if x == NAN or y == NAN or (_is_inf(x) and _is_inf(y) and x == y):
            return model.nan_bits
        if _is_inf(x) or _is_inf(y):
            infinities.append(1)  # a square is never negative
            continue
        diff = x - y
        terms.append((Fraction(0), model.zero_exponent) if diff == 0
                     else (diff * diff, 2 * _floor_log2(abs(diff))))
    if c_val == NAN:
        return model.nan_bits
    if _is_inf(c_val):
        infinities.append(1 if c_val > 0 else -1)
    elif c_val == 0:
        terms.append((Fraction(0), model.zero_exponent))
    else:
        min_normal = 1 - c_fmt.bias if c_fmt.subnormals else -c_fmt.bias
        terms.append((c_val, max(_floor_log2(abs(c_val)), min_normal)))
    if infinities:
        if 1 in infinities and -1 in infinities:
            return model.nan_bits
        return (((1 << (d.width - 1)) << d.pad_bits) if infinities[0] < 0 else 0) | d.inf_bits
    exponents = [e for _, e in terms if e is not None]  # zeros without a zero exponent drop out
    if model.frac_bits is None or not exponents:
        total = sum(v for v, _ in terms)
    else:
        emax = max(exponents)
        ulp = Fraction(2) ** (emax - model.frac_bits)
        total = sum(int(v / ulp) * ulp for v, _ in terms)  # int() truncates toward zero
    return round_exact(total, model.output_format, model.output_rounding, model.output_overflow, False)


def norm_bits(model: UnitModel, a_bits, b_bits, c_bits: int, c_fmt: FloatFormat) -> int:
    """One plus-norm output: groups of ``model.group_size`` in K order, from bits to d bits."""
    a_vals = [value_of(model.a_format, int(x)) for x in a_bits]
    b_vals = [value_of(model.b_format, int(y)) for y in b_bits]
    acc, acc_fmt = int(c_bits), c_fmt
    for start in range(0, len(a_vals), model.group_size):
        acc = _norm_group(model, a_vals[start:start + model.group_size], b_vals[start:start + model.group_size],
                          value_of(acc_fmt, acc), acc_fmt)
        acc_fmt = model.d_format
    return acc


def boolean_exact(a_bits, b_bits, c_bit) -> bool:
    """``c or any(a_k and b_k)``."""
    return bool(c_bit) or any(bool(x) and bool(y) for x, y in zip(a_bits, b_bits))
