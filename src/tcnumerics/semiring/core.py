"""SIMD2-style semiring matrix operations on tcnumerics' unit model: the public API.

``semiring_matmul(A, B, C, op=...)`` computes ``D[i,j] = C[i,j] ⊕ (⊕_k A[i,k] ⊗ B[k,j])``
for the nine operations of :mod:`tcnumerics.semiring.ops`; ``semiring_instruction(op, ...)``
fixes the formats and gives bit-level (``dot_bits``, ``matmul_bits``) and value-level
(``matmul``) evaluation, like ``tcnumerics.instruction(name)`` does for the catalogued units.

Numerics (full statement in ``docs/semiring.md``):

* min/max ⊕ (min-plus, max-plus, min-mul, max-mul, min-max, max-min): every ``a ⊗ b`` is
  exact, min/max picks the exact extreme (C included), one rounding into ``out_format``
  (default FP32, round-to-nearest-even; ``rounding=`` chooses another).
* mul-plus is the unit itself: the catalogued instruction ``unit`` through ``tcnumerics.gemm``.
* plus-norm: ``sum_k (a - b)**2`` through the same unit's fused truncating groups, each
  term the exact squared difference.
* or-and: booleans.

Only mul-plus is a plan run by the one interpreter (``tcnumerics.gemm``, ``Instruction.dot_bits``); the other
eight ops compute with this package's engines (``reference``, ``fast``, ``oracle``) -- their reductions and terms
are not nodes of a GEMM plan (docs/plans.md, "What does not run as a plan", says why for each).

Example:
    >>> import numpy as np
    >>> import tcnumerics as tc
    >>> inf = np.inf
    >>> D = np.array([[0, 3, inf], [inf, 0, 1.5], [2, inf, 0]], np.float16)   # edge weights
    >>> D2 = tc.semiring_matmul(D, D, op="min-plus")                          # paths of <= 2 edges
    >>> D2.dtype, D2.tolist()
    (dtype('float32'), [[0.0, 3.0, 4.5], [3.5, 0.0, 1.5], [2.0, 5.0, 0.0]])
"""

from __future__ import annotations

import numpy as np

from ..api import Instruction, check_bits
from ..catalog import get_instruction
from ..formats import FloatFormat, Format, Rounding, format_names, get_format
from ..gemm import convert_output, gemm
from ..model import InstructionSpec, UnitModel
from . import oracle, reference
from .ops import SemiringOp, get_op

__all__ = ["SemiringUnit", "semiring_instruction", "semiring_matmul", "semiring_closure", "DEFAULT_UNIT", "ENGINES"]

DEFAULT_UNIT = "hopper.wgmma.m64n8k16.f32.f16.f16"  # Hopper FP16 wgmma: L=16, F=25, FP32 RZ (measured, H200)
ENGINES = ("auto", "reference", "fast", "exact")
_BOOL = get_format("b1")


def _fast_module(engine: str):
    """The numba kernels, or None when the reference engine should run."""
    if engine in ("reference", "exact"):
        return None
    try:
        from . import fast
    except ImportError as exc:
        if engine == "fast":
            raise ImportError(f"engine: 'fast' needs numba, which failed to import ({exc})") from exc
        return None
    return fast


def _resolve_unit(unit) -> InstructionSpec:
    if isinstance(unit, Instruction):
        return unit.spec
    if isinstance(unit, UnitModel):
        return InstructionSpec(name="custom-unit", k=unit.group_size, model=unit)
    if not isinstance(unit, (str, InstructionSpec)):
        raise TypeError(f"unit: expected a catalog instruction name, InstructionSpec, Instruction or UnitModel, "
                        f"got {type(unit).__name__}")
    try:
        return get_instruction(unit)
    except ValueError as exc:
        raise ValueError(f"unit: {exc}") from None


def _format(name: str, fmt) -> Format:
    """``get_format`` with errors naming the argument."""
    try:
        return get_format(fmt)
    except (ValueError, TypeError) as exc:
        raise type(exc)(f"{name}: {exc}") from None


def _float_format(name: str, fmt) -> FloatFormat:
    f = _format(name, fmt)
    if not isinstance(f, FloatFormat):
        raise ValueError(f"{name}: {f.name} is not a floating-point format")
    return f


def format_of_dtype(dtype: np.dtype) -> FloatFormat | None:
    """The operand format whose numpy/ml_dtypes dtype is ``dtype`` (None for float64 and non-floats).

    >>> format_of_dtype(np.dtype(np.float32)).name
    'fp32'
    """
    for name in format_names():
        f = get_format(name)
        if isinstance(f, FloatFormat) and f.container_bits <= 32 and f.ml_dtype_name and f.dtype == dtype:
            return f
    return None


class SemiringUnit:
    """A semiring operation with fixed formats, evaluated by a chosen engine.

    Build it with :func:`semiring_instruction`.  Attributes: ``op`` (a SemiringOp),
    ``a_format``, ``b_format``, ``c_format``, ``d_format`` (what the datapath writes),
    ``out_format`` (what is returned; differs from d_format only for an epilogue
    conversion of mul-plus / plus-norm results), ``rounding`` (selecting ops), ``spec``
    (the unit's InstructionSpec; plus-type ops), ``model`` (the datapath they run on).
    """

    def __init__(self, op: "str | SemiringOp", *, a_format=None, b_format=None, out_format=None,
                 unit=DEFAULT_UNIT, rounding: "Rounding | str | None" = None, engine: str = "auto"):
        self.op = get_op(op)
        if engine not in ENGINES:
            raise ValueError(f"engine: expected one of {', '.join(ENGINES)}, got {engine!r}")
        self.engine = engine
        self.spec = _resolve_unit(unit)
        if rounding is not None:
            rounding = Rounding.parse(rounding)
            if rounding is Rounding.SR:
                raise ValueError("rounding: stochastic rounding needs random bits; semiring ops take a fixed mode")
        kind = self.op.kind
        if kind == "boolean":
            for name, value in (("in_format", a_format), ("in_format", b_format), ("out_format", out_format)):
                if value is not None and _format(name, value) != _BOOL:
                    raise ValueError(f"{name}: or-and works on booleans (format b1), got {value!r}")
            self.a_format = self.b_format = self.c_format = self.d_format = self.out_format = _BOOL
            self.rounding = None
            self.model = None
        elif kind == "select":
            self._init_select(a_format, b_format, out_format, rounding)
        elif self.op.name == "mul-plus":
            self._init_mul_plus(a_format, b_format, out_format, rounding)
        else:
            self._init_plus_norm(a_format, b_format, out_format, rounding)

    # -- construction ---------------------------------------------------------------------
    def _init_select(self, a_format, b_format, out_format, rounding) -> None:
        self.a_format = _float_format("in_format", a_format if a_format is not None else "fp16")
        self.b_format = _float_format("in_format", b_format if b_format is not None else self.a_format)
        for f in (self.a_format, self.b_format):
            if f.container_bits > 32:
                raise ValueError(f"in_format: {f.name} is wider than 32 bits; semiring operands are at most FP32")
        out = _float_format("out_format", out_format if out_format is not None else "fp32")
        if not out.has_inf or not out.signed:
            raise ValueError(f"out_format: {out.name} has no ±infinity, which min/max results need "
                             "(unreachable = +inf in min-plus)")
        self.c_format = self.d_format = self.out_format = out
        self.rounding = rounding or Rounding.RNE
        self.model = self.spec.model
        # one canonical NaN per unit: the unit's own when it writes this format (Hopper: 0x7FFFFFFF)
        unit_nan = self.model.nan_bits if self.model.algorithm != "integer" else None
        self.nan_bits = unit_nan if (unit_nan is not None and self.model.d_format == out) else out.nan_bits

    def _init_mul_plus(self, a_format, b_format, out_format, rounding) -> None:
        spec = self.spec
        for name, value, own in (("in_format", a_format, spec.a_format), ("in_format", b_format, spec.b_format)):
            if value is not None and _format(name, value) != own:
                raise ValueError(f"{name}: mul-plus runs on {spec.name}, whose operands are "
                                 f"{spec.a_format.name} x {spec.b_format.name}, not {get_format(value).name}; "
                                 "pick a unit with those operands (tcnumerics.instructions() lists them)")
        if rounding is not None:  # a what-if: the same unit with another output rounding
            spec = InstructionSpec(name=f"{spec.name}+{rounding.value}", k=spec.k,
                                   model=spec.model.with_(output_rounding=rounding), a_format=spec.a_format,
                                   b_format=spec.b_format, c_format=spec.c_format, k_order=spec.k_order,
                                   chunk=spec.chunk, c_entry=spec.c_entry, c_add_rounding=spec.c_add_rounding,
                                   provenance=spec.provenance)
        self.spec = spec
        self.model = spec.model
        self.a_format, self.b_format, self.c_format, self.d_format = (spec.a_format, spec.b_format, spec.c_format,
                                                                      spec.d_format)
        self.out_format = _format("out_format", out_format) if out_format is not None else self.d_format
        self.rounding = None

    def _init_plus_norm(self, a_format, b_format, out_format, rounding) -> None:
        model = self.spec.model
        if model.algorithm != "fused":
            raise ValueError(f"unit: plus-norm needs a fused floating-point unit, {self.spec.name} is "
                             f"{model.algorithm}")
        a = _float_format("in_format", a_format) if a_format is not None else model.a_format
        b = _float_format("in_format", b_format) if b_format is not None else (
            a if a_format is not None else model.b_format)
        changes = {"a_format": a, "b_format": b}
        if rounding is not None:
            changes["output_rounding"] = rounding
        self.model = model.with_(**changes)
        self.a_format, self.b_format = a, b
        self.c_format, self.d_format = model.c_format, model.d_format
        self.out_format = _format("out_format", out_format) if out_format is not None else self.d_format
        self.rounding = None

    # -- description ----------------------------------------------------------------------
    def __repr__(self) -> str:
        return (f"SemiringUnit({self.op.name!r}, {self.a_format.name} x {self.b_format.name} -> "
                f"{self.out_format.name}, engine={self.engine!r})")

    def describe(self) -> str:
        """The numerics in words."""
        op = self.op
        head = f"{op.name}: D = C ⊕ {op.symbol}  ({op.use})"
        if op.kind == "boolean":
            return f"{head}\n  booleans in, booleans out"
        fmts = f"operands {self.a_format.name} x {self.b_format.name}, C {self.c_format.name}"
        if op.kind == "select":
            return (f"{head}\n  {fmts}\n  each a ⊗ b exact; exact {op.reduce} over k and C; one rounding to "
                    f"{self.out_format.name} ({self.rounding.value.upper()}); NaN anywhere -> "
                    f"{self.nan_bits:#x}; zeros written as +0")
        lines = [head, f"  {fmts}"]
        if op.name == "mul-plus":
            lines.append("  the unit itself: " + self.spec.describe().replace("\n", "\n  "))
        else:
            lines.append("  terms (a - b)**2 exact, exponent 2*floor(log2|a - b|), through the unit's groups: "
                         + self.model.describe())
        if self.out_format != self.d_format:
            lines.append(f"  epilogue: {self.d_format.name} results converted to {self.out_format.name} (RNE)")
        return "\n".join(lines)

    # -- operands ---------------------------------------------------------------------------
    def _bits(self, name: str, x, fmt: Format, ndim: int) -> np.ndarray:
        arr = check_bits(name, x, fmt, ndim)
        if self.op.kind == "boolean" and arr.size and int(arr.max()) > 1:
            raise ValueError(f"{name}: boolean bit patterns must be 0 or 1, found {int(arr.max())}")
        return arr

    def _values(self, name: str, x, fmt: Format) -> np.ndarray:
        """Bits of value arrays: booleans for or-and, else the format's bits (RNE conversion)."""
        arr = np.asarray(x)
        if self.op.kind == "boolean":
            if arr.dtype == bool:
                return arr.astype(np.uint8)
            if arr.dtype.kind not in "iuf" and format_of_dtype(arr.dtype) is None:
                raise TypeError(f"{name}: expected booleans (or numbers, nonzero = true), got dtype {arr.dtype}")
            as_float = arr.astype(np.float64)
            if np.isnan(as_float).any():
                raise ValueError(f"{name}: NaN is neither true nor false")
            return (as_float != 0).astype(np.uint8)
        if arr.dtype == bool or (arr.dtype.kind not in "iuf" and format_of_dtype(arr.dtype) is None):
            raise TypeError(f"{name}: expected numbers for {fmt.name} operands, got dtype {arr.dtype}")
        try:
            return fmt.bits_of(arr)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{name}: {exc}") from None

    def _out_values(self, bits: np.ndarray) -> np.ndarray:
        if self.op.kind == "boolean":
            return bits.astype(bool)
        return self.out_format.to_array(bits)

    # -- evaluation -------------------------------------------------------------------------
    def dot_bits(self, a, b, c=None, *, engine: str | None = None) -> np.ndarray:
        """Pair form on bit patterns: ``d[n] = c[n] ⊕ (⊕_k a[n,k] ⊗ b[n,k])``.

        ``a``, ``b``: [N, K] unsigned bits of the operand formats; ``c``: [N] bits of
        ``c_format`` or None (no C: the identity of ⊕, i.e. +0 for plus-type ops).
        Returns [N] bits of ``out_format`` (uint8 0/1 for or-and).  K = 0 is an empty reduction: see ``matmul``.
        """
        a = self._bits("a", a, self.a_format, 2)
        b = self._bits("b", b, self.b_format, 2)
        if a.shape != b.shape:
            raise ValueError(f"a, b: shapes differ: {a.shape} vs {b.shape}")
        if c is not None:
            c = self._bits("c", c, self.c_format, 1)
            if c.shape != (a.shape[0],):
                raise ValueError(f"c: expected shape ({a.shape[0]},), got {c.shape}")
        return self._evaluate(a, b, c, engine or self.engine, pairs=True)

    def matmul_bits(self, A, B, C=None, *, engine: str | None = None) -> np.ndarray:
        """Matrix form on bit patterns: ``A`` [M, K], ``B`` [K, N], ``C`` [M, N] or None -> [M, N] bits."""
        A = self._bits("A", A, self.a_format, 2)
        B = self._bits("B", B, self.b_format, 2)
        if A.shape[1] != B.shape[0]:
            raise ValueError(f"A, B: inner dimensions differ: A is {A.shape}, B is {B.shape}")
        if C is not None:
            C = self._bits("C", C, self.c_format, 2)
            if C.shape != (A.shape[0], B.shape[1]):
                raise ValueError(f"C: expected shape {(A.shape[0], B.shape[1])}, got {C.shape}")
        return self._evaluate(A, B, C, engine or self.engine, pairs=False)

    def matmul(self, A, B, C=None, *, engine: str | None = None) -> np.ndarray:
        """Matrix form on values: arrays of the operand format's dtype are read bit for bit,
        other numbers are rounded to it (RNE); booleans for or-and.  Returns values of
        ``out_format`` (its numpy/ml_dtypes type; bool for or-and).

        K = 0 reduces over nothing, so ``D = C ⊕ (identity of ⊕)``: C rounded into ``out_format``, or without C
        +inf for min, -inf for max, False for or; the plus-type ops run the unit on one group of zero terms, as
        ``tcnumerics.gemm`` does (C through the unit's epilogue, +0 without C).

        >>> import numpy as np
        >>> u = semiring_instruction("max-plus")
        >>> u.matmul(np.zeros((1, 0), np.float16), np.zeros((0, 2), np.float16)).tolist()
        [[-inf, -inf]]
        """
        A, B = np.asarray(A), np.asarray(B)
        for name, X in (("A", A), ("B", B)):
            if X.ndim != 2:
                raise ValueError(f"{name}: expected a 2-D matrix, got shape {X.shape}")
        a = self._values("A", A, self.a_format)
        b = self._values("B", B, self.b_format)
        c = None if C is None else self._values("C", C, self.c_format)
        return self._out_values(self.matmul_bits(a, b, c, engine=engine))

    # -- dispatch ---------------------------------------------------------------------------
    def _evaluate(self, a, b, c, engine: str, pairs: bool) -> np.ndarray:
        if engine not in ENGINES:
            raise ValueError(f"engine: expected one of {', '.join(ENGINES)}, got {engine!r}")
        kind = self.op.kind
        if a.shape[1] == 0:
            if kind == "select":
                return self._empty_select(a.shape[0] if pairs else (a.shape[0], b.shape[1]), c)
            if kind == "boolean":
                return np.zeros(a.shape[0] if pairs else (a.shape[0], b.shape[1]), np.uint8) | (
                    0 if c is None else np.asarray(c, np.uint8))
            if self.op.name == "plus-norm":  # one group of zero terms (0 - 0)**2, as a kernel pads K
                L = self.model.group_size
                a = np.zeros((a.shape[0], L), a.dtype)
                b = np.zeros((b.shape[0], L) if pairs else (L, b.shape[1]), b.dtype)
        if kind == "boolean":
            return self._boolean(a, b, c, engine, pairs)
        if kind == "select":
            return self._select(a, b, c, engine, pairs)
        if self.op.name == "mul-plus":
            d = self._mul_plus(a, b, c, engine, pairs)
        else:
            d = self._plus_norm(a, b, c, engine, pairs)
        if self.out_format == self.d_format:
            return d
        values = convert_output(self.d_format.to_array(d), self.d_format, self.out_format.name, Rounding.RNE)
        return self.out_format.bits_of(values)

    def _exact_loop(self, a, b, c, pairs: bool, cell) -> np.ndarray:
        """Run the oracle's ``cell(a_row, b_row, c_or_None)`` per output."""
        if pairs:
            return np.array([cell(a[n], b[n], None if c is None else c[n]) for n in range(a.shape[0])],
                            dtype=self.out_format.container_dtype)
        M, N = a.shape[0], b.shape[1]
        out = np.empty((M, N), dtype=self.out_format.container_dtype)
        for i in range(M):
            for j in range(N):
                out[i, j] = cell(a[i], b[:, j], None if c is None else c[i, j])
        return out

    def _empty_select(self, shape, c) -> np.ndarray:
        """K = 0: the empty min is +inf, the empty max -inf (numpy's ``initial``), so the result is C alone."""
        identity = np.inf if self.op.reduce == "min" else -np.inf
        hi = np.full(shape, identity) if c is None else reference.exact_values(c, self.c_format)
        return reference.round_pairs(hi, np.zeros(shape), self.out_format, self.rounding, self.nan_bits)

    def _select(self, a, b, c, engine, pairs) -> np.ndarray:
        reduce, combine = self.op.reduce, self.op.combine
        if engine == "exact":
            def cell(x, y, z):
                return oracle.select_bits(reduce, combine, self.a_format, self.b_format, x, y, z, self.c_format,
                                          self.out_format, self.rounding, self.nan_bits)
            return self._exact_loop(a, b, c, pairs, cell)
        av = reference.exact_values(a, self.a_format)
        bv = reference.exact_values(b, self.b_format)
        cv = None if c is None else reference.exact_values(c, self.c_format)
        fast = None if pairs else _fast_module(engine)
        if pairs:
            hi, lo = reference.select_pairs(reduce, combine, av, bv, cv)
        elif fast is not None:
            hi, lo = _fast_select(fast, reduce, combine, av, bv, cv, _sums_exact(self.a_format, self.b_format))
        else:
            shape = (a.shape[0], b.shape[1])
            hi, lo = reference.pairs_in_blocks(lambda x, y, z: reference.select_pairs(reduce, combine, x, y, z),
                                               av, bv, cv, (np.empty(shape), np.empty(shape)))
        return reference.round_pairs(hi, lo, self.out_format, self.rounding, self.nan_bits)

    def _boolean(self, a, b, c, engine, pairs) -> np.ndarray:
        if engine == "exact":
            return self._exact_loop(a, b, c, pairs, lambda x, y, z: oracle.boolean_exact(x, y, z or 0))
        if pairs:
            return reference.boolean_pairs(a, b, c).astype(np.uint8)
        fast = _fast_module(engine)
        if fast is not None:
            c0 = np.zeros((a.shape[0], b.shape[1]), np.uint8) if c is None else np.ascontiguousarray(c, np.uint8)
            return fast.or_and(np.ascontiguousarray(a, np.uint8), np.ascontiguousarray(b, np.uint8), c0)
        out = np.empty((a.shape[0], b.shape[1]), bool)
        reference.pairs_in_blocks(reference.boolean_pairs, a, b, c, out)
        return out.astype(np.uint8)

    def _mul_plus(self, a, b, c, engine, pairs) -> np.ndarray:
        spec = self.spec
        K = a.shape[1]
        pad = -K % spec.k  # a kernel pads K with zeros; zero products never change a result (docs)
        if pad:
            a = np.pad(a, ((0, 0), (0, pad)))
            b = np.pad(b, ((0, 0), (0, pad)) if pairs else ((0, pad), (0, 0)))
        if pairs:
            c = np.zeros(a.shape[0], spec.c_format.container_dtype) if c is None else c
            return Instruction(spec, engine).dot_bits(a, b, c)
        C = None if c is None else spec.c_format.to_array(c)
        d = gemm(spec.a_format.to_array(a), spec.b_format.to_array(b), C, instruction=Instruction(spec, engine),
                 engine=engine)
        return spec.d_format.bits_of(d)

    def _plus_norm(self, a, b, c, engine, pairs) -> np.ndarray:
        model, c_fmt = self.model, self.c_format
        if c is None:
            c = np.zeros(a.shape[0] if pairs else (a.shape[0], b.shape[1]), c_fmt.container_dtype)
        if engine == "exact":
            return self._exact_loop(a, b, c, pairs, lambda x, y, z: oracle.norm_bits(model, x, y, z, c_fmt))
        fast = _fast_module(engine)
        reason = _norm_fast_refusal(model)
        if fast is not None and reason is not None:
            if engine == "fast":
                raise ValueError(f"engine: the fast plus-norm kernel cannot run this unit ({reason}); "
                                 "use engine='reference'")
            fast = None
        if fast is None:
            if pairs:
                return reference.norm_datapath(model, a, b, c, c_fmt)
            out = np.empty((a.shape[0], b.shape[1]), model.d_format.container_dtype)
            return reference.pairs_in_blocks(lambda x, y, z: reference.norm_datapath(model, x, y, z, c_fmt),
                                             a, b, c, out)
        out_fmt = model.output_format
        params = (model.group_size, model.frac_bits, model.zero_exponent or 0, model.zero_exponent is not None,
                  c_fmt.emin, model.d_format.emin, out_fmt.man_bits, out_fmt.emin, out_fmt.max_finite,
                  fast.ROUNDING_CODES[model.output_rounding.value], fast.OVERFLOW_CODES[model.output_overflow])
        av = reference.exact_values(a, model.a_format)
        bv = reference.exact_values(b, model.b_format)
        cv = reference.exact_values(c, c_fmt)
        if pairs:
            values = fast.norm_pairs(av, bv, cv, *params)
        else:
            values = fast.norm_matrix(av, bv, cv, *params)
        d = model.d_format
        bits = d.from_float(values)  # exact: the kernel's values are d_format numbers
        return np.where(np.isnan(values), model.nan_bits, bits).astype(d.container_dtype)


def _span(fmt: FloatFormat) -> tuple[int, int]:
    """(lowest bit position, highest bit position + 1) a finite value of ``fmt`` can occupy."""
    return fmt.emin - fmt.man_bits, fmt.emax + 1


def _sums_exact(a: FloatFormat, b: FloatFormat) -> bool:
    """Whether every ``a + b`` or ``a - b`` of the two formats is exact in float64 (53 bits)."""
    lo = min(_span(a)[0], _span(b)[0])
    hi = max(_span(a)[1], _span(b)[1])
    return hi + 1 - lo <= 53  # one more bit for the carry


def _norm_fast_refusal(model: UnitModel) -> str | None:
    """Why the numba plus-norm kernel cannot run ``model`` exactly (None: it can)."""
    if not _sums_exact(model.a_format, model.b_format):
        return f"differences of {model.a_format.name} and {model.b_format.name} values need more than 53 bits"
    if model.frac_bits is None:
        return "exact accumulation (frac_bits=None)"
    if model.frac_bits + 2 + (model.group_size - 1).bit_length() > 53:  # a group's sum must be exact in float64
        return f"frac_bits={model.frac_bits} with group_size={model.group_size} is too wide for float64 sums"
    if model.output_rounding is Rounding.SR:
        return "stochastic output rounding"
    if model.output_overflow not in ("inf", "ieee", "saturate"):
        return f"output_overflow={model.output_overflow!r}"
    if model.output_format.man_bits > 52:
        return "an output format wider than float64"
    return None


def _fast_select(fast, reduce: str, combine: str, av, bv, cv, sums_exact: bool):
    """Run the minimising kernel, turning max-type operations into min-type ones by negation."""
    negate = reduce == "max"
    if (combine, reduce) in (("min", "min"), ("max", "max")):
        raise ValueError(f"op: no selecting operation reduces with {reduce} over {combine}")
    # min over max(a, b) is the kernel's MAX; max over min(a, b) = -(min over max(-a, -b))
    code = {"plus": fast.PLUS if sums_exact else fast.PLUS_TWO_SUM, "mul": fast.MUL, "max": fast.MAX,
            "min": fast.MAX}[combine]
    A = -av if negate else av
    B = -bv if (negate and combine != "mul") else bv  # -(a*b) = (-a)*b; the others negate both
    M, N = av.shape[0], bv.shape[1]
    C = np.full((M, N), np.inf) if cv is None else (-cv if negate else cv)
    hi, lo = fast.min_select(np.ascontiguousarray(A), np.ascontiguousarray(B), np.ascontiguousarray(C), code)
    return (-hi, -lo) if negate else (hi, lo)


def semiring_instruction(op: "str | SemiringOp", in_format=None, out_format=None, *, unit=DEFAULT_UNIT,
                         rounding: "Rounding | str | None" = None, engine: str = "auto") -> SemiringUnit:
    """The operation ``op`` with fixed formats: bit-level and value-level evaluation.

    ``in_format``: the operand format (one name for both, or a pair ``(a, b)``); default
    FP16 for min/max ops, the unit's operand formats for mul-plus / plus-norm.
    ``out_format``: default FP32 for min/max ops, the unit's output for plus-type ops.
    ``unit``: the datapath of plus-type ops (catalog name, InstructionSpec, Instruction or
    UnitModel); min/max ops take only its canonical NaN.  ``rounding``: the one rounding of
    min/max ops (default RNE); for plus-type ops an override of the unit's output rounding.

    >>> import numpy as np
    >>> u = semiring_instruction("max-min")
    >>> a = np.array([[0x3C00, 0x4000]], np.uint16); b = np.array([[0x4400, 0x3800]], np.uint16)
    >>> hex(int(u.dot_bits(a, b)[0]))     # max(min(1, 4), min(2, 0.5)) = 1.0 in FP32
    '0x3f800000'
    """
    a_fmt, b_fmt = in_format if isinstance(in_format, tuple) else (in_format, in_format)
    return SemiringUnit(op, a_format=a_fmt, b_format=b_fmt, out_format=out_format, unit=unit, rounding=rounding,
                        engine=engine)


def _auto_format(name: str, X) -> FloatFormat:
    """The operand's own format, or for float64 / integer arrays the narrowest of FP16, FP32
    holding every value exactly (min/max results depend on nothing but the exact values)."""
    X = np.asarray(X)
    own = format_of_dtype(X.dtype)
    if own is not None:
        return own
    if X.dtype.kind not in "iuf":
        raise TypeError(f"{name}: expected numbers, got dtype {X.dtype}")
    values = X.astype(np.float64)
    for candidate in ("fp16", "fp32"):
        fmt = get_format(candidate)
        with np.errstate(over="ignore"):
            held = fmt.to_float(fmt.from_float(values))
        if np.array_equal(held, values, equal_nan=True):
            return fmt
    raise ValueError(f"{name}: some {X.dtype} values are exact in neither FP16 nor FP32; pass in_format= "
                     "to have them rounded to that format")


def semiring_matmul(A, B, C=None, *, op: "str | SemiringOp", in_format="auto", out_format=None,
                    unit=DEFAULT_UNIT, rounding: "Rounding | str | None" = None, engine: str = "auto") -> np.ndarray:
    """``D = C ⊕ (A ⊗ B)`` for a SIMD2 semiring operation, bit-exact to the documented numerics.

    ``A`` [M, K], ``B`` [K, N], ``C`` [M, N] or None: values (numpy / ml_dtypes arrays;
    booleans for or-and).  ``in_format="auto"`` takes min/max operands exactly as given: in
    their own format when their dtype is one (float16, float32, bfloat16, float8_*; so FP32
    results fed back stay exact), float64 and integer arrays in the narrowest of FP16, FP32
    that holds them (ValueError if neither does); mul-plus and plus-norm read the unit's
    operand formats (other values rounded to them, RNE, as ``tcnumerics.gemm`` does).  ``out_format`` defaults to FP32
    (min/max ops) or the unit's output (plus-type ops); or-and returns booleans.
    See :func:`semiring_instruction` for ``unit``, ``rounding`` and ``engine``.

    >>> import numpy as np
    >>> A = np.array([[1.0, 2.0]], np.float16); B = np.array([[3.0], [4.0]], np.float16)
    >>> semiring_matmul(A, B, op="plus-norm").tolist()      # (1-3)**2 + (2-4)**2
    [[8.0]]
    >>> semiring_matmul(A, B, op="mul-plus").tolist()       # the Hopper FP16 unit: 1*3 + 2*4
    [[11.0]]
    """
    op = get_op(op)
    if in_format == "auto" or in_format is None:
        if op.kind == "select":
            in_format = (_auto_format("A", A), _auto_format("B", B))
        else:
            in_format = None
    unit_obj = semiring_instruction(op, in_format, out_format, unit=unit, rounding=rounding, engine=engine)
    return unit_obj.matmul(A, B, C)


def semiring_closure(D, *, op: "str | SemiringOp", max_squarings: int | None = None, **options) -> np.ndarray:
    """Repeated squaring ``D <- D ⊗ D`` (through :func:`semiring_matmul`) until nothing changes.

    With the identity of ⊗ on the diagonal (0 for min-plus / max-plus, 1 for the mul ops,
    -inf for min-max, +inf for max-min, True for or-and), squaring k times covers every
    path of at most 2**k edges, so ``ceil(log2(n - 1))`` squarings (the default limit)
    reach the closure of an n-node graph; it stops earlier at a bitwise fixpoint.
    ``options`` go to :func:`semiring_matmul` (``out_format``, ``rounding``, ``engine``).

    >>> import numpy as np
    >>> inf = np.inf
    >>> D = np.array([[0, 1, inf, inf], [inf, 0, 1, inf], [inf, inf, 0, 1], [inf, inf, inf, 0]], np.float16)
    >>> semiring_closure(D, op="min-plus")[0].tolist()
    [0.0, 1.0, 2.0, 3.0]
    """
    op = get_op(op)
    if op.kind == "accumulate":
        raise ValueError(f"op: {op.name} accumulates; a closure needs a selecting or boolean operation")
    D = np.asarray(D)
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise ValueError(f"D: expected a square matrix, got shape {D.shape}")
    n = D.shape[0]
    limit = max(1, int(np.ceil(np.log2(max(n - 1, 1))))) if max_squarings is None else max_squarings
    if limit < 0:
        raise ValueError(f"max_squarings: must be >= 0, got {max_squarings}")
    for _ in range(limit):
        squared = semiring_matmul(D, D, op=op, **options)
        if np.array_equal(squared, D, equal_nan=squared.dtype != bool) and squared.dtype == D.dtype:
            return squared
        D = squared
    return D
