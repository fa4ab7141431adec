"""The semiring reference engine: readable numpy, the specification the fast kernels must equal.

Everything here works on a batch of N independent "dot products" at once: operand
values or bits ``a``, ``b`` of shape [N, K] and an accumulator ``c`` of shape [N]
(the pair form).  Matrices go through :func:`matrix` which feeds blocks of rows as
pairs, so there is exactly one statement of the numerics.

Three families (see ``docs/semiring.md``):

* selecting ⊕ (min/max): each term ``a ⊗ b`` is exact; min/max picks the exact extreme
  term (C included); one rounding to the output format.  Exact terms are carried as
  float64 pairs ``hi + lo`` (``hi`` = the float64 nearest the term, ``lo`` its exact
  remainder), which represent every sum and product of operands of at most 32 bits.
* plus-norm: the fused truncating group model of a unit with the exact squared
  differences ``(a - b)**2`` as its terms.
* or-and: booleans.

Example:
    >>> import numpy as np
    >>> from tcnumerics.semiring.reference import select_pairs, round_pairs
    >>> from tcnumerics.formats import get_format
    >>> a = np.array([[1.0, 2.0**-30]]); b = np.array([[2.0**-40, 1.0]])
    >>> hi, lo = select_pairs("min", "plus", a, b)      # min(1 + 2**-40, 2**-30 + 1)
    >>> float(hi[0] - 1), float(lo[0])
    (9.094947017729282e-13, 0.0)
    >>> hex(int(round_pairs(hi, lo, get_format("fp32"), "ru", 0x7FFFFFFF)[0]))   # 1 + 2**-40 rounded up
    '0x3f800001'
"""

from __future__ import annotations

import numpy as np

from ..engines.reference import round_signed_sum
from ..formats import FloatFormat, Format, Rounding
from ..model import UnitModel

__all__ = ["exact_values", "select_pairs", "round_pairs", "boolean_pairs", "norm_group", "norm_datapath",
           "pairs_in_blocks"]

_WORKING_SET = 1 << 21  # elements of the [rows*N, K] pair blocks :func:`pairs_in_blocks` builds at once
_shift = np.frompyfunc(lambda v, s: v << s if s >= 0 else v >> -s, 2, 1)  # exact Python-int shifts
_bit_length = np.frompyfunc(lambda v: abs(v).bit_length(), 1, 1)


def exact_values(bits: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """float64 values of bit patterns; exact for every format of at most 32 bits."""
    if fmt.container_bits > 32:
        raise ValueError(f"format {fmt.name}: semiring operands must be formats of at most 32 bits")
    return fmt.to_float(bits)


# -- selecting ⊕: exact terms, min/max, one rounding ------------------------------------------

def _two_sum_remainder(a: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Exact ``(a + b) - s`` for ``s = fl(a + b)`` (Knuth's TwoSum); 0 where s is not finite."""
    with np.errstate(invalid="ignore", over="ignore"):
        b_virtual = s - a
        rem = (a - (s - b_virtual)) + (b - b_virtual)
    return np.where(np.isfinite(s), rem, 0.0)


def terms(combine: str, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact ``a ⊗ b`` as float64 pairs ``(hi, lo)``; NaN in hi for an invalid term.

    Sums of operands up to 32 bits may need more than 53 bits, so a sum keeps its TwoSum
    remainder in ``lo``; products of such operands (at most 48 bits, exponents well inside
    float64's range) and min/max are exact in ``hi`` alone.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        if combine == "plus":
            hi = a + b  # inf + -inf is NaN, as IEEE says
            return hi, _two_sum_remainder(a, b, hi)
        if combine == "mul":
            hi = a * b  # inf * 0 is NaN
        elif combine == "min":
            hi = np.minimum(a, b)  # NaN propagates
        elif combine == "max":
            hi = np.maximum(a, b)
        else:
            raise ValueError(f"combine: {combine!r} is not a selecting operation's ⊗")
    return hi, np.zeros_like(hi)


def select_pairs(reduce: str, combine: str, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None):
    """Exact ``c ⊕ (⊕_k a_k ⊗ b_k)`` for ⊕ = min or max, per row; returns float64 pairs ``(hi, lo)``.

    ``a``, ``b``: [N, K] exact values; ``c``: [N] values or None (no C).  A NaN anywhere in
    a row (an operand, an invalid term such as ``inf + -inf`` or ``0 * inf``, or C) makes
    the row's result NaN: ⊕ propagates NaN like IEEE 754-2019 ``minimum``/``maximum``.
    """
    if reduce not in ("min", "max"):
        raise ValueError(f"reduce: expected 'min' or 'max', got {reduce!r}")
    hi, lo = terms(combine, np.asarray(a, np.float64), np.asarray(b, np.float64))
    if c is not None:
        c = np.asarray(c, np.float64)
        hi = np.concatenate([hi, c[:, None]], axis=1)
        lo = np.concatenate([lo, np.zeros((len(c), 1))], axis=1)
    nan = np.isnan(hi).any(axis=1)
    with np.errstate(invalid="ignore"):
        # hi is the float64 nearest each exact term, so it orders the terms up to ties in hi,
        # which the exact remainders lo then break
        best_hi = hi.min(axis=1) if reduce == "min" else hi.max(axis=1)
        tied = hi == best_hi[:, None]
        if reduce == "min":
            best_lo = np.where(tied, lo, np.inf).min(axis=1)
        else:
            best_lo = np.where(tied, lo, -np.inf).max(axis=1)
    best_lo = np.where(np.isfinite(best_lo), best_lo, 0.0)
    return np.where(nan, np.nan, best_hi), np.where(nan, 0.0, best_lo)


def round_pairs(hi: np.ndarray, lo: np.ndarray, fmt: FloatFormat, rounding: Rounding | str,
                nan_bits: int) -> np.ndarray:
    """Round exact values ``hi + lo`` (float64 pairs, |lo| at most half an ulp of hi) into ``fmt``.

    One rounding with ``rounding``; overflow follows IEEE 754 for that rounding; a zero
    result is +0 (matrix units write no -0); NaN becomes ``nan_bits``; ±inf stays ±inf.
    Only the sign of ``lo`` matters: every point where the rounding of a format of at
    most 53 bits can change is a float64 number, so ``hi + lo`` rounds like
    ``hi + sign(lo) * 2**(ulp(hi) - 3)``, which is exact in a 57-bit integer.
    """
    hi = np.asarray(hi, np.float64)
    lo = np.asarray(lo, np.float64)
    rounding = Rounding.parse(rounding)
    if rounding is Rounding.RNE and fmt.name in ("fp32", "fp16") and not lo.any():
        # numpy's float64 -> float32 / float16 casts are correctly rounded IEEE conversions:
        # the same single RNE rounding (overflow to inf, subnormals kept), only faster
        with np.errstate(over="ignore"):
            bits = hi.astype(fmt.dtype).view(fmt.container_dtype)
        bits = np.where(bits == (1 << (fmt.width - 1)), 0, bits)  # a zero result is +0
        return np.where(np.isnan(hi), nan_bits, bits).astype(fmt.container_dtype)
    finite = np.isfinite(hi)
    safe = np.where(finite, hi, 0.0)
    m, e = np.frexp(np.abs(safe))
    sig = np.ldexp(m, 53).astype(np.uint64)  # |hi| = sig * 2**(e - 53)
    toward = np.where(lo == 0, 0, np.where((lo < 0) == (safe < 0), 1, -1)).astype(np.int64)
    mag = (sig << np.uint64(3)).astype(np.int64) + toward
    bits = fmt.encode(safe < 0, mag, e.astype(np.int64) - 56, rounding, overflow="ieee")
    negative_zero = (1 << (fmt.width - 1)) << fmt.pad_bits
    bits = np.where(bits == negative_zero, 0, bits)
    bits = np.where(np.isposinf(hi), fmt.inf_bits, bits)
    bits = np.where(np.isneginf(hi), negative_zero | fmt.inf_bits, bits)
    bits = np.where(np.isnan(hi), nan_bits, bits)
    return bits.astype(fmt.container_dtype)


# -- or-and ----------------------------------------------------------------------------------

def boolean_pairs(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> np.ndarray:
    """``c or any_k(a_k and b_k)`` per row of [N, K] boolean arrays."""
    out = np.any(np.asarray(a, bool) & np.asarray(b, bool), axis=1)
    return out if c is None else out | np.asarray(c, bool)


# -- plus-norm: the fused truncating group on squared differences -----------------------------

def _signed_int(sig: np.ndarray, negative: np.ndarray) -> np.ndarray:
    s = sig.astype(object)
    return np.where(negative, -s, s)


def norm_group(model: UnitModel, a: np.ndarray, b: np.ndarray, c: np.ndarray, c_format: FloatFormat) -> np.ndarray:
    """One group of the unit with terms ``(a_k - b_k)**2``: ``d = round(sum_k trunc(t_k) + trunc(c))``.

    ``a``, ``b``: [N, L] bits of ``model.a_format``/``model.b_format``; ``c``: [N] bits of
    ``c_format``.  Each difference is exact; its square keeps an unnormalised significand
    in [1, 4) with exponent ``2*floor(log2|a - b|)``, exactly as a product ``d*d`` would in
    the unit's multiplier; a zero term takes ``model.zero_exponent``.  Then the unit's
    rules: align to the largest exponent, truncate to ``frac_bits`` below it, sum exactly,
    round once.  Returns d bits.
    """
    A, B, C = model.a_format.decode(a), model.b_format.decode(b), c_format.decode(c)
    # specials: inf - inf of like signs is NaN; any other infinite difference squares to +inf
    same_inf = A.is_inf & B.is_inf & (A.sign == B.sign)
    nan = A.is_nan.any(axis=1) | B.is_nan.any(axis=1) | same_inf.any(axis=1) | C.is_nan
    term_inf = ((A.is_inf | B.is_inf) & ~same_inf).any(axis=1)
    nan |= term_inf & C.is_inf & C.sign
    pos_inf = (term_inf | (C.is_inf & ~C.sign)) & ~nan
    neg_inf = C.is_inf & C.sign & ~nan & ~term_inf

    # exact differences as Python integers on the finer of the two ulps: (a - b) = diff * 2**ulp
    ulp = np.minimum(A.ulp_exponent, B.ulp_exponent)
    diff = (_shift(_signed_int(A.significand, A.sign), (A.ulp_exponent - ulp).astype(object))
            - _shift(_signed_int(B.significand, B.sign), (B.ulp_exponent - ulp).astype(object)))
    finite = (A.kind == 0) & (B.kind == 0)
    diff = np.where(finite, diff, 0)
    zero = diff == 0
    e_zero = model.zero_exponent if model.zero_exponent is not None else -(1 << 40)
    t_exp = np.where(zero, e_zero, 2 * (_bit_length(diff).astype(np.int64) - 1 + ulp))
    square = diff * diff  # the term is square * 2**(2*ulp)

    c_sig = _signed_int(np.where(C.kind == 0, C.significand, 0), C.sign)
    c_exp = np.where(c_sig == 0, e_zero, C.exponent)
    e_max = np.maximum(t_exp.max(axis=1), c_exp)
    if model.frac_bits is None:  # exact sum on the finest ulp present
        quantum = np.minimum(np.where(zero, 1 << 40, 2 * ulp).min(axis=1), C.ulp_exponent)
    else:
        quantum = e_max - model.frac_bits
    q = quantum.astype(object)
    # squares are non-negative, so truncation toward zero is a right shift; c may be negative
    total = _shift(square, (2 * ulp).astype(object) - q[:, None]).sum(axis=1)
    c_mag = _shift(np.abs(c_sig), C.ulp_exponent.astype(object) - q)
    total = total + np.where(c_sig < 0, -c_mag, c_mag)

    bits = round_signed_sum(total, quantum, model.output_format, model.output_rounding, model.output_overflow)
    d = model.d_format
    sign_bit = (1 << (d.width - 1)) << d.pad_bits
    bits = np.where(pos_inf, d.inf_bits, bits)
    bits = np.where(neg_inf, sign_bit | d.inf_bits, bits)
    bits = np.where(nan, model.nan_bits, bits)
    return bits.astype(d.container_dtype)


def norm_datapath(model: UnitModel, a: np.ndarray, b: np.ndarray, c: np.ndarray, c_format: Format) -> np.ndarray:
    """Groups of ``model.group_size`` squared differences in K order, each group's d the next one's c."""
    acc, acc_format = c, c_format
    for start in range(0, a.shape[1], model.group_size):
        acc = norm_group(model, a[:, start:start + model.group_size], b[:, start:start + model.group_size],
                         acc, acc_format)
        acc_format = model.d_format
    return acc


# -- matrices as blocks of pairs ---------------------------------------------------------------

def pairs_in_blocks(pair_fn, A: np.ndarray, B: np.ndarray, C: np.ndarray | None, out: np.ndarray) -> np.ndarray:
    """Fill ``out[i, j] = pair_fn(A[i, :], B[:, j], C[i, j])`` for all i, j, a block of rows at a time.

    ``pair_fn(a [n, K], b [n, K], c [n] or None)`` returns n results (or a tuple of arrays,
    in which case ``out`` is a matching tuple).
    """
    M, K = A.shape
    N = B.shape[1]
    b_cols = np.ascontiguousarray(B.T)
    rows = max(1, _WORKING_SET // max(1, N * K))
    outs = out if isinstance(out, tuple) else (out,)
    for m0 in range(0, M, rows):
        m1 = min(M, m0 + rows)
        a = np.repeat(A[m0:m1], N, axis=0)
        b = np.tile(b_cols, (m1 - m0, 1))
        c = None if C is None else C[m0:m1].reshape(-1)
        res = pair_fn(a, b, c)
        for o, r in zip(outs, res if isinstance(res, tuple) else (res,)):
            o[m0:m1] = r.reshape(m1 - m0, N)
    return out
