"""Datapath faults: a fused unit with one step of its group datapath changed.

Some neighbour designs of a fused unit are neither a ``UnitModel`` parameter nor an exact
rewrite of its operands or result: a term aligned one bit off, negative terms negated
without the +1 of two's complement, C left out of the group's maximum exponent, a subnormal
operand aligned one binade low.  These are the classes of bug an RTL datapath has (see
``rtlbench.BUGS``), so the mutants that model them (``mutants``, kinds ``term_alignment``,
``negation``, ``emax``, ``subnormal_exponent``) run the unit through ``dot_bits`` here: the
reference engine's instruction and group structure, restated with a ``Fault`` whose
neutral value ``Fault()`` is the unit itself (``tests/test_mutants.py`` proves
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

from ..engines.reference import _special_mask, _truncated, instruction_step, round_signed_sum
from ..formats import Decoded, FloatFormat, Format
from ..model import InstructionSpec, UnitModel

__all__ = ["Fault", "fused_group", "dot_bits", "applies"]


@dataclass(frozen=True)
class Fault:
    """One change to the group datapath; ``Fault()`` changes nothing.

    ``product_shift``: products aligned this many bits low (their value / 2**shift; emax
    unchanged); ``c_shift``: C aligned this many bits high (value * 2**shift);
    ``ones_complement``: a negative product enters as ``~magnitude`` (one unit of the grid
    low); ``c_in_emax=False``: emax over the products only; ``subnormal_low``: operands
    ('a', 'b', 'c') whose subnormals align one binade low (exponent field 0 read as 0).
    """

    product_shift: int = 0
    c_shift: int = 0
    ones_complement: bool = False
    c_in_emax: bool = True
    subnormal_low: tuple = ()


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
                fault: Fault) -> np.ndarray:
    """``engines.reference.fused_group`` (F set, no block scales) with ``fault`` applied."""
    decoded = {"a": model.a_format.decode(a), "b": model.b_format.decode(b), "c": c_format.decode(c)}
    fmts = {"a": model.a_format, "b": model.b_format, "c": c_format}
    A, B, C = (_lower_subnormals(fmts[s], decoded[s]) if s in fault.subnormal_low else decoded[s] for s in "abc")
    nan, inf, inf_neg = _special_mask(A, B, C)
    p_sig = np.where((A.kind == 0) & (B.kind == 0), A.significand * B.significand, 0)
    p_ulp = A.ulp_exponent + B.ulp_exponent
    p_neg = A.sign ^ B.sign
    c_sig = np.where(C.kind == 0, C.significand, 0)
    p_exp = np.where(p_sig == 0, model.zero_exponent, A.exponent + B.exponent)
    c_exp = np.where(c_sig == 0, model.zero_exponent, C.exponent)
    e_max = np.maximum(p_exp.max(axis=1), c_exp) if fault.c_in_emax else p_exp.max(axis=1)
    quantum = e_max - model.frac_bits
    terms = _truncated(p_sig, p_ulp - quantum[:, None] - fault.product_shift, p_neg)
    if fault.ones_complement:
        terms = np.where(p_neg, terms - 1, terms)
    total = terms.sum(axis=1)
    if fault.c_in_emax:
        total += _truncated(c_sig, C.ulp_exponent - quantum + fault.c_shift, C.sign)
    else:  # C may lie far above the products' window: exact Python integers
        total = total.astype(object) + np.array([_trunc_int(s, e, neg) for s, e, neg in zip(
            c_sig, C.ulp_exponent - quantum + fault.c_shift, C.sign)] or [], dtype=object)
    bits = round_signed_sum(total, quantum, model.output_format, model.output_rounding, model.output_overflow)
    d = model.d_format
    inf_bits = np.where(inf_neg, (1 << (d.width - 1)) << d.pad_bits, 0) | d.inf_bits
    bits = np.where(inf, inf_bits, bits)
    return np.where(nan, model.nan_bits, bits).astype(d.container_dtype)


def _trunc_int(sig, shift, negative) -> int:
    mag = int(sig) << int(shift) if shift >= 0 else int(sig) >> int(-shift)
    return -mag if negative else mag


def _groups(model: UnitModel, a, b, acc, acc_fmt, fault: Fault):
    for start in range(0, a.shape[1], model.group_size):
        acc = fused_group(model, a[:, start:start + model.group_size], b[:, start:start + model.group_size],
                          acc, acc_fmt, fault)
        acc_fmt = model.d_format
    return acc


def dot_bits(spec: InstructionSpec, a: np.ndarray, b: np.ndarray, c: np.ndarray, fault: Fault) -> np.ndarray:
    """The instruction chained over K' (a multiple of spec.k) with ``fault`` in every group."""
    if not applies(spec) or spec.model.is_block_scaled:
        raise ValueError(f"{spec.name}: datapath faults cover fused, unscaled units with F and a zero exponent")
    acc = c
    for start in range(0, a.shape[1], spec.k):
        acc = instruction_step(spec, a[:, start:start + spec.k], b[:, start:start + spec.k], acc,
                               group_datapath=functools.partial(_groups, fault=fault))
    return acc
