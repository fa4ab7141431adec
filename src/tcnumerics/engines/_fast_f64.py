"""Vectorised kernels of the fast engine for the common case of a fused unit (private).

Why float64 lanes give the integer datapath's bits exactly: for operand formats of at most
13 fraction bits every product ``a * b`` is exact in float64 (at most 28 significant bits);
scaling by ``S = 2**(F - E)`` (E the group's maximum alignment exponent) is exact (a power
of two, far from float64's range limits: operand and accumulator exponents stay within
+-300); converting ``a * S * b`` to int64 truncates toward zero -- the integer kernel's
``(|sig| << lshift) >> (distance + rshift)`` with the sign put back; and the group's sum of
such integers below ``2**(F+2)`` is exact in int64 and converts back to float64 exactly
while ``F + 2 + log2(L + 1) <= 53``.  The maximum exponent is a maximum over ``ea + eb``
(the plan's exponent tables, held as float32 for the dot kernel and as int16 panels in the
GEMM kernel: 32 lanes per AVX-512 op), and the single rounding to the output format works
on the float64 bit pattern of ``sum * 2**(E - F)`` (sign-magnitude: adding an increment and
masking low bits rounds the magnitude, carries renormalise).  In exchange LLVM vectorises
every inner loop, with no per-element branches.

The GEMM kernel's int32 route (``_add_row32``; the plan's ``sum32_window`` R): in a group
whose nonzero operands lie within 2**-R of the group's largest exponent (per row of A, per
column of B), the products are formed in float32 from operands stored relative to that
exponent (exact and normal), scaled by adding to their exponent field, truncated by the
float32 -> int32 conversion and summed in int32 (16 lanes per AVX-512 op); four rows of A
share each pass over B.  Other groups keep the float64 lanes.

Lanes the vector path does not cover -- a group with an inf/NaN operand or accumulator, a
result below the output format's normal range (subnormal rounding) or beyond its largest
finite value -- are flagged and recomputed by the scalar integer kernel of ``_fast_numba``
(``_fused_one``), so every lane ends with the reference engine's bits.

The dot kernel (``_fast_dot``) runs the same group operations with the vectors as lanes; the
panels are decoded by ``_fast_panels``.  Operands arrive as panels built from the plan's tables (``_fast_plan``): ``val`` (float64:
the value as the datapath sees it, 0 for zeros and specials) and ``exp`` (float32 holding
the integer alignment exponent: ZERO_EXP for zeros, ZERO_EXP - 1/2/3 for +inf/-inf/NaN).

Example:
    >>> import numpy as np
    >>> from tcnumerics.formats import get_format
    >>> from tcnumerics.engines._fast_plan import format_params
    >>> _value_bits(1.5, format_params(get_format("fp32"))) == 0x3FC00000
    True
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from ._fast_numba import FLAG_SPECIAL, FLAG_ZERO, _decode, _fused_one, _ieee_add, _round
from ._numba_launch import fork_safe
from ._fast_plan import ZERO_EXP
from ._lanes import add16 as _add16
from ._lanes import bits_f32 as _bits_f32
from ._lanes import bits_f64 as _bits_f64
from ._lanes import f32_bits as _f32_bits
from ._lanes import f64_bits as _f64_bits
from ._lanes import max16 as _max16

__all__ = ["BLOCK_N", "gemm_fused_f64"]

_MAG_MASK = np.int64(0x7FFFFFFFFFFFFFFF)
_SIGN = np.int64(-0x8000000000000000)
_E_FLOOR = -900  # floor of a group's E: keeps 2**(F - E) finite when every term is zero
_TILE_M = 8
BLOCK_N = 128  # lanes per GEMM block: one group of B (16 x 128 float64 + int16) stays in L1
_F32_EXP = np.uint32(0x7F800000)
FLAG_WIDE = 4  # a row (column) group holds a nonzero operand beyond the int32 route's window
EXP16_ZERO = -16000  # int16 exponent panels: zeros and specials (two of them still sum within int16)
SCALE32_BIAS = 4  # A's int32-route operands sit 2**-4 below their group's largest exponent (_group_scale32)



@njit(cache=True, nogil=True)
def _int_entry(val, exp, man_bits):
    """Signed significand of one operand from its (value, exponent) panel entries."""
    if exp <= ZERO_EXP:
        return np.int64(0)
    return np.int64(math.ldexp(val, man_bits - exp))


@njit(cache=True, nogil=True)
def _value_bits(value, fp):
    """Bits of a float64 value exactly representable in the IEEE-like format fp (+0 for zeros)."""
    if value == 0.0:
        return np.int64(0)
    m, e = math.frexp(abs(value))
    return _round(value < 0.0, np.int64(math.ldexp(m, 53)), np.int64(e) - 53, fp, 0, 0, False)


@njit(cache=True, nogil=True)
def _bits_value(bits, fp):
    """(float64 value, kind) of one pattern; specials give value 0 and kind 1/2/3."""
    sig, exp, kind = _decode(bits, fp)
    if kind != 0:
        return 0.0, kind
    return math.ldexp(float(sig), int(exp - fp[4])), np.int64(0)


@njit(cache=True, nogil=True)
def _load_acc(bits_row, c, ck, cb, nb, d_fp, fp32_acc):
    """Decode nb accumulator patterns into values c, kinds ck and (for specials) bits cb."""
    if fp32_acc:  # the common case, vectorised: a float32 widens exactly
        as_f32 = bits_row.view(np.float32)
        any_special = False
        for j in range(nb):
            c[j] = np.float64(as_f32[j])
            ck[j] = 0
            any_special |= (bits_row[j] & _F32_EXP) == _F32_EXP
        if not any_special:
            return
    for j in range(nb):
        bits = np.int64(bits_row[j])
        c[j], ck[j] = _bits_value(bits, d_fp)
        cb[j] = bits


@njit(cache=True, nogil=True)
def _store_acc(bits_row, c, ck, cb, nb, d_fp, fp32_acc):
    """Encode nb accumulators (values are exact in d_fp) back into bits_row."""
    if fp32_acc:
        as_f32 = bits_row.view(np.float32)
        for j in range(nb):
            as_f32[j] = np.float32(c[j])
        for j in range(nb):
            if ck[j] != 0:
                bits_row[j] = cb[j]
        return
    for j in range(nb):
        bits_row[j] = cb[j] if ck[j] != 0 else _value_bits(c[j], d_fp)


@njit(cache=True, nogil=True)
def _constants(d_fp, out_fp, F, e_zero, rounding):
    """Per-kernel constants of the vector path, as one int64 array.

    [0] low: float64 fraction bits the rounding drops, [1] their mask, [2..5] increment terms
    c0, c1, c_pos, c_neg (rounded magnitude = (mag + c0 + c1*lsb + (c_neg if negative else
    c_pos)) & ~mask), [6] / [7] the output's smallest normal / largest finite biased float64
    exponent field, [8] F, [9] emin of D, [10] E_zero (far below every exponent when the
    model has none), [11] 1 for truncation (RZ)."""
    low = 52 - out_fp[4]
    mask = (np.int64(1) << low) - 1
    half = np.int64(1) << (low - 1)
    c0, c1, c_pos, c_neg = np.int64(0), np.int64(0), np.int64(0), np.int64(0)
    if rounding == 0:  # RNE
        c0, c1 = half - 1, np.int64(1)
    elif rounding == 1:  # RNA
        c0 = half
    elif rounding == 3:  # RU
        c_pos = mask
    elif rounding == 4:  # RD
        c_neg = mask
    out = np.empty(12, np.int64)
    out[0], out[1], out[2], out[3], out[4], out[5] = low, mask, c0, c1, c_pos, c_neg
    out[6] = out_fp[10] + 1023
    out[7] = (out_fp[9] >> out_fp[4]) - out_fp[5] + 1023
    out[8] = F
    out[9] = d_fp[10]
    out[10] = max(e_zero, _E_FLOOR)
    out[11] = rounding == 2  # RZ: rounding drops the low bits, no increment
    return out


@njit(cache=True, nogil=True)
def _group_begin(c, ck, b_flag, fa, E, exc, nb, k):
    """E[j] = the group's starting maximum exponent: C's alignment exponent (E_zero for a
    zero C), floored at E_zero when a product is zero; exc[j] marks lanes with an inf/NaN
    operand or accumulator.  Returns whether any lane is marked."""
    emin_d = np.float32(k[9])
    e_zero = np.float32(k[10])
    any_exc = np.int64(0)
    for j in range(nb):
        cj = c[j]
        e = max(np.float32(((_f64_bits(cj) >> 52) & 0x7FF) - 1023), emin_d) if cj != 0.0 else e_zero
        fl = fa | b_flag[j]
        E[j] = max(e, e_zero) if fl & FLAG_ZERO else e
        x = np.int64(fl & FLAG_SPECIAL) | ck[j]
        exc[j] = x
        any_exc |= x
    return any_exc


@njit(cache=True, nogil=True)
def _group_scale(c, c_old, E, S, T, nb, k):
    """S[j] = 2**(F - E[j]) (built as an exponent field), T[j] = C's truncated term; keeps C
    in c_old for the lanes the scalar path redoes."""
    F = k[8]
    for j in range(nb):
        e = max(E[j], np.float32(_E_FLOOR))
        E[j] = e
        s = _bits_f64((F - np.int64(e) + 1023) << 52)
        S[j] = s
        cj = c[j]
        c_old[j] = cj
        T[j] = np.int64(cj * s)


@njit(cache=True, nogil=True)
def _round_lane(total, e, k):
    """(the exact sum total * 2**(e - F) rounded once to the output format, on its float64
    bits; 1 where the result leaves the output's normal range, else 0).  Units write +0 for a
    zero result.  Truncation (RZ, the tensor cores' usual rounding) only drops bits."""
    low, mask, c0, c1, c_pos, c_neg = k[0], k[1], k[2], k[3], k[4], k[5]
    emin_field, emax_field, F = k[6], k[7], k[8]
    bits = _f64_bits(np.float64(total) * _bits_f64((np.int64(e) - F + 1023) << 52))
    sign = bits & _SIGN
    mag = bits & _MAG_MASK
    if k[11]:
        r = mag & ~mask
    else:
        r = (mag + c0 + c1 * ((mag >> low) & 1) + (c_neg if sign != 0 else c_pos)) & ~mask
    bad = np.int64((((mag >> 52) < emin_field) & (mag != 0)) | ((r >> 52) > emax_field))
    return (_bits_f64(sign | r) if r != 0 else 0.0), bad


@njit(cache=True, nogil=True, inline="always")
def _round_into(c, exc, j, total, e, k):
    """Lane j's end of a group: c[j] = ``_round_lane``'s value of total * 2**(e - F), its
    out-of-range mark ORed into exc[j]; returns exc[j]."""
    value, bad = _round_lane(total, e, k)
    x = exc[j] | bad
    exc[j] = x
    c[j] = value
    return x


@njit(cache=True, nogil=True)
def _group_round(c, E, T, exc, nb, k):
    """c[j] = the exact sum T[j] * 2**(E - F) rounded once to the output format (``_round_lane``);
    lanes whose result leaves the output's normal range are marked in exc.  Returns whether any
    lane is marked."""
    any_exc = np.int64(0)
    for j in range(nb):
        any_exc |= _round_into(c, exc, j, T[j], E[j], k)
    return any_exc


@njit(cache=True, nogil=True)
def _group_round32(c, c_old, E, T32, exc, nb, k):
    """``_group_round`` for the int32 route: the sum is the products' T32[j] plus C's truncated
    term, taken here from c_old (C before the group) and E."""
    F = k[8]
    any_exc = np.int64(0)
    for j in range(nb):
        e = E[j]
        total = np.int64(c_old[j] * _bits_f64((F - np.int64(e) + 1023) << 52)) + T32[j]
        any_exc |= _round_into(c, exc, j, total, e, k)
    return any_exc


def _at(x, i):
    """x[i], or None where x is None (the maximum's missing scales); compiled by ``_at_typed``."""
    return None if x is None else x[i]


@overload(_at, inline="always")
def _at_typed(x, i):  # chosen per argument type: an `is None` branch would make x[i] Optional
    if isinstance(x, types.NoneType):
        return lambda x, i: None
    return lambda x, i: x[i]


@njit(cache=True, nogil=True)
def _four(x, i):
    """x[i], .., x[i + 3] as a tuple: four rows of a tile, or four K of a row (held in registers)."""
    return _at(x, i), _at(x, i + 1), _at(x, i + 2), _at(x, i + 3)


@njit(cache=True, nogil=True, inline="always")
def _step4x4(rows, b, kk):
    """The operands of one step of ``_four_rows``: B's panel rows kk .. kk+3 (lane vectors) and the
    4 x 4 entries of the four rows of A at those K, each loaded once a step."""
    r0, r1, r2, r3 = rows
    return _four(b, kk), (_four(r0, kk), _four(r1, kk), _four(r2, kk), _four(r3, kk))


@njit(cache=True, nogil=True, inline="always")
def _max4(e, p, x):
    """max(e, p[i] + x[i] for i < 4) in int16 lanes: four K of ``_max_row`` at once."""
    return _max16(_max16(e, _max16(_add16(p[0], x[0]), _add16(p[1], x[1]))),
                  _max16(_add16(p[2], x[2]), _add16(p[3], x[3])))


@njit(cache=True, nogil=True)
def _max_row(E, a_exp, b_exp, k0, L, nb):
    """E[j] = max(E[j], ea + eb) over the group's products; A is one row (GEMM).  Exponents
    are int16 (``gemm_panels``: 32 lanes per AVX-512 op); zero and special operands carry
    EXP16_ZERO and never win (the flags cover them)."""
    for kk in range(k0, k0 + L):
        p0 = a_exp[kk]
        b0 = b_exp[kk]
        for j in range(nb):
            E[j] = _max16(E[j], _add16(p0, b0[j]))


@njit(cache=True, nogil=True)
def _sum_row(T, S, a_val, b_val, k0, L, nb):
    """T[j] += trunc(a * S[j] * b) over the group's products; A is one row (GEMM).  The
    float64 -> int64 conversion truncates toward zero; |terms| < 2**53."""
    kk = k0
    while kk + 4 <= k0 + L:
        v0, v1, v2, v3 = a_val[kk], a_val[kk + 1], a_val[kk + 2], a_val[kk + 3]
        b0, b1, b2, b3 = b_val[kk], b_val[kk + 1], b_val[kk + 2], b_val[kk + 3]
        for j in range(nb):
            s = S[j]
            T[j] += (np.int64(v0 * s * b0[j]) + np.int64(v1 * s * b1[j])) + \
                    (np.int64(v2 * s * b2[j]) + np.int64(v3 * s * b3[j]))
        kk += 4
    while kk < k0 + L:
        v0 = a_val[kk]
        b0 = b_val[kk]
        for j in range(nb):
            T[j] += np.int64(v0 * S[j] * b0[j])
        kk += 1


@njit(cache=True, nogil=True)
def _group_scale32(c, c_old, E, U, a_off, b_off, nb, k):
    """The int32 route's per-group scale: U[j] = 2**u of the products as an exponent-field
    increment (u << 23), u = F - E[j] + a_off + b_off[j] + SCALE32_BIAS (operands are stored
    relative to their group's largest exponent, a_off for the row of A, b_off[j] per column
    of B, and A SCALE32_BIAS further below); keeps C in c_old (its term is taken when
    rounding, ``_group_round32``).  The clamp to [1, 126] only acts where no product can
    contribute (``_add_row32``).  E needs no floor here: ``_group_begin`` starts it at C's
    exponent, D's emin or E_zero, all within +-900."""
    bias = np.float32(k[8] + SCALE32_BIAS)
    for j in range(nb):
        c_old[j] = c[j]
        u = min(max(bias - np.float32(E[j]) + a_off + b_off[j], np.float32(1)), np.float32(126))
        U[j] = np.int32(u) << 23


@njit(cache=True, nogil=True)
def _scaled_term(a, b, u):
    """int32(a * b * 2**u) for float32 a * b in the window and u = U[j] (``_group_scale32``).

    The product is exact in float32 and normal (or zero); adding u to its exponent field
    scales it exactly by 2**u without a second multiply, and the conversion truncates toward
    zero.  A zero product becomes +-2**(u - 127), below 1 since u <= 126: truncates to 0."""
    return np.int32(_bits_f32(_f32_bits(a * b) + u))


@njit(cache=True, nogil=True, inline="always")
def _terms4(p, x, u):
    """The sum of four ``_scaled_term`` (p[i], x[i], u): four K of ``_add_row32`` at once."""
    return (_scaled_term(p[0], x[0], u) + _scaled_term(p[1], x[1], u)) + \
        (_scaled_term(p[2], x[2], u) + _scaled_term(p[3], x[3], u))


@njit(cache=True, nogil=True)
def _add_row32(T32, U, a32, b32, k0, L, nb):
    """T32[j] += the group's truncated product terms over K[k0:k0+L), in float32 / int32 lanes
    (sixteen per AVX-512 op): ``_scaled_term`` is a * b * 2**(F - E[j]) truncated toward zero,
    exactly, for operands within the plan's window; L terms below 2**(F+2) fit int32 (and int32
    sums are exact in any order, so a row may be taken in pieces)."""
    kk = k0
    while kk + 4 <= k0 + L:
        v = _four(a32, kk)
        b0, b1, b2, b3 = _four(b32, kk)
        for j in range(nb):
            T32[j] += _terms4(v, (b0[j], b1[j], b2[j], b3[j]), U[j])
        kk += 4
    while kk < k0 + L:
        v0 = a32[kk]
        b0 = b32[kk]
        for j in range(nb):
            T32[j] += _scaled_term(v0, b0[j], U[j])
        kk += 1


def _lane4(acc, p, x, u):
    """Four K of one lane's group operation: the exponents' maximum (``_max_row``; u is None) or
    the int32 route's truncated terms added to acc (``_add_row32``; u the lane's scale)."""
    return _max4(acc, p, x) if u is None else acc + _terms4(p, x, u)


@overload(_lane4, inline="always")
def _lane4_typed(acc, p, x, u):  # chosen per type of u: the maximum compiles no term code, and no Optional
    if isinstance(u, types.NoneType):
        return lambda acc, p, x, u: _max4(acc, p, x)
    return lambda acc, p, x, u: acc + _terms4(p, x, u)


def _one_row(acc, U, a, b, k0, L, nb):
    """One row's group operation over K[k0:k0+L): ``_max_row`` (U None) or ``_add_row32``."""
    if U is None:
        _max_row(acc, a, b, k0, L, nb)
    else:
        _add_row32(acc, U, a, b, k0, L, nb)


@overload(_one_row)
def _one_row_typed(acc, U, a, b, k0, L, nb):  # as _lane4_typed
    if isinstance(U, types.NoneType):
        return lambda acc, U, a, b, k0, L, nb: _max_row(acc, a, b, k0, L, nb)
    return lambda acc, U, a, b, k0, L, nb: _add_row32(acc, U, a, b, k0, L, nb)


@njit(cache=True, nogil=True)
def _four_rows(acc, U, a, m0, tm, b, k0, L, nb):
    """A group operation (``_one_row``) for rows m0 .. m0+tm-1 of A (acc[t], U[t] for row m0 + t),
    four rows per pass over the group's B panel: one load of B serves four rows.  acc = E (int16,
    U None): the exponents' maximum; acc = T32 (int32, from 0), U: the int32 route's terms."""
    t = 0
    while t + 4 <= tm:
        A0, A1, A2, A3 = _four(acc, t)
        U0, U1, U2, U3 = _four(U, t)
        rows = _four(a, m0 + t)
        kk = k0
        while kk + 4 <= k0 + L:
            (b0, b1, b2, b3), (p0, p1, p2, p3) = _step4x4(rows, b, kk)
            for j in range(nb):
                x = (b0[j], b1[j], b2[j], b3[j])
                A0[j] = _lane4(A0[j], p0, x, _at(U0, j))
                A1[j] = _lane4(A1[j], p1, x, _at(U1, j))
                A2[j] = _lane4(A2[j], p2, x, _at(U2, j))
                A3[j] = _lane4(A3[j], p3, x, _at(U3, j))
            kk += 4
        if kk < k0 + L:  # the last K, below a step of four: row by row
            for r in range(4):
                _one_row(acc[t + r], _at(U, t + r), rows[r], b, kk, k0 + L - kk, nb)
        t += 4
    while t < tm:
        _one_row(acc[t], _at(U, t), a[m0 + t], b, k0, L, nb)
        t += 1


@njit(cache=True, nogil=True)
def _fallback(a_val, a_exp, b_val, b_exp, L, c_value, c_kind, c_bits, ma, mb, d_fp, out_fp, F, e_zero,
              ls_ab, rs_ab, ls_d, rs_d, rounding, overflow, nan_bits, sa_g, ea_g, sb_g, eb_g):
    """One lane's group by the scalar integer kernel: (value, kind, bits) of its result."""
    for i in range(L):
        ea_g[i] = np.int64(a_exp[i])
        sa_g[i] = _int_entry(a_val[i], ea_g[i], ma)
        eb_g[i] = np.int64(b_exp[i])
        sb_g[i] = _int_entry(b_val[i], eb_g[i], mb)
    bits = c_bits if c_kind != 0 else _value_bits(c_value, d_fp)
    r = _fused_one(sa_g, ea_g, sb_g, eb_g, L, bits, d_fp, False, ls_d, rs_d, F, e_zero, ls_ab, rs_ab,
                   out_fp, d_fp, rounding, overflow, nan_bits)
    value, kind = _bits_value(r, d_fp)
    return value, kind, r


@njit(cache=True, nogil=True)
def _add_c(c, ck, cb, c_in, ck_in, cb_in, exc, nb, d_fp, add_rounding, nan_bits, fp32_acc):
    """c += c_in by one IEEE addition rounded into D (units that add C after the products).

    FP32 with round-to-nearest-even, vectorised: the float64 sum of two FP32 values rounded
    to FP32 is the correctly rounded FP32 sum (53 >= 2 * 24 + 2); anything else (specials,
    overflow, other roundings or formats) takes the scalar float64 route of the reference."""
    scalar = not fp32_acc or add_rounding != 0
    any_exc = scalar
    if not scalar:
        for j in range(nb):
            x = np.float64(np.float32(c[j] + c_in[j]))
            bad = (ck[j] | ck_in[j]) != 0 or abs(x) == np.inf
            exc[j] = bad
            any_exc |= bad
            c[j] = x if not bad else c[j]
    if any_exc:
        for j in range(nb):
            if scalar or exc[j]:
                xb = cb[j] if ck[j] != 0 else _value_bits(c[j], d_fp)
                yb = cb_in[j] if ck_in[j] != 0 else _value_bits(c_in[j], d_fp)
                r = _ieee_add(xb, d_fp, yb, d_fp, d_fp, add_rounding, nan_bits)
                c[j], ck[j] = _bits_value(r, d_fp)
                cb[j] = r

@njit(cache=True, nogil=True)
def _accumulators(shape):
    """Accumulators of a block of lanes: values (float64), kinds (0 finite, 1/2/3 +inf/-inf/NaN)
    and the bit patterns of special ones."""
    return np.empty(shape, np.float64), np.empty(shape, np.int64), np.empty(shape, np.int64)


@njit(cache=True, nogil=True)
def _lane_scratch(lanes, lmax):
    """Per-group working arrays of one block of lanes (C before the group, E, S, the group
    sum, exception marks) and of the scalar path (one group's table entries)."""
    return (np.empty(lanes, np.float64), np.empty(lanes, np.float32), np.empty(lanes, np.float64),
            np.empty(lanes, np.int64), np.empty(lanes, np.int64), np.empty(lmax, np.int64),
            np.empty(lmax, np.int64), np.empty(lmax, np.int64), np.empty(lmax, np.int64))


@fork_safe
@njit(cache=True, parallel=True)
def gemm_fused_f64(a_val, a_exp, a_flag, b_val, b_exp, b_flag, acc, glen, n_inst, d_fp, out_fp, F, e_zero,
                   ls_ab, rs_ab, ls_d, rs_d, rounding, overflow, nan_bits, ma, mb, fp32_acc, ieee_add, add_rounding,
                   a32, a_off, b32, b_off, b_any, window, a_e16, b_e16):
    """Continue acc[M, N] (uint32 bits in d_fp) over one K panel of whole instructions.

    a_val/a_exp: [M, Kp] panels (float64 values / float32 exponents); b_val/b_exp:
    [ceil(N / BLOCK_N), Kp, BLOCK_N] (B in column blocks, zero-padded); a_flag: [M, G] and
    b_flag: [blocks, G, BLOCK_N] group flags; glen: the group lengths of one instruction
    (C and D share d_fp); fp32_acc: D is FP32 (decoded and encoded vectorised); ieee_add:
    each instruction starts from zero and adds C last (``_add_c``).  The int32 route (window
    > 0, see ``gemm_panels``): a32 / b32 the operands relative to their group's largest
    exponent a_off [M, G] / b_off [blocks, G, BLOCK_N]; b_any [blocks, G] ORs a block's flags;
    a row group takes it unless it or its block is FLAG_WIDE.  a_e16 / b_e16: the exponent
    panels as int16 (zeros and specials EXP16_ZERO) for the maximum."""
    M = a_val.shape[0]
    N = acc.shape[1]
    lmax = np.max(glen)
    k = _constants(d_fp, out_fp, F, e_zero, rounding)
    n_tiles = (M + _TILE_M - 1) // _TILE_M
    for tile in prange(n_tiles):
        c, ck, cb = _accumulators((_TILE_M, BLOCK_N))
        c_in, ck_in, cb_in = _accumulators((_TILE_M, BLOCK_N))
        c_old, _, S, T, _, sa_g, ea_g, sb_g, eb_g = _lane_scratch((_TILE_M, BLOCK_N), lmax)
        exc = np.empty((_TILE_M, BLOCK_N), np.int8)  # narrow marks: fewer bytes through every per-group loop
        E = np.empty((_TILE_M, BLOCK_N), np.int16)
        U = np.empty((_TILE_M, BLOCK_N), np.int32)
        T32 = np.empty((_TILE_M, BLOCK_N), np.int32)
        any_exc = np.zeros(_TILE_M, np.int64)
        m0 = tile * _TILE_M
        tm = min(M, m0 + _TILE_M) - m0
        for blk in range(b_val.shape[0]):
            n0 = blk * BLOCK_N
            nb = min(BLOCK_N, N - n0)
            for t in range(tm):
                _load_acc(acc[m0 + t, n0:n0 + nb], c[t], ck[t], cb[t], nb, d_fp, fp32_acc)
            bv = b_val[blk]
            be = b_exp[blk]
            b32_blk = b32[blk]
            be16 = b_e16[blk]
            k0 = 0
            gg = 0
            for inst in range(n_inst):
                if ieee_add:
                    for t in range(tm):
                        for j in range(nb):
                            c_in[t, j], ck_in[t, j], cb_in[t, j] = c[t, j], ck[t, j], cb[t, j]
                            c[t, j], ck[t, j] = 0.0, 0
                for g in range(len(glen)):
                    L = glen[g]
                    bf = b_flag[blk, gg]
                    block_wide = window == 0 or (b_any[blk, gg] & FLAG_WIDE) != 0
                    for t in range(tm):
                        any_exc[t] = _group_begin(c[t], ck[t], bf, a_flag[m0 + t, gg], E[t], exc[t], nb, k)
                    _four_rows(E, None, a_e16, m0, tm, be16, k0, L, nb)
                    if not block_wide:  # the int32 route for every row (rows with a wide group redo below)
                        for t in range(tm):
                            _group_scale32(c[t], c_old[t], E[t], U[t], a_off[m0 + t, gg], b_off[blk, gg], nb, k)
                        T32[:tm, :nb] = 0  # each group's int32 terms start from 0
                        _four_rows(T32, U, a32, m0, tm, b32_blk, k0, L, nb)
                    for t in range(tm):
                        m = m0 + t
                        if block_wide or (a_flag[m, gg] & FLAG_WIDE) != 0:
                            _group_scale(c[t], c_old[t], E[t], S[t], T[t], nb, k)
                            _sum_row(T[t], S[t], a_val[m], bv, k0, L, nb)
                            x = any_exc[t] | _group_round(c[t], E[t], T[t], exc[t], nb, k)
                        else:
                            x = any_exc[t] | _group_round32(c[t], c_old[t], E[t], T32[t], exc[t], nb, k)
                        if x:
                            ct, ckt, cbt, ext, av, ae = c[t], ck[t], cb[t], exc[t], a_val[m], a_exp[m]
                            for j in range(nb):
                                if ext[j]:
                                    ct[j], ckt[j], cbt[j] = _fallback(
                                        av[k0:k0 + L], ae[k0:k0 + L], bv[k0:k0 + L, j], be[k0:k0 + L, j], L,
                                        c_old[t, j], ckt[j], cbt[j], ma, mb, d_fp, out_fp, F, e_zero, ls_ab, rs_ab,
                                        ls_d, rs_d, rounding, overflow, nan_bits, sa_g, ea_g, sb_g, eb_g)
                    k0 += L
                    gg += 1
                if ieee_add:
                    for t in range(tm):
                        _add_c(c[t], ck[t], cb[t], c_in[t], ck_in[t], cb_in[t], exc[t], nb, d_fp, add_rounding,
                               nan_bits, fp32_acc)
            for t in range(tm):
                _store_acc(acc[m0 + t, n0:n0 + nb], c[t], ck[t], cb[t], nb, d_fp, fp32_acc)
