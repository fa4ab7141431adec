"""Specialise, compile and cache the GPU engine's kernels for one instruction (private).

``config_header(spec, plan, tile)`` turns a fast-engine plan (``_fast_plan.build_plan``) into
the compile-time constants of ``_cuda_source.KERNEL_SOURCE``; ``device_module`` compiles that
for the GPU through CuPy's NVRTC (CuPy keeps compiled binaries in its on-disk kernel cache,
so a unit is compiled once per machine), ``host_library`` builds the same text with the host
C++ compiler into a shared library (cached under ``~/.cache/tcnumerics``), which the tests
run on a CPU.  ``tiled_reason`` says why a plan cannot use the tiled GEMM kernel (the
per-output ``gemm_scalar`` kernel then evaluates it).

Example:
    >>> from tcnumerics.catalog import get_instruction
    >>> from tcnumerics.engines._fast_plan import build_plan
    >>> spec = get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")
    >>> "#define F_BITS 25" in config_header(spec, build_plan(spec), DEVICE_TILE)
    True
    >>> tiled_reason(build_plan(spec)) is None
    True
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..model import InstructionSpec
from ._cuda_source import (FCHAIN_HOST_LAUNCHER, FFMA_HOST_LAUNCHER, FFMA_SOURCE, HOST_LAUNCHER, HOST_PRELUDE,
                           KERNEL_SOURCE, TCALIGN_HOST_LAUNCHER)
from ._fast_plan import ZERO_EXP, Plan

__all__ = ["Tile", "DEVICE_TILE", "ROW_TILE", "HOST_TILE", "device_tiles", "SubgroupPlan", "subgroup_plan", "config_header", "tiled_reason",
           "promotion_reason", "tables", "smem_words", "FmaAlign", "fma_align", "fp32_rz_end", "fast_end", "ExpMma", "exp_mma", "MMA_TILE",
           "device_module", "host_library", "host_compiler", "ffma_host_library", "ffma_device_kernel"]


@dataclass(frozen=True)
class Tile:
    """Tiled-GEMM shape: TX x TY threads, each a TM x TN block of outputs."""

    tx: int = 16
    ty: int = 16
    tm: int = 8
    tn: int = 8

    @property
    def bm(self) -> int:
        return self.ty * self.tm

    @property
    def bn(self) -> int:
        return self.tx * self.tn

    @property
    def threads(self) -> int:
        return self.tx * self.ty


DEVICE_TILE = Tile(tx=16, ty=16, tm=4, tn=4)  # H100: +13% (FP8) / +20% (BF16) over 16x16x8x4 at 8192^3
ROW_TILE = Tile(tx=32, ty=16, tm=4, tn=4)  # a warp per thread row: the FP32 FMA pass's sign branch (H200: FP8 +5%)
HOST_TILE = Tile(tx=4, ty=2, tm=2, tn=4)  # small blocks: several per test matrix, edges exercised

_CTYPES = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int"}


@dataclass(frozen=True)
class SubgroupPlan(Plan):
    """The fused plan of a sub-group scaled unit's unscaled model plus what its scales need.

    subgroup_size: products per exactly summed sub-group; scale_sig_max: the largest
    significand of a scale code (the scaled sub-group sums' width follows from it)."""

    subgroup_size: int = 16
    scale_sig_max: int = 1


def subgroup_plan(plan: Plan, spec: InstructionSpec) -> SubgroupPlan:
    """``plan`` (the unscaled model's) marked as the plan of the sub-group scaled unit ``spec``."""
    table = scale_table(spec)
    return SubgroupPlan(**{f.name: getattr(plan, f.name) for f in fields(Plan)},
                        subgroup_size=int(spec.model.subgroup_size), scale_sig_max=int(table[0::4].max()))


def _operand_ints(sig: np.ndarray, exp: np.ndarray) -> np.ndarray:
    """Operand values in units of their format's finest quantum (``sig << (exp - emin)``; zeros 0)."""
    nonzero = exp > ZERO_EXP
    emin = int(exp[nonzero].min()) if nonzero.any() else 0
    shift = np.where(nonzero, exp.astype(np.int64) - emin, 0)
    return np.where(nonzero, sig.astype(np.int64) << shift, 0)


def _subgroup_tiled_reason(plan: SubgroupPlan) -> str | None:
    """Why the tiled sub-group kernel cannot run ``plan`` (None: it can): its sums must fit int32."""
    if plan.ieee_add or not plan.natural_order or len(plan.group_lengths) != 1:
        return "sub-group unit with C added last, a K order or several groups"
    gl, sub = int(plan.group_lengths[0]), plan.subgroup_size
    if gl % sub:
        return f"groups of {gl} products do not split into sub-groups of {sub}"
    amax = int(np.abs(_operand_ints(plan.a_sig, plan.a_exp)).max())
    bmax = int(np.abs(_operand_ints(plan.b_sig, plan.b_exp)).max())
    term_max = sub * amax * bmax * plan.scale_sig_max * plan.scale_sig_max
    if term_max >= 1 << 31:
        return f"scaled sub-group sums up to {term_max} exceed int32"
    if int(term_max).bit_length() + plan.frac_bits + 2 > 62:  # the aligned terms' 64-bit sum
        return f"aligned sub-group terms of {term_max} with F={plan.frac_bits} may exceed int64"
    return None


def tiled_reason(plan: Plan) -> str | None:
    """Why the tiled GEMM kernel cannot run this plan (None: it can)."""
    if isinstance(plan, SubgroupPlan):
        return _subgroup_tiled_reason(plan)
    if plan.kind != "fused":
        return "not a fused unit"
    lengths = set(int(x) for x in plan.group_lengths)
    if len(lengths) != 1:
        return f"unequal group lengths {sorted(lengths)}"
    gl = lengths.pop()
    if gl > 32:
        return f"groups of {gl} products (sign masks hold 32)"
    if _split_sum(plan, gl) and (gl % 2 or (gl // 2) * (1 << (plan.frac_bits + 2)) > 1 << 31):
        return f"{gl} products truncated to frac_bits={plan.frac_bits} may exceed two int32 sums"
    return None


@dataclass(frozen=True)
class FmaAlign:
    """The directed-rounding FMA pass of the tiled kernel for one plan: ``width`` 1 (FP32 FMA) or 2 (FP64),
    ``lo`` / ``hi`` the clamp of the grid exponent G = E + RS (see the kernel's comment)."""

    width: int
    lo: int
    hi: int

    @property
    def precision(self) -> int:
        return 24 if self.width == 1 else 53


_FT_RANGE = {1: (24, -126, 127), 2: (53, -1022, 1023)}  # significand bits, normal exponent range


def fma_align(plan: Plan, spec: InstructionSpec | None = None) -> FmaAlign | None:
    """The FMA form of the tiled kernel's truncating pass for ``plan`` (None: the integer pass runs).

    FP32 where every bound of the kernel's exactness argument holds in FP32, else FP64, else None:
    the magnitudes (|sig| << LS) fit the significand, every x = mag * 2**e and every 2**g, 2**-g,
    2**(P - 1 + g) over the clamped grid exponents g are normal, and a group's truncated products sum
    below 2**(P - 1) units (and 2**31, the int the kernel keeps)."""
    if tiled_reason(plan) is not None or isinstance(plan, SubgroupPlan):
        return None
    if spec is not None and spec.model.algorithm == "scaled_fused":
        return None  # block scales widen the exponent range: the integer pass
    ls, rs, gl = int(plan.lshift_ab), int(plan.rshift_ab), _group_length(plan)
    ranges = []
    for sig, exp, shift in ((plan.a_sig, plan.a_exp, ls), (plan.b_sig, plan.b_exp, 0)):
        nz = (exp > ZERO_EXP) & (sig != 0)
        if not nz.any():
            return None
        mag = int(np.abs(sig[nz].astype(np.int64)).max()) << shift
        ranges.append((int(exp[nz].min()), int(exp[nz].max()), mag.bit_length()))
    (amin, amax, abits), (bmin, bmax, bbits) = ranges
    lo, hi = amin + bmin + rs, amax + bmax + abits + bbits
    if gl << max(abits + bbits - rs, 0) > 1 << 31:
        return None
    for width, (p, emin, emax) in _FT_RANGE.items():
        fits = (max(abits, bbits) <= p and gl << max(abits + bbits - rs, 0) <= 1 << (p - 1)
                and min(amin, bmin) >= emin and max(amax + abits, bmax + bbits) <= emax
                and p - 1 + lo >= emin and p + hi <= emax and -hi >= emin and -lo <= emax)
        if fits:
            return FmaAlign(width, lo, hi)
    return None


_FP32_PARAMS = (0, 0, 32, 8, 23, 127, 1, 0, 1)  # format_params' head for IEEE FP32: pad, width, exp, man, bias, ...


def fp32_rz_end(plan: Plan) -> bool:
    """Whether a group's result is FP32 arithmetic's to finish: C and D in IEEE FP32, an output of FP32's layout cut
    to fewer significand bits (or none) rounded toward zero with overflow to infinity, no IEEE C addition."""
    out = [int(x) for x in plan.out_params]
    fp32_cut = (out[0] == 0 and out[3] == 8 and out[5] == 127 and 0 < out[4] <= 23 and out[1] == 23 - out[4]
                and out[1] + out[2] == 32 and out[6] == 1 and out[7] == 0)
    return (tuple(int(x) for x in plan.c_params[:9]) == _FP32_PARAMS
            and tuple(int(x) for x in plan.d_params[:9]) == _FP32_PARAMS and fp32_cut
            and plan.rounding == 2 and plan.overflow == 1 and not plan.ieee_add)


def fast_end(plan: Plan, spec: InstructionSpec, fa: FmaAlign) -> bool:
    """Whether the tiled kernel ends a group in FP32 (``tc_fast_end``, the argument in its comment): the FP32 FMA
    pass, C and D in IEEE FP32, an output of FP32's layout cut to fewer significand bits (or none) rounded toward
    zero with overflow to infinity, no IEEE C addition, F <= 22 (C's anchor binade) -- the group's sum bound is
    ``fma_align``'s (below 2**23 units), so the total stays below 2**24 units.

    >>> from tcnumerics.catalog import get_instruction
    >>> from tcnumerics.engines import cuda
    >>> spec = get_instruction("hopper.wgmma.m64n8k32.f32.e4m3.e4m3")
    >>> fast_end(cuda._plan(spec), spec, fma_align(cuda._plan(spec), spec))
    True
    """
    return fa.width == 1 and fp32_rz_end(plan) and plan.frac_bits <= 22 and spec.model.algorithm == "fused"


MMA_TILE = Tile(tx=16, ty=16, tm=4, tn=4)  # the tile the tensor-core exponent pass is written for (8 warps, 64 x 64)
@dataclass(frozen=True)
class ExpMma:
    """The tiled kernel's exponent pass on the tensor core (the kernel's comment has the argument): operand
    exponent e enters as x = 2**(m * (e - bias)) in BF16; one BF16 mma chain per group sums the products
    2**(m * (ea + eb - bias_a - bias_b)) and E = floor(exponent(S) / m) + bias_a + bias_b."""

    m: int
    bias_a: int
    bias_b: int


def _nonzero_exp_range(sig: np.ndarray, exp: np.ndarray) -> tuple[int, int] | None:
    nz = exp > ZERO_EXP  # the exponent pass counts every entry above ZERO_EXP (the ALU pass's max does)
    return (int(exp[nz].min()), int(exp[nz].max())) if nz.any() else None


def exp_mma(plan: Plan, spec: InstructionSpec | None = None, tile: Tile = MMA_TILE,
            terms: int | None = None) -> ExpMma | None:
    """The tensor-core exponent pass for ``plan`` (None: the CUDA-core max runs).

    Needs the 64 x 64 tile of 8 warps, groups of 16 or 32 products (k16 steps), no block scales, and the
    ranges of the argument: with m the least integer with L < 2**m, every x = 2**(m * (e - bias)) a normal BF16
    and every product 2**(m * s) (s = ea + eb - bias_a - bias_b) normal in FP32 with 2**(m * (s + 1)) <= 2**128,
    so the group's sum S < 2**(m * (E + 1)) is finite.  ``terms``: the products one power sum holds when a kernel
    sums a group's parts apart (``gemm_tcalign``; default L)."""
    if tile != MMA_TILE or tiled_reason(plan) is not None or isinstance(plan, SubgroupPlan):
        return None
    if spec is not None and spec.model.algorithm in ("scaled_fused", "subgroup_scaled"):
        return None
    gl = _group_length(plan)
    if gl % 16:
        return None
    m = (terms or gl).bit_length()  # least m with terms < 2**m
    ra, rb = _nonzero_exp_range(plan.a_sig, plan.a_exp), _nonzero_exp_range(plan.b_sig, plan.b_exp)
    if ra is None or rb is None:
        return None
    for ba in range(ra[0], ra[1] + 1):
        for bb in range(rb[0], rb[1] + 1):
            fits = (all(-126 <= m * (e - ba) <= 127 for e in ra) and all(-126 <= m * (e - bb) <= 127 for e in rb)
                    and m * (ra[0] + rb[0] - ba - bb) >= -126 and m * (ra[1] + rb[1] - ba - bb + 1) <= 128)
            if fits:
                return ExpMma(m, ba, bb)
    return None


def promotion_reason(spec: InstructionSpec, plan: Plan) -> str | None:
    """Why the kernels cannot promote ``spec``'s chains to FP32 themselves (None: they can).

    Promotion adds each block's chain result into an FP32 main accumulator (``gemm(promote_every=P)``); the
    kernels do it where that result is already FP32 -- D and C in FP32 -- and the unit has no sub-group scales."""
    from ..formats import get_format

    fp32 = get_format("fp32")
    if spec.d_format != fp32 or spec.c_format != fp32:
        return f"{spec.name} accumulates in {spec.c_format.name} -> {spec.d_format.name}, not FP32"
    if isinstance(plan, SubgroupPlan) or spec.model.algorithm == "subgroup_scaled":
        return "sub-group scaled units promote through the host loop"
    if plan.kind != "fused":
        return "not a fused unit"
    return None


def _split_sum(plan: Plan, gl: int) -> bool:
    """Whether a group's truncated products are summed in two int32 halves (one could overflow)."""
    return gl * (1 << (plan.frac_bits + 2)) > 1 << 31


def _group_length(plan: Plan) -> int:
    return int(plan.group_lengths[0])


def _stage_groups(gl: int, stage_k: int = 32) -> int:
    return max(1, stage_k // gl)


def smem_words(plan: Plan, tile: Tile, stage_k: int = 32, promote: bool = False, header: str = "") -> int:
    """32-bit words of dynamic shared memory the tiled kernel needs (``stage_k`` K per shared stage; ``promote``:
    the build that keeps an FP32 main accumulator per output for in-kernel promotion; ``header``: the build's
    ``config_header``, whose FP32 FMA pass stages two words per operand value -- its positive and negative part --
    and whose tensor-core exponent pass stages each operand's BF16 powers in pairs along K, rows padded by 8)."""
    pairs = "#define FMA_ALIGN 1\n" in header
    exp_pass = "#define EXP_MMA 1\n" in header
    gl = _group_length(plan)
    if isinstance(plan, SubgroupPlan):  # one group per stage: integer operands, 4 scale words per sub-group
        rows = tile.bm + tile.bn
        return gl * rows + 4 * (gl // plan.subgroup_size) * rows + 4 * tile.tm * tile.tn * tile.threads
    gps = _stage_groups(gl, stage_k)
    ks = gl * gps
    rows = tile.bm + tile.bn
    per_output = 3 + int(plan.ieee_add) + int(_split_sum(plan, gl)) + int(promote)
    powers = (ks // 2) * (rows + 16) if exp_pass else 0
    return (3 + int(pairs)) * ks * rows + 2 * gps * rows + tile.tm * tile.tn * tile.threads * per_output + powers


def _fmt_struct(name: str, params: np.ndarray) -> str:
    p = [int(x) for x in params]
    return (f"struct {name} {{ static constexpr int pad = {p[1]}, width = {p[2]}, exp_bits = {p[3]}, "
            f"man_bits = {p[4]}, bias = {p[5]}, is_signed = {p[6]}, specials = {p[7]}, subnormals = {p[8]}; "
            f"static constexpr long long max_code = {p[9]}LL, emin = {p[10]}LL; }};")


ALIGNS = ("auto", "fma", "int")
EXP_PASSES = ("alu", "mma")


def _align_choice(plan: Plan, spec: InstructionSpec, align: str) -> FmaAlign | None:
    """The truncating pass a build uses: "fma" the FMA pass wherever ``fma_align`` allows (FP32 or FP64), "int"
    the integer pass, "auto" the FP32 FMA pass where its FP32 group end applies (``fast_end``: the FP8 chains) and
    the integer pass elsewhere.  Measured on an H200 (benchmarks/RESULTS.md, every output of the two passes equal at
    2048x5760x1920, 4096^3 and 8192^3): FP8 E4M3 1.93e12 MAC/s (FMA, ``ROW_TILE``) against 1.61e12 (integer); BF16
    1.30e12 (integer) against 0.97e12 (FP64 FMA)."""
    if align not in ALIGNS:
        raise ValueError(f"align must be one of {ALIGNS}, not {align!r}")
    if align == "int":
        return None
    fa = fma_align(plan, spec)
    if align == "auto" and (fa is None or fa.width != 1 or not fast_end(plan, spec, fa)):
        return None
    return fa


def exp_choice(plan: Plan, spec: InstructionSpec, tile: Tile, exp_pass: str) -> ExpMma | None:
    """The exponent pass a build uses: "alu" the CUDA-core max (``max(ea + eb, E)``), "mma" the tensor-core
    power sum wherever ``exp_mma`` allows (same bits; the ALU pass elsewhere)."""
    if exp_pass not in EXP_PASSES:
        raise ValueError(f"exp_pass must be one of {EXP_PASSES}, not {exp_pass!r}")
    return exp_mma(plan, spec, tile) if exp_pass == "mma" else None


def device_tiles(plan: Plan, spec: InstructionSpec, align: str, exp_pass: str) -> list[Tile]:
    """The tiled kernel's shapes for a build, best first (the caller takes the first whose shared memory fits):
    ``ROW_TILE`` for the FP32 FMA pass with its FP32 end (a warp per thread row routes by a's sign; H200, FP8
    E4M3 8192^3: 1.93e12 against 1.84e12 MAC/s at ``DEVICE_TILE`` and 1.22e12 at 32 x 8 -- benchmarks/RESULTS.md),
    then ``DEVICE_TILE``."""
    fa = _align_choice(plan, spec, align) if tiled_reason(plan) is None and not isinstance(plan, SubgroupPlan) \
        else None
    row = fa is not None and fa.width == 1 and fast_end(plan, spec, fa) and exp_pass == "alu"
    return [ROW_TILE, DEVICE_TILE] if row else [DEVICE_TILE]


def config_header(spec: InstructionSpec, plan: Plan, tile: Tile, stage_k: int = 32, promote: bool = False,
                  align: str = "auto", exp_pass: str = "alu") -> str:
    """The compile-time constants of one instruction's kernels (``stage_k``: K per shared stage; ``promote``: the
    tiled kernel's build with FP32 promotion inside, see ``promotion_reason``; ``exp_pass``: see ``exp_choice``).

    Block-scaled units (``scaled_fused`` with power-of-two scales) are the fused plan of their
    unscaled model plus ``SCALED`` / ``SCALE_BLOCK``: each product's exponent is raised by its
    two scales' exponents."""
    model = spec.model
    scale_block = model.scale_block if model.is_block_scaled else None
    subgroup = model.algorithm == "subgroup_scaled"
    lengths = [int(x) for x in plan.group_lengths]
    tiled = tiled_reason(plan) is None
    gl = lengths[0] if tiled else 1
    if subgroup and not isinstance(plan, SubgroupPlan):
        raise ValueError(f"{spec.name}: a sub-group scaled unit needs its SubgroupPlan (engines.cuda plans it)")
    sub_tiled = tiled and subgroup
    F = plan.frac_bits
    lines = [
        f"#define A_T {_CTYPES[np.dtype(spec.a_format.container_dtype).itemsize]}",
        f"#define B_T {_CTYPES[np.dtype(spec.b_format.container_dtype).itemsize]}",
        f"#define C_T {_CTYPES[np.dtype(spec.c_format.container_dtype).itemsize]}",
        f"#define D_T {_CTYPES[np.dtype(spec.d_format.container_dtype).itemsize]}",
        f"#define A_SHIFT {plan.a_shift}", f"#define B_SHIFT {plan.b_shift}",
        f"#define K_INST {plan.k}", f"#define NG {len(lengths)}", f"#define GLMAX {max(lengths)}",
        f"#define NATURAL {int(plan.natural_order)}",
        f"__constant__ int GLEN[{len(lengths)}] = {{{', '.join(map(str, lengths))}}};",
        f"__constant__ int PERM[{plan.k}] = {{{', '.join(str(int(x)) for x in plan.perm)}}};",
        f"#define KIND_INTEGER {int(plan.kind == 'integer')}", f"#define SATURATE {int(plan.saturate)}",
        f"#define BIT_XOR {int(spec.model.algorithm == 'binary' and spec.model.bit_op == 'xor')}",
        f"#define F_BITS {F}", f"#define E_ZERO ({plan.e_zero})",
        f"#define LS_AB {plan.lshift_ab}", f"#define RS_AB {plan.rshift_ab}",
        f"#define LS_C {plan.lshift_c}", f"#define RS_C {plan.rshift_c}",
        f"#define LS_D {plan.lshift_d}", f"#define RS_D {plan.rshift_d}",
        f"#define ROUNDING {plan.rounding}", f"#define ROUND_OUT {plan.rounding}", f"#define OVERFLOW {plan.overflow}",
        f"#define NAN_BITS ((long long){plan.nan_bits}LL)",
        f"#define IEEE_ADD {int(plan.ieee_add)}", f"#define ADD_ROUNDING {plan.add_rounding}",
        _fmt_struct("FmtC", plan.c_params), _fmt_struct("FmtD", plan.d_params), _fmt_struct("FmtOut", plan.out_params),
        f"#define SCALED {int(model.algorithm == 'scaled_fused')}", f"#define SCALE_BLOCK {scale_block or 1}",
        f"#define SUBGROUP {int(subgroup)}", f"#define SUBG {model.subgroup_size if subgroup else 1}",
        f"#define EMIN_A {_emin(model.a_format)}", f"#define MAN_A {getattr(model.a_format, 'man_bits', 0)}",
        f"#define EMIN_B {_emin(model.b_format)}", f"#define MAN_B {getattr(model.b_format, 'man_bits', 0)}",
        f"#define TILED {int(tiled)}", f"#define GL {gl}", f"#define SPLIT_SUM {int(tiled and not subgroup and _split_sum(plan, gl))}",
        f"#define GPS {1 if sub_tiled else _stage_groups(gl, stage_k)}",
        f"#define TX {tile.tx}", f"#define TY {tile.ty}", f"#define TM {tile.tm}", f"#define TN {tile.tn}",
        f"#define PROMOTE {int(promote)}",
    ]
    fa = _align_choice(plan, spec, align) if tiled and not subgroup else None
    if fa is not None:
        lines += [f"#define FMA_ALIGN {fa.width}", f"#define FMA_LO ({fa.lo})", f"#define FMA_HI ({fa.hi})",
                  f"#define FMA_P {fa.precision}"]
    if fa is not None and fast_end(plan, spec, fa):
        lines.append("#define FAST_END 1")
    em = exp_choice(plan, spec, tile, exp_pass) if tiled and not subgroup else None
    if em is not None:
        lines += ["#define EXP_MMA 1", f"#define MMA_M {em.m}", f"#define XBIAS_A ({em.bias_a})",
                  f"#define XBIAS_B ({em.bias_b})"]
    return "\n".join(lines) + "\n"


NAN_SCALE = 0x40000000  # the scale table's mark of a NaN scale (the kernel source's NAN_SCALE)


def _emin(fmt) -> int:
    """The exponent a zero of ``fmt`` decodes to (its smallest exponent; 0 for integer formats)."""
    return int(fmt.emin) if hasattr(fmt, "emin") else 0


def scale_table(spec: InstructionSpec) -> np.ndarray | None:
    """int32 exponent shift of every scale code of a block-scaled unit (NAN_SCALE: NaN), or None.

    >>> t = scale_table(__import__("tcnumerics").catalog.get_instruction(
    ...     "blackwell.tcgen05.mma.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0"))
    >>> int(t[127]), int(t[130]), bool(t[255] == NAN_SCALE)
    (0, 3, True)
    """
    model = spec.model
    if not model.is_block_scaled:
        return None
    fmt = model.scale_format
    codes = np.arange(1 << fmt.container_bits, dtype=np.uint64).astype(fmt.container_dtype)
    dec = fmt.decode(codes)
    sig = dec.significand.astype(np.int64)
    if model.algorithm == "subgroup_scaled":  # 4 ints per code: significand, exponent, ulp exponent, NaN
        return np.stack([sig, dec.exponent, dec.ulp_exponent, dec.kind == 2], axis=1).astype(np.int32).ravel()
    bitlen = np.where(sig > 0, np.floor(np.log2(np.maximum(sig, 1))).astype(np.int64) + 1, 1)
    shift = dec.ulp_exponent.astype(np.int64) + bitlen - 1
    return np.where(dec.kind == 2, NAN_SCALE, shift).astype(np.int32)


def tables(plan: Plan) -> tuple[np.ndarray, np.ndarray]:
    """Operand tables packed as int32: significand in the high half, exponent in the low half."""
    def pack(sig: np.ndarray, exp: np.ndarray) -> np.ndarray:
        return ((sig.astype(np.int32) << 16) | (exp.astype(np.int32) & 0xFFFF)).astype(np.int32)

    if plan.kind == "integer":
        zeros = np.zeros_like
        return pack(plan.a_sig, zeros(plan.a_sig)), pack(plan.b_sig, zeros(plan.b_sig))
    return pack(plan.a_sig, plan.a_exp), pack(plan.b_sig, plan.b_exp)


assert ZERO_EXP == -16384  # the kernel source hard-codes it


# --- GPU build ---------------------------------------------------------------------------------

_KERNEL_FLAGS = {"dot_kernel": "BUILD_DOT", "gemm_scalar": "BUILD_SCALAR", "gemm_tiled": "BUILD_TILED",
                 "gemm_fchain": "BUILD_FCHAIN", "gemm_tcalign": "BUILD_TCALIGN",
                 "gemm_native": "BUILD_NATIVE"}


@lru_cache(maxsize=256)
def device_module(header: str, kernel: str):
    """CuPy RawModule holding ``kernel`` for one configuration (NVRTC; CuPy's disk cache keeps the binary).

    Each kernel is its own module: a unit compiles only what it runs."""
    import cupy

    flags = "".join(f"#define {flag} {int(name == kernel)}\n" for name, flag in _KERNEL_FLAGS.items())
    for dpx in (1, 0):  # Hopper's DPX add-max where NVRTC offers it
        module = cupy.RawModule(code=f"#define USE_DPX {dpx}\n" + flags + header + KERNEL_SOURCE,
                                options=("-std=c++17",))
        try:
            module.get_function(kernel)  # compiles now
            return module
        except cupy.cuda.compiler.CompileException:
            if not dpx:
                raise
    raise AssertionError("unreachable")


# --- host build (CI: the kernels' logic on a CPU) ----------------------------------------------

def host_compiler() -> str | None:
    """The host C++ compiler used for the CPU build of the kernels (None: none found)."""
    for name in (os.environ.get("CXX"), "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _cache_dir() -> Path:
    root = os.environ.get("TCNUMERICS_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "tcnumerics")
    path = Path(root) / "cuda-host"
    path.mkdir(parents=True, exist_ok=True)
    return path


@lru_cache(maxsize=64)
def host_library(header: str) -> ctypes.CDLL:
    """The kernels built for the CPU (same source behind HOST_PRELUDE), as a loaded shared library."""
    return _host_build(HOST_PRELUDE + header + KERNEL_SOURCE + HOST_LAUNCHER + FCHAIN_HOST_LAUNCHER
                       + TCALIGN_HOST_LAUNCHER)


@lru_cache(maxsize=1)
def ffma_host_library() -> ctypes.CDLL:
    """The FFMA chain kernel built for the CPU (``FFMA_SOURCE`` behind HOST_PRELUDE)."""
    return _host_build(HOST_PRELUDE + FFMA_SOURCE + FFMA_HOST_LAUNCHER)


@lru_cache(maxsize=1)
def ffma_device_kernel():
    """The FFMA chain kernel compiled for the GPU (NVRTC through CuPy)."""
    import cupy

    return cupy.RawModule(code=FFMA_SOURCE, options=("-std=c++17",)).get_function("ffma_chain")


def _host_build(text: str) -> ctypes.CDLL:
    cxx = host_compiler()
    if cxx is None:
        raise RuntimeError("no host C++ compiler (g++ or clang++) to build the GPU kernels for the CPU")
    key = hashlib.sha256(text.encode()).hexdigest()[:24]
    lib = _cache_dir() / f"kernels-{key}.so"
    if not lib.exists():
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "kernels.cpp"
            src.write_text(text)
            out = Path(tmp) / "kernels.so"
            proc = subprocess.run([cxx, "-std=c++20", "-O1", "-frounding-math", "-shared", "-fPIC", "-pthread", "-w", "-o", str(out),
                                   str(src)], capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"host build of the GPU kernels failed:\n{proc.stderr[-4000:]}")
            shutil.move(str(out), str(lib))
    return ctypes.CDLL(str(lib))
