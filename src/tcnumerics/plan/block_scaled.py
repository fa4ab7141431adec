"""Block-scaled dot products on bit patterns: the engine-level entry of the MX / NVFP4 units.

The interpreter calls ``dot_bits`` for the block-scaled nodes (``PairedChain(block_scaled=True)``,
``BlockScaledChain``): it validates the bits, unpacks packed FP4 and hands the paired rows to an engine -- the
reference engine, the GPU engine for MX kinds, or the exact oracle.  It is not a plan path: it computes what one
node asks for.  ``tcnumerics.blockscale`` is its public face (the operand and scale layout is documented there);
results through a plan come from ``blockscale.mma``, ``Instruction.dot_bits(..., scale_a=, scale_b=)`` and the
``"mx"`` / ``"nvfp4"`` unit recipes of ``tcnumerics.torch``.  It lives here, under the interpreter, so that
``blockscale`` can build plans without an import circle.

>>> import numpy as np
>>> name = "blackwell.tcgen05.mma.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0"
>>> a = np.full((1, 32), 0x38, np.uint8)                  # E4M3 1.0
>>> d = dot_bits(name, a, a, np.zeros(1, np.uint32), scale_a=np.array([[128]], np.uint8),
...              scale_b=np.array([[127]], np.uint8))     # UE8M0 2 and 1
>>> float(d.view(np.float32)[0])
64.0
"""

from __future__ import annotations

import numpy as np

from ..bit_arrays import check_bits
from ..catalog import get_instruction
from ..model import InstructionSpec

__all__ = ["dot_bits", "unpack_fp4", "pack_fp4", "block_scaled_spec"]


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
    """One E2M1 per byte (low nibble) -> two per byte; the inverse of ``unpack_fp4``.

    >>> hex(int(pack_fp4(np.array([[2, 15]], np.uint8))[0, 0]))
    '0x2f'
    """
    v = np.asarray(values)
    if v.dtype != np.uint8 or v.shape[-1] % 2:
        raise ValueError(f"values: expected uint8 with an even last axis, got {v.dtype} {v.shape}")
    return ((v[..., 0::2] & 0xF) << 4 | (v[..., 1::2] & 0xF)).astype(np.uint8)


def block_scaled_spec(name: "str | InstructionSpec") -> InstructionSpec:
    """The catalogued block-scaled instruction ``name`` (a ValueError naming the argument if it is not one).

    >>> block_scaled_spec("blackwell.tcgen05.mma.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0").model.scale_block
    32
    """
    spec = get_instruction(name)
    if not spec.model.is_block_scaled:
        raise ValueError(f"instruction: {spec.name} is not block-scaled (blockscale.block_scaled_instructions() "
                         "lists those that are)")
    return spec


def dot_bits(name: "str | InstructionSpec", a, b, c, *, scale_a, scale_b, packed: bool | None = None,
             engine: str = "reference") -> np.ndarray:
    """Block-scaled dot products on bit patterns -- the engine-level entry point the interpreter calls.

    ``a``, ``b``: [N, K'] operand bits (K' a multiple of the instruction's K; FP4 of the
    k64 kinds one per byte, or packed, see ``tcnumerics.blockscale``); ``c``: [N] FP32 bits;
    ``scale_a``, ``scale_b``: [N, K'/scale_block] scale bits.  Returns [N] FP32 bits.
    ``engine="exact"`` evaluates with the exact oracle (``engines.oracle.scaled_dot_bits``);
    every other engine name evaluates with the reference engine (``"cuda"``: the GPU engine for MX kinds).

    This is what one plan node computes (``PairedChain(block_scaled=True)``, ``BlockScaledChain``), not a plan
    path of its own: ``blockscale.mma`` and ``Instruction.dot_bits(..., scale_a=, scale_b=)`` build the plan and
    the interpreter calls this.

    >>> name = "blackwell.tcgen05.mma.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3"
    >>> a = np.full((1, 64), 0x2, np.uint8)                                  # E2M1 1.0
    >>> s = np.array([[0x38, 0x38, 0x40, 0x00]], np.uint8)                   # UE4M3 1, 1, 2, 0
    >>> d = dot_bits(name, a, a, np.zeros(1, np.uint32), scale_a=s, scale_b=np.full((1, 4), 0x38, np.uint8))
    >>> float(d.view(np.float32)[0])                                         # 16 + 16 + 32 + 0
    64.0
    """
    spec = block_scaled_spec(name)
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
        from ..engines import oracle  # the exact oracle: slow (per element, in Python), for checks

        return oracle.scaled_dot_bits(spec, a, b, c, sa, sb)
    if engine != "reference":
        from ..engines import get_engine

        get_engine(engine)  # validates the name; the other engines evaluate block scaling by the reference
        if engine == "cuda":
            from ..engines import cuda

            if cuda.unsupported_reason(spec) is None:  # MX (power-of-two scales per group): on the GPU
                return cuda.dot_bits(spec, a, b, c, scale_a=sa, scale_b=sb)
            import warnings

            warnings.warn(f"engine='cuda': {spec.name} (block-scaled) runs on the CPU reference engine: "
                          f"{cuda.unsupported_reason(spec)}", RuntimeWarning, stacklevel=2)
    from ..engines import reference

    return reference.dot_bits(spec, a, b, c, scale_a=sa, scale_b=sb)
