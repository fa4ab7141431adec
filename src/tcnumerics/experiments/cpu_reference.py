"""The CPU baseline of Sun et al.: plain FP32 arithmetic, one rounding per operation.

Their reference ``D = A*B + C`` runs on the host in ``float``: for each output,
``tmp = 0; tmp += a_k * b_k`` in K order (each product and each sum rounded to nearest
even in FP32, no fused multiply-add), then ``d = tmp + c``.  numpy's float32 arithmetic
is IEEE binary32 with round-to-nearest-even, so the same sequence here gives the same bits.

Example:
    >>> import numpy as np
    >>> a = np.array([[1.0, 2.0**-24]], np.float32); b = np.ones((1, 2), np.float32)
    >>> float(fp32_dot(a, b, np.zeros(1, np.float32))[0])    # 1 + 2**-24 rounds to 1 (a tie, to even)
    1.0
"""

from __future__ import annotations

import numpy as np

__all__ = ["fp32_dot", "fp32_matmul"]


def fp32_dot(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Rows of ``sum_k a[:, k] * b[:, k]`` then ``+ c``, sequentially in FP32 (float32 out)."""
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"a, b: expected two [N, K] arrays of one shape, got {a.shape} and {b.shape}")
    acc = np.zeros(a.shape[0], np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(a.shape[1]):
            acc = acc + a[:, k] * b[:, k]
        return acc + np.asarray(c, np.float32)


def fp32_matmul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Batched ``A @ B`` ([..., M, K] x [..., K, N]) with the same sequential FP32 sums.

    >>> import numpy as np
    >>> fp32_matmul(np.ones((1, 2, 3), np.float32), np.ones((1, 3, 2), np.float32)).tolist()
    [[[3.0, 3.0], [3.0, 3.0]]]
    """
    A = np.asarray(A, np.float32)
    B = np.asarray(B, np.float32)
    if A.shape[-1] != B.shape[-2]:
        raise ValueError(f"A, B: inner dimensions differ: {A.shape} and {B.shape}")
    out = np.zeros(np.broadcast_shapes(A.shape[:-2], B.shape[:-2]) + (A.shape[-2], B.shape[-1]), np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(A.shape[-1]):
            out = out + A[..., :, k:k + 1] * B[..., k:k + 1, :]
    return out
