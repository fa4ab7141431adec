"""Block-scaled MMA (Blackwell ``tcgen05.mma`` and RTX Blackwell ``mma.sync``): MXFP8 /
MXFP6 / MXFP4 with UE8M0 scales per 32 K elements, NVFP4 with UE4M3 scales per 16.

Each row of A (and column of B) carries one scale per block of ``scale_block`` K
elements: ``scale_a`` / ``scale_b`` are [N, K'/scale_block] bit patterns (uint8) of the
entry's scale format.  A NaN scale (UE8M0 0xFF, UE4M3 0x7F) makes the dot product NaN; a
zero UE4M3 scale zeroes its block; bit 7 of a UE4M3 scale is ignored (it has no sign).

FP4 operands of the k64 kinds are one E2M1 value per uint8 in the low nibble, [N, K'];
``packed=True`` (or a width of K'/2 that the scales imply) reads two per byte instead,
element 2i in the high nibble and 2i+1 in the low one (MMA-Sim's packing).

``mma`` is a plan path: it builds the paired-row block-scaled chain of every (row of A, column of B) and the one
interpreter (``plan.interpret``) runs it, as ``Instruction.dot_bits`` with scales does.  ``dot_bits`` is the
engine-level entry point the interpreter itself calls for a block-scaled node (``plan.block_scaled``, re-exported
here): it evaluates bits on a named engine, not a plan.

Example:
    >>> import numpy as np
    >>> from tcnumerics import blockscale
    >>> name = "blackwell.tcgen05.mma.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3"
    >>> a = np.full((1, 64), 0x2, np.uint8)                  # E2M1 1.0
    >>> s = np.array([[0x38, 0x38, 0x40, 0x00]], np.uint8)   # UE4M3 1, 1, 2, 0
    >>> d = blockscale.dot_bits(name, a, a, np.zeros(1, np.uint32), scale_a=s, scale_b=np.full((1, 4), 0x38, np.uint8))
    >>> float(d.view(np.float32)[0])                         # 16 + 16 + 32 + 0
    64.0
"""

from __future__ import annotations

import numpy as np

from .model import InstructionSpec
from .plan import interpret
from .plan.block_scaled import block_scaled_spec, dot_bits, pack_fp4, unpack_fp4
from .plan.nodes import PairedChain

__all__ = ["dot_bits", "mma", "unpack_fp4", "pack_fp4", "block_scaled_instructions"]


def block_scaled_instructions() -> list[str]:
    """Names of every block-scaled catalog entry.

    >>> "blackwell.tcgen05.mma.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0" in block_scaled_instructions()
    True
    """
    from .catalog import all_instructions

    return [s.name for s in all_instructions() if s.model.is_block_scaled]


def mma(name: "str | InstructionSpec", A, B, C=None, *, scale_a, scale_b) -> np.ndarray:
    """Value-level block-scaled ``D = (A * scale_a) @ (B * scale_b) + C``, run as a plan by the interpreter.

    ``A``: [M, K'] operand bits, ``B``: [K', N] operand bits, ``scale_a``: [M, K'/block],
    ``scale_b``: [K'/block, N] scale bits, ``C``: [M, N] float32 values or None.
    Returns float32 [M, N].  The plan: one ``PairedChain`` with block scales over the M x N pairs (row i of A
    with column j of B, chained over K from C[i, j] or +0), on the reference engine; its bits are
    ``dot_bits``' for each pair.

    >>> name = "blackwell.tcgen05.mma.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0"
    >>> A = np.full((2, 32), 0x38, np.uint8); B = np.full((32, 3), 0x38, np.uint8)   # E4M3 1.0
    >>> sa = np.array([[127], [128]], np.uint8); sb = np.full((1, 3), 127, np.uint8)  # UE8M0 1, 2 and 1
    >>> mma(name, A, B, np.ones((2, 3), np.float32), scale_a=sa, scale_b=sb).tolist()
    [[33.0, 33.0, 33.0], [65.0, 65.0, 65.0]]
    """
    spec = block_scaled_spec(name)
    A, B = np.asarray(A), np.asarray(B)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"A, B: expected [M, K] and [K, N] with equal K, got {A.shape} and {B.shape}")
    sa, sb = np.asarray(scale_a), np.asarray(scale_b)
    if sb.ndim != 2:
        raise ValueError(f"scale_b: expected a 2-D [K/block, N] array, got shape {sb.shape}")
    M, K = A.shape
    N = B.shape[1]
    c = np.zeros((M, N), np.uint32) if C is None else np.asarray(C, np.float32).view(np.uint32)
    if c.shape != (M, N):
        raise ValueError(f"C: expected shape ({M}, {N}), got {c.shape}")
    # pair (i, j) is row i * N + j: row i of A with column j of B, its scales likewise, from C[i, j]
    operands = {"A": np.repeat(A, N, axis=0), "B": np.tile(B.T, (M, 1)), "C_acc": c.reshape(-1),
                "scale_bits_a": np.repeat(sa, N, axis=0), "scale_bits_b": np.tile(sb.T, (M, 1))}
    rows = interpret.evaluate(PairedChain(spec, block_scaled=True), operands, "reference").bits
    return rows.reshape(M, N).view(np.float32)
