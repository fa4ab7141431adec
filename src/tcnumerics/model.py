"""The configurable unit model: what one matrix-unit instruction computes, as data.

``UnitModel`` describes the arithmetic of one datapath (a fused, truncating
dot-product-add over groups of products, or exact integer accumulation, ...).
``InstructionSpec`` wraps it with what an instruction does around the datapath:
its K, how its K elements are fed to the datapath (order, chunks, operand conversion)
and how the accumulator C enters.  Catalog entries are instances of these; engines
read them and never special-case an instruction by name.

Example:
    >>> from tcnumerics.model import UnitModel
    >>> m = UnitModel(a_format="bf16", b_format="bf16", c_format="fp32", d_format="fp32",
    ...               group_size=16, frac_bits=25, zero_exponent=-133, output_rounding="rz")
    >>> m.group_size, m.frac_bits, m.output_format.name
    (16, 25, 'fp32')
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from numbers import Integral
from typing import Literal

from .formats import FloatFormat, Format, IntFormat, Rounding, get_format

__all__ = ["UnitModel", "InstructionSpec", "Algorithm"]

Algorithm = Literal["fused", "integer", "fma_chain", "binary", "ieee_mul_add", "exact_sum", "ftz_mul_add",
                    "staged_sum", "scaled_fused", "subgroup_scaled"]


@dataclass(frozen=True)
class UnitModel:
    """Arithmetic of one matrix-unit datapath.

    Attributes:
        a_format, b_format: operand formats (may differ, e.g. E4M3 x E5M2).
        c_format: accumulator input format; d_format: output format (its bits are returned).
        algorithm: ``"fused"`` -- the fused truncating dot-product-add: per group, exact
            products and C aligned to the largest exponent, truncated to ``frac_bits``
            fraction bits below it, summed exactly, rounded once;
            ``"integer"`` -- exact integer products and sum, then wrap or saturate;
            ``"fma_chain"`` -- sequential IEEE fused multiply-adds (FP64 units);
            ``"binary"`` -- one-bit operands combined by ``bit_op`` (AND / XOR), popcount
            summed exactly onto the int32 accumulator (``mma ... .b1 ... .popc``);
            ``"ieee_mul_add"`` -- a naive pipeline: every product and every addition
            rounded separately in d_format (IEEE 754, ``output_rounding``), sequentially
            in K order onto C (the contrast model);
            ``"exact_sum"`` -- AMD CDNA1: per group, the exact sum of products and C,
            rounded once (RNE) to FP32;
            ``"ftz_mul_add"`` -- AMD CDNA2: subnormal inputs flushed, products rounded to
            FP32, added pairwise (``pair_tree`` products per step) with FP32 RNE additions,
            flushing subnormal results;
            ``"staged_sum"`` -- AMD CDNA3: products truncated to ``frac_bits`` below their
            maximum (split into even/odd halves first when ``split_even_odd``), then C and
            the product sum floored to ``frac_bits`` / ``sum_frac_bits + 1`` bits, the total
            floored to ``sum_frac_bits`` bits and rounded RNE to FP32;
            ``"scaled_fused"`` -- Blackwell block-scaled k32: the fused group with each
            product's exponent raised by its two block scales' exponents;
            ``"subgroup_scaled"`` -- Blackwell mxf4/nvf4 k64: products summed exactly in
            sub-groups of ``subgroup_size``, each scaled and aligned on its scales'
            exponents, then fused with C.
        group_size: products fused per group (L).  K beyond it chains groups in K order,
            each group's rounded output being the C of the next.
        frac_bits: fraction bits kept below 2**emax when aligning (F); None = no truncation.
        zero_exponent: exponent an exactly-zero term takes when emax is formed (e_zero).
        output_rounding: rounding of each group's exact sum into d_format.
        output_mantissa_bits: a narrower mantissa the result is cut to before it is stored
            in d_format (13 for Hopper FP8 wgmma's E8M13 FP32 output); None = d_format's own.
        output_overflow: what a result beyond d_format's range becomes (hardware: inf).
        nan_bits: the canonical NaN the unit writes (None = d_format's default quiet NaN).
        saturate: integer ``.satfinite`` clamping instead of two's-complement wraparound.
        bit_op: ``"and"`` or ``"xor"`` for the ``"binary"`` algorithm.
        nan_policy: ``"canonical"`` -- every NaN result is ``nan_bits``; ``"x86"`` -- the
            NaN an x86 CPU running MMA-Sim's reference arithmetic produces (the first NaN
            operand of each operation, quieted; an invalid operation gives the negative
            default NaN), for entries whose published model is defined by that arithmetic.
        pair_tree: ``"ftz_mul_add"`` products added per accumulation step (2 or 4).
        sum_frac_bits: ``"staged_sum"`` fraction bits of the final floor (F2 = 31 on CDNA3).
        split_even_odd: ``"staged_sum"`` sums even- and odd-indexed products separately first.
        subgroup_size: ``"subgroup_scaled"`` products summed exactly before scaling (16).
        scale_block: K elements sharing one scale (32 for MX formats, 16 for NVFP4);
            block-scaled algorithms only.
        scale_format: the format of the scale factors (ue8m0, ue4m3).
    """

    a_format: Format | str
    b_format: Format | str
    c_format: Format | str
    d_format: Format | str
    group_size: int = 16
    frac_bits: int | None = 25
    zero_exponent: int | None = -133
    output_rounding: Rounding | str = Rounding.RZ
    output_mantissa_bits: int | None = None
    output_overflow: Literal["inf", "ieee", "saturate"] = "inf"
    nan_bits: int | None = None
    algorithm: Algorithm = "fused"
    saturate: bool = False
    bit_op: Literal["and", "xor"] | None = None
    nan_policy: Literal["canonical", "x86"] = "canonical"
    pair_tree: int = 4
    sum_frac_bits: int = 31
    split_even_odd: bool = False
    subgroup_size: int = 16
    scale_block: int | None = None
    scale_format: Format | str | None = None

    def __post_init__(self) -> None:
        for name in ("a_format", "b_format", "c_format", "d_format"):
            object.__setattr__(self, name, get_format(getattr(self, name)))
        object.__setattr__(self, "output_rounding", Rounding.parse(self.output_rounding))
        for name in ("group_size", "frac_bits", "zero_exponent", "output_mantissa_bits", "nan_bits"):
            value = getattr(self, name)
            if (value is not None or name == "group_size") and (isinstance(value, bool) or not isinstance(value, Integral)):
                raise TypeError(f"{name}: expected an integer, got {value!r}")
        if self.output_overflow not in ("inf", "ieee", "saturate"):
            raise ValueError(f"output_overflow: expected 'inf', 'ieee' or 'saturate', got {self.output_overflow!r}")
        if self.group_size < 1:
            raise ValueError(f"group_size: must be >= 1, got {self.group_size}")
        if self.algorithm == "fused":
            for name in ("a_format", "b_format", "c_format", "d_format"):
                if not isinstance(getattr(self, name), FloatFormat):
                    raise ValueError(f"{name}: a fused floating-point unit needs float formats")
            if self.frac_bits is not None and not 0 <= self.frac_bits <= 56:
                raise ValueError(f"frac_bits: must be in 0..56 (or None), got {self.frac_bits}")
            if self.nan_bits is None:
                object.__setattr__(self, "nan_bits", self.d_format.nan_bits)
        elif self.algorithm == "integer":
            for name in ("a_format", "b_format", "c_format", "d_format"):
                if not isinstance(getattr(self, name), IntFormat):
                    raise ValueError(f"{name}: an integer unit needs integer formats")
        elif self.algorithm == "fma_chain":
            if self.nan_bits is None:
                object.__setattr__(self, "nan_bits", self.d_format.nan_bits)
        elif self.algorithm == "binary":
            for name in ("a_format", "b_format"):
                f = getattr(self, name)
                if not (isinstance(f, IntFormat) and f.bits == 1):
                    raise ValueError(f"{name}: the binary unit needs one-bit operands (b1)")
            if not isinstance(self.d_format, IntFormat) or not isinstance(self.c_format, IntFormat):
                raise ValueError("c_format, d_format: the binary unit accumulates into integers")
            if self.bit_op not in ("and", "xor"):
                raise ValueError(f"bit_op: expected 'and' or 'xor', got {self.bit_op!r}")
        elif self.algorithm in ("ieee_mul_add", "exact_sum", "ftz_mul_add", "staged_sum", "scaled_fused",
                                "subgroup_scaled"):
            for name in ("a_format", "b_format", "c_format", "d_format"):
                if not isinstance(getattr(self, name), FloatFormat):
                    raise ValueError(f"{name}: the {self.algorithm} unit needs float formats")
            if self.algorithm == "ieee_mul_add" and self.output_rounding is not Rounding.RNE:
                raise ValueError("output_rounding: ieee_mul_add models round-to-nearest-even pipelines only")
            if self.algorithm == "ieee_mul_add" and self.d_format.man_bits > 23:
                raise ValueError(f"d_format: ieee_mul_add supports outputs up to 24 significand bits, "
                                 f"got {self.d_format.name}")
            if self.algorithm in ("exact_sum", "ftz_mul_add", "staged_sum") and self.d_format.name != "fp32":
                raise ValueError(f"d_format: the {self.algorithm} unit writes fp32, got {self.d_format.name}")
            if self.algorithm == "ftz_mul_add" and (self.pair_tree not in (2, 4) or self.group_size % self.pair_tree):
                raise ValueError(f"pair_tree: must be 2 or 4 and divide group_size, got {self.pair_tree}")
            if self.algorithm in ("scaled_fused", "subgroup_scaled"):
                if self.scale_block is None or self.scale_format is None:
                    raise ValueError("scale_block, scale_format: block-scaled units need both")
                object.__setattr__(self, "scale_format", get_format(self.scale_format))
                if self.algorithm == "subgroup_scaled" and (
                        self.scale_block % self.subgroup_size or self.group_size % self.subgroup_size):
                    raise ValueError(f"subgroup_size: {self.subgroup_size} must divide scale_block and group_size")
            if self.nan_bits is None:
                object.__setattr__(self, "nan_bits", self.d_format.nan_bits)
        else:
            raise ValueError(f"algorithm: unknown {self.algorithm!r}")

    @property
    def is_block_scaled(self) -> bool:
        """Whether the unit takes per-block scale factors alongside its operands."""
        return self.algorithm in ("scaled_fused", "subgroup_scaled")

    @property
    def output_format(self) -> Format:
        """The format results are rounded to (d_format, or its E8M13-style cut)."""
        d = self.d_format
        if self.output_mantissa_bits is None or not isinstance(d, FloatFormat):
            return d
        cut = d.man_bits - self.output_mantissa_bits
        return FloatFormat(f"{d.name}-m{self.output_mantissa_bits}", d.exp_bits, self.output_mantissa_bits, d.bias,
                           signed=d.signed, specials=d.specials, subnormals=d.subnormals,
                           container_bits=d.container_bits, pad_bits=d.pad_bits + cut)

    def with_(self, **changes) -> "UnitModel":
        """A copy with some parameters changed (for what-if studies)."""
        return replace(self, **changes)

    def describe(self) -> str:
        if self.algorithm == "integer":
            return (f"integer {self.a_format.name}x{self.b_format.name}+{self.c_format.name}->{self.d_format.name}, "
                    f"exact, {'saturating' if self.saturate else 'wrapping'}")
        if self.algorithm == "fma_chain":
            return f"sequential FMA in {self.d_format.name}, {self.output_rounding.value}"
        if self.algorithm == "binary":
            return f"binary {self.bit_op.upper()} + popcount onto {self.c_format.name}, wrapping"
        if self.algorithm == "ieee_mul_add":
            return (f"IEEE per operation: each product and each addition rounded to {self.d_format.name} "
                    f"({self.output_rounding.value.upper()}), sequential in K order")
        if self.algorithm == "exact_sum":
            return f"exact sum of {self.group_size} products and C, one RNE rounding to {self.d_format.name}"
        if self.algorithm == "ftz_mul_add":
            return (f"subnormals flushed; FP32 products added {self.pair_tree} at a time with FP32 RNE "
                    f"additions onto C")
        if self.algorithm == "staged_sum":
            split = ", even/odd products summed separately" if self.split_even_odd else ""
            return (f"staged: group_size={self.group_size}, products truncated to frac_bits={self.frac_bits}{split}, "
                    f"C floored to {self.frac_bits}, sum floored to {self.sum_frac_bits} bits, RNE to fp32")
        if self.algorithm == "scaled_fused":
            return (f"block-scaled fused {self.a_format.name}x{self.b_format.name} ({self.scale_format.name} "
                    f"scales per {self.scale_block}): group_size={self.group_size}, frac_bits={self.frac_bits}, "
                    f"zero_exponent={self.zero_exponent}, output {self.output_rounding.value.upper()}")
        if self.algorithm == "subgroup_scaled":
            return (f"block-scaled {self.a_format.name}x{self.b_format.name} ({self.scale_format.name} scales per "
                    f"{self.scale_block}): exact sub-groups of {self.subgroup_size}, scaled, fused with C: "
                    f"frac_bits={self.frac_bits}, zero_exponent={self.zero_exponent}, "
                    f"output {self.output_rounding.value.upper()}")
        cut = f" (mantissa cut to {self.output_mantissa_bits} bits)" if self.output_mantissa_bits else ""
        return (f"fused {self.a_format.name}x{self.b_format.name}+{self.c_format.name}->{self.d_format.name}: "
                f"group_size={self.group_size}, frac_bits={self.frac_bits}, zero_exponent={self.zero_exponent}, "
                f"output {self.output_rounding.value.upper()}{cut}")


@dataclass(frozen=True)
class InstructionSpec:
    """One instruction: a datapath model plus how the instruction drives it.

    Attributes:
        name: catalog name in PTX order, ``<arch>.<op>.<shape>[.satfinite].<dtype>.<atype>.<btype>[.<ctype>]``.
        k: the instruction's K (elements of each dot product per instruction).
        model: the datapath arithmetic.
        a_format, b_format, c_format: the instruction's operand formats as the user
            passes them (default: the model's).  When they differ from the model's the
            operands are converted exactly on the way in (Hopper mma.sync FP8 -> FP16).
        k_order: the order in which the instruction's K elements enter the datapath
            (None: natural order).
        chunk: datapath instructions each take this many K elements (None: all of k).
        c_entry: ``"fused"`` -- C is the first chunk's accumulator; ``"ieee_add"`` -- the
            chunks start from +0 and C is added to their result by an IEEE addition in
            d_format with ``c_add_rounding``.
        provenance: where the parameters come from (measured on which GPU / publication).
        chunk_combine: ``"chain"`` -- each chunk's result is the next chunk's accumulator;
            ``"ieee_add"`` -- every chunk starts from +0 and their results are added in K order
            by IEEE additions in d_format (``c_add_rounding``) before C is (needs
            ``c_entry="ieee_add"``; ptxas 12.4-12.6's FP8 ``mma.sync`` lowering on sm_90).
    """

    name: str
    k: int
    model: UnitModel
    a_format: Format | str | None = None
    b_format: Format | str | None = None
    c_format: Format | str | None = None
    k_order: tuple[int, ...] | None = None
    chunk: int | None = None
    c_entry: Literal["fused", "ieee_add"] = "fused"
    c_add_rounding: Rounding | str = Rounding.RNE
    provenance: str = ""
    notes: str = field(default="", compare=False)
    chunk_combine: Literal["chain", "ieee_add"] = "chain"

    def __post_init__(self) -> None:
        if not isinstance(self.model, UnitModel):
            raise TypeError(f"model: expected a UnitModel, got {type(self.model).__name__}")
        for name, default in (("a_format", self.model.a_format), ("b_format", self.model.b_format),
                              ("c_format", self.model.c_format)):
            value = getattr(self, name)
            object.__setattr__(self, name, get_format(value) if value is not None else default)
        object.__setattr__(self, "c_add_rounding", Rounding.parse(self.c_add_rounding))
        if isinstance(self.k, bool) or not isinstance(self.k, Integral) or self.k < 1:
            raise ValueError(f"k: expected a positive integer, got {self.k!r}")
        if self.chunk is not None and (isinstance(self.chunk, bool) or not isinstance(self.chunk, Integral)
                                       or self.chunk < 1):
            raise ValueError(f"chunk: expected a positive integer or None, got {self.chunk!r}")
        if self.c_entry not in ("fused", "ieee_add"):
            raise ValueError(f"c_entry: expected 'fused' or 'ieee_add', got {self.c_entry!r}")
        if self.chunk_combine not in ("chain", "ieee_add"):
            raise ValueError(f"chunk_combine: expected 'chain' or 'ieee_add', got {self.chunk_combine!r}")
        if self.chunk_combine == "ieee_add" and self.c_entry != "ieee_add":
            raise ValueError("chunk_combine='ieee_add' needs c_entry='ieee_add' (C added after the chunks)")
        if self.k_order is not None and sorted(self.k_order) != list(range(self.k)):
            raise ValueError(f"k_order: must be a permutation of range({self.k})")
        chunk = self.chunk or self.k
        if self.k % chunk:
            raise ValueError(f"chunk: {chunk} does not divide k={self.k}")

    @property
    def d_format(self) -> Format:
        return self.model.d_format

    @property
    def arch(self) -> str:
        return self.name.split(".", 1)[0]

    def describe(self) -> str:
        parts = [f"{self.name}: K={self.k}", self.model.describe()]
        if self.a_format != self.model.a_format or self.b_format != self.model.b_format:
            parts.append(f"operands {self.a_format.name}x{self.b_format.name} converted to "
                         f"{self.model.a_format.name}x{self.model.b_format.name}")
        if self.k_order is not None:
            parts.append(f"K order {list(self.k_order)}")
        if self.chunk and self.chunk != self.k:
            parts.append(f"in chunks of {self.chunk}")
        if self.chunk_combine == "ieee_add":
            parts.append(f"chunks each from +0, summed by IEEE {self.d_format.name} additions "
                         f"({self.c_add_rounding.value})")
        if self.c_entry == "ieee_add":
            parts.append(f"C added last by an IEEE {self.d_format.name} addition ({self.c_add_rounding.value})")
        if self.provenance:
            parts.append(f"provenance: {self.provenance}")
        return "\n  ".join(parts)
