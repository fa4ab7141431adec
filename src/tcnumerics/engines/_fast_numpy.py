"""Pure-numpy kernels of the fast engine, used when numba is not installed.

Same functions and arguments as ``_fast_numba`` and the same bits; vectorised over blocks
of vectors (or of GEMM rows x all columns) instead of compiled loops.  Accumulator formats
are rebuilt from their ``format_params`` vectors so that decoding and the single rounding
use ``FloatFormat.decode`` / ``FloatFormat.encode`` themselves.

Example:
    >>> import numpy as np
    >>> from tcnumerics.formats import get_format
    >>> from tcnumerics.engines._fast_plan import format_params
    >>> _format(tuple(format_params(get_format("fp16")))).to_float(np.array([0x3C00], np.uint16)).tolist()
    [1.0]
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..formats import FloatFormat, IntFormat, Rounding
from ._fast_plan import OVERFLOW_CODES, ROUNDING_CODES, ZERO_EXP

__all__ = ["dot_fused", "dot_integer", "gemm_fused_panel", "gemm_integer_panel", "group_flags"]

FLAG_ZERO = 1
FLAG_SPECIAL = 2
_ROUNDING = {v: k for k, v in ROUNDING_CODES.items()}
_OVERFLOW = {v: k for k, v in OVERFLOW_CODES.items()}
_SPECIALS = {0: "ieee", 1: "fn", 2: "fnuz", 3: "none"}
_BLOCK = 1 << 18  # products materialised at once


@lru_cache(maxsize=64)
def _format(params: tuple) -> FloatFormat | IntFormat:
    kind, pad, width, exp_bits, man_bits, bias, signed, specials, subnormals = (int(x) for x in params[:9])
    if kind == 1:
        return IntFormat(f"int{width}", width, bool(signed))
    return FloatFormat(f"e{exp_bits}m{man_bits}", exp_bits, man_bits, bias, signed=bool(signed),
                       specials=_SPECIALS[specials], subnormals=bool(subnormals), container_bits=32, pad_bits=pad)


def _fmt(params: np.ndarray):
    return _format(tuple(int(x) for x in params))


def group_flags(exps: np.ndarray, starts: np.ndarray, lengths: np.ndarray, out: np.ndarray) -> None:
    zero = np.logical_or.reduceat(exps <= ZERO_EXP, starts, axis=1)
    special = np.logical_or.reduceat(exps < ZERO_EXP, starts, axis=1)
    out[...] = np.where(zero, FLAG_ZERO, 0) | np.where(special, FLAG_SPECIAL, 0)


def _decode_acc(bits: np.ndarray, fp: np.ndarray):
    fmt = _fmt(fp)
    dec = fmt.decode(bits.astype(np.uint64) & np.uint64(0xFFFFFFFF))
    sig = np.where(dec.sign, -dec.significand, dec.significand)
    kind = np.where(dec.kind == 2, 3, np.where(dec.kind == 1, np.where(dec.sign, 2, 1), 0))
    return sig, dec.exponent, kind


def _terms(sig, dist, lshift, rshift):
    mag = np.abs(sig) << lshift
    t = mag >> np.minimum(dist + rshift, 63)
    return np.where(sig < 0, -t, t)


def _inf_bits(neg, fp):
    width, exp_bits, man_bits, pad = int(fp[2]), int(fp[3]), int(fp[4]), int(fp[1])
    return ((neg.astype(np.int64) << (width - 1)) | (((1 << exp_bits) - 1) << man_bits)) << pad


def _fused_group(sa, ea, sb, eb, acc, acc_fp, acc_zero, ls_acc, rs_acc, F, e_zero, ls_ab, rs_ab, out_fp, d_fp,
                 rounding, overflow, nan_bits):
    """One fused group for a batch: operand entries [..., L] (broadcastable), acc bits [...]."""
    sa, ea, sb, eb = (np.asarray(x, np.int64) for x in (sa, ea, sb, eb))
    if acc_zero:
        c_sig = np.zeros(acc.shape, np.int64)
        c_exp = np.zeros(acc.shape, np.int64)
        c_kind = np.zeros(acc.shape, np.int64)
    else:
        c_sig, c_exp, c_kind = _decode_acc(acc, acc_fp)
    zero_p = (sa == 0) | (sb == 0)
    p_exp = np.where(zero_p, e_zero, ea + eb)
    emax = np.maximum(p_exp.max(axis=-1), np.where(c_sig != 0, c_exp, e_zero))
    total = (_terms(sa * sb, emax[..., None] - ea - eb, ls_ab, rs_ab) * ~zero_p).sum(axis=-1)
    total += _terms(c_sig, emax - c_exp, ls_acc, rs_acc)
    out = _fmt(out_fp)
    bits = out.encode(total < 0, np.abs(total), emax - F, _ROUNDING[rounding],
                      overflow=_OVERFLOW[overflow]).astype(np.int64)
    bits = np.where((bits >> int(out_fp[1])) == 1 << (int(out_fp[2]) - 1), 0, bits)  # units write +0

    # specials: exponents below ZERO_EXP encode +inf (1), -inf (2), NaN (3)
    ka = np.where(ea < ZERO_EXP, ZERO_EXP - ea, 0)
    kb = np.where(eb < ZERO_EXP, ZERO_EXP - eb, 0)
    nan = (ka == 3).any(axis=-1) | (kb == 3).any(axis=-1) | (c_kind == 3)
    inf_p = ((ka == 1) | (ka == 2) | (kb == 1) | (kb == 2))
    nan |= (inf_p & (((ka == 0) & (sa == 0)) | ((kb == 0) & (sb == 0)))).any(axis=-1)
    neg_a = np.where(ka != 0, ka == 2, sa < 0)
    neg_b = np.where(kb != 0, kb == 2, sb < 0)
    pos = (inf_p & (neg_a == neg_b)).any(axis=-1) | (c_kind == 1)
    neg = (inf_p & (neg_a != neg_b)).any(axis=-1) | (c_kind == 2)
    nan |= pos & neg
    bits = np.where(pos | neg, _inf_bits(neg, d_fp), bits)
    return np.where(nan, nan_bits, bits)


def _ieee_add(x, x_fp, y, y_fp, out_fp, rounding, nan_bits):
    with np.errstate(invalid="ignore"):  # inf + -inf is NaN by design
        s = _fmt(x_fp).to_float(x.astype(np.uint64) & np.uint64(0xFFFFFFFF)) + \
            _fmt(y_fp).to_float(y.astype(np.uint64) & np.uint64(0xFFFFFFFF))
        bits = _fmt(out_fp).from_float(s, _ROUNDING[rounding], overflow="ieee").astype(np.int64)
    return np.where(np.isnan(s), nan_bits, bits)


def _gather(lut, bits, shift):
    return lut[bits.astype(np.int64) >> shift]


def _containers(raw, nbytes):
    """Undo the byte view the kernels take: [N, K * nbytes] uint8 -> [N, K] containers."""
    return raw.view({1: np.uint8, 2: "<u2", 4: "<u4"}[nbytes])


def dot_fused(a, a_bytes, b, b_bytes, c, perm, glen, lut_a_sig, lut_a_exp, a_shift, lut_b_sig, lut_b_exp, b_shift,
              c_fp, d_fp, out_fp, F, e_zero, ls_ab, rs_ab, ls_c, rs_c, ls_d, rs_d,
              rounding, overflow, nan_bits, ieee_add, add_rounding, out):
    a, b = _containers(a, a_bytes), _containers(b, b_bytes)
    n, k_total = a.shape
    k = len(perm)
    rows = max(1, _BLOCK // max(1, k))
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        acc = c[r0:r1].astype(np.int64)
        for base in range(0, k_total, k):
            cols = base + perm
            ia = a[r0:r1, cols]
            ib = b[r0:r1, cols]
            sa, ea = _gather(lut_a_sig, ia, a_shift), _gather(lut_a_exp, ia, a_shift)
            sb, eb = _gather(lut_b_sig, ib, b_shift), _gather(lut_b_exp, ib, b_shift)
            c_in = acc
            pos = 0
            for g, L in enumerate(glen):
                s = slice(pos, pos + L)
                first = g == 0
                acc = _fused_group(sa[:, s], ea[:, s], sb[:, s], eb[:, s], acc, c_fp if first else d_fp,
                                   first and ieee_add, ls_c if first else ls_d, rs_c if first else rs_d, F, e_zero,
                                   ls_ab, rs_ab, out_fp, d_fp, rounding, overflow, nan_bits)
                pos += L
            if ieee_add:
                acc = _ieee_add(acc, d_fp, c_in, c_fp, d_fp, add_rounding, nan_bits)
        out[r0:r1] = acc


def _int_wrap(total, d_fp, saturate):
    if saturate:
        total = np.clip(total, int(d_fp[10]), int(d_fp[9]))
    return total & ((1 << int(d_fp[2])) - 1)


def _decode_int(bits, fp):
    return _fmt(fp).decode_int(bits.astype(np.uint64) & np.uint64(0xFFFFFFFF))


def dot_integer(a, a_bytes, b, b_bytes, c, perm, glen, lut_a, a_shift, lut_b, b_shift, c_fp, d_fp, saturate, out):
    a, b = _containers(a, a_bytes), _containers(b, b_bytes)
    n, k_total = a.shape
    k = len(perm)
    acc = c.astype(np.int64)
    for base in range(0, k_total, k):
        cols = base + perm
        va = _gather(lut_a, a[:, cols], a_shift).astype(np.int64)
        vb = _gather(lut_b, b[:, cols], b_shift).astype(np.int64)
        pos = 0
        for g, L in enumerate(glen):
            total = _decode_int(acc, c_fp if g == 0 else d_fp) + (va[:, pos:pos + L] * vb[:, pos:pos + L]).sum(axis=1)
            acc = _int_wrap(total, d_fp, saturate)
            pos += L
    out[:] = acc


def gemm_fused_panel(a_sig, a_exp, a_flag, b_sig, b_exp, b_flag, acc, glen, n_inst,
                     c_fp, d_fp, out_fp, F, e_zero, ls_ab, rs_ab, ls_c, rs_c, ls_d, rs_d,
                     rounding, overflow, nan_bits, ieee_add, add_rounding):
    M = a_sig.shape[0]
    N = b_sig.shape[1]
    lmax = int(max(glen))
    rows = max(1, _BLOCK // max(1, N * lmax))
    for r0 in range(0, M, rows):
        r1 = min(M, r0 + rows)
        bits = acc[r0:r1].astype(np.int64)
        k0 = 0
        for _ in range(n_inst):
            saved = bits
            for g, L in enumerate(glen):
                s = slice(k0, k0 + L)
                first = g == 0
                bits = _fused_group(a_sig[r0:r1, None, s], a_exp[r0:r1, None, s], b_sig[s].T[None], b_exp[s].T[None],
                                    bits, c_fp if first else d_fp, first and ieee_add, ls_c if first else ls_d,
                                    rs_c if first else rs_d, F, e_zero, ls_ab, rs_ab, out_fp, d_fp, rounding,
                                    overflow, nan_bits)
                k0 += L
            if ieee_add:
                bits = _ieee_add(bits, d_fp, saved, c_fp, d_fp, add_rounding, nan_bits)
        acc[r0:r1] = bits


def gemm_integer_panel(a_val, b_val, acc, glen, n_inst, c_fp, d_fp, saturate):
    M = a_val.shape[0]
    N = b_val.shape[1]
    rows = max(1, _BLOCK // max(1, N * int(max(glen))))
    for r0 in range(0, M, rows):
        r1 = min(M, r0 + rows)
        bits = acc[r0:r1].astype(np.int64)
        k0 = 0
        for _ in range(n_inst):
            for g, L in enumerate(glen):
                s = slice(k0, k0 + L)
                prod = a_val[r0:r1, None, s].astype(np.int64) * b_val[s].T[None].astype(np.int64)
                bits = _int_wrap(_decode_int(bits, c_fp if g == 0 else d_fp) + prod.sum(axis=-1), d_fp, saturate)
                k0 += L
        acc[r0:r1] = bits
