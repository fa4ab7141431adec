"""Which plans ``gemm_fchain`` runs and the constants it is compiled with (private; the kernel's method is in
``_cuda_fchain_source``).

Two forms of the same source: FP8 units whose groups end in FP32 (``_cuda_build.fast_end``: FP32 values, two
accumulators per output, per-code tables) and the wide units -- BF16, FP16, TF32 operands, FP32 C and D, output
rounded toward zero (``FC_WIDE``: FP64 values, one accumulator per output, operands decoded from their bits).

Example:
    >>> from tcnumerics.catalog import get_instruction
    >>> from tcnumerics.engines import cuda
    >>> spec = get_instruction("hopper.wgmma.m64n128k32.f32.e4m3.e4m3")
    >>> fchain_reason(cuda._plan(spec), spec) is None, "#define FC_WIDE 0" in fchain_header(spec, cuda._plan(spec))
    (True, True)
    >>> spec = get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")
    >>> fchain_reason(cuda._plan(spec), spec) is None, "#define FC_WIDE 1" in fchain_header(spec, cuda._plan(spec))
    (True, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model import InstructionSpec
from ._cuda_build import (SubgroupPlan, Tile, _group_length, config_header, fast_end, fma_align, fp32_rz_end,
                          tiled_reason)
from ._fast_plan import ZERO_EXP, Plan

__all__ = ["FCHAIN_TILE", "fchain_reason", "fchain_header", "fchain_smem_words"]

FCHAIN_TILE = Tile(tx=32, ty=8, tm=8, tn=4)  # gemm_fchain's fixed shape: 8 warps of 8 rows, 4 columns a lane (64 x 128)


@dataclass(frozen=True)
class _Bounds:
    wide: bool  # the FP64 form
    emax: int   # the largest exponent a C may have on the fast path
    cmin: int   # the least exponent a nonzero C may have on it: C's term and the results stay normal


def _widths(plan: Plan) -> tuple[int, int]:
    """Bit lengths of the largest staged magnitudes: |sig_a| << LS and |sig_b|."""
    a_nz, b_nz = plan.a_exp > ZERO_EXP, plan.b_exp > ZERO_EXP
    abits = (int(np.abs(plan.a_sig[a_nz].astype(np.int64)).max()) << int(plan.lshift_ab)).bit_length()
    return abits, int(np.abs(plan.b_sig[b_nz].astype(np.int64)).max()).bit_length()


def _ieee_codes_match(fmt, sig: np.ndarray, exp: np.ndarray) -> bool:
    """Whether ``fc_decode`` (sign, exponent and fraction fields, subnormals, all-ones exponent special) gives the
    plan's significand and exponent for every code of ``fmt`` (specials: an exponent below ZERO_EXP)."""
    eb, mb, bias = int(fmt.exp_bits), int(fmt.man_bits), int(fmt.bias)
    if len(sig) != 1 << (1 + eb + mb):
        return False
    code = np.arange(len(sig), dtype=np.int64)
    f, m, neg = (code >> mb) & ((1 << eb) - 1), code & ((1 << mb) - 1), (code >> (eb + mb)) & 1
    special = f == (1 << eb) - 1
    mag = np.where(f > 0, m | (1 << mb), m)
    want_exp = np.where(mag > 0, np.maximum(f, 1) - bias, ZERO_EXP)
    ok_special = np.all((exp < ZERO_EXP) == special)
    ours = ~special
    return bool(ok_special and np.array_equal(np.where(neg > 0, -mag, mag)[ours], sig[ours].astype(np.int64))
                and np.array_equal(want_exp[ours], exp[ours].astype(np.int64)))


def _narrow_bounds(plan: Plan, spec: InstructionSpec, fa) -> "_Bounds | str":
    rs, f, gl = int(plan.rshift_ab), int(plan.frac_bits), _group_length(plan)
    e0, emax = fa.lo - rs, fa.hi - rs
    a_nz, b_nz = plan.a_exp > ZERO_EXP, plan.b_exp > ZERO_EXP
    top = int(plan.a_exp[a_nz].max()) + int(plan.b_exp[b_nz].max())
    abits, bbits = _widths(plan)
    checks = {
        "operands wider than one byte": all(
            np.dtype(x.container_dtype).itemsize == 1 for x in (spec.a_format, spec.b_format)),
        "the unit's zero exponent is above the least product exponent": plan.e_zero <= e0,
        "a product exponent lies above the grid's clamp": top <= emax,
        "a group's terms may leave the accumulator's binade": (gl << max(abits + bbits - rs, 0)) + (1 << (f + 1)) <= 1 << 23,
        "a result or C's term could be subnormal in FP32": e0 - f >= -126 and e0 + rs + f >= -126,
        "C's term could overflow FP32": emax + 1 + rs + f <= 127 and emax + rs + 24 <= 127,
        "code 0 is not a zero": plan.a_exp[0] == ZERO_EXP and plan.b_exp[0] == ZERO_EXP,
        "a zero C's grid would not be normal": -127 + rs + 23 >= -126 and e0 > -127,
    }
    failed = [name for name, ok in checks.items() if not ok]
    return failed[0] if failed else _Bounds(False, emax, max(f - 126, -126 - rs - f, -126))


def _wide_bounds(plan: Plan, spec: InstructionSpec, fa) -> "_Bounds | str":
    rs, f, gl = int(plan.rshift_ab), int(plan.frac_bits), _group_length(plan)
    emax = fa.hi - rs
    abits, bbits = _widths(plan)
    checks = {
        "C, D and the output are not FP32 rounded toward zero with overflow to infinity": fp32_rz_end(plan),
        "operands not IEEE-style codes the kernel decodes": (
            _ieee_codes_match(spec.a_format, plan.a_sig, plan.a_exp)
            and _ieee_codes_match(spec.b_format, plan.b_sig, plan.b_exp)),
        "a group's terms may leave the accumulator's binade": (gl << max(abits + bbits - rs, 0)) + (1 << (f + 1)) <= 1 << 51,
        "the grid's anchors leave FP64's normal range": fa.hi + 53 <= 1023 and plan.e_zero + rs + 52 >= -1022,
    }
    failed = [name for name, ok in checks.items() if not ok]
    return failed[0] if failed else _Bounds(True, emax, -126)


def _bounds(plan: Plan, spec: InstructionSpec) -> "_Bounds | str":
    """The exponent range ``gemm_fchain`` runs ``plan`` on, or why it cannot."""
    if tiled_reason(plan) is not None or isinstance(plan, SubgroupPlan) or spec.model.algorithm != "fused":
        return "not a fused unit the tiled kernel runs"
    if _group_length(plan) > 32:
        return "groups longer than 32"
    fa = fma_align(plan, spec)
    if fa is not None and fa.width == 1 and fast_end(plan, spec, fa):
        return _narrow_bounds(plan, spec, fa)
    if fa is not None and fa.width == 2:
        return _wide_bounds(plan, spec, fa)
    return "its FMA pass's bounds do not hold (fma_align) or its groups do not end in FP32 (fast_end)"


def fchain_reason(plan: Plan, spec: InstructionSpec) -> str | None:
    """Why ``gemm_fchain`` cannot run ``plan`` (None: it can)."""
    bounds = _bounds(plan, spec)
    return bounds if isinstance(bounds, str) else None


def fchain_header(spec: InstructionSpec, plan: Plan) -> str:
    """The compile-time constants of ``gemm_fchain`` for ``spec``: the unit's (``config_header``) and the kernel's
    own -- its form, the fast path's range (C's exponent bits at the ends: FC_UMIN, FC_UMAX; FC_VMIN, the wide
    form's least normal FP32 result, as the high word of an FP64), the scalings between values and grid units, the
    output's significand mask and, for the wide form, the operand fields."""
    b = _bounds(plan, spec)
    if isinstance(b, str):
        raise ValueError(f"{spec.name}: gemm_fchain does not run it: {b}")
    scale = int(plan.rshift_ab) + int(plan.frac_bits)
    man = int(plan.out_params[4])
    suffix = "" if b.wide else "f"
    umax = 0x7F7FFFFF if b.wide else (b.emax + 1 + 127) << 23  # wide: FLT_MAX too (RZ's image of an overflow)
    lines = ["#define FCHAIN 1", f"#define FC_WIDE {int(b.wide)}", f"#define FC_EMAX ({b.emax})",
             f"#define FC_UMIN {(b.cmin + 127) << 23}u", f"#define FC_UMAX {umax}u",
             f"#define FC_VMIN {(1023 - 126) << 20}u", f"#define FC_SCALE 0x1p{scale}{suffix}",
             f"#define FC_UNSCALE 0x1p{-scale}{suffix}", f"#define FC_MASK {(0xFFFFFFFF << (23 - man)) & 0xFFFFFFFF}u"]
    for side, fmt in (("A", spec.a_format), ("B", spec.b_format)):
        lines += [f"#define FC_{side}_EXPB {int(fmt.exp_bits)}", f"#define FC_{side}_MANB {int(fmt.man_bits)}",
                  f"#define FC_{side}_BIAS {int(fmt.bias)}"]
    return config_header(spec, plan, FCHAIN_TILE) + "\n".join(lines) + "\n"


def fchain_smem_words(plan: Plan, spec: InstructionSpec) -> int:
    """32-bit words of dynamic shared memory ``gemm_fchain`` needs: the stage (GL + 2 rows along K of A's values and
    exponents at row stride 68, B's pairs at 129, B's packed exponents at 65, the sign patterns), each output's C
    and, for the FP8 form, the per-code tables."""
    b = _bounds(plan, spec)
    wide = not isinstance(b, str) and b.wide
    gl, t, xw = _group_length(plan), FCHAIN_TILE, 2 if wide else 1
    stage = (gl + 2) * (2 * xw * (t.bn + 1) + (xw + 1) * (t.bm + 4) + (t.bn // 2 + 1) + 2 * t.ty)  # + a scratch row, + 1: alignment
    return stage + t.tm * t.tn * t.threads + (0 if wide else 5 * 256)
