"""Integer and binary mma.sync / wgmma for Turing, Ampere and Hopper.

PTX defines these instructions as exact integer arithmetic: products and their sum are
exact, the int32 accumulator wraps in two's complement, and ``.satfinite`` clamps the
result to [-2**31, 2**31 - 1].  Binary (``.b1``) instructions combine one-bit operands with
AND or XOR and add the population count.  Operand conventions: one element per uint8,
4-bit values in the low nibble (s4 two's complement, u4 unsigned), one bit in bit 0.
Hopper s8/u8 entries live in ``catalog/hopper.py`` (measured there).

Shapes per the PTX ISA (mma): sm_75 m8n8k16 (8-bit), m8n8k32 (4-bit), m8n8k128 (.xor.popc);
sm_80 adds m16n8k16/k32 (8-bit), m16n8k32/k64 (4-bit), m16n8k128/k256 and ``.and.popc``;
Hopper wgmma has m64nNk256 ``.b1 .and.popc``.

Example:
    >>> import numpy as np
    >>> from tcnumerics import instruction
    >>> popc = instruction("hopper.mma.m16n8k256.s32.b1.b1.s32.xor.popc")
    >>> a = np.ones(256, np.uint8); b = np.zeros(256, np.uint8)
    >>> int(popc.dot_bits(a, b, np.uint32(5)))
    261
"""

from __future__ import annotations

from ..model import InstructionSpec, UnitModel
from . import register

PTX = "PTX ISA 8.7 semantics (exact integer arithmetic; MMA-Sim has no integer models)"
# every Hopper s4/u4/b1 variant was captured by our probe (vectors/hopper/) and replays exactly;
# SASS shows s4/u4 emulated as two IMMA.S8/U8 and .xor.popc as two BMMA.AND.POPC
HOPPER_PENDING = ("measured on NVIDIA H200 (sm_90a), driver 580.159.04, CUDA 13.0: exact integer arithmetic "
                  "(s4/u4 lowered to IMMA 8-bit, .xor.popc to BMMA.AND.POPC)")

_INT8 = ("s8", "u8")
_INT4 = ("s4", "u4")
_SHAPES = {
    # arch: (8-bit shapes, 4-bit shapes, binary shapes, binary ops)
    "turing": ((("m8n8k16", 16),), (("m8n8k32", 32),), (("m8n8k128", 128),), ("xor",)),
    "ampere": ((("m8n8k16", 16), ("m16n8k16", 16), ("m16n8k32", 32)),
               (("m8n8k32", 32), ("m16n8k32", 32), ("m16n8k64", 64)),
               (("m8n8k128", 128), ("m16n8k128", 128), ("m16n8k256", 256)), ("and", "xor")),
    "hopper": ((),  # s8/u8: catalog/hopper.py
               (("m8n8k32", 32), ("m16n8k32", 32), ("m16n8k64", 64)),
               (("m8n8k128", 128), ("m16n8k128", 128), ("m16n8k256", 256)), ("and", "xor")),
}


def _integer(a: str, b: str, k: int, saturate: bool) -> UnitModel:
    return UnitModel(a_format=a, b_format=b, c_format="s32", d_format="s32", algorithm="integer",
                     group_size=k, frac_bits=None, zero_exponent=None, saturate=saturate)


def _binary(op: str, k: int) -> UnitModel:
    return UnitModel(a_format="b1", b_format="b1", c_format="s32", d_format="s32", algorithm="binary",
                     group_size=k, frac_bits=None, zero_exponent=None, bit_op=op)


for _arch, (_s8, _s4, _b1, _ops) in _SHAPES.items():
    _prov = HOPPER_PENDING if _arch == "hopper" else PTX
    for _shapes, _types in ((_s8, _INT8), (_s4, _INT4)):
        for _shape, _k in _shapes:
            for _a in _types:
                for _b in _types:
                    for _sat in ("", ".satfinite"):
                        register(InstructionSpec(f"{_arch}.mma.{_shape}{_sat}.s32.{_a}.{_b}.s32", _k,
                                                 _integer(_a, _b, _k, bool(_sat)), provenance=_prov))
    for _shape, _k in _b1:
        for _op in _ops:
            register(InstructionSpec(f"{_arch}.mma.{_shape}.s32.b1.b1.s32.{_op}.popc", _k, _binary(_op, _k),
                                     provenance=_prov))
register(InstructionSpec("hopper.wgmma.m64n8k256.s32.b1.b1.and.popc", 256, _binary("and", 256),
                         provenance=HOPPER_PENDING))
