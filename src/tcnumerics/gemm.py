"""GEMM-level composition: whole matrices through a chain of instructions.

Example:
    >>> import numpy as np, ml_dtypes
    >>> from tcnumerics.gemm import gemm
    >>> A = np.ones((2, 16), ml_dtypes.bfloat16); B = np.ones((16, 3), ml_dtypes.bfloat16)
    >>> gemm(A, B, instruction="hopper.wgmma.m64n8k16.f32.bf16.bf16", out_format="bf16").dtype
    dtype(bfloat16)
"""

from __future__ import annotations

import numpy as np

from .api import Instruction
from .catalog import get_instruction
from .formats import Format, IntFormat, Rounding, get_format
from .model import InstructionSpec

__all__ = ["gemm", "convert_output"]


def gemm(A, B, C=None, *, instruction: "str | InstructionSpec | Instruction", out_format: str | None = None,
         out_rounding: Rounding | str = Rounding.RNE, engine: str = "auto") -> np.ndarray:
    """Whole-matrix ``A @ B (+ C)`` by chaining ``instruction`` over K in order.

    The accumulator starts at C (or +0) in the instruction's accumulator format and each
    instruction's D is the next one's C; the result is converted to ``out_format``
    (default: the instruction's output format) with ``out_rounding``.

    >>> import numpy as np, ml_dtypes
    >>> A = np.full((4, 32), 0.5, ml_dtypes.float8_e4m3fn); B = np.full((32, 2), 2, ml_dtypes.float8_e4m3fn)
    >>> gemm(A, B, instruction="hopper.wgmma.m64n8k32.f32.e4m3.e4m3")[0].tolist()
    [32.0, 32.0]
    """
    inst = instruction if isinstance(instruction, Instruction) else Instruction(get_instruction(instruction), engine)
    A, B = np.asarray(A), np.asarray(B)
    if A.ndim != 2 or B.ndim != 2:
        raise ValueError(f"A, B: expected 2-D matrices, got shapes {A.shape} and {B.shape}")
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"A, B: inner dimensions differ: A is {A.shape}, B is {B.shape}")
    if A.shape[1] % inst.k:
        raise ValueError(f"A: K={A.shape[1]} is not a multiple of {inst.name}'s K={inst.k}")
    if C is not None and np.shape(C) != (A.shape[0], B.shape[1]):
        raise ValueError(f"C: expected shape {(A.shape[0], B.shape[1])}, got {np.shape(C)}")
    d = inst.mma(A, B, C, engine=engine if engine != "auto" else None)
    return convert_output(d, inst.d_format, out_format, out_rounding)


def convert_output(d: np.ndarray, d_format: Format, out_format: str | None, rounding: Rounding | str) -> np.ndarray:
    """Epilogue conversion of accumulator values to ``out_format`` (None keeps them)."""
    if out_format is None:
        return d
    out = get_format(out_format)
    if out == d_format:
        return d
    if isinstance(out, IntFormat):
        raise ValueError(f"out_format: cannot convert {d_format.name} results to integer format {out.name}")
    values = d.astype(np.float64) if not isinstance(d_format, IntFormat) else d.astype(np.float64)
    return out.to_array(out.from_float(values, rounding))
