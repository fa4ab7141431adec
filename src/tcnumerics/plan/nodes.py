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
* ``FFMAChain`` -- an FP32 fused multiply-add per element, in the order of its K columns, from +0 (then, where a
  kernel's lane runs idle steps, +0 products: they turn a -0 into +0);
* ``OrderedSum`` -- FP32 terms summed, each addition RNE: in order (``contiguous`` / ``interleaved`` slices,
  optionally from +0), as a ``halving`` tree (term i + term i + n/2, repeated: shared-memory / shuffle lane
  reductions) or along a given ``tree`` of index pairs (stream-K fix-up); or ``serial``: the first term already
  converted to the output, each later one added by ``fma(alpha, t, D)`` rounded to the output format;
* ``LayOut`` -- the call's operand values bound for its subtree: rounded to TF32 where the kernel does, as the
  instruction's operand bits, each K slice padded with +0 to instruction boundaries;
* ``TileGroups`` -- outputs grouped by their output tile, each group computed by its own subtree (stream-K: the
  tiles CTAs share are reduced differently from the data-parallel ones);
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

from dataclasses import dataclass

from ..model import InstructionSpec

__all__ = ["Plan", "Node", "Chain", "PairedChain", "BlockScaledChain", "Promote", "FFMAChain", "OrderedSum", "RoundEach",
           "Input", "LayOut", "TileGroups", "Scale", "Epilogue", "Alpha", "AddC", "RoundTo", "AddExact", "Convert",
           "k_span"]


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
    from the bound accumulator bits ``C_acc`` -- the unit-level chain ``Instruction.dot_bits`` evaluates; with
    ``block_scaled`` the bound ``scale_bits_a``/``scale_bits_b`` ([N, K / block]) enter inside the unit."""

    instruction: InstructionSpec
    block_scaled: bool = False

    def line(self) -> str:
        scaled = ", block scales in the unit" if self.block_scaled else ""
        return f"paired-row chain {self.instruction.name} over all K from C{scaled}"


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
    """One FP32 FFMA per element over the K columns ``columns`` (in that order), from +0; then ``pad`` FFMAs of a +0
    product (a lane's idle steps: each adds +0, which turns a -0 result into +0)."""

    columns: tuple[int, ...]
    pad: int = 0

    def line(self) -> str:
        idle = f", then {self.pad} +0 product{'s' * (self.pad != 1)}" if self.pad else ""
        return f"FFMA chain over {k_span(self.columns)} from +0{idle}"


def k_span(columns) -> str:
    """K columns in words: a range, a strided range, equal runs at a stride, or a count.

    >>> k_span((4, 5, 6)), k_span((3, 19, 35)), k_span((0, 1, 8, 9, 16)), k_span(())
    ('K[4:7)', 'K[3:36:16)', 'K[0:17) in runs of 2 every 8', 'no K columns')
    """
    c = list(columns)
    if not c:
        return "no K columns"
    if c == list(range(c[0], c[-1] + 1)):
        return f"K[{c[0]}:{c[-1] + 1})"
    starts = [k for i, k in enumerate(c) if i == 0 or c[i - 1] != k - 1]
    ends = [k for i, k in enumerate(c) if i + 1 == len(c) or c[i + 1] != k + 1]
    lengths = [e - a + 1 for a, e in zip(starts, ends)]
    steps = {b - a for a, b in zip(starts, starts[1:])}
    if len(steps) == 1 and len(set(lengths[:-1])) <= 1 and lengths[-1] <= lengths[0]:
        step = steps.pop()
        if lengths[0] == 1:
            return f"K[{c[0]}:{c[-1] + 1}:{step})"
        return f"K[{c[0]}:{c[-1] + 1}) in runs of {lengths[0]} every {step}"
    return f"{len(c)} K columns from {c[0]} to {c[-1]}"


@dataclass(frozen=True)
class OrderedSum(Node):
    """``terms`` summed with FP32 additions, each RNE: ``contiguous`` / ``interleaved`` in order (from +0 with
    ``from_zero``), ``halving`` (term i + term i + n/2, repeated, an odd count padded with +0), ``tree`` (along
    ``tree``: a term's index or a pair of subtrees); or ``serial`` (see the module)."""

    terms: tuple[Node, ...]
    kind: str = "contiguous"
    alpha: float = 1.0
    out_format: str | None = None
    from_zero: bool = False
    tree: object = None

    def children(self):
        return self.terms

    def line(self) -> str:
        n = len(self.terms)
        if self.kind == "serial":
            return (f"serial sum of {n} slices: D = {self.out_format}(fma(alpha={self.alpha:g}, "
                    f"slice, D)) after the first slice's epilogue")
        if self.kind == "halving":
            return f"halving tree over {n} terms (term i + term i + n/2, repeated), FP32 RNE additions"
        if self.kind == "tree":
            shape = str(self.tree)
            return f"tree sum of {n} terms {shape if len(shape) <= 90 else shape[:87] + '...'}, FP32 RNE additions"
        start = " from +0" if self.from_zero else ""
        return f"ordered sum ({self.kind}) of {n} terms{start}, FP32 RNE additions in order"


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
class LayOut(Node):
    """The call's operand values (``A`` [M, K], ``B`` [K, N], scales as ``tcnumerics.gemm`` takes them) bound for
    ``term``: rounded to TF32 first where the kernel does (``input_rounding``), as the instruction's operand bits,
    each caller K range of ``slices`` padded with +0 to instruction boundaries (``k_tile``/``k_residue`` as in
    ``gemm``), the ranges one after the other -- the K positions ``term``'s nodes name."""

    term: Node
    instruction: InstructionSpec
    slices: tuple[tuple[int, int], ...]
    k_tile: int
    k_residue: str = "last"
    input_rounding: str | None = None
    scale_block: int = 128

    def children(self):
        return (self.term,)

    def line(self) -> str:
        spec = self.instruction
        rounded = f"rounded to TF32 ({self.input_rounding.upper()}), " if self.input_rounding else ""
        ranges = ", ".join(f"K[{a}:{b})" for a, b in self.slices[:3]) + (", ..." if len(self.slices) > 3 else "")
        where = "after a first partial tile" if self.k_residue == "first" else "at the end"
        return (f"operands {rounded}as {spec.a_format.name} x {spec.b_format.name} bits: {ranges}, each padded with +0 "
                f"to {spec.k}-element instructions {where}")


@dataclass(frozen=True)
class TileGroups(Node):
    """Outputs by their output tile (``tile`` = (TM, TN): TM of the output's columns, TN of its rows; an output's
    place in the whole call is bound as ``rows``/``cols``, default the first ones): the outputs of the tiles
    ``groups[i]`` ((tm, tn) pairs; None: every tile no group names) are computed by ``terms[i]``."""

    tile: tuple[int, int]
    groups: tuple
    terms: tuple[Node, ...]

    def children(self):
        return self.terms

    def line(self) -> str:
        def words(g):
            if g is None:
                return "the other tiles"
            shown = " ".join(f"({m},{n})" for m, n in g[:4]) + (" ..." if len(g) > 4 else "")
            return f"{len(g)} tile{'s' * (len(g) != 1)} {shown}"
        return (f"outputs by {self.tile[0]} x {self.tile[1]} output tile (columns x rows), in the order below: "
                + "; ".join(words(g) for g in self.groups))


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
