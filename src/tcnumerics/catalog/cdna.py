"""AMD CDNA1-3 (MI100, MI200, MI300) MFMA instructions, named with AMD's suffix:
``cdna<n>.mfma.<suffix>`` (``v_mfma_f32_32x32x8f16`` -> ``cdna1.mfma.f32_32x32x8f16``).

Published models (not measured here), MMA-Sim 2.1.1 (arXiv 2511.10909) and Khattak &
Mikaitis (arXiv 2512.07004):

- FP32 and FP64 MFMA: sequential IEEE fused multiply-adds, RNE.
- CDNA1 FP16 / BF16: the exact sum of 4 (FP16) or 2 (BF16) products and C, rounded once
  to FP32 (RNE).
- CDNA2 FP16 / BF16: subnormal inputs flushed to zero, products rounded to FP32, added
  pairwise by FP32 RNE additions (four products per step; two for the CDNA1-era BF16
  instructions without ``_1k``), subnormal results flushed.
- CDNA3 FP16 / BF16 (8 products), xf32 (4): products truncated to 24 fraction bits below
  their maximum, that sum floored to 32 bits and C to 24 bits below the larger exponent,
  the total floored to 31 bits and rounded RNE to FP32.  FP8 / BF8 (the FNUZ formats,
  16 products) sum even- and odd-indexed products separately first.

NaN payloads: CDNA3 writes the canonical 0x7FFFFFFF; the FMA, CDNA1 and CDNA2 models are
defined by MMA-Sim's CPU arithmetic, whose NaN results follow x86 rules (the first NaN
operand quieted, an invalid operation's NaN 0xFFC00000); tcnumerics reproduces those.

Example:
    >>> from tcnumerics import instruction
    >>> m = instruction("cdna3.mfma.f32_16x16x32_fp8_bf8").model
    >>> m.algorithm, m.group_size, m.a_format.name, m.b_format.name
    ('staged_sum', 16, 'e4m3fnuz', 'e5m2fnuz')
"""

from __future__ import annotations

from ..model import InstructionSpec, UnitModel
from . import register

PUBLISHED = "published: MMA-Sim 2.1.1 (arXiv 2511.10909) and Khattak & Mikaitis (arXiv 2512.07004); not measured here"
_TYPES = {"f64": "fp64", "f32": "fp32", "xf32": "tf32", "f16": "fp16", "bf16": "bf16", "fp8": "e4m3fnuz",
          "bf8": "e5m2fnuz"}

CDNA1 = ["f32_32x32x2f32", "f32_32x32x1f32", "f32_16x16x4f32", "f32_16x16x1f32", "f32_4x4x1f32",
         "f32_32x32x8f16", "f32_32x32x4f16", "f32_16x16x16f16", "f32_16x16x4f16", "f32_4x4x4f16",
         "f32_32x32x4bf16", "f32_32x32x2bf16", "f32_16x16x8bf16", "f32_16x16x2bf16", "f32_4x4x2bf16"]
CDNA2 = ["f64_16x16x4f64", "f64_4x4x4f64", "f32_32x32x8bf16_1k", "f32_32x32x4bf16_1k", "f32_16x16x16bf16_1k",
         "f32_16x16x4bf16_1k", "f32_4x4x4bf16_1k"] + CDNA1
CDNA3 = ["f64_16x16x4_f64", "f64_4x4x4_4b_f64", "f32_32x32x1_2b_f32", "f32_16x16x1_4b_f32", "f32_4x4x1_16b_f32",
         "f32_32x32x2_f32", "f32_16x16x4_f32", "f32_16x16x8_xf32", "f32_32x32x4_xf32", "f32_32x32x4_2b_f16",
         "f32_16x16x4_4b_f16", "f32_4x4x4_16b_f16", "f32_32x32x8_f16", "f32_16x16x16_f16", "f32_32x32x4_2b_bf16",
         "f32_16x16x4_4b_bf16", "f32_4x4x4_16b_bf16", "f32_32x32x8_bf16", "f32_16x16x16_bf16"] + [
    f"f32_{shape}_{a}_{b}" for shape in ("16x16x32", "32x32x16") for a in ("bf8", "fp8") for b in ("bf8", "fp8")]


def parse_suffix(suffix: str) -> tuple[str, str, str, int]:
    """(d type, a type, b type, K) of an MFMA suffix such as ``f32_32x32x8bf16_1k``."""
    parts = suffix.split("_")
    d = parts[0]
    if parts[-1] in ("fp8", "bf8"):
        shape, a, b = parts[1], parts[2], parts[3]
    elif len(parts) >= 3 and parts[-1] != "1k":  # CDNA3: f32_32x32x8_f16, f32_32x32x4_2b_f16
        shape, a = parts[1], parts[-1]
        b = a
    else:  # CDNA1/2: the type is glued to K (f32_32x32x8f16, f32_32x32x8bf16_1k)
        glued = parts[1]
        a = next(t for t in ("bf16", "f16", "f32", "f64") if glued.endswith(t))
        shape, b = glued[: -len(a)], a
    k = int(shape.split("x")[2])
    return d, a, b, k


def mfma_model(arch: str, suffix: str) -> UnitModel:
    d, a, b, k = parse_suffix(suffix)
    fa, fb, fd = _TYPES[a], _TYPES[b], _TYPES[d]
    common = dict(a_format=fa, b_format=fb, c_format=fd, d_format=fd, frac_bits=None, zero_exponent=None)
    if a in ("f32", "f64"):
        return UnitModel(**common, algorithm="fma_chain", group_size=k, output_rounding="rne", nan_policy="x86")
    if a in ("fp8", "bf8"):
        return UnitModel(**{**common, "frac_bits": 24}, algorithm="staged_sum", group_size=16, sum_frac_bits=31,
                         split_even_odd=True, output_rounding="rne", nan_bits=0x7FFFFFFF)
    if arch == "cdna1":
        return UnitModel(**common, algorithm="exact_sum", group_size=4 if a == "f16" else 2,
                         output_rounding="rne", nan_policy="x86")
    if arch == "cdna2":
        pairs = 2 if (a == "bf16" and not suffix.endswith("_1k")) else 4
        return UnitModel(**common, algorithm="ftz_mul_add", group_size=k, pair_tree=pairs, output_rounding="rne",
                         nan_policy="x86")
    return UnitModel(**{**common, "frac_bits": 24}, algorithm="staged_sum", group_size=4 if a == "xf32" else 8,
                     sum_frac_bits=31, output_rounding="rne", nan_bits=0x7FFFFFFF)


for _arch, _suffixes in (("cdna1", CDNA1), ("cdna2", CDNA2), ("cdna3", CDNA3)):
    for _suffix in _suffixes:
        register(InstructionSpec(f"{_arch}.mfma.{_suffix}", parse_suffix(_suffix)[3], mfma_model(_arch, _suffix),
                                 provenance=PUBLISHED))
