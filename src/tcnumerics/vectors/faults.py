"""Datapath faults: a fused unit with one step of its group datapath changed.

Some neighbour designs of a fused unit are neither a ``UnitModel`` parameter nor an exact
rewrite of its operands or result: a term aligned one bit off, negative terms negated
without the +1 of two's complement, C left out of the group's maximum exponent, a subnormal
operand aligned one binade low, products cut to fewer bits before alignment, C entering the
last group of a chain instead of the first.  These are the classes of bug an RTL datapath
has (see ``rtlbench.BUGS``), so the mutants that model them (``mutants``, kinds
``term_alignment``, ``negation``, ``emax``, ``subnormal_exponent``, ``product_truncation``,
``c_entry``) run the unit through ``dot_bits`` here: the
reference engine's instruction and group structure, restated with a ``Fault`` whose
neutral value ``Fault()`` is the unit itself (``tests/test_adequate.py`` proves
``dot_bits(spec, a, b, c, Fault())`` equal to ``engines.reference.dot_bits`` bit for bit on
every family of every fused entry; the group reuses the reference's own decode, special
and truncation steps, so only the lines a fault changes are restated).

Method of the group (as ``engines.reference.fused_group``): every product is exact; emax is
the largest term exponent (zero terms count as the zero exponent); every term is truncated
toward zero to a multiple of 2**(emax - F); the integer sum is rounded once.  A fault that
leaves C out of emax keeps C's bits above the window, so its sum is formed with Python
integers (exact, any width).

Example:
    >>> import numpy as np
    >>> from tcnumerics.catalog import get_instruction
    >>> spec = get_instruction("volta.mma.m8n8k4.f32.f16.f16.f32")
    >>> a = np.array([[0x3A00, 0x3A00, 0, 0]], np.uint16)          # 0.75, 0.75, 0, 0
    >>> b = np.full((1, 4), 0x3C00, np.uint16)                     # 1.0
    >>> c = np.array([0x4B000000], np.uint32)                      # C = 2**23: its window ends at 2**0
    >>> [hex(int(dot_bits(spec, a, b, c, f)[0])) for f in (Fault(), Fault(c_in_emax=False))]
    ['0x4b000000', '0x4b000001']
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..engines.reference import convert_patterns, special_outcome, truncate_toward_zero, instruction_step, round_signed_sum
from ..formats import Decoded, FloatFormat, Format
from ..model import InstructionSpec, UnitModel

__all__ = ["Fault", "fused_group", "dot_bits", "applies", "group_bounds"]


@dataclass(frozen=True)
class Fault:
    """One change to the group datapath; ``Fault()`` changes nothing.

    ``product_shift``: products aligned this many bits low (their value / 2**shift; emax
    unchanged); ``c_shift``: C aligned this many bits high (value * 2**shift);
    ``ones_complement``: a negative product enters as ``~magnitude`` (one unit of the grid
    low); ``c_in_emax=False``: emax over the products only; ``subnormal_low``: operands
    ('a', 'b', 'c') whose subnormals align one binade low (exponent field 0 read as 0);
    ``product_drop``: each exact product's significand cut toward zero by this many low
    bits before alignment (a multiplier array one column short); ``c_last``: the chain of
    groups starts from +0 and C enters the last group, aligned there with its products and
    the running sum (instead of being the first group's accumulator or added after).
    """

    product_shift: int = 0
    c_shift: int = 0
    ones_complement: bool = False
    c_in_emax: bool = True
    subnormal_low: tuple = ()
    product_drop: int = 0
    c_last: bool = False


def applies(spec: InstructionSpec) -> bool:
    """Datapath faults are defined for fused, unscaled units with a truncation window and a zero exponent."""
    m = spec.model
    return m.algorithm == "fused" and m.frac_bits is not None and m.zero_exponent is not None


def _lower_subnormals(fmt: Format, D: Decoded) -> Decoded:
    if not isinstance(fmt, FloatFormat) or not fmt.subnormals:
        return D
    sub = (D.kind == 0) & (D.significand != 0) & (D.significand < (1 << fmt.man_bits))
    return Decoded(D.sign, D.significand, D.ulp_exponent - sub, D.exponent - sub, D.kind)


def fused_group(model: UnitModel, a: np.ndarray, b: np.ndarray, c: np.ndarray, c_format: Format,
                fault: Fault, extra: "tuple | None" = None) -> np.ndarray:
    """``engines.reference.fused_group`` (F set, no block scales) with ``fault`` applied.

    ``extra``: ``(bits, format)`` of one more addend aligned in the group like C (C entering
    the last group of a chain, ``Fault.c_last``); None for the unit's group.
    """
    decoded = {"a": model.a_format.decode(a), "b": model.b_format.decode(b), "c": c_format.decode(c)}
    fmts = {"a": model.a_format, "b": model.b_format, "c": c_format}
    A, B, C = (_lower_subnormals(fmts[s], decoded[s]) if s in fault.subnormal_low else decoded[s] for s in "abc")
    nan, inf, inf_neg = special_outcome(A, B, C)
    X = extra[1].decode(extra[0]) if extra is not None else None
    if X is not None:
        nan, inf, inf_neg = _with_special_addend(nan, inf, inf_neg, X)
    p_sig = np.where((A.kind == 0) & (B.kind == 0), A.significand * B.significand, 0)
    if fault.product_drop:  # the multiplier keeps fewer low bits: magnitudes cut toward zero
        p_sig = (p_sig >> fault.product_drop) << fault.product_drop
    p_ulp = A.ulp_exponent + B.ulp_exponent
    p_neg = A.sign ^ B.sign
    c_sig = np.where(C.kind == 0, C.significand, 0)
    p_exp = np.where(p_sig == 0, model.zero_exponent, A.exponent + B.exponent)
    c_exp = np.where(c_sig == 0, model.zero_exponent, C.exponent)
    e_max = np.maximum(p_exp.max(axis=1), c_exp) if fault.c_in_emax else p_exp.max(axis=1)
    if X is not None:
        x_sig = np.where(X.kind == 0, X.significand, 0)
        e_max = np.maximum(e_max, np.where(x_sig == 0, model.zero_exponent, X.exponent))
    quantum = e_max - model.frac_bits
    terms = truncate_toward_zero(p_sig, p_ulp - quantum[:, None] - fault.product_shift, p_neg)
    if fault.ones_complement:
        terms = np.where(p_neg, terms - 1, terms)
    total = terms.sum(axis=1)
    if X is not None:
        total += truncate_toward_zero(x_sig, X.ulp_exponent - quantum, X.sign)
    if fault.c_in_emax:
        total += truncate_toward_zero(c_sig, C.ulp_exponent - quantum + fault.c_shift, C.sign)
    else:  # C may lie far above the products' window: exact Python integers
        total = total.astype(object) + np.array([_trunc_int(s, e, neg) for s, e, neg in zip(
            c_sig, C.ulp_exponent - quantum + fault.c_shift, C.sign)] or [], dtype=object)
    bits = round_signed_sum(total, quantum, model.output_format, model.output_rounding, model.output_overflow)
    d = model.d_format
    inf_bits = np.where(inf_neg, (1 << (d.width - 1)) << d.pad_bits, 0) | d.inf_bits
    bits = np.where(inf, inf_bits, bits)
    return np.where(nan, model.nan_bits, bits).astype(d.container_dtype)


def _with_special_addend(nan, inf, inf_neg, X: Decoded):
    """The group's (is_nan, is_inf, inf_negative) with one more addend ``X``: a NaN, or an
    infinity of the other sign than the group's, makes the result NaN."""
    pos = (inf & ~inf_neg) | (X.is_inf & ~X.sign)
    neg = (inf & inf_neg) | (X.is_inf & X.sign)
    nan = nan | X.is_nan | (pos & neg)
    return nan, (pos | neg) & ~nan, neg


def _trunc_int(sig, shift, negative) -> int:
    mag = int(sig) << int(shift) if shift >= 0 else int(sig) >> int(-shift)
    return -mag if negative else mag


def _groups(model: UnitModel, a, b, acc, acc_fmt, fault: Fault):
    for start in range(0, a.shape[1], model.group_size):
        acc = fused_group(model, a[:, start:start + model.group_size], b[:, start:start + model.group_size],
                          acc, acc_fmt, fault)
        acc_fmt = model.d_format
    return acc


def group_bounds(spec: InstructionSpec) -> list:
    """``(start, stop)`` of each group of one instruction in datapath order (chunks split into groups)."""
    chunk, size = spec.chunk or spec.k, spec.model.group_size
    return [(s, min(s + size, c0 + chunk)) for c0 in range(0, spec.k, chunk) for s in range(c0, c0 + chunk, size)]


def _c_last_step(spec: InstructionSpec, a, b, c, fault: Fault) -> np.ndarray:
    """One instruction whose groups chain from +0, C aligned in the last group with its products
    and the running sum (``Fault.c_last``; chained chunks only)."""
    m = spec.model
    a, b = convert_patterns(a, spec.a_format, m.a_format), convert_patterns(b, spec.b_format, m.b_format)
    if spec.k_order is not None:
        a, b = a[:, np.asarray(spec.k_order)], b[:, np.asarray(spec.k_order)]
    acc, acc_fmt = np.zeros(len(c), m.c_format.container_dtype), m.c_format
    bounds = group_bounds(spec)
    for i, (s, e) in enumerate(bounds):
        extra = (c, spec.c_format) if i == len(bounds) - 1 else None
        acc = fused_group(m, a[:, s:e], b[:, s:e], acc, acc_fmt, fault, extra)
        acc_fmt = m.d_format
    return acc


def dot_bits(spec: InstructionSpec, a: np.ndarray, b: np.ndarray, c: np.ndarray, fault: Fault) -> np.ndarray:
    """The instruction chained over K' (a multiple of spec.k) with ``fault`` in every group."""
    if not applies(spec) or spec.model.is_block_scaled:
        raise ValueError(f"{spec.name}: datapath faults cover fused, unscaled units with F and a zero exponent")
    if fault.c_last and spec.chunk_combine != "chain":
        raise ValueError(f"{spec.name}: C in the last group needs chunks chained (chunk_combine='chain')")
    acc = c
    for start in range(0, a.shape[1], spec.k):
        a_k, b_k = a[:, start:start + spec.k], b[:, start:start + spec.k]
        if fault.c_last:
            acc = _c_last_step(spec, a_k, b_k, acc, fault)
        else:
            acc = instruction_step(spec, a_k, b_k, acc, group_datapath=functools.partial(_groups, fault=fault))
    return acc
