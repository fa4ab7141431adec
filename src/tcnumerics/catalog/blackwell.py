"""Blackwell: data-centre sm_100 (B200: mma.sync and tcgen05.mma) and RTX sm_120 (RTX 50: mma.sync).

Published parameters (not measured here), MMA-Sim 2.1.1 (arXiv 2511.10909) and Khattak &
Mikaitis (arXiv 2512.07004): F = 25 fraction bits; FP16/BF16 fuse 16 products, TF32 8,
FP8/FP6/FP4 32 (no 13-bit FP8 quirk); zero exponent -133 (FP32 output) / -21 (FP16 output).
Block scaling: ``kind::mxf8f6f4`` (k32) adds the two UE8M0 scale exponents to each
product's exponent; ``kind::mxf4`` / ``kind::mxf4nvf4`` (k64) sum the products exactly in
sub-groups of 16, scale each sub-group and fuse the four with C keeping F = 35 bits, zero
exponent -139.

Operand conventions (as MMA-Sim): FP6 values sit in bits 5:0 and FP4 values in bits 5:2 of
one uint8 per element for ``kind::f8f6f4`` / ``kind::mxf8f6f4``; the k64 FP4 kinds take one
E2M1 value per uint8 in the low nibble (or two per byte, see ``tcnumerics.blockscale``).
Names: ``blackwell.tcgen05.mma.kind::<kind>[.block<n>].<dtype>.<atype>.<btype>[.<scale type>]``
(tcgen05 carries its shape in the instruction descriptor; numerics do not depend on M, N),
``rtx-blackwell.mma.m16n8k32.kind::f8f6f4.<dtype>.<atype>.<btype>.<ctype>``.

Example:
    >>> from tcnumerics import instruction
    >>> m = instruction("blackwell.tcgen05.mma.kind::f8f6f4.f32.e2m1.e4m3").model
    >>> m.group_size, m.frac_bits, m.a_format.pad_bits
    (32, 25, 2)
"""

from __future__ import annotations

import numpy as np

from ..formats import FloatFormat
from ..model import InstructionSpec, UnitModel
from . import register
from .ampere import NAN, PTX_TYPES, PUBLISHED, fp64_model, nv_model, register_sm80

class ByteContainedE2M1(FloatFormat):
    """E2M1 in bits 5:2 of a byte (kind::f8f6f4); value-level arrays are ml_dtypes float4_e2m1fn."""

    def to_array(self, bits: np.ndarray) -> np.ndarray:
        import ml_dtypes

        return ((np.asarray(bits).astype(np.uint8) >> 2) & 0xF).view(ml_dtypes.float4_e2m1fn)

    def bits_of(self, values: np.ndarray, rounding="rne") -> np.ndarray:
        import ml_dtypes

        x = np.asarray(values)
        if x.dtype == np.dtype(ml_dtypes.float4_e2m1fn):
            return ((x.view(np.uint8) & 0xF) << 2).astype(np.uint8)
        return self.from_float(x, rounding)


# FP6/FP4 operands of kind::f8f6f4 travel one per byte: FP6 in bits 5:0, FP4 in bits 5:2
E2M1_IN_BYTE = ByteContainedE2M1("e2m1-b52", 2, 1, 1, specials="none", container_bits=8, pad_bits=2)
F8F6F4 = {"e4m3": "e4m3", "e5m2": "e5m2", "e3m2": "e3m2", "e2m3": "e2m3", "e2m1": E2M1_IN_BYTE}
TYPES = tuple(F8F6F4)
_KW = dict(frac_bits=25, zero_f32=-133, zero_f16=-21)
BLOCK = ("published: MMA-Sim 2.1.1 (arXiv 2511.10909), block-scaled models; PTX ISA 8.7 for the scale "
         "formats and block sizes; not measured here")


def _block_model(a, b, *, k: int, block: int, scale: str) -> UnitModel:
    if k == 32:  # mxf8f6f4: scale exponents join each product's exponent
        return UnitModel(a_format=a, b_format=b, c_format="fp32", d_format="fp32", algorithm="scaled_fused",
                         group_size=32, frac_bits=25, zero_exponent=-133, output_rounding="rz",
                         nan_bits=NAN["f32"], scale_block=block, scale_format=scale)
    return UnitModel(a_format="e2m1", b_format="e2m1", c_format="fp32", d_format="fp32",
                     algorithm="subgroup_scaled", group_size=64, subgroup_size=16, frac_bits=35,
                     zero_exponent=-139, output_rounding="rz", nan_bits=NAN["f32"], scale_block=block,
                     scale_format=scale)


# --- sm_100: mma.sync (the sm_75/sm_80 shapes), FP64, tcgen05.mma ---------------------------
register_sm80("blackwell", f16_group=16, tf32_group=8, provenance=PUBLISHED, **_KW)
for _k in (4, 8, 16):  # the sm_90 FP64 shapes
    register(InstructionSpec(f"blackwell.mma.m16n8k{_k}.f64.f64.f64.f64", _k, fp64_model(_k),
                             provenance="PTX ISA 8.7 (sm_90+ FP64 shapes): sequential IEEE FP64 FMA, RNE, "
                                        "by analogy with MMA-Sim's FP64 model; not measured here"))

# mma.sync FP8 on sm_100 is not native either: ptxas 12.8-13.5 emit the Hopper lowering (SASS of
# lab/device/published_ptxas.py: FP8->FP16 unpack, 2x HMMA.16816 (k32) / HMMA.1688 (k16) over the
# interleaved K halves, the second accumulating onto the first, then FADD / HADD2 of C)
_SASS100 = "ptxas 12.8-13.5 sm_100 SASS: FP8->FP16 unpack + 2x HMMA.{shape}.{d}, then {add}"
for _a in ("e4m3", "e5m2"):
    for _b in ("e4m3", "e5m2"):
        for _k, _shape in ((32, "16816"), (16, "1688")):
            _half = tuple(i for i in range(_k) if i % 4 < 2) + tuple(i for i in range(_k) if i % 4 >= 2)
            for _d in ("f32", "f16"):
                _sass = _SASS100.format(shape=_shape, d=_d.upper(), add="FADD" if _d == "f32" else "HADD2")
                _prov = f"{_sass}: the FP16 datapath (published parameters) over interleaved K halves, C added last"
                register(InstructionSpec(f"blackwell.mma.m16n8k{_k}.{_d}.{_a}.{_b}.{_d}", _k,
                                         nv_model("f16", "f16", _d, _d, group_size=_k // 2, **_KW), provenance=_prov,
                                         a_format=_a, b_format=_b, c_format=PTX_TYPES[_d], k_order=_half,
                                         chunk=_k // 2, c_entry="ieee_add"))

_T = "blackwell.tcgen05.mma"
register(InstructionSpec(f"{_T}.kind::tf32.f32.tf32.tf32", 8,
                         nv_model("tf32", "tf32", "f32", "f32", group_size=8, **_KW), provenance=PUBLISHED))
for _ab in ("f16", "bf16"):
    register(InstructionSpec(f"{_T}.kind::f16.f32.{_ab}.{_ab}", 16,
                             nv_model(_ab, _ab, "f32", "f32", group_size=16, **_KW), provenance=PUBLISHED))
register(InstructionSpec(f"{_T}.kind::f16.f16.f16.f16", 16,
                         nv_model("f16", "f16", "f16", "f16", group_size=16, **_KW), provenance=PUBLISHED))
for _d in ("f32", "f16"):
    for _a in TYPES:
        for _b in TYPES:
            register(InstructionSpec(f"{_T}.kind::f8f6f4.{_d}.{_a}.{_b}", 32,
                                     nv_model(F8F6F4[_a], F8F6F4[_b], _d, _d, group_size=32, **_KW),
                                     provenance=PUBLISHED))
for _a in TYPES:
    for _b in TYPES:
        register(InstructionSpec(f"{_T}.kind::mxf8f6f4.block32.f32.{_a}.{_b}.ue8m0", 32,
                                 _block_model(F8F6F4[_a], F8F6F4[_b], k=32, block=32, scale="ue8m0"),
                                 provenance=BLOCK))
register(InstructionSpec(f"{_T}.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0", 64,
                         _block_model(None, None, k=64, block=32, scale="ue8m0"), provenance=BLOCK))
register(InstructionSpec(f"{_T}.kind::mxf4nvf4.block32.f32.e2m1.e2m1.ue8m0", 64,
                         _block_model(None, None, k=64, block=32, scale="ue8m0"), provenance=BLOCK))
for _s in ("ue8m0", "ue4m3"):
    register(InstructionSpec(f"{_T}.kind::mxf4nvf4.block16.f32.e2m1.e2m1.{_s}", 64,
                             _block_model(None, None, k=64, block=16, scale=_s), provenance=BLOCK))

# --- sm_120 (RTX Blackwell): mma.sync ------------------------------------------------------
register_sm80("rtx-blackwell", f16_group=16, tf32_group=8, provenance=PUBLISHED, **_KW)
for _k in (16, 32):  # the sm_89 FP8 shapes, with Blackwell's F = 25
    for _d in ("f32", "f16"):
        for _a in ("e4m3", "e5m2"):
            for _b in ("e4m3", "e5m2"):
                register(InstructionSpec(f"rtx-blackwell.mma.m16n8k{_k}.{_d}.{_a}.{_b}.{_d}", _k,
                                         nv_model(_a, _b, _d, _d, group_size=32, **_KW), provenance=PUBLISHED))
for _d in ("f32", "f16"):
    for _a in TYPES:
        for _b in TYPES:
            register(InstructionSpec(f"rtx-blackwell.mma.m16n8k32.kind::f8f6f4.{_d}.{_a}.{_b}.{_d}", 32,
                                     nv_model(F8F6F4[_a], F8F6F4[_b], _d, _d, group_size=32, **_KW),
                                     provenance=PUBLISHED))
_R = "rtx-blackwell.mma"
for _a in TYPES:
    for _b in TYPES:
        register(InstructionSpec(f"{_R}.m16n8k32.kind::mxf8f6f4.block32.f32.{_a}.{_b}.f32.ue8m0", 32,
                                 _block_model(F8F6F4[_a], F8F6F4[_b], k=32, block=32, scale="ue8m0"),
                                 provenance=BLOCK))
register(InstructionSpec(f"{_R}.m16n8k64.kind::mxf4.block32.f32.e2m1.e2m1.f32.ue8m0", 64,
                         _block_model(None, None, k=64, block=32, scale="ue8m0"), provenance=BLOCK))
register(InstructionSpec(f"{_R}.m16n8k64.kind::mxf4nvf4.block32.f32.e2m1.e2m1.f32.ue8m0", 64,
                         _block_model(None, None, k=64, block=32, scale="ue8m0"), provenance=BLOCK))
for _s in ("ue8m0", "ue4m3"):
    register(InstructionSpec(f"{_R}.m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.{_s}", 64,
                             _block_model(None, None, k=64, block=16, scale=_s), provenance=BLOCK))
