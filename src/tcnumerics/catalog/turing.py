"""Turing (sm_75: T4, RTX 20) mma.sync FP16 instructions.

Published parameters (not measured here): MMA-Sim 2.1.1 (arXiv 2511.10909) and Khattak &
Mikaitis (arXiv 2512.07004): m16n8k8 fuses 8 products (L = 8) with F = 24 fraction bits,
zero exponent -132 (FP32 output) / -20 (FP16 output), FP32 output RZ, FP16 output RNE.
The Volta-compatible m8n8k4 runs with Volta's parameters (L = 4, F = 23, -131 / -19).
wmma m16n16k16 is the chain of two k8 groups.  Integer entries: ``catalog/integer.py``.

Example:
    >>> from tcnumerics import instruction
    >>> instruction("turing.mma.m8n8k4.f32.f16.f16.f32").model.frac_bits
    23
"""

from __future__ import annotations

from ..model import InstructionSpec, UnitModel
from . import register
from .volta import volta_model

PUBLISHED = "published: MMA-Sim 2.1.1 (arXiv 2511.10909) and Khattak & Mikaitis (arXiv 2512.07004); not measured here"
_FMT = {"f32": "fp32", "f16": "fp16"}
_OUT = {"f32": (-132, "rz", 0x7FFFFFFF), "f16": (-20, "rne", 0x7FFF)}


def turing_model(ctype: str, dtype: str) -> UnitModel:
    zero_exponent, rounding, nan = _OUT[dtype]
    return UnitModel(a_format="fp16", b_format="fp16", c_format=_FMT[ctype], d_format=_FMT[dtype],
                     group_size=8, frac_bits=24, zero_exponent=zero_exponent, output_rounding=rounding,
                     nan_bits=nan)


for _d, _c in (("f32", "f32"), ("f16", "f16"), ("f32", "f16"), ("f16", "f32")):
    _in_mmasim = (_d, _c) in (("f32", "f32"), ("f16", "f16"))
    _prov = PUBLISHED if _in_mmasim else PUBLISHED + "; this D/C combination by analogy (not in MMA-Sim)"
    register(InstructionSpec(f"turing.mma.m16n8k8.{_d}.f16.f16.{_c}", 8, turing_model(_c, _d), provenance=_prov))
    register(InstructionSpec(f"turing.wmma.m16n16k16.{_d}.f16.f16.{_c}", 16, turing_model(_c, _d),
                             provenance=PUBLISHED + "; wmma as chained k8 groups"))
    _vprov = (PUBLISHED if (_d, _c) != ("f16", "f32") else PUBLISHED + "; this D/C combination by analogy")
    register(InstructionSpec(f"turing.mma.m8n8k4.{_d}.f16.f16.{_c}", 4, volta_model(_c, _d),
                             provenance=_vprov + " (Volta parameters on Turing)"))
