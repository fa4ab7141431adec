"""The exact product of two floating-point matrices, rounded once to float64.

Every finite float is an integer times a power of two, so with ``q`` the lowest set bit
of a matrix, ``A = IA * 2**qa`` with integer ``IA``.  The integers are split into signed
16-bit limbs; each limb product matmul runs in float64 BLAS, exact because every partial
sum is an integer below 2**53 (K is processed in slices of at most 2**20); the limb
results are combined as Python integers and rounded once to float64 (correctly rounded
unless the result is subnormal).

Example:
    >>> import numpy as np
    >>> A = np.array([[2.0**60, 1.0, -2.0**60]]); B = np.array([[1.0], [2.0**-40], [1.0]])
    >>> float(exact_matmul(A, B)[0, 0]) == 2.0**-40
    True
    >>> float((A @ B)[0, 0])  # float64 BLAS loses it
    0.0
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["exact_matmul"]

_LIMB = 16
_K_SLICE = 1 << 20  # (2**16)**2 * 2**20 = 2**52 < 2**53: every slice's sums are exact in float64


def _limbs(x: np.ndarray) -> tuple[list[np.ndarray], int]:
    """Signed limbs L_j (float64 integers below 2**16) and q with x == sum_j L_j * 2**(16 j + q)."""
    nonzero = x[x != 0]
    if nonzero.size == 0:
        return [np.zeros_like(x)], 0
    mant, exp = np.frexp(np.abs(nonzero))
    ints = np.ldexp(mant, 53).astype(np.uint64)  # 53-bit significands
    low = (ints & (~ints + np.uint64(1))).astype(np.float64)  # lowest set bit
    q = int((exp - 53 + np.log2(low).astype(np.int64)).min())
    mag = np.ldexp(np.abs(x), -q)  # exact integers (below 2**1024)
    top = int(np.frexp(mag.max())[1])
    sign = np.sign(x)
    limbs = []
    for j in range(max(1, -(-top // _LIMB))):
        limbs.append(sign * np.fmod(np.floor(np.ldexp(mag, -_LIMB * j)), 2.0**_LIMB))
    return limbs, q


def exact_matmul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A @ B`` of finite float matrices, computed exactly and rounded once to float64."""
    A = np.asarray(A, np.float64)
    B = np.asarray(B, np.float64)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"A, B: expected [M, K] and [K, N] matrices, got {A.shape} and {B.shape}")
    if not (np.isfinite(A).all() and np.isfinite(B).all()):
        raise ValueError("A, B: the exact product needs finite operands")
    la, qa = _limbs(A)
    lb, qb = _limbs(B)
    M, K = A.shape
    N = B.shape[1]
    total = np.zeros((M, N), dtype=object)
    for i, a in enumerate(la):
        for j, b in enumerate(lb):
            part = np.zeros((M, N), dtype=object)
            for k0 in range(0, K, _K_SLICE):
                part += (a[:, k0:k0 + _K_SLICE] @ b[k0:k0 + _K_SLICE]).astype(np.int64).astype(object)
            total += part * (1 << (_LIMB * (i + j)))
    scale = qa + qb
    out = np.array([_to_float(int(v), scale) for v in total.ravel()], dtype=np.float64)
    return out.reshape(M, N)


def _to_float(value: int, scale: int) -> float:
    """``value * 2**scale`` rounded once to float64 (Python's int/float conversion rounds to nearest even)."""
    if value == 0:
        return 0.0
    shift = max(0, value.bit_length() - 64)  # keep 64 bits plus a sticky bit: one correct rounding
    if shift:
        sticky = 1 if value & ((1 << shift) - 1) else 0
        value = ((value >> shift) | sticky) if value > 0 else -(((-value) >> shift) | sticky)
    return math.ldexp(float(value), scale + shift)
