"""Ada Lovelace (sm_89: L4, L40, RTX 40) mma.sync instructions.

Published parameters (not measured here): MMA-Sim 2.1.1 (arXiv 2511.10909) and Khattak &
Mikaitis (arXiv 2512.07004): as Ampere (F = 24; FP16/BF16 L = 8, TF32 L = 4; zero exponent
-132 / -20), and the sm_89 FP8 instructions (m16n8k32, m16n8k16, E4M3/E5M2 in any
combination) fuse 16 products with only F = 13 fraction bits; their FP32 output is cut to
13 mantissa bits (E8M13, RZ), FP16 output RNE.

Example:
    >>> from tcnumerics import instruction
    >>> m = instruction("ada.mma.m16n8k32.f32.e4m3.e4m3.f32").model
    >>> m.group_size, m.frac_bits, m.output_mantissa_bits
    (16, 13, 13)
"""

from __future__ import annotations

from ..model import InstructionSpec
from . import register
from .ampere import PUBLISHED, nv_model, register_sm80

register_sm80("ada", frac_bits=24, f16_group=8, tf32_group=4, zero_f32=-132, zero_f16=-20, provenance=PUBLISHED)

for _k in (16, 32):
    for _d in ("f32", "f16"):
        for _a in ("e4m3", "e5m2"):
            for _b in ("e4m3", "e5m2"):
                register(InstructionSpec(
                    f"ada.mma.m16n8k{_k}.{_d}.{_a}.{_b}.{_d}", _k,
                    nv_model(_a, _b, _d, _d, group_size=16, frac_bits=13, zero_f32=-132, zero_f16=-20, e8m13=True),
                    provenance=PUBLISHED + " (FP8: F = 13, FP32 output E8M13)"))
