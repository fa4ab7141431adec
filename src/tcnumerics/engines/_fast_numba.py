"""numba kernels of the fast engine (private; ``tcnumerics.engines.fast`` is the interface).

Every kernel works on integers only: operand significands and alignment exponents come
from the plan's lookup tables (``_fast_plan``), accumulators travel as bit patterns and
are decoded / rounded by ``_decode`` / ``_round`` below, which re-state
``FloatFormat.decode`` / ``FloatFormat.encode`` for one value at a time.  Format
parameters arrive as the int64 vectors of ``_fast_plan.format_params``.

Two kernels evaluate fused groups: ``dot_fused`` for independent vectors (operand bits
gathered through the tables) and ``gemm_fused_panel`` for a K panel of a GEMM (operands
decoded beforehand into [M, Kp] and [Kp, N] int16 arrays), vectorised over a block of
output columns; ``dot_integer`` / ``gemm_integer_panel`` do exact integer units.

Importing this module imports numba; the engine falls back to ``_fast_numpy`` without it.

Fork and thread safety: the ``parallel=True`` kernels are wrapped by ``_numba_launch.fork_safe``.

Example:
    >>> import numpy as np
    >>> from tcnumerics.formats import get_format
    >>> from tcnumerics.engines._fast_plan import format_params
    >>> fp32 = format_params(get_format("fp32"))
    >>> _decode(np.int64(0x3F800000), fp32)      # 1.0: significand 2**23, exponent 0, finite
    (8388608, 0, 0)
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange
from numba.cpython.unsafe.numbers import leading_zeros

from ._fast_plan import ZERO_EXP
from ._numba_launch import fork_safe, serial_only, threads  # the kernel backend's interface (fast.py)

__all__ = ["dot_fused", "dot_integer", "gemm_fused_panel", "gemm_integer_panel", "group_flags", "fork_safe",
           "serial_only", "threads"]

_RNE, _RNA, _RZ, _RU, _RD, _RTO = 0, 1, 2, 3, 4, 5
_OV_IEEE, _OV_INF, _OV_SAT, _OV_NAN = 0, 1, 2, 3
FLAG_ZERO = 1  # the group has a zero operand: some product is exactly zero
FLAG_SPECIAL = 2  # the group has an inf or NaN operand: its result is inf or NaN

@njit(cache=True, nogil=True)
def _decode(bits, fp):
    """(signed significand, alignment exponent, kind) of one float pattern; kind 0/1/2/3 =
    finite/+inf/-inf/NaN.  Zeros and specials have significand 0."""
    pad, width, exp_bits, man_bits, bias = fp[1], fp[2], fp[3], fp[4], fp[5]
    signed, specials, subnormals = fp[6], fp[7], fp[8]
    v = (bits >> pad) & ((np.int64(1) << width) - 1)
    neg = (v >> (width - 1)) & 1 if signed else 0
    code = v & ((np.int64(1) << (exp_bits + man_bits)) - 1)
    fe = code >> man_bits
    frac = code & ((np.int64(1) << man_bits) - 1)
    if subnormals:
        sig = frac | (np.int64(1) << man_bits) if fe > 0 else frac
        exp = max(fe, 1) - bias
    else:
        sig = frac | (np.int64(1) << man_bits)
        exp = fe - bias
    kind = 0
    if specials == 0:
        if fe == (np.int64(1) << exp_bits) - 1:
            kind = 3 if frac != 0 else (2 if neg else 1)
    elif specials == 1:
        if code == (np.int64(1) << (exp_bits + man_bits)) - 1:
            kind = 3
    elif specials == 2:
        if neg and code == 0:
            kind = 3
    if kind != 0:
        sig = 0
    return (-sig if neg else sig), exp, kind


@njit(cache=True, nogil=True)
def _decode_int(bits, fp):
    v = bits & ((np.int64(1) << fp[2]) - 1)
    if fp[6] and v >= (np.int64(1) << (fp[2] - 1)):
        v -= np.int64(1) << fp[2]
    return v


@njit(cache=True, nogil=True)
def _bit_length(x):
    return 64 - np.int64(leading_zeros(np.uint64(x)))


@njit(cache=True, nogil=True)
def _round(neg, mag, exp2, fp, rounding, overflow, keep_negative_zero):
    """Bits of ``(-1)**neg * mag * 2**exp2`` rounded once into the IEEE-like format ``fp``
    (``FloatFormat.encode`` for one value; mag is a non-negative int64)."""
    pad, width, exp_bits, p, bias, max_code, emin = fp[1], fp[2], fp[3], fp[4], fp[5], fp[9], fp[10]
    code = np.int64(0)
    fe = np.int64(0)
    if mag != 0:
        q = max(exp2 + _bit_length(mag) - 1 - p, emin - p)
        shift = q - exp2
        if shift > 0:
            if shift >= 63:
                trunc = np.int64(0)
                rem = mag
                above = shift == 63 and mag > (np.int64(1) << 62)
                tie = shift == 63 and mag == (np.int64(1) << 62)
            else:
                trunc = mag >> shift
                rem = mag - (trunc << shift)
                half = np.int64(1) << (shift - 1)
                above = rem > half
                tie = rem == half
            inexact = rem != 0
            up = False
            if rounding == _RNE:
                up = above or (tie and (trunc & 1) == 1)
            elif rounding == _RNA:
                up = above or tie
            elif rounding == _RU:
                up = inexact and not neg
            elif rounding == _RD:
                up = inexact and neg
            sig = trunc + (1 if up else 0)
            if rounding == _RTO and inexact:
                sig |= 1
        else:
            sig = mag << min(-shift, 63)
        if sig >> (p + 1) != 0:
            sig >>= 1
            q += 1
        if sig >= (np.int64(1) << p):
            fe = q + p + bias
            code = (fe << p) | (sig - (np.int64(1) << p))
        else:
            code = sig
    if code > max_code or fe > (max_code >> p):
        if overflow == _OV_IEEE:
            to_inf = rounding == _RNE or rounding == _RNA or (rounding == _RU and not neg) or (rounding == _RD and neg)
        else:
            to_inf = overflow != _OV_SAT
        if to_inf:
            code = ((np.int64(1) << exp_bits) - 1) << p
            if overflow == _OV_NAN:
                code |= np.int64(1) << max(p - 1, 0)
        else:
            code = max_code
    if code == 0 and not keep_negative_zero:
        return np.int64(0)  # units write +0 for a zero result
    return (((np.int64(1) if neg else np.int64(0)) << (width - 1)) | code) << pad


@njit(cache=True, nogil=True)
def _inf_bits(neg, fp):
    return (((np.int64(1) if neg else np.int64(0)) << (fp[2] - 1)) | (((np.int64(1) << fp[3]) - 1) << fp[4])) << fp[1]


@njit(cache=True, nogil=True)
def _to_float(bits, fp):
    sig, exp, kind = _decode(bits, fp)
    if kind == 3:
        return np.nan
    if kind != 0:
        return -np.inf if kind == 2 else np.inf
    if sig == 0:
        neg = fp[6] and ((bits >> fp[1]) >> (fp[2] - 1)) & 1
        return -0.0 if neg else 0.0
    return math.ldexp(float(sig), int(exp - fp[4]))


@njit(cache=True, nogil=True)
def _ieee_add(x_bits, x_fp, y_bits, y_fp, out_fp, rounding, nan_bits):
    """IEEE addition of two patterns rounded once into out_fp (float64 route, as the reference)."""
    s = _to_float(x_bits, x_fp) + _to_float(y_bits, y_fp)
    if math.isnan(s):
        return np.int64(nan_bits)
    neg = math.copysign(1.0, s) < 0
    if math.isinf(s):
        return _inf_bits(neg, out_fp)
    m, e = math.frexp(abs(s))
    mag = np.int64(math.ldexp(m, 53))
    return _round(neg, mag, np.int64(e) - 53, out_fp, rounding, _OV_IEEE, True)


@njit(cache=True, nogil=True)
def _special_outcome(sa, ea, sb, eb, c_kind, d_fp, nan_bits):
    """inf/NaN result bits of a group that has a special operand or accumulator (-1: none).

    sa/ea/sb/eb: the group's table entries (exponents below ZERO_EXP encode the kind)."""
    nan = c_kind == 3
    pos = c_kind == 1
    neg = c_kind == 2
    for i in range(len(sa)):
        ka = ZERO_EXP - ea[i] if ea[i] < ZERO_EXP else 0
        kb = ZERO_EXP - eb[i] if eb[i] < ZERO_EXP else 0
        if ka == 3 or kb == 3:
            nan = True
        elif ka != 0 or kb != 0:
            a_zero = ka == 0 and sa[i] == 0
            b_zero = kb == 0 and sb[i] == 0
            if a_zero or b_zero:
                nan = True
            else:
                na = ka == 2 if ka != 0 else sa[i] < 0
                nb = kb == 2 if kb != 0 else sb[i] < 0
                if na != nb:
                    neg = True
                else:
                    pos = True
    if nan or (pos and neg):
        return np.int64(nan_bits)
    if pos or neg:
        return _inf_bits(neg, d_fp)
    return np.int64(-1)


@njit(cache=True, nogil=True)
def _term(sig, dist, lshift, rshift):
    """Signed sig truncated toward zero after shifting left by lshift, right by dist + rshift."""
    s = sig >> 63
    mag = ((sig ^ s) - s) << lshift
    t = mag >> min(dist + rshift, 63)
    return (t ^ s) - s


@njit(cache=True, nogil=True)
def _fused_one(sa, ea, sb, eb, L, acc_bits, acc_fp, acc_zero, ls_acc, rs_acc, F, e_zero, ls_ab, rs_ab,
               out_fp, d_fp, rounding, overflow, nan_bits):
    """One fused group for one vector (operand table entries sa/ea/sb/eb of length L)."""
    if acc_zero:
        c_sig, c_exp, c_kind = np.int64(0), np.int64(0), np.int64(0)
    else:
        c_sig, c_exp, c_kind = _decode(acc_bits, acc_fp)
    special = c_kind != 0
    emax = c_exp if c_sig != 0 else e_zero
    for i in range(L):
        if ea[i] < ZERO_EXP or eb[i] < ZERO_EXP:
            special = True
        if sa[i] == 0 or sb[i] == 0:
            emax = max(emax, e_zero)
        else:
            emax = max(emax, np.int64(ea[i]) + eb[i])
    if special:
        return _special_outcome(sa[:L], ea[:L], sb[:L], eb[:L], c_kind, d_fp, nan_bits)
    total = _term(c_sig, emax - c_exp, ls_acc, rs_acc)
    for i in range(L):
        total += _term(np.int64(sa[i]) * sb[i], emax - ea[i] - eb[i], ls_ab, rs_ab)
    return _round(total < 0, abs(total), emax - F, out_fp, rounding, overflow, False)


@njit(cache=True, nogil=True)
def _load(raw, row, col, nbytes):
    """Element ``col`` of a row of little-endian unsigned integers stored as bytes
    (one compiled kernel serves 8-, 16- and 32-bit containers)."""
    if nbytes == 1:
        return np.int64(raw[row, col])
    base = col * nbytes
    v = np.int64(raw[row, base]) | (np.int64(raw[row, base + 1]) << 8)
    if nbytes == 4:
        v |= (np.int64(raw[row, base + 2]) << 16) | (np.int64(raw[row, base + 3]) << 24)
    return v


@fork_safe
@njit(cache=True, parallel=True)
def dot_fused(a, a_bytes, b, b_bytes, c, perm, glen, lut_a_sig, lut_a_exp, a_shift, lut_b_sig, lut_b_exp, b_shift,
              c_fp, d_fp, out_fp, F, e_zero, ls_ab, rs_ab, ls_c, rs_c, ls_d, rs_d,
              rounding, overflow, nan_bits, ieee_add, add_rounding, out):
    """Chained fused instructions over N vectors; writes out[N] (int64 bits).

    a, b: [N, K' * a_bytes] / [N, K' * b_bytes] uint8 views of the operand containers;
    c: [N] int64 accumulator bits."""
    n = a.shape[0]
    k_total = a.shape[1] // a_bytes
    k = len(perm)
    lmax = 0
    for g in range(len(glen)):
        lmax = max(lmax, glen[g])
    n_chunks = (n + 4095) // 4096
    for chunk in prange(n_chunks):
        sa = np.empty(lmax, np.int64)
        ea = np.empty(lmax, np.int64)
        sb = np.empty(lmax, np.int64)
        eb = np.empty(lmax, np.int64)
        for row in range(chunk * 4096, min(n, chunk * 4096 + 4096)):
            acc = c[row]
            for base in range(0, k_total, k):
                c_in = acc
                pos = 0
                for g in range(len(glen)):
                    L = glen[g]
                    for i in range(L):
                        col = base + perm[pos + i]
                        ia = _load(a, row, col, a_bytes) >> a_shift
                        ib = _load(b, row, col, b_bytes) >> b_shift
                        sa[i] = lut_a_sig[ia]
                        ea[i] = lut_a_exp[ia]
                        sb[i] = lut_b_sig[ib]
                        eb[i] = lut_b_exp[ib]
                    first = g == 0
                    acc = _fused_one(sa, ea, sb, eb, L, acc, c_fp if first else d_fp,
                                     first and ieee_add, ls_c if first else ls_d, rs_c if first else rs_d, F, e_zero,
                                     ls_ab, rs_ab, out_fp, d_fp, rounding, overflow, nan_bits)
                    pos += L
                if ieee_add:
                    acc = _ieee_add(acc, d_fp, c_in, c_fp, d_fp, add_rounding, nan_bits)
            out[row] = acc


@njit(cache=True, nogil=True)
def _int_wrap(total, d_fp, saturate):
    if saturate:
        total = min(max(total, d_fp[10]), d_fp[9])
    return total & ((np.int64(1) << d_fp[2]) - 1)


@fork_safe
@njit(cache=True, parallel=True)
def dot_integer(a, a_bytes, b, b_bytes, c, perm, glen, lut_a, a_shift, lut_b, b_shift, c_fp, d_fp, saturate, out):
    """Chained exact integer instructions over N vectors (operands as in ``dot_fused``)."""
    n = a.shape[0]
    k_total = a.shape[1] // a_bytes
    k = len(perm)
    for row in prange(n):
        acc = c[row]
        for base in range(0, k_total, k):
            pos = 0
            for g in range(len(glen)):
                total = _decode_int(acc, c_fp if g == 0 else d_fp)
                for i in range(glen[g]):
                    col = base + perm[pos + i]
                    total += np.int64(lut_a[_load(a, row, col, a_bytes) >> a_shift]) * \
                        lut_b[_load(b, row, col, b_bytes) >> b_shift]
                acc = _int_wrap(total, d_fp, saturate)
                pos += glen[g]
        out[row] = acc


@fork_safe
@njit(cache=True, parallel=True)
def group_flags(exps, starts, lengths, out):
    """out[r, g] = FLAG_ZERO / FLAG_SPECIAL bits of rows' groups (exps: [R, Kp] table exponents)."""
    for r in prange(exps.shape[0]):
        for g in range(len(starts)):
            f = 0
            for i in range(starts[g], starts[g] + lengths[g]):
                e = exps[r, i]
                if e <= ZERO_EXP:
                    f |= FLAG_ZERO
                    if e < ZERO_EXP:
                        f |= FLAG_SPECIAL
            out[r, g] = f


_TILE_M = 4
_BLOCK_N = 512


@njit(cache=True, nogil=True)
def _fused_row_block(m, n0, nb, a_sig, a_exp, a_flag, b_sig, b_exp, b_flag, acc, glen, n_inst,
                     c_fp, d_fp, out_fp, F, e_zero, ls_ab, rs_ab, ls_c, rs_c, ls_d, rs_d,
                     rounding, overflow, nan_bits, ieee_add, add_rounding,
                     emax, total, c_sig, c_exp, c_kind, bits, saved, sa_g, ea_g, sb_g, eb_g):
    """Row m, columns n0:n0+nb of a GEMM panel (scratch arrays of at least nb / L entries)."""
    for j in range(nb):
        bits[j] = acc[m, n0 + j]
    k0 = 0
    gg = 0
    for inst in range(n_inst):
        for g in range(len(glen)):
            L = glen[g]
            # the group's incoming accumulator
            if g == 0 and ieee_add:
                for j in range(nb):
                    saved[j] = bits[j]
                    c_sig[j] = 0
                    c_exp[j] = 0
                    c_kind[j] = 0
            else:
                fp = c_fp if g == 0 else d_fp
                for j in range(nb):
                    c_sig[j], c_exp[j], c_kind[j] = _decode(bits[j], fp)
            ls_acc = ls_c if g == 0 else ls_d
            rs_acc = rs_c if g == 0 else rs_d
            fa = a_flag[m, gg]
            # pass 1: the maximum exponent over products and C
            for j in range(nb):
                e = c_exp[j] if c_sig[j] != 0 else e_zero
                if (fa | b_flag[gg, n0 + j]) & FLAG_ZERO:
                    e = max(e, e_zero)
                emax[j] = e
            for kk in range(k0, k0 + L):
                ea = np.int64(a_exp[m, kk])
                if ea <= ZERO_EXP:
                    continue  # zero or special a: covered by the flags
                b_row = b_exp[kk, n0:n0 + nb]
                for j in range(nb):
                    emax[j] = max(emax[j], ea + b_row[j])
            # pass 2: truncate every term to F fraction bits below 2**emax and sum exactly
            for j in range(nb):
                total[j] = _term(c_sig[j], emax[j] - c_exp[j], ls_acc, rs_acc)
            for kk in range(k0, k0 + L):
                sa = np.int64(a_sig[m, kk])
                if sa == 0:
                    continue
                ea = np.int64(a_exp[m, kk]) - rs_ab
                bs_row = b_sig[kk, n0:n0 + nb]
                be_row = b_exp[kk, n0:n0 + nb]
                for j in range(nb):
                    p = sa * bs_row[j]
                    s = p >> 63
                    mag = ((p ^ s) - s) << ls_ab
                    t = mag >> min(emax[j] - ea - be_row[j], 63)
                    total[j] += (t ^ s) - s
            # round once; groups with an inf/NaN operand or accumulator are special
            for j in range(nb):
                if ((fa | b_flag[gg, n0 + j]) & FLAG_SPECIAL) or c_kind[j] != 0:
                    for i in range(L):
                        sa_g[i] = a_sig[m, k0 + i]
                        ea_g[i] = a_exp[m, k0 + i]
                        sb_g[i] = b_sig[k0 + i, n0 + j]
                        eb_g[i] = b_exp[k0 + i, n0 + j]
                    bits[j] = _special_outcome(sa_g[:L], ea_g[:L], sb_g[:L], eb_g[:L], c_kind[j], d_fp, nan_bits)
                else:
                    t = total[j]
                    bits[j] = _round(t < 0, abs(t), emax[j] - F, out_fp, rounding, overflow, False)
            k0 += L
            gg += 1
        if ieee_add:
            for j in range(nb):
                bits[j] = _ieee_add(bits[j], d_fp, saved[j], c_fp, d_fp, add_rounding, nan_bits)
    for j in range(nb):
        acc[m, n0 + j] = bits[j]


@fork_safe
@njit(cache=True, parallel=True)
def gemm_fused_panel(a_sig, a_exp, a_flag, b_sig, b_exp, b_flag, acc, glen, n_inst,
                     c_fp, d_fp, out_fp, F, e_zero, ls_ab, rs_ab, ls_c, rs_c, ls_d, rs_d,
                     rounding, overflow, nan_bits, ieee_add, add_rounding):
    """Continue acc[M, N] (uint32 bits) over one K panel of whole instructions.

    a_sig/a_exp: [M, Kp] table entries (K permuted per instruction); b_sig/b_exp: [Kp, N];
    a_flag: [M, G], b_flag: [G, N] group flags (``group_flags``); glen: the group lengths of
    one instruction; n_inst: instructions in the panel (Kp = n_inst * sum(glen)).
    """
    M = a_sig.shape[0]
    N = b_sig.shape[1]
    lmax = 0
    for g in range(len(glen)):
        lmax = max(lmax, glen[g])
    n_tiles = (M + _TILE_M - 1) // _TILE_M
    for tile in prange(n_tiles):
        emax = np.empty(_BLOCK_N, np.int64)
        total = np.empty(_BLOCK_N, np.int64)
        c_sig = np.empty(_BLOCK_N, np.int64)
        c_exp = np.empty(_BLOCK_N, np.int64)
        c_kind = np.empty(_BLOCK_N, np.int64)
        bits = np.empty(_BLOCK_N, np.int64)
        saved = np.empty(_BLOCK_N, np.int64)
        sa_g = np.empty(lmax, np.int64)
        ea_g = np.empty(lmax, np.int64)
        sb_g = np.empty(lmax, np.int64)
        eb_g = np.empty(lmax, np.int64)
        for n0 in range(0, N, _BLOCK_N):
            nb = min(_BLOCK_N, N - n0)
            for m in range(tile * _TILE_M, min(M, tile * _TILE_M + _TILE_M)):
                _fused_row_block(m, n0, nb, a_sig, a_exp, a_flag, b_sig, b_exp, b_flag, acc, glen, n_inst,
                                 c_fp, d_fp, out_fp, F, e_zero, ls_ab, rs_ab, ls_c, rs_c, ls_d, rs_d,
                                 rounding, overflow, nan_bits, ieee_add, add_rounding,
                                 emax, total, c_sig, c_exp, c_kind, bits, saved, sa_g, ea_g, sb_g, eb_g)


@fork_safe
@njit(cache=True, parallel=True)
def gemm_integer_panel(a_val, b_val, acc, glen, n_inst, c_fp, d_fp, saturate):
    """Continue acc[M, N] (uint32 bits) over one K panel of exact integer instructions."""
    M = a_val.shape[0]
    N = b_val.shape[1]
    n_tiles = (M + _TILE_M - 1) // _TILE_M
    for tile in prange(n_tiles):
        total = np.empty(_BLOCK_N, np.int64)
        for n0 in range(0, N, _BLOCK_N):
            nb = min(_BLOCK_N, N - n0)
            for m in range(tile * _TILE_M, min(M, tile * _TILE_M + _TILE_M)):
                k0 = 0
                for inst in range(n_inst):
                    for g in range(len(glen)):
                        for j in range(nb):
                            total[j] = _decode_int(np.int64(acc[m, n0 + j]), c_fp if g == 0 else d_fp)
                        for kk in range(k0, k0 + glen[g]):
                            va = np.int64(a_val[m, kk])
                            for j in range(nb):
                                total[j] += va * b_val[kk, n0 + j]
                        for j in range(nb):
                            acc[m, n0 + j] = _int_wrap(total[j], d_fp, saturate)
                        k0 += glen[g]
