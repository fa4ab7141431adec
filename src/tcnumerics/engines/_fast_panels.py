"""Decoding a GEMM's K panel into the fast engine's vector layouts (private).

The operands' containers are read once per panel through the plan's tables (value, alignment
exponent) into the layouts ``_fast_f64.gemm_fused_f64`` consumes: A as rows, B in column blocks of
``BLOCK_N`` lanes, per-group flags (zero, special, beyond the int32 route's window), and the int32
route's operands relative to their group's largest exponent.

Example:
    >>> BLOCK_N % 32
    0
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._fast_f64 import BLOCK_N, EXP16_ZERO, FLAG_WIDE, SCALE32_BIAS
from ._fast_numba import FLAG_SPECIAL, FLAG_ZERO, _load
from ._numba_launch import fork_safe
from ._fast_plan import ZERO_EXP
from ._lanes import bits_f64 as _bits_f64

__all__ = ["gemm_panels"]


@njit(cache=True, nogil=True)
def _group_offset(exps, window):
    """(the largest exponent of a group's nonzero finite operands, 0 if none; FLAG_WIDE when
    one of them lies more than window below it)."""
    top = np.float32(ZERO_EXP)
    low = np.float32(-ZERO_EXP)
    for e in exps:
        if e > ZERO_EXP:
            top = max(top, e)
            low = min(low, e)
    if top == np.float32(ZERO_EXP):
        return np.float32(0.0), 0
    return top, (FLAG_WIDE if low < top - window else 0)


@fork_safe
@njit(cache=True, parallel=True)
def gemm_panels(a, a_bytes, b, b_bytes, cols, lut_a_val, lut_a_exp, a_shift, lut_b_val, lut_b_exp, b_shift,
                g_starts, g_lengths, a_val, a_exp, a_flag, b_val, b_exp, b_flag, window, a32, a_off, b32, b_off,
                b_any, a_e16, b_e16):
    """Decode one K panel of a GEMM through the plan's tables, in the kernel's layouts.

    a, b: [M, K * bytes] / [N, K * bytes] uint8 views of the operand containers; cols: the
    panel's K columns in evaluation order.  Fills a_val/a_exp [M, Kp], a_flag [M, G] and
    b_val/b_exp [blocks, Kp, BLOCK_N], b_flag [blocks, G, BLOCK_N] (lanes past N: zeros).
    With window > 0 (the plan's ``sum32_window``) also the int32 route's operands: a_off
    [M, G] / b_off [blocks, G, BLOCK_N] the largest exponent of each row (column) group,
    a32 / b32 the values times 2**-offset in float32, FLAG_WIDE in the flags of groups
    spanning more than the window, and b_any [blocks, G] the OR of a block's flags; a_e16 /
    b_e16 the exponents as int16 (EXP16_ZERO for zeros and specials)."""
    M = a.shape[0]
    N = b.shape[0]
    kp = len(cols)
    G = len(g_starts)
    for m in prange(M):
        for i in range(kp):
            ia = _load(a, m, cols[i], a_bytes) >> a_shift
            a_val[m, i] = lut_a_val[ia]
            e = lut_a_exp[ia]
            a_exp[m, i] = e
            a_e16[m, i] = np.int16(max(e, np.float32(EXP16_ZERO)))
        for g in range(G):
            i0, i1 = g_starts[g], g_starts[g] + g_lengths[g]
            f = 0
            for i in range(i0, i1):
                e = a_exp[m, i]
                f |= (FLAG_ZERO if e <= ZERO_EXP else 0) | (FLAG_SPECIAL if e < ZERO_EXP else 0)
            if window > 0:
                top, wide = _group_offset(a_exp[m, i0:i1], window)
                f |= wide
                a_off[m, g] = top
                scale = _bits_f64((1023 - SCALE32_BIAS - np.int64(top)) << 52)
                for i in range(i0, i1):
                    a32[m, i] = np.float32(a_val[m, i] * scale)
            a_flag[m, g] = f
    for blk in prange(b_val.shape[0]):
        n0 = blk * BLOCK_N
        nb = min(BLOCK_N, N - n0)
        top = np.empty(BLOCK_N, np.float32)
        low = np.empty(BLOCK_N, np.float32)
        scale = np.empty(BLOCK_N, np.float64)
        # K in slices of 64: each B row is read contiguously, the block written a few pages at a time
        for i0 in range(0, kp, 64):
            i1 = min(kp, i0 + 64)
            for j in range(nb):
                for i in range(i0, i1):
                    ib = _load(b, n0 + j, cols[i], b_bytes) >> b_shift
                    b_val[blk, i, j] = lut_b_val[ib]
                    e = lut_b_exp[ib]
                    b_exp[blk, i, j] = e
                    b_e16[blk, i, j] = np.int16(max(e, np.float32(EXP16_ZERO)))
            for i in range(i0, i1):
                for j in range(nb, BLOCK_N):
                    b_val[blk, i, j] = 0.0
                    b_exp[blk, i, j] = ZERO_EXP
                    b_e16[blk, i, j] = EXP16_ZERO
        for g in range(G):
            i0, i1 = g_starts[g], g_starts[g] + g_lengths[g]
            for j in range(BLOCK_N):
                b_flag[blk, g, j] = 0
            for i in range(i0, i1):
                for j in range(BLOCK_N):
                    e = b_exp[blk, i, j]
                    b_flag[blk, g, j] |= (FLAG_ZERO if e <= ZERO_EXP else 0) | (FLAG_SPECIAL if e < ZERO_EXP else 0)
            if window > 0:  # lanes innermost: the group's largest / smallest exponent per column
                for j in range(BLOCK_N):
                    top[j] = np.float32(ZERO_EXP)
                    low[j] = np.float32(-ZERO_EXP)
                for i in range(i0, i1):
                    for j in range(BLOCK_N):
                        e = b_exp[blk, i, j]
                        live = e > ZERO_EXP
                        top[j] = max(top[j], e) if live else top[j]
                        low[j] = min(low[j], e) if live else low[j]
                any_flag = 0
                for j in range(BLOCK_N):
                    empty = top[j] == np.float32(ZERO_EXP)
                    t = np.float32(0.0) if empty else top[j]
                    b_off[blk, g, j] = t
                    wide = FLAG_WIDE if (not empty and low[j] < t - window) else 0
                    b_flag[blk, g, j] |= wide
                    any_flag |= b_flag[blk, g, j]
                    scale[j] = _bits_f64((1023 - np.int64(t)) << 52)
                b_any[blk, g] = any_flag
                for i in range(i0, i1):
                    for j in range(BLOCK_N):
                        b32[blk, i, j] = np.float32(b_val[blk, i, j] * scale[j])
