"""Contrast models: what a naive simulator computes, for comparison with real units.

A "naive" matrix-multiply simulator evaluates ``d = c + sum_k a_k*b_k`` with ordinary
IEEE 754 arithmetic: every product rounded to the working format, then added to the
running sum one at a time in K order, each addition rounded again (round-to-nearest-even,
signed zeros and infinities per IEEE 754, a NaN result is the format's default quiet NaN).
Real tensor cores fuse the group and truncate instead; ``reproduce fused-vs-ieee`` shows
the difference.  Names: ``contrast.ieee.<working format>.<dtype>.<atype>.<btype>`` (C has the type of D).
K is 1 (one multiply and one add per step), so any K chains.

Example:
    >>> import numpy as np
    >>> from tcnumerics import instruction
    >>> naive = instruction("contrast.ieee.fp16.f16.f16.f16")
    >>> a = np.array([0x3C00, 0x1000], np.uint16)      # fp16 1.0 and 2**-11
    >>> b = np.array([0x3C00, 0x3C00], np.uint16)
    >>> hex(int(naive.dot_bits(a, b, np.uint16(0x1000))))   # 1 + 2**-11 rounds back to 1, twice
    '0x3c00'
"""

from __future__ import annotations

from ..model import InstructionSpec, UnitModel
from . import register

PROVENANCE = "contrast model: IEEE 754 per-operation arithmetic (RNE), not a hardware unit"
_FMT = {"f32": "fp32", "f16": "fp16", "bf16": "bf16", "tf32": "tf32", "e4m3": "e4m3", "e5m2": "e5m2"}

# (working format, d/c type, operand types)
_PIPELINES = [
    ("fp16", "f16", ("f16",)),
    ("bf16", "bf16", ("bf16",)),
    ("fp32", "f32", ("f16", "bf16", "tf32", "e4m3", "e5m2")),
]

for _work, _d, _operands in _PIPELINES:
    for _a in _operands:
        register(InstructionSpec(
            name=f"contrast.ieee.{_work}.{_d}.{_a}.{_a}", k=1,
            model=UnitModel(a_format=_FMT[_a], b_format=_FMT[_a], c_format=_FMT[_d], d_format=_FMT[_d],
                            algorithm="ieee_mul_add", group_size=1, frac_bits=None, zero_exponent=None,
                            output_rounding="rne"),
            provenance=PROVENANCE,
            notes="each product and each addition rounded separately (what a naive simulator computes)"))
