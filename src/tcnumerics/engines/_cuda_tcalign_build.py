"""Which plans ``gemm_tcalign`` runs and the constants it is compiled with (private; the kernel's method and its
argument are in ``_cuda_tcalign_source``).

It runs fused units whose terms are truncated toward zero onto F <= 16 fraction bits, with FP32 C and D and a result
cut toward zero, and either one-byte operands whose values are exact in BF16 (FP8, FP6, FP4) in equal groups of 16
or 32 -- the FP8 chains of Hopper and Ada, and custom units of that shape -- or BF16 operands (the *wide* form,
``TA_WIDE``) in groups of 8, 16 or 32 -- custom BF16 units with a narrower accumulator than the GPU's own.
The host instruction's numerics are NUMERICS.md's
Hopper BF16 ``mma.sync`` (F = 25); ``_cuda_launch`` proves them on each GPU before it uses the kernel there.

Example:
    >>> from tcnumerics.catalog import get_instruction
    >>> from tcnumerics.engines import cuda
    >>> spec = get_instruction("hopper.wgmma.m64n128k32.f32.e4m3.e4m3")
    >>> tcalign_reason(cuda._plan(spec), spec) is None
    True
    >>> tcalign_reason(*(lambda s: (cuda._plan(s), s))(get_instruction("hopper.wgmma.m64n8k16.f32.f16.f16")))
    'operands neither one byte wide nor BF16'
"""

from __future__ import annotations

import numpy as np

from ..model import InstructionSpec
from ._cuda_build import SubgroupPlan, Tile, _group_length, config_header, exp_mma, fp32_rz_end, tiled_reason
from ._fast_plan import ZERO_EXP, Plan

__all__ = ["TCALIGN_TILE", "HOST_FRAC_BITS", "tcalign_reason", "tcalign_header", "tcalign_smem_words",
           "self_test_operands"]

TCALIGN_TILE = Tile(tx=32, ty=8, tm=8, tn=4)  # the launch's shape: 256 threads, 64 x 128 outputs a block
HOST_FRAC_BITS = 25  # F of the host instruction, BF16 mma.sync m16n8k16 (NUMERICS.md)


def _bf16_exact(values: np.ndarray) -> bool:
    bits = values.astype(np.float32).view(np.uint32)
    return bool(np.all(values.astype(np.float32) == values) and np.all(bits & 0xFFFF == 0))


def _operand_checks(plan: Plan, spec: InstructionSpec) -> dict:
    """Each operand's values as the kernel builds them (sig * 2**(e - man), ``ta_entry``) equal the plan's, in BF16."""
    out = {}
    for side, sig, exp, val, fmt in (("A", plan.a_sig, plan.a_exp, plan.a_val, spec.model.a_format),
                                     ("B", plan.b_sig, plan.b_exp, plan.b_val, spec.model.b_format)):
        nz = (exp > ZERO_EXP) & (sig != 0)
        built = sig[nz].astype(np.float64) * np.exp2(exp[nz].astype(np.float64) - getattr(fmt, "man_bits", 0))
        ok = np.array_equal(built, val[nz]) and _bf16_exact(val[nz]) and bool(np.all(np.abs(built) >= 2.0 ** -126))
        out[f"{side}'s values are not the kernel's BF16 ones"] = ok
    return out


def _exp_pass(plan: Plan, spec: InstructionSpec) -> "tuple[int, object] | None":
    """(products a power sum holds, ``exp_mma``'s parameters): the whole group chained where its ranges allow,
    else k16 steps apart, else eight products apart (an mma with half its K zero) -- FP8 E5M2's wider exponents."""
    gl = _group_length(plan)
    for terms in (gl, 16, 8):
        em = exp_mma(plan, spec, terms=terms) if terms <= gl else None
        if em is not None:
            return terms, em
    return None


def wide(spec: InstructionSpec) -> bool:
    """BF16 operands: the kernel's wide form (``TA_WIDE``: the values as they are, the exponent pass on CUDA cores)."""
    return spec.a_format.name == "bf16" and spec.b_format.name == "bf16"


def _wide_bounds(plan: Plan, spec: InstructionSpec) -> "int | str":
    """EMAX for BF16 operands, or why not: their exponents span too much to bound statically, so the kernel checks
    each group's E (a product exponent above EMAX, a grid below FP32's normal range, a subnormal operand: the block's
    slow path) and only the fixed facts are checked here."""
    gl, f = _group_length(plan), int(plan.frac_bits)
    checks = {
        "groups other than 8, 16 or 32 long": gl in (8, 16, 32),
        "C, D and the output are not FP32 rounded toward zero with overflow to infinity": fp32_rz_end(plan),
        "C is added after the group": not plan.ieee_add,
        "terms truncated onto more than 16 fraction bits": 0 <= f <= 16,
        "a group's sum may leave FP32's exact range": (2 + gl * 4) * 2.0 ** f < 2.0 ** 24,
        "the unit's zero exponent is not below every normal FP32 C": plan.e_zero < -126,
    }
    failed = [name for name, ok in checks.items() if not ok]
    return failed[0] if failed else min(127 - (HOST_FRAC_BITS - f), 119)


def _bounds(plan: Plan, spec: InstructionSpec) -> "int | str":
    """The largest exponent a group's E may have on the fast path (EMAX), or why the kernel cannot run ``plan``."""
    if tiled_reason(plan) is not None or isinstance(plan, SubgroupPlan) or spec.model.algorithm != "fused":
        return "not a fused unit the tiled kernel runs"
    if wide(spec):
        return _wide_bounds(plan, spec)
    if not all(np.dtype(x.container_dtype).itemsize == 1 for x in (spec.a_format, spec.b_format)):
        return "operands neither one byte wide nor BF16"
    gl, f = _group_length(plan), int(plan.frac_bits)
    a_nz, b_nz = plan.a_exp > ZERO_EXP, plan.b_exp > ZERO_EXP
    if not (a_nz.any() and b_nz.any()):
        return "an operand format without a nonzero value"
    lo = int(plan.a_exp[a_nz].min()) + int(plan.b_exp[b_nz].min())
    top = int(plan.a_exp[a_nz].max()) + int(plan.b_exp[b_nz].max())
    # the largest |product| / 2**(ea + eb): the products' significand bound (below 4)
    ra = float(np.max(np.abs(plan.a_val[a_nz]) / np.exp2(plan.a_exp[a_nz].astype(np.float64))))
    rb = float(np.max(np.abs(plan.b_val[b_nz]) / np.exp2(plan.b_exp[b_nz].astype(np.float64))))
    emax = min(127 - (HOST_FRAC_BITS - f), 119)
    checks = {
        "groups other than 16 or 32 long": gl in (16, 32),
        "C, D and the output are not FP32 rounded toward zero with overflow to infinity": fp32_rz_end(plan),
        "C is added after the group": not plan.ieee_add,
        "terms truncated onto more than 16 fraction bits": 0 <= f <= 16,
        "a product's significand is 4 or more": ra * rb < 4.0,
        "a group's sum may leave FP32's exact range": (2 + gl * ra * rb) * 2.0 ** f < 2.0 ** 24,
        "the unit's zero exponent is not below every normal FP32 C": plan.e_zero < -126,
        "a product exponent lies above the anchors' range": top <= emax,
        "the grid of the least product could be subnormal in FP32": lo - f >= -126,
        "the exponent pass's powers leave BF16 / FP32 (exp_mma) in sums of 8": _exp_pass(plan, spec) is not None,
        **_operand_checks(plan, spec),
    }
    failed = [name for name, ok in checks.items() if not ok]
    return failed[0] if failed else emax


def tcalign_reason(plan: Plan, spec: InstructionSpec) -> str | None:
    """Why ``gemm_tcalign`` cannot run ``plan`` (None: it can, on a GPU whose mma passed the self-test)."""
    bounds = _bounds(plan, spec)
    return bounds if isinstance(bounds, str) else None


def tcalign_header(spec: InstructionSpec, plan: Plan) -> str:
    """The compile-time constants of ``gemm_tcalign`` for ``spec``: the unit's (``config_header``), the fast path's
    largest E (TA_EMAX) and C bound (TA_UMAX, the FP32 bits of 2**(EMAX + 1)), the output's significand mask, and
    the form: wide (BF16 operands) or the one-byte form's exponent pass (``_exp_pass``: TA_XTERMS products a sum,
    MMA_M, XBIAS_A, XBIAS_B)."""
    emax = _bounds(plan, spec)
    if isinstance(emax, str):
        raise ValueError(f"{spec.name}: gemm_tcalign does not run it: {emax}")
    man = int(plan.out_params[4])
    lines = ["#define TCALIGN 1", f"#define TA_EMAX ({emax})", f"#define TA_UMAX {(emax + 1 + 127) << 23}u",
             f"#define TA_MASK {(0xFFFFFFFF << (23 - man)) & 0xFFFFFFFF}u"]
    if wide(spec):
        lines.append("#define TA_WIDE 1")
    else:
        terms, em = _exp_pass(plan, spec)
        lines += ["#define TA_WIDE 0", f"#define TA_XTERMS {terms}", f"#define MMA_M {em.m}",
                  f"#define XBIAS_A ({em.bias_a})", f"#define XBIAS_B ({em.bias_b})"]
    return config_header(spec, plan, TCALIGN_TILE) + "\n".join(lines) + "\n"


def _byte_codes(rng, shape, exp: np.ndarray, tiny: bool = False) -> np.ndarray:
    """Uniform one-byte codes, the format's specials replaced by zeros (``tiny``: the four least)."""
    x = rng.integers(0, 4 if tiny else 256, shape, dtype=np.uint8)
    return np.where(np.isin(x, np.flatnonzero(np.asarray(exp) < ZERO_EXP)), np.uint8(0), x).astype(np.uint8)


def _wide_codes(rng, shape, exp: np.ndarray, tiny: bool = False) -> np.ndarray:
    """BF16 codes over 48 binades around 1 (``tiny``: 40 binades below them) with every sign and fraction, one in
    sixteen a zero; the last 8 rows of A (and of B) also hold subnormals and infinities: their blocks take the slow
    path, which must give the same bits."""
    field = rng.integers(87, 103, shape) if tiny else rng.integers(103, 151, shape)
    x = (rng.integers(0, 2, shape) << 15 | field << 7 | rng.integers(0, 128, shape)).astype(np.uint16)
    x[rng.random(shape) < 1 / 16] = 0
    if not tiny:
        x[-8:, 5::17] = rng.integers(1, 128, x[-8:, 5::17].shape).astype(np.uint16)  # subnormals
        x[-8:, 11::29] = 0x7F80  # infinity
    return x


def tcalign_smem_words(plan: Plan, spec: InstructionSpec) -> int:
    """32-bit words of dynamic shared memory: the group's stage (values and powers of A's 64 rows and B's 128
    columns, K pairs at strides 72 and 136) and the two per-code tables; the wide form: values by K pair and
    exponents by K, no tables."""
    gl = _group_length(plan)
    if wide(spec):
        return (gl // 2 + gl) * ((64 + 8) + (128 + 8))
    return gl // 2 * 2 * (64 + 8) + gl // 2 * 2 * (128 + 8) + 2 * 256


def self_test_operands(plan: Plan, spec: InstructionSpec, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Operands on which ``gemm_tcalign`` must give the unit's bits on a GPU before the engine uses it there: A [128, K]
    and B [256, K] codes, C [128, 256] FP32 bits, K four groups (at least).  Uniform codes (every exponent, the
    subnormals and zeros; no NaN), rows and columns whose products cancel pairwise down to a few tiny ones (the
    truncation at the grid decides them), C over 60 binades with zeros of both signs: every term of the mma's
    alignment is exercised -- the anchor, products far below it, C's term.

    >>> from tcnumerics.catalog import get_instruction
    >>> from tcnumerics.engines import cuda
    >>> spec = get_instruction("hopper.wgmma.m64n128k32.f32.e4m3.e4m3")
    >>> a, b, c = self_test_operands(cuda._plan(spec), spec)
    >>> a.shape, b.shape, c.shape, c.dtype
    ((128, 128), (256, 128), (128, 256), dtype('uint32'))
    """
    rng = np.random.default_rng(seed)
    k = 4 * max(_group_length(plan), int(plan.k))
    codes = _wide_codes if wide(spec) else _byte_codes
    a, b = codes(rng, (128, k), plan.a_exp), codes(rng, (256, k), plan.b_exp)
    dtype = a.dtype.type
    sign = dtype(1 << (8 * a.dtype.itemsize - 1))
    a[:32, 1::2] = a[:32, 0::2] ^ sign  # rows 0-31: each product followed by its negation (same B column codes)...
    b[:, 1::2] = np.where(np.arange(256)[:, None] < 128, b[:, 0::2], b[:, 1::2])
    a[:32, 3::8] = codes(rng, (32, k // 8), plan.a_exp, tiny=True)  # ...but for a few tiny ones
    c = (rng.standard_normal((128, 256)) * np.exp2(rng.integers(-30, 30, (128, 256)))).astype(np.float32)
    c[::7, ::5] = 0.0
    c[3::7, ::5] = -0.0
    return a, b, c.view(np.uint32)
