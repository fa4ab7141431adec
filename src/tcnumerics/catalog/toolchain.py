"""Instructions whose bits depend on the compiler: entries named after the ptxas releases that give them.

Hopper has no FP8 ``mma.sync`` unit: ptxas unpacks the operands to FP16 and issues two
``HMMA.16816.F32`` over interleaved K halves, and how it joins the halves and C changed
between releases (SASS of the same PTX assembled by each ptxas, bits measured on an H100
through cubins loaded by CuPy; lab/device/published_ptxas.py and published_device.py,
evidence in docs/catalog.md and vectors/published/device/):

* ptxas 12.4-12.6: both HMMAs start from zero, D = C + (H1 + H2) with two FP32 round-to-nearest
  ``FADD`` per element (8 FADD in the warp's SASS) -- the entries here;
* ptxas 12.8, 12.9, 13.0, 13.5: the second HMMA accumulates onto the first, D = C + H, one FADD
  per element (4 FADD) -- the ``hopper.mma.m16n8k32.f32.<a>.<b>.f32`` entries.

Only the k32 FP32-output forms existed before PTX ISA 8.7 (CUDA 12.8); the other FP8
``mma.sync`` forms are lowered identically by every release that accepts them.  The
architecture token names the ptxas range (dots written as underscores, names being
dot-separated).

Example:
    >>> from tcnumerics import instruction
    >>> old = instruction("hopper-ptxas12_4-12_6.mma.m16n8k32.f32.e4m3.e4m3.f32").spec
    >>> old.chunk, old.chunk_combine, old.c_entry
    (16, 'ieee_add', 'ieee_add')
"""

from __future__ import annotations

from dataclasses import replace

from . import get_instruction, register

PTXAS_12_4_TO_12_6 = "hopper-ptxas12_4-12_6"
LEGACY = ("measured on NVIDIA H100 (sm_90), driver 580.159.04: cubins assembled by ptxas 12.4.131, 12.5.82 and "
          "12.6.85 (CUDA 12.x compiler wheels), loaded through CuPy 14.2; SASS: FP8->FP16 unpack + "
          "2x HMMA.16816.F32 from RZ, then FADD (H1 + H2) and FADD (C + sum) per element; 6,144 vectors per form "
          "(6 families) bit-exact, ptxas 12.8-13.5 differ on 339-479 of them")

for _a in ("e4m3", "e5m2"):
    for _b in ("e4m3", "e5m2"):
        _current = get_instruction(f"hopper.mma.m16n8k32.f32.{_a}.{_b}.f32")
        register(replace(_current, name=f"{PTXAS_12_4_TO_12_6}.mma.m16n8k32.f32.{_a}.{_b}.f32",
                         chunk_combine="ieee_add", provenance=LEGACY))
