"""Which entries published silicon captures verify, and whose: one table, applied to the provenance.

Khattak & Mikaitis publish 5,000-vector captures from seven GPUs (github.com/north-numerical-
computing/MATLAB-tensor-core, ``model_validation/``, BSD-2-Clause); ``vectors/published/``
holds them converted (lab/device/published_import.py) and CI replays every file through the
entry below.  Each entry's provenance gains "verified against Khattak & Mikaitis' <GPUs>
captures, 5,000 vectors" (per GPU); ``PUBLISHED_CAPTURES`` is what the test holds the files to.

Example:
    >>> from tcnumerics import instruction
    >>> "verified against Khattak & Mikaitis' A100, A2 captures" in instruction(
    ...     "ampere.mma.m16n8k16.f32.bf16.bf16.f32").provenance
    True
"""

from __future__ import annotations

from dataclasses import replace

from . import get_instruction, register

# what their wmma bench runs on sm_80..sm_100 (nvcc 13.0 SASS, vectors/published/device/wmma_sass.txt):
# m16n16k16 FP16/BF16 = HMMA.16816 per n8 half, m16n16k8 TF32 = two chained HMMA.1684 per half
_WMMA16 = ("mma.m16n8k16.f32.f16.f16.f32", "mma.m16n8k16.f16.f16.f16.f16", "mma.m16n8k16.f32.bf16.bf16.f32",
           "mma.m16n8k4.f32.tf32.tf32.f32")
_FP8_K32 = tuple(f"mma.m16n8k32.{d}.{t}.{t}.{d}" for t in ("e4m3", "e5m2") for d in ("f32", "f16"))

PUBLISHED_CAPTURES: dict[str, tuple[str, ...]] = {
    "volta.wmma.m16n16k16.f32.f16.f16.f32": ("V100",),
    "volta.wmma.m16n16k16.f16.f16.f16.f16": ("V100",),
    **{f"ampere.{x}": ("A100", "A2") for x in _WMMA16},
    **{f"ada.{x}": ("L40S",) for x in _WMMA16 + _FP8_K32},
    **{f"hopper.{x}": ("H100", "H200") for x in _WMMA16},
    **{f"hopper.mma.m16n8k32.f16.{t}.{t}.f16": ("H100", "H200") for t in ("e4m3", "e5m2")},
    # their FP8 FP32-output H100/H200 sets came from wgmma with a zero accumulator (docs/catalog.md)
    **{f"hopper.wgmma.m64n8k32.f32.{t}.{t}": ("H100", "H200") for t in ("e4m3", "e5m2")},
    **{f"blackwell.{x}": ("B200",) for x in _WMMA16 + _FP8_K32},
}


def verified_note(gpus: tuple[str, ...]) -> str:
    each = " each" if len(gpus) > 1 else ""
    return f"verified against Khattak & Mikaitis' {', '.join(gpus)} captures, 5,000 vectors{each}"


for _name, _gpus in PUBLISHED_CAPTURES.items():
    _spec = get_instruction(_name)
    _prov = _spec.provenance.replace("; not measured here", "").replace(" (not measured here)", "")
    register(replace(_spec, provenance=f"{_prov}; {verified_note(_gpus)}"), replace=True)
