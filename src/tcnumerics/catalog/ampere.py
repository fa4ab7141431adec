"""Ampere (sm_80 / sm_86: A100, RTX 30) mma.sync instructions.

Published parameters (not measured here): MMA-Sim (mmasim 2.1.1, arXiv 2511.10909) and
Khattak & Mikaitis (arXiv 2512.07004), which agree: fraction bits kept F = 24; FP16/BF16
fuse 8 products per group (so k16 is two chained groups, C entering the first), TF32 4;
zero exponent -132 (FP32 output) / -20 (FP16 output); FP32 output RZ, FP16 output RNE.
"""

from __future__ import annotations

from ..model import InstructionSpec, UnitModel
from . import register

PUBLISHED = "published: MMA-Sim 2.1.1 (arXiv 2511.10909) and Khattak & Mikaitis (arXiv 2512.07004); not measured here"
_FMT = {"f32": "fp32", "f16": "fp16", "bf16": "bf16", "tf32": "tf32"}
_OUT = {"f32": (-132, "rz", 0x7FFFFFFF), "f16": (-20, "rne", 0x7FFF)}


def _model(atype: str, ctype: str, dtype: str, group_size: int) -> UnitModel:
    zero_exponent, rounding, nan = _OUT[dtype]
    return UnitModel(a_format=_FMT[atype], b_format=_FMT[atype], c_format=_FMT[ctype], d_format=_FMT[dtype],
                     group_size=group_size, frac_bits=24, zero_exponent=zero_exponent, output_rounding=rounding,
                     nan_bits=nan)


for _k in (8, 16):
    for _d, _c in (("f32", "f32"), ("f16", "f16"), ("f32", "f16"), ("f16", "f32")):
        register(InstructionSpec(f"ampere.mma.m16n8k{_k}.{_d}.f16.f16.{_c}", _k, _model("f16", _c, _d, 8),
                                 provenance=PUBLISHED))
    register(InstructionSpec(f"ampere.mma.m16n8k{_k}.f32.bf16.bf16.f32", _k, _model("bf16", "f32", "f32", 8),
                             provenance=PUBLISHED))
for _k in (4, 8):
    register(InstructionSpec(f"ampere.mma.m16n8k{_k}.f32.tf32.tf32.f32", _k, _model("tf32", "f32", "f32", 4),
                             provenance=PUBLISHED))
