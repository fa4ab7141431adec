"""The fast engine's vectorised dot kernel: chained fused instructions over independent vectors (private).

The vectors are the lanes: a block of them is gathered through the plan's tables into [K, block] panels and
evaluated group by group with the GEMM kernel's group operations (``_fast_f64``, where the argument why float64
lanes give the integer datapath's bits is made); lanes the vector path does not cover are redone by the scalar
integer kernel.

Example:
    >>> _DOT_BLOCK >= 64
    True
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._fast_f64 import (_accumulators, _add_c, _bits_value, _constants, _fallback, _group_begin, _group_round,
                        _group_scale, _lane_scratch, _value_bits)
from ._fast_numba import FLAG_SPECIAL, FLAG_ZERO
from ._numba_launch import fork_safe
from ._fast_plan import ZERO_EXP

__all__ = ["dot_fused_f64"]

_DOT_BLOCK = 256  # vectors per block of the dot kernel


@njit(cache=True, nogil=True)
def _max_lanes(E, a_exp, b_exp, k0, L, nb):
    """As ``_max_row`` with A varying by lane too ([K, lanes] panels, the dot kernel)."""
    for kk in range(k0, k0 + L):
        a0 = a_exp[kk]
        b0 = b_exp[kk]
        for j in range(nb):
            E[j] = max(E[j], a0[j] + b0[j])


@njit(cache=True, nogil=True)
def _sum_lanes(T, S, a_val, b_val, k0, L, nb):
    """As ``_sum_row`` with A varying by lane too ([K, lanes] panels, the dot kernel)."""
    for kk in range(k0, k0 + L):
        a0 = a_val[kk]
        b0 = b_val[kk]
        for j in range(nb):
            T[j] += np.int64(a0[j] * S[j] * b0[j])


@njit(cache=True, nogil=True)
def _gather_rows(rows, shift, perm, base, lut_val, lut_exp, r0, nb, out_val, out_exp):
    # lanes innermost: the block's rows stay in L1 while every output row is written contiguously
    for i in range(len(perm)):
        col = base + perm[i]
        for j in range(nb):
            idx = rows[r0 + j, col] >> shift
            out_val[i, j] = lut_val[idx]
            out_exp[i, j] = lut_exp[idx]


@njit(cache=True, nogil=True)
def _gather(raw, nbytes, shift, perm, base, lut_val, lut_exp, r0, nb, out_val, out_exp):
    """out_val/out_exp[i, j] = table entries of operand column base + perm[i] of vector r0 + j
    (raw: [N, K * nbytes] little-endian bytes, read through a typed view)."""
    if nbytes == 1:
        _gather_rows(raw, shift, perm, base, lut_val, lut_exp, r0, nb, out_val, out_exp)
    elif nbytes == 2:
        _gather_rows(raw.view(np.uint16), shift, perm, base, lut_val, lut_exp, r0, nb, out_val, out_exp)
    else:
        _gather_rows(raw.view(np.uint32), shift, perm, base, lut_val, lut_exp, r0, nb, out_val, out_exp)


@fork_safe
@njit(cache=True, parallel=True)
def dot_fused_f64(a, a_bytes, b, b_bytes, c_in, perm, glen, lut_a_val, lut_a_exp, a_shift, lut_b_val, lut_b_exp,
                  b_shift, d_fp, out_fp, F, e_zero, ls_ab, rs_ab, ls_d, rs_d, rounding, overflow, nan_bits, ma, mb,
                  fp32_acc, ieee_add, add_rounding, out):
    """Chained fused instructions over N independent vectors; writes out[N] (int64 bits).

    a, b: [N, K' * bytes] uint8 views of the operand containers (as ``_fast_numba.dot_fused``);
    c_in: [N] int64 accumulator bits in d_fp.  The vectors are the lanes: a block of them is
    gathered through the plan's tables into [K, block] panels, then evaluated group by group."""
    n = a.shape[0]
    k_total = a.shape[1] // a_bytes
    kk = len(perm)
    lmax = np.max(glen)
    k = _constants(d_fp, out_fp, F, e_zero, rounding)
    n_blocks = (n + _DOT_BLOCK - 1) // _DOT_BLOCK
    for blk in prange(n_blocks):
        av = np.empty((kk, _DOT_BLOCK), np.float64)
        ae = np.empty((kk, _DOT_BLOCK), np.float32)
        bv = np.empty((kk, _DOT_BLOCK), np.float64)
        be = np.empty((kk, _DOT_BLOCK), np.float32)
        flags = np.empty(_DOT_BLOCK, np.int64)
        c, ck, cb = _accumulators(_DOT_BLOCK)
        c_add, ck_add, cb_add = _accumulators(_DOT_BLOCK)
        c_old, E, S, T, exc, sa_g, ea_g, sb_g, eb_g = _lane_scratch(_DOT_BLOCK, lmax)
        r0 = blk * _DOT_BLOCK
        nb = min(n, r0 + _DOT_BLOCK) - r0
        for j in range(nb):
            bits = c_in[r0 + j]
            c[j], ck[j] = _bits_value(bits, d_fp)
            cb[j] = bits
        for base in range(0, k_total, kk):
            _gather(a, a_bytes, a_shift, perm, base, lut_a_val, lut_a_exp, r0, nb, av, ae)
            _gather(b, b_bytes, b_shift, perm, base, lut_b_val, lut_b_exp, r0, nb, bv, be)
            if ieee_add:
                for j in range(nb):
                    c_add[j], ck_add[j], cb_add[j] = c[j], ck[j], cb[j]
                    c[j], ck[j] = 0.0, 0
            k0 = 0
            for g in range(len(glen)):
                L = glen[g]
                # per-lane group flags (A and B both vary by lane): zero / special operands
                for j in range(nb):
                    flags[j] = 0
                for i in range(k0, k0 + L):
                    for j in range(nb):
                        lo = min(ae[i, j], be[i, j])
                        flags[j] |= (FLAG_ZERO if lo <= ZERO_EXP else 0) | (FLAG_SPECIAL if lo < ZERO_EXP else 0)
                any_exc = _group_begin(c, ck, flags, np.int64(0), E, exc, nb, k)
                _max_lanes(E, ae, be, k0, L, nb)
                _group_scale(c, c_old, E, S, T, nb, k)
                _sum_lanes(T, S, av, bv, k0, L, nb)
                any_exc |= _group_round(c, E, T, exc, nb, k)
                if any_exc:
                    for j in range(nb):
                        if exc[j]:
                            c[j], ck[j], cb[j] = _fallback(
                                av[k0:k0 + L, j], ae[k0:k0 + L, j], bv[k0:k0 + L, j], be[k0:k0 + L, j], L, c_old[j],
                                ck[j], cb[j], ma, mb, d_fp, out_fp, F, e_zero, ls_ab, rs_ab, ls_d, rs_d, rounding,
                                overflow, nan_bits, sa_g, ea_g, sb_g, eb_g)
                k0 += L
            if ieee_add:
                _add_c(c, ck, cb, c_add, ck_add, cb_add, exc, nb, d_fp, add_rounding, nan_bits, fp32_acc)
        for j in range(nb):
            out[r0 + j] = cb[j] if ck[j] != 0 else _value_bits(c[j], d_fp)
