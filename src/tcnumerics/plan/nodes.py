"""The plan tree: a frozen, printable statement of exactly how an output is computed.

A plan is a tree of nodes; leaves read the call's operands (bound by name when the plan is run), inner nodes
are the reductions and the epilogue.  ``Plan.explain()`` prints it, one node a line, children indented below
their parent (read it bottom-up: the innermost chains run first).

Nodes (``K[k0:k1)`` are positions in the call's K order after the kernel's zero padding):

* ``Chain`` -- the instruction chain over ``K[k0:k1)``: each instruction's D is the next one's C, from +0 or
  from C as the accumulator;
* ``PairedChain`` -- the chain of paired rows' dot products (``Instruction.dot_bits``; sparse units);
* ``BlockScaledChain`` -- a block-scaled (MX / NVFP4) instruction's chain, the scales applied inside the unit;
* ``Promote`` -- ``every`` K-elements chained from +0, each block's FP32 result added into an FP32 main
  accumulator (RNE), or with block scales multiplied in by one FMA per block;
* ``FFMAChain`` -- an FP32 fused multiply-add per element, in K order, from +0, over given K columns;
* ``Reduction`` -- a kernel-specific FP32 summation order (cuBLAS SIMT small-M kernels, stream-K), evaluated by
  the function it names;
* ``OrderedSum`` -- FP32 terms summed in order, each addition RNE (``contiguous`` / ``interleaved`` slices), or
  ``serial``: the first term already converted to the output, each later one added by ``fma(alpha, t, D)``
  rounded to the output format;
* ``RoundEach`` -- a term rounded to a narrower format (split-K partials stored in BF16/FP16);
* ``Scale`` -- per-tensor ``acc * fp32(sa * sb)`` or row-wise ``(acc * sb) * sa``;
* ``Epilogue`` -- alpha, beta * C and bias in the accumulator format, in the order of its steps;
* ``Convert`` -- one conversion to the output format.

>>> import tcnumerics as tc
>>> from tcnumerics.catalog import get_instruction
>>> spec = get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")
>>> print(Plan(Convert(Chain(spec, 0, 64), "bf16")).explain())
convert to bf16 (RNE)
  chain hopper.wgmma.m64n8k16.f32.bf16.bf16 over K[0:64) (4 instructions) from +0
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..model import InstructionSpec

__all__ = ["Plan", "Node", "Chain", "PairedChain", "BlockScaledChain", "Promote", "FFMAChain", "Reduction", "OrderedSum", "RoundEach", "Input",
           "Scale", "Epilogue", "Alpha", "AddC", "RoundTo", "AddExact", "Convert"]


class Node:
    """A node of a plan: ``children()`` below it, ``line()`` says what it computes."""

    def children(self) -> tuple["Node", ...]:
        return ()

    def line(self) -> str:  # pragma: no cover - every node overrides it
        raise NotImplementedError


@dataclass(frozen=True)
class Input(Node):
    """A bound operand, read as FP32 values (e.g. C starting the FP32 main accumulator)."""

    name: str

    def line(self) -> str:
        return f"{self.name} (FP32 values)"


@dataclass(frozen=True)
class Chain(Node):
    """The instruction chain over ``K[k0:k1)``, from +0 or (``start="C"``) from C as the accumulator."""

    instruction: InstructionSpec
    k0: int
    k1: int
    start: str | None = None

    def line(self) -> str:
        n = (self.k1 - self.k0) // self.instruction.k
        return (f"chain {self.instruction.name} over K[{self.k0}:{self.k1}) ({n} instruction{'s' * (n != 1)}) "
                f"from {'C' if self.start else '+0'}")


@dataclass(frozen=True)
class PairedChain(Node):
    """Dot products of paired rows (row i of ``A`` with row i of ``B``, [N, K] bits each) chained over all of K
    from the bound accumulator bits ``C_acc`` -- the unit-level chain ``Instruction.dot_bits`` evaluates."""

    instruction: InstructionSpec

    def line(self) -> str:
        return f"paired-row chain {self.instruction.name} over all K from C"


@dataclass(frozen=True)
class BlockScaledChain(Node):
    """A block-scaled instruction's chain over ``K[k0:k1)`` from +0: the block scales (bound as ``scale_bits_a``
    [M, Kp / block] and ``scale_bits_b`` [N, Kp / block]) enter inside the unit (``tcnumerics.blockscale``)."""

    instruction: InstructionSpec
    k0: int
    k1: int

    def line(self) -> str:
        n = (self.k1 - self.k0) // self.instruction.k
        m = self.instruction.model
        return (f"block-scaled chain {self.instruction.name} over K[{self.k0}:{self.k1}) ({n} instruction"
                f"{'s' * (n != 1)}) from +0, {m.scale_format.name} scales per {m.scale_block} elements in the unit")


@dataclass(frozen=True)
class Promote(Node):
    """FP32 promotion over ``K[k0:k1)``: chains of ``every`` elements from +0 added into a main accumulator that
    starts at ``start`` (an Input name) or +0; with ``block_scale`` each block's partial is multiplied by
    ``fp32(scale_a * scale_b)`` of its scale block in one FMA (``origin``: the slice's first K in the call)."""

    instruction: InstructionSpec
    k0: int
    k1: int
    every: int
    start: str | None = None
    block_scale: int | None = None
    origin: int = 0

    def line(self) -> str:
        how = (f"main = fma(partial, fp32(sa * sb), main) per {self.block_scale}-element scale block"
               if self.block_scale else "main += partial, RNE")
        return (f"promote every {self.every} over K[{self.k0}:{self.k1}): chains of {self.instruction.name} "
                f"from +0, {how}; main from {self.start or '+0'}")


@dataclass(frozen=True)
class FFMAChain(Node):
    """One FP32 FFMA per element over the K columns ``columns`` (in that order), from +0."""

    columns: tuple[int, ...]

    def line(self) -> str:
        c = self.columns
        span = (f"K[{c[0]}:{c[-1] + 1})" if c and list(c) == list(range(c[0], c[-1] + 1))
                else f"{len(c)} K columns from {c[0] if c else '-'}")
        return f"FFMA chain over {span} from +0"


@dataclass(frozen=True)
class Reduction(Node):
    """A kernel-specific FP32 reduction (``describe`` says which); ``evaluate(A, B)`` computes it."""

    describe: str
    evaluate: Callable = field(compare=False, repr=False)
    detail: "Node | None" = None  # the plan it runs itself (printed only)

    def children(self):
        return () if self.detail is None else (self.detail,)

    def line(self) -> str:
        return self.describe


@dataclass(frozen=True)
class OrderedSum(Node):
    """``terms`` summed in order: FP32 additions, RNE (contiguous / interleaved), or ``serial`` (see module)."""

    terms: tuple[Node, ...]
    kind: str = "contiguous"
    alpha: float = 1.0
    out_format: str | None = None

    def children(self):
        return self.terms

    def line(self) -> str:
        if self.kind == "serial":
            return (f"serial sum of {len(self.terms)} slices: D = {self.out_format}(fma(alpha={self.alpha:g}, "
                    f"slice, D)) after the first slice's epilogue")
        return f"ordered sum ({self.kind}) of {len(self.terms)} terms, FP32 RNE additions in order"


@dataclass(frozen=True)
class RoundEach(Node):
    """A term rounded to ``format`` (RNE) before it is summed."""

    term: Node
    format: str

    def children(self):
        return (self.term,)

    def line(self) -> str:
        return f"round to {self.format} (RNE)"


@dataclass(frozen=True)
class Scale(Node):
    """Epilogue scales: ``tensor`` -- acc * fp32(sa * sb); ``row`` -- (acc * sb) * sa, each product RNE."""

    term: Node
    kind: str

    def children(self):
        return (self.term,)

    def line(self) -> str:
        return ("scale: acc * fp32(scale_a * scale_b)" if self.kind == "tensor"
                else "scale: (acc * scale_b) * scale_a, each product rounded to FP32")


@dataclass(frozen=True)
class Alpha:
    """``d = R(d * R(alpha))`` (skipped for alpha = 1); ``name``: the factor's name in the call (``beta`` scaling C
    where nothing was multiplied); ``value_format``: the factor is rounded to that format first (torch rounds
    addmm's beta to the output type)."""

    value: float
    name: str = "alpha"
    value_format: str | None = None

    def text(self) -> str:
        factor = f"{self.name}={self.value:g}" + (f" as {self.value_format}" if self.value_format else "")
        return f"* {factor}" if self.value != 1 else f"{factor} (no product)"


@dataclass(frozen=True)
class AddC:
    """``d = R(d + R(c * R(beta)))`` (the product skipped for beta = 1; ``round_operand``: c rounded to the
    accumulator format first), or ``fused``: ``d = fma(R(beta), c, d)``.  ``operand``: "C" or "bias" (a row)."""

    operand: str = "C"
    beta: float = 1.0
    fused: bool = False
    round_operand: bool = False

    def text(self) -> str:
        c = f"R({self.operand})" if self.round_operand else self.operand
        if self.fused:
            return f"fma(beta={self.beta:g}, {c}, d)"
        return f"+ {c}" if self.beta == 1 else f"+ R(beta={self.beta:g} * {c})"


@dataclass(frozen=True)
class RoundTo:
    """``d`` converted to ``format`` (RNE) in the middle of the epilogue."""

    format: str
    rounding: str = "rne"

    def text(self) -> str:
        return f"to {self.format}"


@dataclass(frozen=True)
class AddExact:
    """``d + operand`` exactly; the conversion that follows rounds the sum once (53 >= 2 * 24 + 2)."""

    operand: str = "C"

    def text(self) -> str:
        return f"+ {self.operand} (rounded once by the conversion)"


@dataclass(frozen=True)
class Epilogue(Node):
    """``steps`` applied in order to the accumulator, each operation rounded to ``acc_format`` (RNE)."""

    term: Node
    steps: tuple = ()
    acc_format: str = "fp32"

    def children(self):
        return (self.term,)

    def line(self) -> str:
        return f"epilogue in {self.acc_format}: " + ", ".join(s.text() for s in self.steps)


@dataclass(frozen=True)
class Convert(Node):
    """One conversion to ``format`` (None: the accumulator format itself) with ``rounding``."""

    term: Node
    format: str | None = None
    rounding: str = "rne"

    def children(self):
        return (self.term,)

    def line(self) -> str:
        name = self.format or "the accumulator format"
        return f"convert to {name} ({str(getattr(self.rounding, 'value', self.rounding)).upper()})"


@dataclass(frozen=True)
class Plan:
    """A whole output's computation: ``root`` and a title line (what was planned, for whom)."""

    root: Node
    title: str = ""
    notes: tuple[str, ...] = ()

    def explain(self) -> str:
        """The tree, one node a line, children indented under their parent; the title and notes first."""
        lines = ([self.title] if self.title else []) + [f"note: {n}" for n in self.notes]
        pad = "  " if self.title or self.notes else ""
        _lines(self.root, pad, lines)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.explain()


def _lines(node: Node, indent: str, out: list[str]) -> None:
    out.append(indent + node.line())
    kids = node.children()
    if len(kids) > 8:  # a long split: the first and last terms stand for the rest
        for k in kids[:3]:
            _lines(k, indent + "  ", out)
        out.append(f"{indent}  ... {len(kids) - 4} more ...")
        kids = kids[-1:]
    for k in kids:
        _lines(k, indent + "  ", out)
