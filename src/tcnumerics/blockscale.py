"""Block-scaled MMA (Blackwell ``tcgen05.mma`` and RTX Blackwell ``mma.sync``): MXFP8 /
MXFP6 / MXFP4 with UE8M0 scales per 32 K elements, NVFP4 with UE4M3 scales per 16.

Each row of A (and column of B) carries one scale per block of ``scale_block`` K
elements: ``scale_a`` / ``scale_b`` are [N, K'/scale_block] bit patterns (uint8) of the
entry's scale format.  A NaN scale (UE8M0 0xFF, UE4M3 0x7F) makes the dot product NaN; a
zero UE4M3 scale zeroes its block; bit 7 of a UE4M3 scale is ignored (it has no sign).

FP4 operands of the k64 kinds are one E2M1 value per uint8 in the low nibble, [N, K'];
``packed=True`` (or a width of K'/2 that the scales imply) reads two per byte instead,
element 2i in the high nibble and 2i+1 in the low one (MMA-Sim's packing).

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

from .bit_arrays import check_bits
from .catalog import get_instruction
from .formats import FloatFormat
from .model import InstructionSpec

__all__ = ["dot_bits", "mma", "unpack_fp4", "pack_fp4", "block_scaled_instructions"]


def block_scaled_instructions() -> list[str]:
    """Names of every block-scaled catalog entry."""
    from .catalog import all_instructions

    return [s.name for s in all_instructions() if s.model.is_block_scaled]


def unpack_fp4(packed: np.ndarray) -> np.ndarray:
    """Two E2M1 values per byte -> one per byte (element 2i from the high nibble).

    >>> unpack_fp4(np.array([[0x2F]], np.uint8)).tolist()
    [[2, 15]]
    """
    p = np.asarray(packed)
    if p.dtype != np.uint8:
        raise TypeError(f"packed: expected uint8 bytes, got dtype {p.dtype}")
    out = np.empty(p.shape[:-1] + (p.shape[-1] * 2,), np.uint8)
    out[..., 0::2] = p >> 4
    out[..., 1::2] = p & 0xF
    return out


def pack_fp4(values: np.ndarray) -> np.ndarray:
    """One E2M1 per byte (low nibble) -> two per byte; the inverse of ``unpack_fp4``."""
    v = np.asarray(values)
    if v.dtype != np.uint8 or v.shape[-1] % 2:
        raise ValueError(f"values: expected uint8 with an even last axis, got {v.dtype} {v.shape}")
    return ((v[..., 0::2] & 0xF) << 4 | (v[..., 1::2] & 0xF)).astype(np.uint8)


def _spec(name) -> InstructionSpec:
    spec = get_instruction(name)
    if not spec.model.is_block_scaled:
        raise ValueError(f"instruction: {spec.name} is not block-scaled (blockscale.block_scaled_instructions() "
                         "lists those that are)")
    return spec


def dot_bits(name, a, b, c, *, scale_a, scale_b, packed: bool | None = None, engine: str = "reference") -> np.ndarray:
    """Block-scaled dot products on bit patterns.

    ``a``, ``b``: [N, K'] operand bits (K' a multiple of the instruction's K; FP4 of the
    k64 kinds one per byte, or packed, see the module doc); ``c``: [N] FP32 bits;
    ``scale_a``, ``scale_b``: [N, K'/scale_block] scale bits.  Returns [N] FP32 bits.
    ``engine="exact"`` evaluates with the exact oracle (``engines.oracle.scaled_dot_bits``);
    every other engine name evaluates with the reference engine.
    """
    spec = _spec(name)
    model = spec.model
    sa = check_bits("scale_a", scale_a, model.scale_format, ndim=2)
    sb = check_bits("scale_b", scale_b, model.scale_format, ndim=2)
    if sa.shape != sb.shape:
        raise ValueError(f"scale_a, scale_b: shapes differ: {sa.shape} vs {sb.shape}")
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"a, b: expected 2-D [N, K] arrays, got shapes {a.shape} and {b.shape}")
    k_total = sa.shape[1] * model.scale_block
    fp4_kind = model.algorithm == "subgroup_scaled"
    if packed is None:
        packed = fp4_kind and a.shape[1] * 2 == k_total and b.shape[1] * 2 == k_total
    if packed:
        if not fp4_kind:
            raise ValueError(f"packed: {spec.name} does not take packed FP4 operands")
        a, b = unpack_fp4(check_bits("a", a, model.a_format)), unpack_fp4(check_bits("b", b, model.b_format))
    a = check_bits("a", a, spec.a_format)
    b = check_bits("b", b, spec.b_format)
    c = check_bits("c", c, spec.c_format, ndim=1)
    if a.shape != b.shape:
        raise ValueError(f"a, b: shapes differ: {a.shape} vs {b.shape}")
    if a.shape[1] == 0 or a.shape[1] % spec.k:
        raise ValueError(f"a: K={a.shape[1]} is not a positive multiple of {spec.name}'s K={spec.k}")
    if sa.shape != (a.shape[0], a.shape[1] // model.scale_block):
        raise ValueError(f"scale_a: expected shape ({a.shape[0]}, {a.shape[1] // model.scale_block}) "
                         f"(one scale per {model.scale_block} K elements), got {sa.shape}")
    if c.shape != (a.shape[0],):
        raise ValueError(f"c: expected shape ({a.shape[0]},) to match a's N, got {c.shape}")
    if engine == "exact":
        from .engines import oracle  # the exact oracle: slow (per element, in Python), for checks

        return oracle.scaled_dot_bits(spec, a, b, c, sa, sb)
    if engine != "reference":
        from .engines import get_engine

        get_engine(engine)  # validates the name; the other engines evaluate block scaling by the reference
        if engine == "cuda":
            from .engines import cuda

            if cuda.unsupported_reason(spec) is None:  # MX (power-of-two scales per group): on the GPU
                return cuda.dot_bits(spec, a, b, c, scale_a=sa, scale_b=sb)
            import warnings

            warnings.warn(f"engine='cuda': {spec.name} (block-scaled) runs on the CPU reference engine: "
                          f"{cuda.unsupported_reason(spec)}", RuntimeWarning, stacklevel=2)
    from .engines import reference

    return reference.dot_bits(spec, a, b, c, scale_a=sa, scale_b=sb)


def mma(name, A, B, C=None, *, scale_a, scale_b) -> np.ndarray:
    """Value-level block-scaled ``D = (A * scale_a) @ (B * scale_b) + C``.

    ``A``: [M, K'] operand bits, ``B``: [K', N] operand bits, ``scale_a``: [M, K'/block],
    ``scale_b``: [K'/block, N] scale bits, ``C``: [M, N] float32 values or None.
    Returns float32 [M, N].
    """
    spec = _spec(name)
    A, B = np.asarray(A), np.asarray(B)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"A, B: expected [M, K] and [K, N] with equal K, got {A.shape} and {B.shape}")
    sa, sb = np.asarray(scale_a), np.asarray(scale_b)
    if sb.ndim != 2:
        raise ValueError(f"scale_b: expected a 2-D [K/block, N] array, got shape {sb.shape}")
    M, K = A.shape
    N = B.shape[1]
    c_fmt = spec.c_format
    assert isinstance(c_fmt, FloatFormat)
    c = np.zeros((M, N), np.uint32) if C is None else np.asarray(C, np.float32).view(np.uint32)
    if c.shape != (M, N):
        raise ValueError(f"C: expected shape ({M}, {N}), got {c.shape}")
    rows = dot_bits(spec, np.repeat(A, N, axis=0), np.tile(B.T, (M, 1)), c.reshape(-1),
                    scale_a=np.repeat(sa, N, axis=0), scale_b=np.tile(sb.T, (M, 1)))
    return rows.reshape(M, N).view(np.float32)
