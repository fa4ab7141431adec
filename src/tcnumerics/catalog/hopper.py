"""Hopper (sm_90 / sm_90a: H100, H200) mma.sync and wgmma instructions.

Parameters measured on an NVIDIA H200 (sm_90a, driver 580.159.04, CUDA 13.0) with
hand-written single-instruction kernels, bit-exact on hundreds of thousands of vectors
(project notes, NUMERICS.md section 2).  Entries whose exact variant was not itself
captured say so in their provenance.
"""

from __future__ import annotations

from ..model import InstructionSpec, UnitModel
from . import register

MEASURED = "measured on NVIDIA H200 (sm_90a), driver 580.159.04, CUDA 13.0"
FP32_NAN = 0x7FFFFFFF  # the canonical NaN Hopper's tensor cores write
FP16_NAN = 0x7FFF

_FLOAT_OUT = {
    # d format -> (zero exponent, output rounding, canonical NaN)
    "f32": (-133, "rz", FP32_NAN),
    "f16": (-21, "rne", FP16_NAN),
}
_FMT = {"f32": "fp32", "f16": "fp16", "bf16": "bf16", "tf32": "tf32", "e4m3": "e4m3", "e5m2": "e5m2",
        "s8": "s8", "u8": "u8", "s32": "s32"}


def _fused(atype: str, btype: str, ctype: str, dtype: str, group_size: int, frac_bits: int,
           fp8_cut: bool = False) -> UnitModel:
    zero_exponent, rounding, nan = _FLOAT_OUT[dtype]
    return UnitModel(a_format=_FMT[atype], b_format=_FMT[btype], c_format=_FMT[ctype], d_format=_FMT[dtype],
                     group_size=group_size, frac_bits=frac_bits, zero_exponent=zero_exponent,
                     output_rounding=rounding, output_mantissa_bits=13 if (fp8_cut and dtype == "f32") else None,
                     nan_bits=nan)


def _add(name: str, k: int, model: UnitModel, provenance: str, **kw) -> None:
    register(InstructionSpec(name=name, k=k, model=model, provenance=provenance, **kw))


# --- FP16 / BF16 ---------------------------------------------------------------------------
# Mixed C/D types (f32 D with f16 C and the reverse) do not exist on sm_90: ptxas 13.0 rejects them
# (".dtype must be '.f32' when .ctype is '.f32'"), so they are not catalogued.
for _k in (16, 8):
    for _d in ("f32", "f16"):
        _prov = (f"{MEASURED} (mma.sync m16n8k{_k})" if (_k == 16 or _d == "f32") else
                 f"{MEASURED} (mma.sync m16n8k8, HMMA.1688.F16; tcnumerics probe captures, vectors/hopper)")
        # the zero exponent and output rounding follow the output (D) format
        _add(f"hopper.mma.m16n8k{_k}.{_d}.f16.f16.{_d}", _k, _fused("f16", "f16", _d, _d, _k, 25), _prov)
    _add(f"hopper.mma.m16n8k{_k}.f32.bf16.bf16.f32", _k, _fused("bf16", "bf16", "f32", "f32", _k, 25),
         f"{MEASURED} (mma.sync m16n8k{_k})")
for _d in ("f32", "f16"):
    _add(f"hopper.wgmma.m64n8k16.{_d}.f16.f16", 16, _fused("f16", "f16", _d, _d, 16, 25), f"{MEASURED} (wgmma)")
_add("hopper.wgmma.m64n8k16.f32.bf16.bf16", 16, _fused("bf16", "bf16", "f32", "f32", 16, 25), f"{MEASURED} (wgmma)")

# --- TF32 (operands in 32-bit containers; the unit reads the upper 19 bits) ----------------
for _k in (4, 8):
    _add(f"hopper.mma.m16n8k{_k}.f32.tf32.tf32.f32", _k, _fused("tf32", "tf32", "f32", "f32", 8, 25),
         f"{MEASURED} (mma.sync m16n8k{_k})")
_add("hopper.wgmma.m64n8k8.f32.tf32.tf32", 8, _fused("tf32", "tf32", "f32", "f32", 8, 25), f"{MEASURED} (wgmma)")

# --- FP8 ------------------------------------------------------------------------------------
_FP8 = ("e4m3", "e5m2")
for _a in _FP8:
    for _b in _FP8:
        for _d in ("f32", "f16"):
            _add(f"hopper.wgmma.m64n8k32.{_d}.{_a}.{_b}", 32, _fused(_a, _b, _d, _d, 32, 13, fp8_cut=True),
                 f"{MEASURED} (wgmma; FP32 output cut to E8M13)")
        # mma.sync FP8 is not native on sm_90: ptxas unpacks to FP16 and issues two
        # HMMA.16816.F32 over interleaved K halves (k mod 4 in {0,1}, then {2,3}), the first
        # from a zero accumulator; C is then added by an FP32 round-to-nearest addition.
        _order = tuple(k for k in range(32) if k % 4 < 2) + tuple(k for k in range(32) if k % 4 >= 2)
        _add(f"hopper.mma.m16n8k32.f32.{_a}.{_b}.f32", 32, _fused("f16", "f16", "f32", "f32", 16, 25),
             f"{MEASURED} (SASS: FP8->FP16 unpack + 2x HMMA.16816.F32, then FADD); the lowering of ptxas "
             "12.8-13.5 (bits measured on an H100 for 12.8.93, 12.9.86, 13.0.88, 13.5.37); ptxas 12.4-12.6 lower "
             "it differently: hopper-ptxas12_4-12_6 entries",
             a_format=_a, b_format=_b, c_format="fp32", k_order=_order, chunk=16, c_entry="ieee_add")
        # PTX ISA 8.7 forms sm_90 also accepts (ptxas 13.0), lowered the same way (SASS):
        # FP16 output of k32 = 2x HMMA.16816.F16 then HADD2 (FP16 RNE addition of C);
        # k16 = 2x HMMA.1688 (k8 groups) over the interleaved halves, then FADD / HADD2
        _add(f"hopper.mma.m16n8k32.f16.{_a}.{_b}.f16", 32, _fused("f16", "f16", "f16", "f16", 16, 25),
             f"{MEASURED} (SASS: FP8->FP16 unpack + 2x HMMA.16816.F16, then HADD2; probe captures)",
             a_format=_a, b_format=_b, c_format="fp16", k_order=_order, chunk=16, c_entry="ieee_add")
        _order16 = tuple(k for k in range(16) if k % 4 < 2) + tuple(k for k in range(16) if k % 4 >= 2)
        for _d in ("f32", "f16"):
            _sass = "2x HMMA.1688.F32, then FADD" if _d == "f32" else "2x HMMA.1688.F16, then HADD2"
            _add(f"hopper.mma.m16n8k16.{_d}.{_a}.{_b}.{_d}", 16, _fused("f16", "f16", _d, _d, 8, 25),
                 f"{MEASURED} (SASS: FP8->FP16 unpack + {_sass}; probe captures)",
                 a_format=_a, b_format=_b, c_format=_FMT[_d], k_order=_order16, chunk=8, c_entry="ieee_add")

# --- 8-bit integer: exact, two's-complement wraparound or .satfinite clamping ---------------
_INT8 = ("s8", "u8")


def _integer(a: str, b: str, saturate: bool) -> UnitModel:
    return UnitModel(a_format=a, b_format=b, c_format="s32", d_format="s32", algorithm="integer",
                     group_size=32, frac_bits=None, zero_exponent=None, saturate=saturate)


for _a in _INT8:
    for _b in _INT8:
        for _sat in (False, True):
            _s = ".satfinite" if _sat else ""
            for _shape, _k in (("m16n8k32", 32), ("m16n8k16", 16), ("m8n8k16", 16)):
                _add(f"hopper.mma.{_shape}{_s}.s32.{_a}.{_b}.s32", _k, _integer(_a, _b, _sat),
                     f"{MEASURED} (s8 x s8 mma.sync m16n8k32; exact integer semantics)" if _shape == "m16n8k32"
                     else f"exact integer arithmetic as measured for m16n8k32 ({MEASURED})")
            _add(f"hopper.wgmma.m64n8k32{_s}.s32.{_a}.{_b}", 32, _integer(_a, _b, _sat),
                 f"{MEASURED} (wgmma m64nNk32; exact integer semantics)")
