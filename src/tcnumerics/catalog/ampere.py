"""Ampere (sm_80 / sm_86: A100, RTX 30) mma.sync instructions.

Published parameters (not measured here): MMA-Sim 2.1.1 (arXiv 2511.10909) and
Khattak & Mikaitis (arXiv 2512.07004), which agree: fraction bits kept F = 24; FP16/BF16
fuse 8 products per group (so k16 is two chained groups, C entering the first), TF32 4;
zero exponent -132 (FP32 output) / -20 (FP16 output); FP32 output RZ, FP16 output RNE.
FP64 m8n8k4 is a sequence of IEEE fused multiply-adds (RNE).  Integer: ``catalog/integer.py``.

``nv_model`` builds the NVIDIA fused datapath for the other NVIDIA catalog modules.

Example:
    >>> from tcnumerics import instruction
    >>> m = instruction("ampere.mma.m16n8k16.f32.bf16.bf16.f32").model
    >>> m.group_size, m.frac_bits, m.zero_exponent
    (8, 24, -132)
"""

from __future__ import annotations

from ..formats import Format
from ..model import InstructionSpec, UnitModel
from . import register

PUBLISHED = "published: MMA-Sim 2.1.1 (arXiv 2511.10909) and Khattak & Mikaitis (arXiv 2512.07004); not measured here"
FP64_PUBLISHED = ("published: sequential IEEE FP64 FMA, RNE (MMA-Sim 2.1.1, Khattak & Mikaitis); NaN payloads "
                  "as MMA-Sim's CPU FMA produces them (x86 rules); not measured here")
PTX_TYPES = {"f64": "fp64", "f32": "fp32", "f16": "fp16", "bf16": "bf16", "tf32": "tf32", "e4m3": "e4m3",
             "e5m2": "e5m2", "e3m2": "e3m2", "e2m3": "e2m3"}
NAN = {"f32": 0x7FFFFFFF, "f16": 0x7FFF}  # the canonical NaNs NVIDIA tensor cores write


def nv_model(a: "str | Format", b: "str | Format", c: str, d: str, *, group_size: int, frac_bits: int,
             zero_f32: int, zero_f16: int, e8m13: bool = False) -> UnitModel:
    """An NVIDIA fused datapath; the zero exponent and rounding follow D (FP32: RZ, FP16: RNE).

    ``a``, ``b``: PTX type names or Format objects; ``e8m13``: FP32 output cut to 13
    mantissa bits (Ada / Hopper FP8).
    """
    fmt = lambda x: PTX_TYPES[x] if isinstance(x, str) else x  # noqa: E731
    fp32_out = d == "f32"
    return UnitModel(a_format=fmt(a), b_format=fmt(b), c_format=fmt(c), d_format=fmt(d),
                     group_size=group_size, frac_bits=frac_bits,
                     zero_exponent=zero_f32 if fp32_out else zero_f16,
                     output_rounding="rz" if fp32_out else "rne",
                     output_mantissa_bits=13 if (e8m13 and fp32_out) else None, nan_bits=NAN[d])


def fp64_model(k: int) -> UnitModel:
    """Sequential IEEE FP64 fused multiply-adds (the FP64 mma units)."""
    return UnitModel(a_format="fp64", b_format="fp64", c_format="fp64", d_format="fp64", algorithm="fma_chain",
                     group_size=k, frac_bits=None, zero_exponent=None, output_rounding="rne", nan_policy="x86")


def register_sm80(arch: str, *, frac_bits: int, f16_group: int, tf32_group: int, zero_f32: int, zero_f16: int,
                  provenance: str) -> None:
    """The sm_75/sm_80 mma.sync floating-point shapes of one architecture."""
    kw = dict(frac_bits=frac_bits, zero_f32=zero_f32, zero_f16=zero_f16)
    for k in (8, 16):
        for d, c in (("f32", "f32"), ("f16", "f16"), ("f32", "f16"), ("f16", "f32")):
            prov = provenance if (d, c) in (("f32", "f32"), ("f16", "f16")) else (
                provenance + "; this D/C combination by analogy (not in MMA-Sim)")
            register(InstructionSpec(f"{arch}.mma.m16n8k{k}.{d}.f16.f16.{c}", k,
                                     nv_model("f16", "f16", c, d, group_size=f16_group, **kw), provenance=prov))
        register(InstructionSpec(f"{arch}.mma.m16n8k{k}.f32.bf16.bf16.f32", k,
                                 nv_model("bf16", "bf16", "f32", "f32", group_size=f16_group, **kw),
                                 provenance=provenance))
    for k in (4, 8):
        register(InstructionSpec(f"{arch}.mma.m16n8k{k}.f32.tf32.tf32.f32", k,
                                 nv_model("tf32", "tf32", "f32", "f32", group_size=tf32_group, **kw),
                                 provenance=provenance))
    register(InstructionSpec(f"{arch}.mma.m8n8k4.f64.f64.f64.f64", 4, fp64_model(4), provenance=FP64_PUBLISHED))


register_sm80("ampere", frac_bits=24, f16_group=8, tf32_group=4, zero_f32=-132, zero_f16=-20, provenance=PUBLISHED)
