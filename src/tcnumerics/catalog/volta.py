"""Volta (sm_70: V100) mma.sync m8n8k4 and wmma, FP16 operands.

Published parameters (not measured here): MMA-Sim 2.1.1 (arXiv 2511.10909) and Khattak &
Mikaitis (arXiv 2512.07004): four products fused per group (L = 4), F = 23 fraction bits
kept below the largest exponent (no guard bit: the V100 "1 - 2**-24" test gives 2**-23),
zero exponent -131 (FP32 output) / -19 (FP16 output); FP32 output RZ, FP16 output RNE.

``wmma`` m16n16k16 (and m32n8k16 / m8n32k16) is executed as a sequence of HMMA.884 steps
(Raihan, Goli & Aamodt, ISPASS 2019: each "set" of "steps" computes four-element dot
products): numerically the chain of four k4 groups in K order, each group's rounded
result the accumulator of the next.

Example:
    >>> from tcnumerics import instruction
    >>> w = instruction("volta.wmma.m16n16k16.f32.f16.f16.f32")
    >>> w.k, w.model.group_size, w.model.frac_bits
    (16, 4, 23)
"""

from __future__ import annotations

from ..model import InstructionSpec, UnitModel
from . import register

PUBLISHED = "published: MMA-Sim 2.1.1 (arXiv 2511.10909) and Khattak & Mikaitis (arXiv 2512.07004); not measured here"
RAIHAN = ("wmma as a sequence of m8n8k4 steps: Raihan, Goli & Aamodt, ISPASS 2019; step arithmetic "
          "from MMA-Sim 2.1.1 / Khattak & Mikaitis (not measured here)")
_FMT = {"f32": "fp32", "f16": "fp16"}
# d type -> (zero exponent, output rounding, canonical NaN)
_OUT = {"f32": (-131, "rz", 0x7FFFFFFF), "f16": (-19, "rne", 0x7FFF)}
FRAC_BITS = 23
GROUP_SIZE = 4


def volta_model(ctype: str, dtype: str) -> UnitModel:
    """The Volta FP16 datapath with C of ``ctype`` and D of ``dtype`` (PTX type names)."""
    zero_exponent, rounding, nan = _OUT[dtype]
    return UnitModel(a_format="fp16", b_format="fp16", c_format=_FMT[ctype], d_format=_FMT[dtype],
                     group_size=GROUP_SIZE, frac_bits=FRAC_BITS, zero_exponent=zero_exponent,
                     output_rounding=rounding, nan_bits=nan)


_COMBOS = (("f32", "f32"), ("f32", "f16"), ("f16", "f16"), ("f16", "f32"))  # (d, c)
for _d, _c in _COMBOS:
    _in_mmasim = (_d, _c) != ("f16", "f32")
    register(InstructionSpec(f"volta.mma.m8n8k4.{_d}.f16.f16.{_c}", 4, volta_model(_c, _d),
                             provenance=PUBLISHED if _in_mmasim else
                             PUBLISHED + "; this D/C combination by analogy (not in MMA-Sim)"))
    for _shape in ("m16n16k16", "m32n8k16", "m8n32k16"):
        register(InstructionSpec(f"volta.wmma.{_shape}.{_d}.f16.f16.{_c}", 16, volta_model(_c, _d),
                                 provenance=RAIHAN))
