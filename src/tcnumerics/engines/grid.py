"""Every (m, n) dot product of a grid, for engines without a native GEMM (the reference, fast and CUDA engines' fallback)."""

from __future__ import annotations

from typing import Callable

import numpy as np


def grid_dot_bits(dot: Callable, spec, a_rows: np.ndarray, b_cols: np.ndarray, c: np.ndarray,
                  working_set: int = 1 << 22) -> np.ndarray:
    """Every (m, n) dot product of ``a_rows`` [M, K] and ``b_cols`` [N, K] with ``c`` [M, N].

    For engines without a native GEMM: ``dot(spec, a, b, c)`` evaluates [rows*N, K] operand
    copies built a block of rows at a time, so memory stays within ``working_set`` elements.

    >>> from tcnumerics.catalog import get_instruction
    >>> from tcnumerics.engines import reference
    >>> spec = get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")
    >>> ones = np.full((2, 16), 0x3F80, np.uint16)
    >>> grid_dot_bits(reference.dot_bits, spec, ones, ones[:1], np.zeros((2, 1), np.uint32)).tolist()
    [[1098907648], [1098907648]]
    """
    M, K = a_rows.shape
    N = b_cols.shape[0]
    out = np.empty((M, N), dtype=spec.d_format.container_dtype)
    rows = max(1, working_set // max(1, N * K))
    for m0 in range(0, M, rows):
        m1 = min(M, m0 + rows)
        a = np.repeat(a_rows[m0:m1], N, axis=0)
        b = np.tile(b_cols, (m1 - m0, 1))
        out[m0:m1] = dot(spec, a, b, c[m0:m1].reshape(-1)).reshape(m1 - m0, N)
    return out
