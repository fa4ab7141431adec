"""Compile an InstructionSpec into the flat numbers and tables the fast kernels read.

A plan holds, for one instruction: operand lookup tables (every container pattern of a
format of at most 20 value bits decoded once: signed significand, alignment exponent,
kind), the integer parameters of the accumulator / output formats, and the group
schedule of one instruction (its K permutation and group lengths).  Anything the fast
kernels do not model makes ``build_plan`` return a reason string instead, and the fast
engine hands that spec to the reference engine.

Example:
    >>> from tcnumerics.catalog import get_instruction
    >>> plan = build_plan(get_instruction("hopper.mma.m16n8k16.f32.f16.f16.f32"))
    >>> plan.kind, plan.group_lengths.tolist(), plan.frac_bits
    ('fused', [16], 25)
    >>> build_plan(get_instruction("hopper.mma.m16n8k16.f32.f16.f16.f32").model.with_(frac_bits=None))
    'frac_bits=None (exact alignment needs unbounded integers)'
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..formats import FloatFormat, Format, IntFormat, Rounding
from ..model import InstructionSpec, UnitModel

__all__ = ["Plan", "build_plan", "format_params", "ZERO_EXP", "ROUNDING_CODES", "OVERFLOW_CODES"]

# alignment exponent stored for zero (and special) operands: so low that a product with it
# never wins the maximum; zero products are accounted for by per-group flags instead
ZERO_EXP = -16384
MAX_TABLE_BITS = 20  # operand formats with more index bits are decoded by the reference engine

ROUNDING_CODES = {Rounding.RNE: 0, Rounding.RNA: 1, Rounding.RZ: 2, Rounding.RU: 3, Rounding.RD: 4, Rounding.RTO: 5}
OVERFLOW_CODES = {"ieee": 0, "inf": 1, "saturate": 2, "nan": 3}
_SPECIALS_CODES = {"ieee": 0, "fn": 1, "fnuz": 2, "none": 3, "nan_only": 1}

# fields of the model/spec dataclasses this engine understands; any other field holding a
# non-default value (a feature added after this engine was written) means "not supported"
_KNOWN_MODEL_FIELDS = {"a_format", "b_format", "c_format", "d_format", "group_size", "frac_bits", "zero_exponent",
                       "output_rounding", "output_mantissa_bits", "output_overflow", "nan_bits", "algorithm",
                       "saturate"}
_KNOWN_SPEC_FIELDS = {"name", "k", "model", "a_format", "b_format", "c_format", "k_order", "chunk", "c_entry",
                      "c_add_rounding", "provenance", "notes"}


def format_params(fmt: Format) -> np.ndarray:
    """A format as the int64 vector the kernels decode/encode with.

    Float: [0, pad_bits, width, exp_bits, man_bits, bias, signed, specials, subnormals, max_code, emin];
    integer: [1, 0, bits, 0, 0, 0, signed, 0, 0, max_value, min_value].

    >>> format_params("fp32" and __import__("tcnumerics").get_format("fp32")).tolist()[:6]
    [0, 0, 32, 8, 23, 127]
    """
    if isinstance(fmt, IntFormat):
        return np.array([1, 0, fmt.bits, 0, 0, 0, int(fmt.signed), 0, 0, fmt.max_value, fmt.min_value], np.int64)
    return np.array([0, fmt.pad_bits, fmt.width, fmt.exp_bits, fmt.man_bits, fmt.bias, int(fmt.signed),
                     _SPECIALS_CODES[fmt.specials], int(fmt.subnormals), fmt.max_code, fmt.emin], np.int64)


@dataclass(frozen=True)
class Plan:
    """Everything a kernel needs about one instruction, as numbers and arrays.

    Attributes:
        kind: ``"fused"`` or ``"integer"``.
        k: the instruction's K; perm: its K order (identity when natural), int64 [k].
        group_lengths: lengths of the consecutive groups one instruction is split into (int64).
        a_sig, a_exp, b_sig, b_exp: int16 lookup tables over operand containers, indexed by
            ``container >> a_shift`` (see ``_operand_table``).
        c_params, d_params, out_params: ``format_params`` of the instruction's C format,
            the model's D format and the rounding target (D, or its narrower cut).
        frac_bits, e_zero: F and the zero exponent (a value below every exponent when None).
        lshift_ab / rshift_ab: a product significand is shifted left then right by these (plus
            its distance to the maximum exponent) to be truncated to F fraction bits;
            lshift_c / rshift_c: the same for C in c_format, lshift_d / rshift_d in d_format.
        rounding, overflow: output rounding and overflow codes; nan_bits: canonical NaN.
        ieee_add: C is added last by an IEEE addition with ``add_rounding``.
        saturate: integer .satfinite.
        a_val, b_val: float64 tables of operand values as the datapath sees them (0 for zeros
            and specials), and a_expf, b_expf the exponent tables as float32, for the
            vectorised kernels (``_fast_f64``); a_man / b_man: the
            datapath formats' fraction bits.
        f64_reason: why the vectorised kernels do not apply (None: they do).
        sum32_window: R of the vectorised GEMM's int32 sum route (``_fast_f64``): groups whose
            nonzero operands lie within 2**-R of the group's largest (per row of A, per column
            of B) sum their products in float32 / int32 lanes; 0: the route does not apply.
    """

    kind: str
    k: int
    perm: np.ndarray
    group_lengths: np.ndarray
    a_sig: np.ndarray
    a_exp: np.ndarray
    b_sig: np.ndarray
    b_exp: np.ndarray
    a_shift: int
    b_shift: int
    c_params: np.ndarray
    d_params: np.ndarray
    out_params: np.ndarray
    frac_bits: int
    e_zero: int
    lshift_ab: int
    rshift_ab: int
    lshift_c: int
    rshift_c: int
    lshift_d: int
    rshift_d: int
    rounding: int
    overflow: int
    nan_bits: int
    ieee_add: bool
    add_rounding: int
    saturate: bool
    c_dtype: type
    d_dtype: type
    a_val: np.ndarray | None = None
    b_val: np.ndarray | None = None
    a_expf: np.ndarray | None = None
    b_expf: np.ndarray | None = None
    a_man: int = 0
    b_man: int = 0
    f64_reason: str | None = "not a fused unit"
    sum32_window: int = 0

    @property
    def natural_order(self) -> bool:
        return bool(np.array_equal(self.perm, np.arange(self.k)))


def _non_default(obj, known: set[str]) -> str | None:
    for f in dataclasses.fields(obj):
        if f.name in known:
            continue
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)
        if default is dataclasses.MISSING or getattr(obj, f.name) != default:
            return f"{type(obj).__name__}.{f.name}={getattr(obj, f.name)!r} is not modelled by the fast engine"
    return None


def _operand_table(user_fmt: Format, model_fmt: Format) -> tuple[np.ndarray, np.ndarray, int] | str:
    """Decode every container pattern of ``user_fmt`` as the datapath sees it (in ``model_fmt``).

    Returns (significand table, exponent table, index shift): int16 arrays indexed by
    ``container >> shift``.  Significands are signed (0 for zeros and specials); exponents
    are alignment exponents, with ZERO_EXP for zeros and ZERO_EXP - 1 / - 2 / - 3 for
    +inf / -inf / NaN.  Integer formats: the significand table holds the value.
    """
    pad = user_fmt.pad_bits if isinstance(user_fmt, FloatFormat) else 0
    index_bits = user_fmt.container_bits - pad
    if index_bits > MAX_TABLE_BITS:
        return f"operand format {user_fmt.name} has {index_bits} index bits (tables stop at {MAX_TABLE_BITS})"
    patterns = (np.arange(1 << index_bits, dtype=np.uint64) << np.uint64(pad)).astype(user_fmt.container_dtype)
    if isinstance(model_fmt, IntFormat) or isinstance(user_fmt, IntFormat):
        if user_fmt != model_fmt:
            return "integer operands converted between formats"
        values = model_fmt.decode_int(patterns)
        if values.min() < -(1 << 15) or values.max() >= 1 << 15:
            return f"integer operand format {model_fmt.name} wider than 16 bits"
        return values.astype(np.int16), np.zeros(len(values), np.int16), pad
    if user_fmt != model_fmt:
        from .reference import convert_patterns  # the reference's own conversion, applied to every pattern once

        patterns = convert_patterns(patterns, user_fmt, model_fmt)
    if model_fmt.man_bits > 13 or model_fmt.bias > 4000 or model_fmt.exp_bits > 12:
        return f"operand format {model_fmt.name} is too wide for 16-bit tables"
    dec = model_fmt.decode(patterns)
    sig = np.where(dec.sign, -dec.significand, dec.significand)
    special = np.where(dec.kind == 2, 3, np.where(dec.kind == 1, np.where(dec.sign, 2, 1), 0))
    exp = np.where(dec.significand == 0, ZERO_EXP - special, dec.exponent)
    return sig.astype(np.int16), exp.astype(np.int16), pad


def _value_table(sig: np.ndarray, exp: np.ndarray, man_bits: int) -> np.ndarray:
    """float64 operand values (as the datapath sees them) from significand/exponent tables."""
    finite = exp > ZERO_EXP
    return np.where(finite, np.ldexp(sig.astype(np.float64), np.where(finite, exp.astype(np.int64) - man_bits, 0)),
                    0.0)


_F64_EXP_LIMIT = 300  # operand / accumulator exponents within +-300 keep every float64 step exact


def _f64_reason(spec: InstructionSpec, model: UnitModel, a_exp: np.ndarray, b_exp: np.ndarray, lengths: list[int],
                c_params: np.ndarray, d_params: np.ndarray, out_params: np.ndarray) -> str | None:
    """Why the float64-lane kernels cannot evaluate this fused plan exactly (None: they can)."""
    if not np.array_equal(c_params, d_params):
        return "C and D formats differ"
    if model.output_rounding == Rounding.RTO:
        return "round-to-odd output"
    d, out = d_params, out_params
    if d[1] != 0 or d[7] != 0 or not d[6] or not d[8]:
        return "accumulator format is not IEEE-like"
    # the rounding target must be D cut to fewer fraction bits (same exponent field)
    if (out[3], out[5], out[10]) != (d[3], d[5], d[10]) or out[4] > d[4] or out[1] != d[4] - out[4] \
            or out[1] + out[2] != d[2]:
        return "output format is not D with fewer fraction bits"
    F, L = model.frac_bits, max(lengths)
    if F + 2 + int(L + 1).bit_length() > 53 or model.a_format.man_bits + model.b_format.man_bits + 2 > 53:
        return "group sums exceed float64's 53 bits"
    exps = [int(x) for t in (a_exp, b_exp) for x in (t[t > ZERO_EXP].min(initial=0), t[t > ZERO_EXP].max(initial=0))]
    emax_d = (int(d[9]) >> int(d[4])) - int(d[5])
    e_zero = model.zero_exponent
    if max(abs(x) for x in exps + [int(d[10]), emax_d] + ([e_zero] if e_zero is not None else [])) > _F64_EXP_LIMIT:
        return "exponent range beyond float64's exact scaling"
    return None


def _sum32_window(frac_bits: int, lengths: list[int], man_a: int, man_b: int) -> int:
    """R of the int32 sum route (``_fast_f64._add_row32``), 0 where it is not exact.

    Operands within 2**-R of their group's largest exponent, A scaled 2**-4 further, have a
    product exact in float32 (significands within 24 bits) and normal (2R + 4 <= 126); every
    truncated term is below 2**(F+2), so L terms fit int32 when F + 2 + log2(L) <= 31; the
    product's scale 2**u, u <= F + 2R + 4, stays at most 2**126, where a zero product plus u
    in its exponent field is below 1."""
    if man_a + man_b + 2 > 24 or frac_bits + 2 + (max(lengths) - 1).bit_length() > 31:
        return 0
    window = (122 - frac_bits) // 2
    return window if window >= 16 else 0


def _shifts(frac_bits: int, man_bits: int) -> tuple[int, int]:
    g = frac_bits - man_bits
    return max(g, 0), max(-g, 0)


def build_plan(spec: InstructionSpec | UnitModel) -> Plan | str:
    """The plan for ``spec`` (a bare UnitModel is wrapped as a one-group instruction), or why not."""
    if isinstance(spec, UnitModel):
        spec = InstructionSpec(name="custom", k=spec.group_size, model=spec)
    model = spec.model
    reason = _non_default(model, _KNOWN_MODEL_FIELDS) or _non_default(spec, _KNOWN_SPEC_FIELDS)
    if reason:
        return reason
    if model.algorithm not in ("fused", "integer"):
        return f"algorithm {model.algorithm!r} is evaluated by the reference engine"
    k = spec.k
    chunk = spec.chunk or k
    L = model.group_size
    lengths = []
    for _ in range(k // chunk):
        lengths += [L] * (chunk // L) + ([chunk % L] if chunk % L else [])
    perm = np.asarray(spec.k_order if spec.k_order is not None else range(k), dtype=np.int64)
    a = _operand_table(spec.a_format, model.a_format)
    b = _operand_table(spec.b_format, model.b_format)
    for t in (a, b):
        if isinstance(t, str):
            return t
    common = dict(k=k, perm=perm, group_lengths=np.asarray(lengths, np.int64), a_sig=a[0], a_exp=a[1], b_sig=b[0],
                  b_exp=b[1], a_shift=a[2], b_shift=b[2], c_dtype=spec.c_format.container_dtype,
                  d_dtype=model.d_format.container_dtype)
    if model.algorithm == "integer":
        if spec.c_entry != "fused":
            return "integer unit with an IEEE C addition"
        for f in (spec.c_format, model.c_format, model.d_format):
            if f.bits > 32:
                return f"integer accumulator format {f.name} wider than 32 bits"
        if spec.c_format != model.c_format:
            return "integer accumulator converted between formats"
        return Plan(kind="integer", c_params=format_params(spec.c_format), d_params=format_params(model.d_format),
                    out_params=format_params(model.d_format), frac_bits=0, e_zero=0, lshift_ab=0, rshift_ab=0,
                    lshift_c=0, rshift_c=0, lshift_d=0, rshift_d=0, rounding=0, overflow=0, nan_bits=0,
                    ieee_add=False, add_rounding=0, saturate=bool(model.saturate), **common)

    if model.frac_bits is None:
        return "frac_bits=None (exact alignment needs unbounded integers)"
    out = model.output_format
    d = model.d_format
    c = spec.c_format
    for name, f in (("c_format", c), ("d_format", d), ("output format", out)):
        if not isinstance(f, FloatFormat) or f.container_bits > 32:
            return f"{name} {f.name} is not a float format of at most 32 bits"
        if f.man_bits > 30:
            return f"{name} {f.name} has too wide a significand"
    if not (out.specials == "ieee" and out.signed and out.subnormals):
        return f"output format {out.name} is not IEEE-like (signed, inf/NaN, subnormals)"
    if model.output_rounding not in ROUNDING_CODES:
        return f"output rounding {model.output_rounding.value} is not supported by the fast engine"
    if spec.c_entry == "ieee_add" and (spec.c_add_rounding not in ROUNDING_CODES or d.man_bits + 1 > 25):
        return "IEEE C addition outside the float64 route"
    F = model.frac_bits
    # every truncated term is below 2**(F+2); a group of L products plus C must fit in int64
    if F + 2 + int(L + 1).bit_length() > 62:
        return f"frac_bits={F} with group_size={L} overflows 64-bit accumulation"
    man_a, man_b = model.a_format.man_bits, model.b_format.man_bits
    ls_ab, rs_ab = _shifts(F, man_a + man_b)
    ls_c, rs_c = _shifts(F, c.man_bits)
    ls_d, rs_d = _shifts(F, d.man_bits)
    e_zero = model.zero_exponent if model.zero_exponent is not None else 4 * ZERO_EXP
    f64 = _f64_reason(spec, model, a[1], b[1], lengths, format_params(c), format_params(d), format_params(out))
    return Plan(kind="fused", a_val=_value_table(a[0], a[1], man_a), b_val=_value_table(b[0], b[1], man_b),
                a_expf=a[1].astype(np.float32), b_expf=b[1].astype(np.float32), a_man=man_a, b_man=man_b,
                f64_reason=f64, sum32_window=_sum32_window(F, lengths, man_a, man_b) if f64 is None else 0,
                c_params=format_params(c), d_params=format_params(d), out_params=format_params(out),
                frac_bits=F, e_zero=int(e_zero), lshift_ab=ls_ab, rshift_ab=rs_ab, lshift_c=ls_c, rshift_c=rs_c,
                lshift_d=ls_d, rshift_d=rs_d, rounding=ROUNDING_CODES[model.output_rounding],
                overflow=OVERFLOW_CODES[model.output_overflow], nan_bits=int(model.nan_bits),
                ieee_add=spec.c_entry == "ieee_add", add_rounding=ROUNDING_CODES.get(spec.c_add_rounding, 0),
                saturate=False, **common)


def cached_planner(builder):
    """``builder(spec)`` memoised per (hashable) spec -- an engine's plan lookup: a model's thousands of calls on one
    unit plan it once.  A spec with an unhashable field is planned every time.

    >>> from tcnumerics.catalog import get_instruction
    >>> plan_of = cached_planner(build_plan)
    >>> plan_of(get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")).kind
    'fused'
    """
    from functools import lru_cache

    cached = lru_cache(maxsize=256)(builder)

    def plan(spec: InstructionSpec) -> "Plan | str":
        try:
            return cached(spec)
        except TypeError:  # an unhashable field added to the spec: plan without the cache
            return builder(spec)

    return plan


def check_k_range(spec: InstructionSpec, K: int, k_start: int, k_stop: int) -> None:
    """The engines' one check of an accumulation's K columns ``k_start:k_stop`` of ``K``: in range, on instruction
    boundaries, and a chain only where C and D share a format.

    >>> from tcnumerics.catalog import get_instruction
    >>> check_k_range(get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16"), 64, 16, 48)
    """
    if not (0 <= k_start <= k_stop <= K):
        raise ValueError(f"k_start, k_stop: need 0 <= k_start <= k_stop <= {K}, got {k_start}, {k_stop}")
    for name, value in (("k_start", k_start), ("k_stop", k_stop)):
        if value % spec.k:
            raise ValueError(f"{name}: {value} is not a multiple of {spec.name}'s K={spec.k}")
    if k_stop - k_start > spec.k and spec.c_format != spec.d_format:
        raise ValueError(f"a_rows: K range {k_start}:{k_stop} chains instructions, but {spec.name} takes C as "
                         f"{spec.c_format.name} and writes D as {spec.d_format.name}")

