"""Mutants of a unit: its one-step neighbour designs, each a real variant the reference engine runs.

A golden-vector set is only as good as the bugs it catches.  ``mutants(spec)`` lists the
designs one step away from a catalog entry (or any ``InstructionSpec`` or bare ``UnitModel``):
each is either a changed ``UnitModel`` / ``InstructionSpec`` (F +-1 and +-2, group size x2 and
/2, the group's output rounding, where C enters, the rounding of C's IEEE addition, the zero
exponent, the overflow policy, the canonical NaN, integer saturation, operand signedness, the
group order), a datapath fault (``faults``: a term aligned one bit off, a ones' complement
negation, C left out of emax, a subnormal aligned a binade low, products cut by a bit before
alignment, C entering the last group of a chain), or the unit wrapped by an exact operand or
result rewrite that *is* the neighbour design (flushing subnormal inputs or outputs, a NaN
payload passed through from C, inf - inf giving +inf, inf * 0 giving 0, the sign of a zero
result taken from C, ...).  Every mutant is evaluated by the reference engine
(``engines.reference.dot_bits``) or its restatement in ``faults``; no engine is
special-cased for it.

Mutants that equal the unit on its whole domain cannot be told apart by any vector and are
listed separately with the argument that proves it (``Mutant.equivalent``), among them:

* a group size change that leaves every chunk in one group (``min(L, chunk)`` unchanged):
  the datapath then sees the same single group;
* the group order reversed when the instruction is one group: a fused group's result
  depends only on the multiset of its terms (emax is a maximum, the truncated terms are
  summed exactly), so order cannot show;
* flushing subnormal inputs of a format without subnormals: there is nothing to flush;
* the zero exponent where no nonzero term aligns below it, or where a group of only such
  terms has a window at or under the grid all terms lie on (nothing is truncated);
* inf rules where products cannot be infinite and each fused group has one accumulator;
* flushing results that cannot be subnormal (all terms on a grid at or above the smallest
  normal); a subnormal C read another way where it lies below every group's window;
* cutting a product's lowest bit where it is always 0 (FP8 widened to FP16) or always
  below the window.

``tests/test_adequate.py`` checks each argument exhaustively on the inputs it is about.
Mutants not argued equivalent that no candidate vector kills are reported as *survivors*
(``tcnumerics.vectors.adequate``), never silently dropped.

Not modelled: a different C exponent alignment within the group beyond ``c_entry`` and the
``faults``, and TF32's low-bit handling (``tf32`` vectors test it).

Example:
    >>> from tcnumerics.vectors.mutants import mutants
    >>> ms = mutants("hopper.wgmma.m64n8k16.f32.bf16.bf16")
    >>> [m.name for m in ms][:4]
    ['frac_bits-2', 'frac_bits-1', 'frac_bits+1', 'frac_bits+2']
    >>> [m.name for m in ms if m.equivalent]
    ['group_size*2', 'k_order_reversed']
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from ..catalog import get_instruction
from ..formats import FloatFormat, IntFormat, Rounding, get_format
from ..model import InstructionSpec, UnitModel
from .faults import Fault, applies as faults_apply, dot_bits as faulty_dot_bits, group_bounds

__all__ = ["Mutant", "mutants", "evaluate", "as_spec", "KINDS"]

KINDS: tuple[str, ...] = (
    "frac_bits", "group_size", "group_rounding", "output_cut", "c_entry", "k_order", "zero_exponent",
    "flush_inputs", "flush_outputs", "nan_bits", "nan_payload", "inf_minus_inf", "inf_times_zero",
    "overflow", "signed_zero", "int_saturation", "int_signedness",
    # datapath faults (``faults``) and the exact rewrites that model the RTL bug classes of ``rtlbench.BUGS``
    "term_alignment", "negation", "emax", "subnormal_exponent", "subnormal_hidden_bit", "product_sign",
    "output_exponent", "product_truncation", "c_add_rounding")

Rewrite = Callable[[InstructionSpec, np.ndarray, np.ndarray, np.ndarray], tuple]
Post = Callable[[InstructionSpec, np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Mutant:
    """One neighbour design of a unit.

    ``spec`` is the changed instruction (the unit's own for rewrite mutants); ``pre``
    rewrites the operands before the unit runs, ``post`` rewrites its result from the
    operands; ``equivalent`` is the proof that no input tells it from the unit ('' if none).
    """

    name: str
    kind: str
    spec: InstructionSpec
    description: str
    pre: Rewrite | None = None
    post: Post | None = None
    equivalent: str = ""
    fault: Fault | None = None


def evaluate(mutant: Mutant, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The mutant's d bits for [N, K] operands and [N] accumulators (K a multiple of its K).

    >>> import numpy as np
    >>> m = [m for m in mutants("volta.mma.m8n8k4.f32.f16.f16.f32") if m.name == "overflow_saturate"][0]
    >>> big = np.full((1, 4), 0x7BFF, np.uint16)             # fp16 65504
    >>> c = np.array([0x7F7FFFFF], np.uint32)                # fp32 max
    >>> hex(int(evaluate(m, big, big, c)[0]))                # the unit gives inf, the mutant max finite
    '0x7f7fffff'
    """
    from ..engines.reference import dot_bits

    a0, b0, c0 = a, b, c
    if mutant.pre is not None:
        a, b, c = mutant.pre(mutant.spec, a, b, c)
    d = dot_bits(mutant.spec, a, b, c) if mutant.fault is None else faulty_dot_bits(mutant.spec, a, b, c, mutant.fault)
    if mutant.post is not None:
        d = mutant.post(mutant.spec, a0, b0, c0, d)
    return np.asarray(d).astype(mutant.spec.d_format.container_dtype)


def mutants(spec_or_name: "str | InstructionSpec | UnitModel", k: int | None = None) -> list[Mutant]:
    """The one-step neighbours of an instruction (or of a bare ``UnitModel``, given ``k``).

    Block-scaled and sparse entries are refused (their operands carry more than a, b, c).
    """
    spec = as_spec(spec_or_name, k)
    if spec.model.is_block_scaled or ".sp." in spec.name:
        raise ValueError(f"{spec.name}: mutants cover dense, unscaled instructions only")
    m = spec.model
    if m.algorithm == "integer":
        return _integer_mutants(spec)
    if m.algorithm != "fused":
        raise ValueError(f"{spec.name}: mutants cover fused and integer units, not {m.algorithm!r}")
    out = _parameter_mutants(spec) + _rewrite_mutants(spec) + _bug_class_mutants(spec)
    return out


def as_spec(spec_or_name: "str | InstructionSpec | UnitModel", k: int | None = None) -> InstructionSpec:
    """A catalog name, an ``InstructionSpec`` or a bare ``UnitModel`` (one instruction of ``k``
    products, default one group) as an ``InstructionSpec``.

    >>> from tcnumerics.model import UnitModel
    >>> m = UnitModel(a_format="fp16", b_format="fp16", c_format="fp32", d_format="fp32", group_size=4,
    ...               frac_bits=23, zero_exponent=-131, output_rounding="rz")
    >>> as_spec(m).k, as_spec(m, k=16).k, as_spec("volta.mma.m8n8k4.f32.f16.f16.f32").k
    (4, 16, 4)
    """
    if isinstance(spec_or_name, UnitModel):
        return InstructionSpec(name="custom.unit", k=k or spec_or_name.group_size, model=spec_or_name)
    return get_instruction(spec_or_name)


def _variant(spec: InstructionSpec, **model_changes) -> InstructionSpec:
    return replace(spec, model=spec.model.with_(**model_changes))


def _parameter_mutants(spec: InstructionSpec) -> list[Mutant]:
    m = spec.model
    out: list[Mutant] = []
    if m.frac_bits is not None:
        for step in (-2, -1, 1, 2):
            f = m.frac_bits + step
            if 0 <= f <= 56:
                out.append(Mutant(f"frac_bits{step:+d}", "frac_bits", _variant(spec, frac_bits=f),
                                  f"alignment keeps F={f} fraction bits instead of {m.frac_bits}"))
    chunk = spec.chunk or spec.k
    for label, size in (("*2", m.group_size * 2), ("/2", m.group_size // 2)):
        if size < 1 or (label == "/2" and m.group_size % 2):
            continue
        proof = ""
        if min(size, chunk) == min(m.group_size, chunk):
            proof = (f"every chunk of {chunk} products is one group for L={m.group_size} and L={size}: "
                     f"the datapath sees the same single group")
        out.append(Mutant(f"group_size{label}", "group_size", _variant(spec, group_size=size),
                          f"{size} products fused per group instead of {m.group_size}", equivalent=proof))
    for r in (Rounding.RZ, Rounding.RNE, Rounding.RD, Rounding.RU):
        if r is not m.output_rounding:
            out.append(Mutant(f"group_rounding_{r.value}", "group_rounding", _variant(spec, output_rounding=r),
                              f"each group's sum rounded {r.value.upper()} instead of "
                              f"{m.output_rounding.value.upper()}"))
    if m.output_mantissa_bits is not None:
        out.append(Mutant("output_cut_missing", "output_cut", _variant(spec, output_mantissa_bits=None),
                          f"the full {m.d_format.name} mantissa written (no cut to {m.output_mantissa_bits} bits)"))
    out += _c_entry_mutants(spec) + _c_add_rounding_mutants(spec)
    order = list(spec.k_order) if spec.k_order is not None else list(range(spec.k))
    groups = -(-chunk // m.group_size) * (spec.k // chunk)
    proof = ("the instruction is one fused group: its result depends only on the multiset of terms "
             "(emax is a maximum, truncated terms are summed exactly)") if groups == 1 else ""
    out.append(Mutant("k_order_reversed", "k_order", replace(spec, k_order=tuple(order[::-1])),
                      "K elements enter the groups in reverse order", equivalent=proof))
    ez = m.zero_exponent
    for label, value in (("none", None), ("-1", None if ez is None else ez - 1), ("+1", None if ez is None else ez + 1)):
        if ez is None:
            break  # a unit without a zero exponent has no neighbour here
        out.append(Mutant(f"zero_exponent_{label}", "zero_exponent", _variant(spec, zero_exponent=value),
                          f"an exactly-zero term takes exponent {value} in emax (unit: {ez})",
                          equivalent=_zero_exponent_proof(spec, value)))
    out.append(Mutant("overflow_saturate", "overflow", _variant(spec, output_overflow="saturate"),
                      "results beyond the output range saturate to the largest finite instead of inf",
                      equivalent=_no_overflow_proof(spec)))
    alt_nan = m.d_format.nan_bits if m.nan_bits != m.d_format.nan_bits else _other_nan(m.d_format)
    out.append(Mutant("nan_bits_other", "nan_bits", _variant(spec, nan_bits=alt_nan),
                      f"the canonical NaN written is {alt_nan:#x} instead of {m.nan_bits:#x}"))
    return out


def _grid(fmt: FloatFormat) -> int:
    """log2 of the spacing of a float format's lowest binade: every value of it is a multiple of 2**grid."""
    return fmt.emin - fmt.man_bits


def _term_grid(spec: InstructionSpec) -> int:
    """log2 of a grid every group term lies on: the products of the operands (widened exactly),
    C, and the d-format accumulators of a chain."""
    return min(_grid(spec.a_format) + _grid(spec.b_format), _grid(spec.c_format), _grid(spec.model.d_format))


def _lowest_exponent(src: FloatFormat, dst: FloatFormat) -> int:
    """The exponent (as the unit aligns it) of the smallest nonzero ``src`` value widened to ``dst``."""
    return max(math.floor(math.log2(src.min_subnormal)), dst.emin)


def _lowest_product_exponent(spec: InstructionSpec) -> int:
    m = spec.model
    return _lowest_exponent(spec.a_format, m.a_format) + _lowest_exponent(spec.b_format, m.b_format)


def _zero_exponent_proof(spec: InstructionSpec, value: int | None) -> str:
    """Zero terms' exponent only matters if every nonzero term aligns below it and the window it
    then sets truncates one of them."""
    m = spec.model
    lowest = min(_lowest_product_exponent(spec), spec.c_format.emin, m.d_format.emin)
    floor = m.zero_exponent if value is None else max(m.zero_exponent, value)
    if lowest >= floor:
        return (f"every nonzero term aligns at exponent >= {lowest} >= {floor}: emax is the same whether zero "
                f"terms count as {m.zero_exponent} or {value}, and an all-zero group sums to 0 either way")
    grid = _term_grid(spec)
    if floor - m.frac_bits <= grid:
        return (f"emax can differ only in a group whose nonzero terms all align below {floor}; its emax is then "
                f"at most {floor} either way, so its window ends at 2**{floor - m.frac_bits} or lower, at or under "
                f"2**{grid}, the grid every term (products, C, accumulators) lies on: nothing is truncated and "
                f"both sum exactly")
    return ""


def _no_overflow_proof(spec: InstructionSpec) -> str:
    """Saturation can only show if a finite sum can round beyond the largest finite output."""
    m = spec.model
    out = m.output_format
    bound = spec.k * m.a_format.max_finite * m.b_format.max_finite + max(spec.c_format.max_finite, out.max_finite)
    ulp = 2.0 ** (out.emax - out.man_bits)
    if spec.c_entry == "ieee_add" or m.output_rounding is not Rounding.RZ:
        if bound < out.max_finite + ulp / 2 and m.output_rounding in (Rounding.RZ, Rounding.RNE):
            return (f"every exact sum is below {out.max_finite:.4g} + half an ulp (bound {bound:.4g}): "
                    f"nothing rounds beyond the largest finite")
        return ""
    if bound < 2.0 ** (out.emax + 1):
        return (f"every exact sum is below 2**{out.emax + 1} (bound {bound:.4g}) and RZ never rounds past "
                f"the largest finite: no finite result overflows")
    return ""


def _other_nan(fmt: FloatFormat) -> int:
    return int(fmt.nan_bits) ^ (1 << fmt.pad_bits)  # the lowest payload bit flipped: still a NaN


def _c_entry_mutants(spec: InstructionSpec) -> list[Mutant]:
    m = spec.model
    out = []
    if spec.c_entry == "fused":
        if m.d_format.man_bits + 1 <= 25:
            out.append(Mutant("c_added_after", "c_entry",
                              replace(spec, c_entry="ieee_add", c_add_rounding=Rounding.RNE),
                              "C added after the products by an IEEE RNE addition instead of aligned with them"))
    else:
        out.append(Mutant("c_fused_first", "c_entry", replace(spec, c_entry="fused", chunk_combine="chain"),
                          "C aligned with the first chunk's products instead of added after the chunks"))
    if faults_apply(spec) and spec.chunk_combine == "chain" and len(group_bounds(spec)) > 1:
        where = "being the first group's accumulator" if spec.c_entry == "fused" else "added after the chain"
        out.append(Mutant("c_last_in_chain", "c_entry", spec,
                          f"the chain of groups starts from +0 and C enters its last group, aligned with that "
                          f"group's products and the running sum, instead of {where}", fault=Fault(c_last=True)))
    return out


def _c_add_rounding_mutants(spec: InstructionSpec) -> list[Mutant]:
    """The rounding of the IEEE addition that adds C after the groups (and sums chunks, where it does)."""
    if spec.c_entry != "ieee_add":
        return []
    what = "IEEE additions of the chunks and of C" if spec.chunk_combine == "ieee_add" else "IEEE addition of C"
    return [Mutant(f"c_add_rounding_{r.value}", "c_add_rounding", replace(spec, c_add_rounding=r),
                   f"the {what} rounded {r.value.upper()} instead of {spec.c_add_rounding.value.upper()}")
            for r in (Rounding.RZ, Rounding.RNE, Rounding.RD, Rounding.RU) if r is not spec.c_add_rounding]


def _integer_mutants(spec: InstructionSpec) -> list[Mutant]:
    m = spec.model
    out = [Mutant("int_wrap" if m.saturate else "int_saturate", "int_saturation",
                  _variant(spec, saturate=not m.saturate),
                  "two's-complement wraparound" if m.saturate else "saturating (.satfinite) accumulation")]
    for side in ("a", "b"):
        fmt = getattr(spec, f"{side}_format")
        flipped = get_format(fmt.name.replace("s", "u") if fmt.name.startswith("s") else fmt.name.replace("u", "s"))
        changes = {f"{side}_format": flipped}
        new = replace(spec, model=m.with_(**changes), **changes)
        out.append(Mutant(f"int_{side}_{flipped.name}", "int_signedness", new,
                          f"operand {side.upper()} read as {flipped.name} instead of {fmt.name}"))
    return out


def _sign_bit(fmt) -> int:
    return (1 << (fmt.width - 1)) << fmt.pad_bits


def _flush_inputs(spec, a, b, c):
    def flush(fmt, x):
        if not isinstance(fmt, FloatFormat) or not fmt.subnormals:
            return x
        d = fmt.decode(x)
        sub = (d.kind == 0) & (d.significand != 0) & (d.significand < (1 << fmt.man_bits))
        return np.where(sub, x & x.dtype.type(_sign_bit(fmt)), x).astype(x.dtype)
    return flush(spec.a_format, a), flush(spec.b_format, b), flush(spec.c_format, c)


def _flush_outputs(spec, a, b, c, d):
    fmt = spec.model.output_format
    dec = fmt.decode(d)
    sub = (dec.kind == 0) & (dec.significand != 0) & (dec.significand < (1 << fmt.man_bits))
    return np.where(sub, 0, d)


def _specials(spec, a, b, c):
    A, B, C = spec.a_format.decode(a), spec.b_format.decode(b), spec.c_format.decode(c)
    any_nan = A.is_nan.any(axis=1) | B.is_nan.any(axis=1) | C.is_nan
    inf_zero = ((A.is_inf & B.is_zero) | (A.is_zero & B.is_inf)).any(axis=1)
    return any_nan, inf_zero, C


def _nan_payload(spec, a, b, c, d):
    fmt = spec.d_format
    any_nan, _, C = _specials(spec, a, b, c)
    is_nan = fmt.decode(d).is_nan
    quiet = (1 << (fmt.man_bits - 1)) << fmt.pad_bits
    return np.where(is_nan & C.is_nan, c | c.dtype.type(quiet), d)


def _inf_minus_inf(spec, a, b, c, d):
    fmt = spec.d_format
    any_nan, inf_zero, _ = _specials(spec, a, b, c)
    is_nan = fmt.decode(d).is_nan
    return np.where(is_nan & ~any_nan & ~inf_zero, fmt.inf_bits, d)


def _inf_times_zero(spec, a, b, c):
    A, B = spec.a_format.decode(a), spec.b_format.decode(b)
    kill_a = A.is_inf & B.is_zero
    kill_b = B.is_inf & A.is_zero
    a = np.where(kill_a, a & a.dtype.type(_sign_bit(spec.a_format)), a).astype(a.dtype)
    b = np.where(kill_b, b & b.dtype.type(_sign_bit(spec.b_format)), b).astype(b.dtype)
    return a, b, c


def _signed_zero(spec, a, b, c, d):
    C = spec.c_format.decode(c)
    neg_zero_c = C.is_zero & C.sign.astype(bool)
    return np.where((d == 0) & neg_zero_c, _sign_bit(spec.d_format), d)


def _one_inf_source_proof(spec: InstructionSpec) -> str:
    if spec.a_format.has_inf or spec.b_format.has_inf:
        return ""
    if spec.c_entry == "fused":  # groups chain: each one's only accumulator is C or the previous result
        return ("no product is infinite (operand formats without inf): a group's one infinite input can only be "
                "its accumulator (C, or the previous group's result, where an overflow's inf goes), so +inf and "
                "-inf never meet and a NaN comes only from a NaN operand")
    if not _no_overflow_proof(spec):
        return ""
    return ("no product is infinite (operand formats without inf) and no finite sum overflows: only C can be "
            "infinite, so +inf and -inf never meet")


def _no_subnormal_result_proof(spec: InstructionSpec) -> str:
    """A result is subnormal only if a nonzero sum can fall below the smallest normal."""
    m = spec.model
    grid = min(_grid(spec.a_format) + _grid(spec.b_format), _grid(spec.c_format))
    lowest_normal = max(m.output_format.emin, m.d_format.emin)
    if grid < lowest_normal:
        return ""
    return (f"every term is a multiple of 2**{grid} (the operands' grids multiplied, C's grid; truncation only "
            f"coarsens it), so a nonzero sum is at least 2**{grid} >= the smallest normal 2**{lowest_normal}; "
            f"rounding keeps it such a multiple at least that large, and every accumulator of a chain or IEEE "
            f"addition inherits it: no result is subnormal")


def _rewrite_mutants(spec: InstructionSpec) -> list[Mutant]:
    has_sub = any(isinstance(f, FloatFormat) and f.subnormals for f in (spec.a_format, spec.b_format, spec.c_format))
    out = [Mutant("flush_inputs", "flush_inputs", spec, "subnormal A, B and C flushed to zero (sign kept) on input",
                  pre=_flush_inputs,
                  equivalent="" if has_sub else "no operand format has subnormals: nothing to flush"),
           Mutant("flush_outputs", "flush_outputs", spec, "a subnormal result written as +0", post=_flush_outputs,
                  equivalent=_no_subnormal_result_proof(spec)),
           Mutant("inf_minus_inf_is_inf", "inf_minus_inf", spec, "+inf and -inf terms together give +inf, not NaN",
                  post=_inf_minus_inf, equivalent=_one_inf_source_proof(spec)),
           Mutant("inf_times_zero_is_zero", "inf_times_zero", spec, "inf * 0 is a zero product, not NaN",
                  pre=_inf_times_zero,
                  equivalent="" if spec.a_format.has_inf or spec.b_format.has_inf else
                  "neither operand format has an infinity: no product is inf * 0"),
           Mutant("zero_sign_from_c", "signed_zero", spec, "a zero result takes C's sign (-0 when C is -0)",
                  post=_signed_zero)]
    if spec.c_format == spec.d_format:
        out.append(Mutant("nan_payload_from_c", "nan_payload", spec,
                          "a NaN C passes through with its payload (quieted) instead of the canonical NaN",
                          post=_nan_payload))
    return out


# --- the RTL bug classes (``rtlbench.BUGS``): datapath faults and exact rewrites ---------------------------

def _c_always_zero(spec: InstructionSpec) -> bool:
    """Whether every group's accumulator input is +0: C added after one group that is the whole chunk."""
    chunk = spec.chunk or spec.k
    one_group = -(-chunk // spec.model.group_size) == 1
    return spec.c_entry != "fused" and one_group and (spec.chunk_combine == "ieee_add" or chunk == spec.k)


def _group_c_normal_proof(spec: InstructionSpec) -> str:
    """With C added after the groups, a group's accumulator is +0 or an earlier group's result: a nonzero
    sum of terms that are multiples of the smallest product, rounded (never below it) -- normal if that is."""
    if spec.c_entry == "fused":
        return ""
    fa, fb, d = spec.a_format, spec.b_format, spec.model.d_format
    quantum = (fa.min_subnormal if fa.subnormals else fa.min_normal) * (fb.min_subnormal if fb.subnormals
                                                                          else fb.min_normal)
    if quantum < d.min_normal:
        return ""
    return (f"C enters after the groups: a group's accumulator is +0 or an earlier group's result, a nonzero "
            f"multiple of the smallest product {quantum:.3g} >= {d.name}'s smallest normal: never subnormal")


def _reachable_subnormal(src, dst) -> bool:
    """Whether a value of format ``src`` can be a subnormal of ``dst`` (after the unit's exact conversion)."""
    if not isinstance(dst, FloatFormat) or not dst.subnormals:
        return False
    smallest = src.min_subnormal if src.subnormals else src.min_normal
    return smallest < dst.min_normal


def _hidden_bit(side: str) -> Rewrite:
    """Subnormals of one operand read with the hidden bit (exponent field 0 taken as 1): an exact bit rewrite."""
    def rewrite(spec, a, b, c):
        ops = {"a": a, "b": b, "c": c}
        fmt, x = getattr(spec, f"{side}_format"), ops[side]
        d = fmt.decode(x)
        sub = (d.kind == 0) & (d.significand != 0) & (d.significand < (1 << fmt.man_bits))
        ops[side] = np.where(sub, x | x.dtype.type(1 << (fmt.man_bits + fmt.pad_bits)), x).astype(x.dtype)
        return ops["a"], ops["b"], ops["c"]
    return rewrite


def _sign_from(side: str) -> Rewrite:
    """The product's sign taken from one operand only: the other operand's sign bit cleared."""
    def rewrite(spec, a, b, c):
        other = "b" if side == "a" else "a"
        x = {"a": a, "b": b}[other]
        cleared = (x & x.dtype.type(~_sign_bit(getattr(spec, f"{other}_format")) & ((1 << x.dtype.itemsize * 8) - 1)))
        return (a, cleared, c) if other == "b" else (cleared, b, c)
    return rewrite


def _exponent_low(spec, a, b, c, d):
    """A normal result written with its exponent field one low (an output bias off by one)."""
    fmt = spec.d_format
    shift = fmt.man_bits + fmt.pad_bits
    field = (d.astype(np.uint64) >> np.uint64(shift)) & np.uint64((1 << fmt.exp_bits) - 1)
    normal = (field >= 1) & (field < (1 << fmt.exp_bits) - 1)
    return np.where(normal, d - d.dtype.type(1 << shift), d)


def _tiny_c_proof(spec: InstructionSpec, single_group: bool) -> str:
    """A subnormal C, read either way, lies below every group's window: truncated to 0 by unit and mutant.

    ``single_group``: the mutant changes every group's accumulator (a datapath fault), so the
    argument covers only units whose instruction is one group (no d-format accumulator)."""
    m, fc = spec.model, spec.c_format
    if spec.c_entry != "fused" or (single_group and len(group_bounds(spec)) > 1):
        return ""
    floor = min(_lowest_product_exponent(spec), m.zero_exponent)
    window = floor - m.frac_bits
    if fc.emin + 1 > window:
        return ""
    return (f"a subnormal C is below 2**{fc.emin} (below 2**{fc.emin + 1} read with the hidden bit or a binade "
            f"low); a group's emax is at least {floor} (a nonzero product's exponent or the zero exponent), so "
            f"its window ends at 2**{window} or higher: C truncates to 0 either way and never sets emax")


@functools.lru_cache(maxsize=64)
def _trailing_zeros(src: FloatFormat, dst: FloatFormat) -> int:
    """The fewest low zero bits of a nonzero finite ``src`` value's significand widened to ``dst``
    (exhaustive over ``src``'s codes; 0 where the formats are the same or ``src`` is too wide to list)."""
    if src == dst or src.width > 16:
        return 0
    bits = src.all_bits()
    values = src.to_float(bits)
    values = values[np.isfinite(values) & (values != 0)]
    sig = dst.decode(dst.from_float(values)).significand.astype(np.int64)
    return int(np.log2(sig & -sig).min())


def _product_drop_proof(spec: InstructionSpec) -> str:
    """Cutting a product's lowest bit shows only if that bit can be 1 and can reach the window."""
    m = spec.model
    zeros = _trailing_zeros(spec.a_format, m.a_format) + _trailing_zeros(spec.b_format, m.b_format)
    if zeros >= 1:
        return (f"the operands are {spec.a_format.name} x {spec.b_format.name} values widened to "
                f"{m.a_format.name} x {m.b_format.name}: their significands end in {zeros} or more zero bits "
                f"between them, so every product's lowest bit is 0")
    width = m.a_format.man_bits + m.b_format.man_bits
    if m.frac_bits <= width - 1:
        return (f"a product's lowest bit lies {width} bits below its exponent, below the window of F={m.frac_bits} "
                f"bits under emax (itself at least the product's exponent): truncation drops it anyway")
    return ""


def _bug_class_mutants(spec: InstructionSpec) -> list[Mutant]:
    m = spec.model
    out: list[Mutant] = []
    floats = all(isinstance(getattr(spec, f"{s}_format"), FloatFormat) and getattr(spec, f"{s}_format").signed
                 and getattr(spec, f"{s}_format").specials != "fnuz" for s in "ab")
    if faults_apply(spec):
        c_zero = ("C is added after the instruction's single group, whose accumulator input is therefore +0: "
                  "nothing of C is aligned in a group") if _c_always_zero(spec) else ""
        lowest = m.a_format.emin + m.b_format.emin
        emax_zero = c_zero if c_zero and lowest > m.zero_exponent else ""
        for name, fault, what, proof in (
                ("products_aligned_low", Fault(product_shift=1), "every product aligned one bit low", ""),
                ("products_aligned_high", Fault(product_shift=-1), "every product aligned one bit high", ""),
                ("c_aligned_high", Fault(c_shift=1), "C aligned one bit high", c_zero),
                ("c_aligned_low", Fault(c_shift=-1), "C aligned one bit low", c_zero)):
            out.append(Mutant(name, "term_alignment", spec, what + " (emax unchanged)", fault=fault,
                              equivalent=proof))
        out.append(Mutant("negation_ones_complement", "negation", spec,
                          "a negative product enters as the ones' complement of its magnitude (no +1)",
                          fault=Fault(ones_complement=True)))
        out.append(Mutant("product_truncated", "product_truncation", spec,
                          "each exact product cut toward zero by its lowest bit before alignment",
                          fault=Fault(product_drop=1), equivalent=_product_drop_proof(spec)))
        out.append(Mutant("c_not_in_emax", "emax", spec,
                          "the group's max exponent taken over the products only (C left out)",
                          fault=Fault(c_in_emax=False), equivalent=emax_zero))
        group_c = (spec.c_format, m.d_format)
        for side, src, dst in (("a", spec.a_format, m.a_format), ("b", spec.b_format, m.b_format)):
            out.append(Mutant(f"subnormal_exponent_{side}", "subnormal_exponent", spec,
                              f"a subnormal {side.upper()} aligned one binade low (exponent field 0 read as 0)",
                              fault=Fault(subnormal_low=(side,)),
                              equivalent="" if _reachable_subnormal(src, dst) else
                              f"no {src.name} value is a subnormal {dst.name}: nothing aligns differently"))
        sub_c = any(isinstance(f, FloatFormat) and f.subnormals for f in group_c)
        out.append(Mutant("subnormal_exponent_c", "subnormal_exponent", spec,
                          "a subnormal C aligned one binade low (exponent field 0 read as 0)",
                          fault=Fault(subnormal_low=("c",)),
                          equivalent=c_zero or ("" if sub_c else "C's formats have no subnormals")
                          or _group_c_normal_proof(spec) or _tiny_c_proof(spec, single_group=True)))
    for side in "abc":
        fmt = getattr(spec, f"{side}_format")
        if isinstance(fmt, FloatFormat):
            tiny = _tiny_c_proof(spec, single_group=False) if side == "c" and faults_apply(spec) else ""
            out.append(Mutant(f"subnormal_hidden_bit_{side}", "subnormal_hidden_bit", spec,
                              f"a subnormal {side.upper()} read with the hidden bit (as exponent field 1)",
                              pre=_hidden_bit(side),
                              equivalent=tiny if fmt.subnormals else f"{fmt.name} has no subnormals"))
    if floats:
        for side in "ab":
            out.append(Mutant(f"product_sign_from_{side}", "product_sign", spec,
                              f"each product's sign taken from {side.upper()} alone", pre=_sign_from(side)))
    if isinstance(spec.d_format, FloatFormat):
        out.append(Mutant("output_exponent_low", "output_exponent", spec,
                          "a normal result written with its exponent one low (output bias off by one)",
                          post=_exponent_low))
    return out
