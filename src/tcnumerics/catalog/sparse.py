"""Structured-sparse ``mma.sp`` instructions on Hopper (sm_90) and Ampere (sm_80).

Each entry's ``k`` is the compressed K -- the products the datapath sees -- and the
name's shape gives the logical K (twice as large); evaluate them with
``tcnumerics.sparse.dot_bits`` (compressed A, dense B, metadata positions).  The
sparsity follows A's type as PTX defines it: 2:4 for 16- and 8-bit types, 1:2 for
TF32, pairwise 4:8 for s4/u4 (``tcnumerics.sparse.sparsity``).

Example:
    >>> from tcnumerics.catalog import get_instruction
    >>> spec = get_instruction("hopper.mma.sp.m16n8k32.f32.f16.f16.f32")
    >>> spec.k, spec.model.group_size
    (16, 16)
"""

from __future__ import annotations

from ..model import InstructionSpec, UnitModel
from . import register

SPARSE_MEASURED = ("measured on NVIDIA H200 (sm_90a), driver 580.159.04, CUDA 13.0: mma.sp::ordered_metadata "
                   "single-instruction captures, vectors/hopper/mma_sp_*")
# both measured with lab/device/capture_sparse_tf32_int4.py (records: vectors/hopper/device/*tf32_int4*)
TF32_MEASURED = (SPARSE_MEASURED + "; TF32 1:2 (SASS HMMA.SP.1688.F32.TF32 / HMMA.SP.16816.F32.TF32): the "
                 "selected products form one group as dense TF32 k4 / k8 do (L = K/2, F = 25, FP32 RZ) -- "
                 "fingerprint of the silicon finds that grouping and 36,864 captured vectors per entry replay with "
                 "0 mismatches; of 18,432 fresh ones L=4 for k16 misses 2,558 and F=24 misses 1,228 (k8) / "
                 "1,887 (k16)")
INT4_MEASURED = (SPARSE_MEASURED + "; s4/u4 pairwise 4:8: exact integer arithmetic (SASS: two 8-bit "
                 "IMMA.SP.16832 (k64) / IMMA.SP.16864 (k128) from a zero accumulator, C added by IMAD.IADD, "
                 ".satfinite by compare and select); 24,576 captured vectors per entry, 0 mismatches")
_FMT = {"f32": "fp32", "f16": "fp16", "bf16": "bf16", "tf32": "tf32", "e4m3": "e4m3", "e5m2": "e5m2", "s8": "s8",
        "u8": "u8", "s4": "s4", "u4": "u4", "s32": "s32"}
# PTX ISA "Sparse matrix storage" (tcnumerics.sparse.sparsity derives the same from A's format)
_SCHEME = {"tf32": "1:2", "s4": "4:8 pairwise", "u4": "4:8 pairwise"}
_OUT = {"f32": (-133, "rz", 0x7FFFFFFF), "f16": (-21, "rne", 0x7FFF)}  # as Hopper's dense units


def _fused(atype: str, dtype: str, ctype: str, group: int, frac_bits: int = 25) -> UnitModel:
    zero_exponent, rounding, nan = _OUT[dtype]
    return UnitModel(a_format=_FMT[atype], b_format=_FMT[atype], c_format=_FMT[ctype], d_format=_FMT[dtype],
                     group_size=group, frac_bits=frac_bits, zero_exponent=zero_exponent,
                     output_rounding=rounding, nan_bits=nan)


def _add(name: str, k_compressed: int, model: UnitModel, provenance: str, **kw) -> None:
    scheme = _SCHEME.get(model.a_format.name, "2:4")
    register(InstructionSpec(name=name, k=k_compressed, model=model, provenance=provenance,
                             notes=f"structured sparse {scheme}: logical K={2 * k_compressed}, "
                                   "evaluate with tcnumerics.sparse.dot_bits", **kw))


# --- FP16 / BF16: the selected products form one group, as the dense unit's k16 / k8 -------
# (measured: m16n8k32 = one fused group of its 16 selected products, HMMA.SP.16832;
# m16n8k16 = one group of 8, HMMA.SP.16816; F = 25, outputs as the dense units)
for _k in (16, 32):
    for _d in ("f32", "f16"):
        _add(f"hopper.mma.sp.m16n8k{_k}.{_d}.f16.f16.{_d}", _k // 2, _fused("f16", _d, _d, _k // 2),
             SPARSE_MEASURED)
    _add(f"hopper.mma.sp.m16n8k{_k}.f32.bf16.bf16.f32", _k // 2, _fused("bf16", "f32", "f32", _k // 2),
         SPARSE_MEASURED)

# --- TF32 (1:2 sparse): the selected products form one group, as dense TF32 k4 / k8 -------
# (measured: m16n8k8 = one fused group of its 4 selected products, HMMA.SP.1688.F32.TF32;
# m16n8k16 = one group of 8, HMMA.SP.16816.F32.TF32; F = 25, FP32 RZ)
for _k in (8, 16):
    _add(f"hopper.mma.sp.m16n8k{_k}.f32.tf32.tf32.f32", _k // 2, _fused("tf32", "f32", "f32", _k // 2),
         TF32_MEASURED)


# --- integer: exact, wrapping or .satfinite (8-bit 2:4: k32, k64; 4-bit pairwise 4:8: k64, k128)
_INT_SHAPES = {"s8": (32, 64), "u8": (32, 64), "s4": (64, 128), "u4": (64, 128)}


def _add_integer(arch: str, provenance: str, types: tuple[str, str] = ("s8", "u8")) -> None:
    for a in types:
        for b in types:
            for sat in (False, True):
                for k in _INT_SHAPES[a]:
                    model = UnitModel(a_format=a, b_format=b, c_format="s32", d_format="s32", algorithm="integer",
                                      group_size=k // 2, frac_bits=None, zero_exponent=None, saturate=sat)
                    _add(f"{arch}.mma.sp.m16n8k{k}{'.satfinite' if sat else ''}.s32.{a}.{b}.s32", k // 2, model,
                         provenance)


_add_integer("hopper", SPARSE_MEASURED)
_add_integer("hopper", INT4_MEASURED, ("s4", "u4"))

# --- FP8 (m16n8k64, FP32 output; ptxas rejects FP16 output on sm_90) -------------------------
# Not native, like dense mma.sync FP8 on sm_90 (SASS): FP8->FP16 unpack, then two
# HMMA.SP.16832.F32 -- the first over the even chunks (compressed elements c with c % 4 in
# {0, 1}) from a zero accumulator, the second over the odd chunks onto it -- then C is added
# by an FP32 round-to-nearest FADD.
_ORDER = tuple(c for c in range(32) if c % 4 < 2) + tuple(c for c in range(32) if c % 4 >= 2)
for _a in ("e4m3", "e5m2"):
    for _b in ("e4m3", "e5m2"):
        register(InstructionSpec(
            name=f"hopper.mma.sp.m16n8k64.f32.{_a}.{_b}.f32", k=32,
            model=UnitModel(a_format="fp16", b_format="fp16", c_format="fp32", d_format="fp32", group_size=16,
                            frac_bits=25, zero_exponent=-133, output_rounding="rz", nan_bits=0x7FFFFFFF),
            a_format=_a, b_format=_b, c_format="fp32", k_order=_ORDER, chunk=16, c_entry="ieee_add",
            provenance=SPARSE_MEASURED + " (SASS: FP8->FP16 unpack, 2x HMMA.SP.16832.F32, FADD)",
            notes="structured sparse 2:4: logical K=64, evaluate with tcnumerics.sparse.dot_bits"))

# --- Ampere (sm_80) ------------------------------------------------------------------------
# Not measured (no A100 here) and not modelled by MMA-Sim: Ampere's published dense parameters
# (F = 24, FP16/BF16 groups of 8, TF32 groups of 4, zero exponent -132 / -20) applied to the
# selected products, which is how Hopper's sparse path was measured to behave (the selected
# products are grouped exactly as the dense unit groups the same number of products).
AMPERE_INFERRED = ("inferred, not measured: Ampere's published dense datapath (MMA-Sim 2.1.1, arXiv 2511.10909; "
                   "Khattak & Mikaitis, arXiv 2512.07004) over the selected products, the grouping measured for "
                   "Hopper's sparse path on an H200")
_AMPERE_OUT = {"f32": (-132, "rz", 0x7FFFFFFF), "f16": (-20, "rne", 0x7FFF)}


def _ampere_fused(atype: str, dtype: str, group: int) -> UnitModel:
    zero_exponent, rounding, nan = _AMPERE_OUT[dtype]
    return UnitModel(a_format=_FMT.get(atype, atype), b_format=_FMT.get(atype, atype), c_format=_FMT[dtype],
                     d_format=_FMT[dtype], group_size=group, frac_bits=24, zero_exponent=zero_exponent,
                     output_rounding=rounding, nan_bits=nan)


for _k in (16, 32):
    for _d in ("f32", "f16"):
        _add(f"ampere.mma.sp.m16n8k{_k}.{_d}.f16.f16.{_d}", _k // 2, _ampere_fused("f16", _d, 8), AMPERE_INFERRED)
    _add(f"ampere.mma.sp.m16n8k{_k}.f32.bf16.bf16.f32", _k // 2, _ampere_fused("bf16", "f32", 8), AMPERE_INFERRED)
# TF32 (1:2): dense Ampere TF32 fuses groups of 4, so k8's 4 selected products are one group
# and k16's 8 are two chained groups
for _k in (8, 16):
    _add(f"ampere.mma.sp.m16n8k{_k}.f32.tf32.tf32.f32", _k // 2, _ampere_fused("tf32", "f32", 4), AMPERE_INFERRED)
_AMPERE_INT = "PTX ISA semantics (exact integer arithmetic); not measured"
_add_integer("ampere", _AMPERE_INT)
_add_integer("ampere", _AMPERE_INT, ("s4", "u4"))
