"""The semiring fast engine: numba kernels, parallel over output rows, bit-identical to the reference.

The kernels are compiled serial and release the GIL (``nogil=True``); the wrappers hand
blocks of output rows to a pool of threads, one per core.  (numba's ``parallel=True``
would do the same but doubles the first-use compile time, which every fresh CI run pays.)

Kernels work on exact float64 values of the operands (every format of at most 32 bits is
exact in float64) and return exact float64 results that the shared numpy finishing step
(:func:`tcnumerics.semiring.reference.round_pairs`, ``FloatFormat.from_float``) turns into
bits, so the one rounding of the selecting operations is written once.

* :func:`min_select` -- min over k of ``a ⊗ b`` for ⊗ in plus / mul / max, loops ordered
  i-k-j so the inner loop runs along contiguous rows and vectorises.  The max-type
  operations run on it through negation: ``max(x) = -min(-x)``, ``-(a + b) = (-a) + (-b)``,
  ``-(a * b) = (-a) * b`` and ``-min(a, b) = max(-a, -b)``.
* :func:`norm_matrix` / :func:`norm_pairs` -- plus-norm through the fused truncating group.
* :func:`or_and` -- boolean product.

Importing this module compiles nothing; each kernel compiles (or loads from numba's
cache) on first use.

Example:
    >>> import numpy as np
    >>> from tcnumerics.semiring.fast import min_select, PLUS
    >>> A = np.array([[0.0, 1.0], [np.inf, 0.0]]); B = np.array([[0.0, 2.0], [5.0, 0.0]])
    >>> hi, lo = min_select(A, B, np.full((2, 2), np.inf), PLUS)
    >>> hi.tolist()
    [[0.0, 1.0], [5.0, 0.0]]
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

__all__ = ["PLUS", "PLUS_TWO_SUM", "MUL", "MAX", "ROUNDING_CODES", "OVERFLOW_CODES", "min_select", "or_and",
           "norm_matrix", "norm_pairs", "round_scaled", "floor_scaled_square"]

# ⊗ of the minimising kernel.  PLUS_TWO_SUM keeps the exact remainder of sums that need
# more than 53 bits (operands wider than FP16); PLUS assumes every sum is exact in float64.
PLUS, PLUS_TWO_SUM, MUL, MAX = 0, 1, 2, 3
ROUNDING_CODES = {"rne": 0, "rna": 1, "rz": 2, "ru": 3, "rd": 4, "rto": 5}
OVERFLOW_CODES = {"inf": 0, "ieee": 1, "saturate": 2}


def _row_blocks(M: int, block) -> None:
    """Call ``block(r0, r1)`` over blocks of the M output rows, one thread per core."""
    threads = min(os.cpu_count() or 1, max(1, M // 4))
    bounds = np.linspace(0, M, threads + 1).astype(int)
    if threads == 1:
        block(0, M)
        return
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda t: block(bounds[t], bounds[t + 1]), range(threads)))


@njit(cache=True, nogil=True)
def _min_select_rows(A, B, hi, lo, combine):
    M, K = A.shape
    N = B.shape[1]
    for i in range(M):
        h = hi[i]
        lo_row = lo[i]
        for k in range(K):
            a = A[i, k]
            b = B[k]
            # a NaN term, or a NaN already held, wins: (t < h) is False for NaN on either side,
            # and (t != t) catches a NaN term
            if combine == PLUS:
                for j in range(N):
                    t = a + b[j]
                    h[j] = t if (t < h[j]) | (t != t) else h[j]
            elif combine == MUL:
                for j in range(N):
                    t = a * b[j]
                    h[j] = t if (t < h[j]) | (t != t) else h[j]
            elif combine == MAX:
                for j in range(N):
                    bj = b[j]
                    t = bj if (bj > a) | (bj != bj) else a
                    h[j] = t if (t < h[j]) | (t != t) else h[j]
            else:  # PLUS_TWO_SUM: order by (hi, lo), hi the float64 nearest the exact sum
                for j in range(N):
                    bj = b[j]
                    t = a + bj
                    bv = t - a
                    r = (a - (t - bv)) + (bj - bv)
                    if not math.isfinite(t):
                        r = 0.0
                    better = (t < h[j]) | ((t == h[j]) & (r < lo_row[j])) | (t != t)
                    if better:
                        h[j] = t
                        lo_row[j] = r


def min_select(A: np.ndarray, B: np.ndarray, C: np.ndarray, combine: int) -> tuple[np.ndarray, np.ndarray]:
    """``min(C[i,j], min_k A[i,k] ⊗ B[k,j])`` as exact pairs ``(hi, lo)``; NaN is sticky.

    ``A`` [M, K], ``B`` [K, N], ``C`` [M, N] float64 (``+inf`` where there is no C).
    """
    A = np.ascontiguousarray(A, np.float64)
    B = np.ascontiguousarray(B, np.float64)
    hi = np.array(C, dtype=np.float64, order="C")
    lo = np.zeros(hi.shape)
    _row_blocks(len(hi), lambda r0, r1: _min_select_rows(A[r0:r1], B, hi[r0:r1], lo[r0:r1], combine))
    return hi, lo


@njit(cache=True, nogil=True)
def _or_and_rows(A, B, out):
    M, K = A.shape
    N = B.shape[1]
    for i in range(M):
        o = out[i]
        for k in range(K):
            if A[i, k]:
                b = B[k]
                for j in range(N):
                    o[j] |= b[j]


def or_and(A: np.ndarray, B: np.ndarray, C: np.ndarray) -> np.ndarray:
    """``C[i,j] | OR_k (A[i,k] & B[k,j])`` on uint8 0/1 arrays."""
    A = np.ascontiguousarray(A, np.uint8)
    B = np.ascontiguousarray(B, np.uint8)
    out = np.array(C, dtype=np.uint8, order="C")
    _row_blocks(len(out), lambda r0, r1: _or_and_rows(A[r0:r1], B, out[r0:r1]))
    return out


@njit(cache=True)
def round_scaled(total, q, p, emin, max_finite, mode, overflow):
    """The float64 value of ``total * 2**q`` (int64 total) rounded to a format of ``p`` fraction
    bits and minimum normal exponent ``emin``; overflow beyond ``max_finite`` per ``overflow``
    (0 inf, 1 IEEE for the mode, 2 saturate).  A zero result is +0."""
    if total == 0:
        return 0.0
    negative = total < 0
    mag = -total if negative else total
    nbits = 0
    t = mag
    while t:
        nbits += 1
        t >>= 1
    quantum = max(q + nbits - 1 - p, emin - p)
    shift = quantum - q
    if shift <= 0:
        value = math.ldexp(float(mag), q)  # mag < 2**(p+1): exact
    else:
        if shift >= 64:
            trunc = 0
            rem = mag
            above_half = False
            at_half = False
        else:
            trunc = mag >> shift
            rem = mag - (trunc << shift)
            half = 1 << (shift - 1)
            above_half = rem > half
            at_half = rem == half
        inexact = rem != 0
        if mode == 0:  # RNE
            up = above_half or (at_half and (trunc & 1) == 1)
        elif mode == 1:  # RNA
            up = above_half or at_half
        elif mode == 3:  # RU
            up = inexact and not negative
        elif mode == 4:  # RD
            up = inexact and negative
        else:  # RZ, RTO
            up = False
        sig = trunc + (1 if up else 0)
        if mode == 5 and inexact:
            sig |= 1
        value = math.ldexp(float(sig), quantum)
    if value > max_finite:
        if overflow == 0:
            value = math.inf
        elif overflow == 2:
            value = max_finite
        else:
            to_inf = mode == 0 or mode == 1 or (mode == 3 and not negative) or (mode == 4 and negative)
            value = math.inf if to_inf else max_finite
    if value == 0.0:
        return 0.0
    return -value if negative else value


@njit(cache=True)
def floor_scaled_square(d, scale):
    """``floor(d*d*scale)`` exactly, for a power-of-two ``scale`` with ``d*d*scale < 2**53``.

    ``d*d = sq + err`` exactly (Dekker's product with Veltkamp's split), and ``sq*scale``
    lies on a float64 grid that contains the integers, so only an integral ``sq*scale``
    with a negative ``err`` floors differently from ``sq*scale`` itself.
    """
    sq = d * d
    split = 134217729.0 * d  # 2**27 + 1
    d_hi = split - (split - d)
    d_lo = d - d_hi
    err = ((d_hi * d_hi - sq) + 2.0 * d_hi * d_lo) + d_lo * d_lo
    scaled = sq * scale
    f = math.floor(scaled)
    # branch-free (the loop vectorises): step down where the exact square lies just below an integer
    return f - ((f == scaled) & (err < 0.0))


@njit(cache=True)
def _norm_cell(a, b, c, group, frac_bits, e_zero, has_e_zero, c_emin, d_emin, p, emin, max_finite, mode,
               overflow):
    """One plus-norm output through the fused truncating group model (see reference.norm_group)."""
    K = a.shape[0]
    acc = c
    acc_emin = c_emin
    for g0 in range(0, K, group):
        g1 = min(K, g0 + group)
        nan = acc != acc
        pos_inf = acc == math.inf
        neg_inf = acc == -math.inf
        has_zero = acc == 0.0
        max_abs = 0.0
        for k in range(g0, g1):
            d = a[k] - b[k]  # exact: the caller checked the operand formats
            if d != d:
                nan = True  # a NaN operand, or inf - inf of like signs
            elif math.isinf(d):
                pos_inf = True
            elif d == 0.0:
                has_zero = True
            else:
                max_abs = max(max_abs, abs(d))
        if nan or (pos_inf and neg_inf):
            acc = math.nan
        elif pos_inf:
            acc = math.inf
        elif neg_inf:
            acc = -math.inf
        else:
            have = False
            e_max = 0
            if max_abs > 0.0:
                e_max = 2 * (math.frexp(max_abs)[1] - 1)  # the largest square's exponent
                have = True
            if acc != 0.0:
                e_c = max(math.frexp(abs(acc))[1] - 1, acc_emin)
                e_max = max(e_max, e_c) if have else e_c
                have = True
            if has_zero and has_e_zero:
                e_max = max(e_max, e_zero) if have else e_zero
                have = True
            if not have:
                acc = 0.0
            else:
                q = e_max - frac_bits
                scale = math.ldexp(1.0, -q)
                # each truncated term is an integer below 2**(frac_bits + 3): a float64 sum of a
                # group of them is exact
                terms = 0.0
                for k in range(g0, g1):
                    terms += floor_scaled_square(a[k] - b[k], scale)
                total = np.int64(acc * scale) + np.int64(terms)  # C truncated toward zero
                acc = round_scaled(total, q, p, emin, max_finite, mode, overflow)
        acc_emin = d_emin
    return acc


@njit(cache=True, nogil=True)
def _norm_rows(A, B, C, out, group, frac_bits, e_zero, has_e_zero, c_emin, d_emin, p, emin, max_finite, mode,
               overflow):
    """_norm_cell for every output of a block of rows, reorganised so the inner loops run along
    contiguous rows of B and vectorise: per group, one pass finds each output's largest
    difference, then one pass sums the truncated squares."""
    M, K = A.shape
    N = B.shape[1]
    max_abs = np.empty(N)
    has_zero = np.empty(N, np.bool_)
    done = np.empty(N, np.bool_)
    scale = np.empty(N)
    quantum = np.empty(N, np.int64)
    terms = np.empty(N)
    for i in range(M):
        acc = out[i]
        acc[:] = C[i]
        acc_emin = c_emin
        for g0 in range(0, K, group):
            g1 = min(K, g0 + group)
            max_abs[:] = 0.0
            has_zero[:] = False
            for k in range(g0, g1):
                a = A[i, k]
                b = B[k]
                for j in range(N):
                    d = abs(a - b[j])
                    max_abs[j] = d if (d > max_abs[j]) | (d != d) else max_abs[j]  # NaN sticks
                    has_zero[j] |= d == 0.0
            for j in range(N):
                m = max_abs[j]
                c = acc[j]
                done[j] = True
                scale[j] = 0.0
                if m != m or c != c or (m == math.inf and c == -math.inf):
                    acc[j] = math.nan  # a NaN operand, inf - inf of like signs, or +inf + -inf
                elif m == math.inf or c == math.inf:
                    acc[j] = math.inf
                elif c == -math.inf:
                    acc[j] = -math.inf
                else:
                    have = False
                    e_max = 0
                    if m > 0.0:
                        e_max = 2 * (math.frexp(m)[1] - 1)
                        have = True
                    if c != 0.0:
                        e_c = max(math.frexp(abs(c))[1] - 1, acc_emin)
                        e_max = max(e_max, e_c) if have else e_c
                        have = True
                    if (has_zero[j] or c == 0.0) and has_e_zero:
                        e_max = max(e_max, e_zero) if have else e_zero
                        have = True
                    if not have:
                        acc[j] = 0.0
                    else:
                        quantum[j] = e_max - frac_bits
                        scale[j] = math.ldexp(1.0, frac_bits - e_max)
                        done[j] = False
            terms[:] = 0.0
            for k in range(g0, g1):
                a = A[i, k]
                b = B[k]
                for j in range(N):
                    terms[j] += floor_scaled_square(a - b[j], scale[j])
            for j in range(N):
                if not done[j]:
                    total = np.int64(acc[j] * scale[j]) + np.int64(terms[j])  # C truncated toward zero
                    acc[j] = round_scaled(total, quantum[j], p, emin, max_finite, mode, overflow)
            acc_emin = d_emin


@njit(cache=True, nogil=True)
def _norm_pair_rows(a, b, c, out, group, frac_bits, e_zero, has_e_zero, c_emin, d_emin, p, emin, max_finite,
                    mode, overflow):
    for n in range(a.shape[0]):
        out[n] = _norm_cell(a[n], b[n], c[n], group, frac_bits, e_zero, has_e_zero, c_emin, d_emin, p, emin,
                            max_finite, mode, overflow)


def norm_matrix(A: np.ndarray, B: np.ndarray, C: np.ndarray, *params) -> np.ndarray:
    """plus-norm of ``A`` [M, K] and ``B`` [K, N] with ``C`` [M, N]: d values.

    ``params``: group_size, frac_bits, zero exponent, whether there is one, C's and D's
    minimum normal exponents, the output's fraction bits, minimum normal exponent and
    largest finite value, and the ROUNDING_CODES / OVERFLOW_CODES of its rounding.
    """
    A, B, C = (np.ascontiguousarray(x, np.float64) for x in (A, B, C))
    out = np.empty((A.shape[0], B.shape[1]))
    _row_blocks(len(out), lambda r0, r1: _norm_rows(A[r0:r1], B, C[r0:r1], out[r0:r1], *params))
    return out


def norm_pairs(a: np.ndarray, b: np.ndarray, c: np.ndarray, *params) -> np.ndarray:
    """plus-norm of row pairs ``a[n]``, ``b[n]`` [N, K] with ``c`` [N]: d values (``params`` as norm_matrix)."""
    a, b, c = (np.ascontiguousarray(x, np.float64) for x in (a, b, c))
    out = np.empty(a.shape[0])
    _row_blocks(len(out), lambda r0, r1: _norm_pair_rows(a[r0:r1], b[r0:r1], c[r0:r1], out[r0:r1], *params))
    return out
