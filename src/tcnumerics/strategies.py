"""Hypothesis strategies for property tests against a matrix unit, and seeded bulk samplers.

Library authors test their own kernels, casts and GEMMs against a catalogued unit with
these.  Everything is built from a handful of hypothesis integer draws, so failures
shrink toward simple inputs (zeros, 1.0, exponents near 0, no specials).

* ``bit_patterns(fmt)`` -- bit patterns of a format (ints), specials and subnormals included;
* ``values(fmt)`` -- its representable values as floats, or (``exact=False``) values that
  fall between them: ties, just-off ties, beyond the largest finite -- what casts get wrong;
* ``dot_products(instruction, family=...)`` -- operand and accumulator bits for one
  instruction, from a named family of hard cases (see ``FAMILIES``);
* ``matrices(fmt, shape)`` and ``mma_operands(instruction)`` -- arrays ready for
  ``Instruction.mma`` / ``tcnumerics.gemm``;
* ``sample_dot_products(instruction, n, seed=...)`` -- the same families drawn in bulk with
  numpy (for fuzzing: millions of vectors, no shrinking).

A property users write ("my kernel equals the Hopper wgmma chain"); here the "kernel" is
numpy's float64 matmul, which is exact on small integers, so the property holds:

    >>> import numpy as np
    >>> from hypothesis import given, settings
    >>> import tcnumerics as tc
    >>> from tcnumerics import strategies as tcs
    >>> inst = tc.instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")
    >>> @settings(max_examples=20, deadline=None)
    ... @given(tcs.mma_operands(inst, family="int", max_k_steps=3))
    ... def test_kernel_matches_unit(ops):
    ...     A, B, C = ops
    ...     mine = (A.astype(np.float64) @ B.astype(np.float64) + C).astype(np.float32)
    ...     assert np.array_equal(mine, tc.gemm(A, B, C, instruction=inst))
    >>> test_kernel_matches_unit()

"My FP8 cast saturates like the hardware" (the cast under test here is the library's own):

    >>> e4m3 = tc.get_format("e4m3")
    >>> @settings(max_examples=50, deadline=None)
    ... @given(tcs.values(e4m3, exact=False))
    ... def test_cast_saturates(x):
    ...     bits = e4m3.from_float(np.array([x]), overflow="saturate")
    ...     assert abs(e4m3.to_float(bits)[0]) <= 448.0
    >>> test_cast_saturates()

Bulk sampling for fuzzing, reproducible from a seed:

    >>> batch = tcs.sample_dot_products("hopper.wgmma.m64n8k32.f32.e4m3.e5m2", 1000, seed=1)
    >>> batch.a.shape, batch.a.dtype, sorted(set(batch.family))[:3]
    ((1000, 32), dtype('uint8'), ['align', 'bits', 'cancel'])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from .catalog import get_instruction
from .family_names import canonical_family
from .formats import FloatFormat, Format, IntFormat, get_format
from .model import InstructionSpec
from .strategy_families import _DrawSource, _FAMILY_FUNCS, _NumpySource, _around, _floats_at, special_patterns

__all__ = [
    "FAMILIES",
    "DotProducts",
    "families",
    "bit_patterns",
    "special_patterns",
    "values",
    "dot_products",
    "matrices",
    "mma_operands",
    "sample_dot_products",
]

# Families of dot products, each aimed at one feature of the datapath (NUMERICS.md sections 1 and 5); the names are
# the one vocabulary of ``family_names`` (the earlier uniform, cancellation, wide_alignment, accumulator_dominant are
# accepted, deprecated):
FAMILIES: dict[str, str] = {
    "int": "small integers: exact in every unit, results easy to predict",
    "normal": "values near N(0,1) rounded to the operand formats (typical ML data)",
    "bits": "uniformly random finite bit patterns (all binades, subnormals included)",
    "cancel": "products cancel in pairs (some off by one ulp): large emax, tiny result",
    "align": "product exponents spread over more than frac_bits: truncation while aligning",
    "cdom": "large c, products near half an output ulp: rounding ties and truncation",
    "subnormal": "subnormal operands and accumulators (and the zero exponent e_zero)",
    "special": "zeros of both signs, infinities, NaNs with payloads, largest finite values",
    "overflow": "operands and accumulator near the largest finite values: inf, saturation, wraparound",
}
_INTEGER_FAMILIES = ("int", "bits", "cancel", "overflow")


# ---------------------------------------------------------------------------------------
# result container
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True, repr=False)
class DotProducts:
    """A batch of dot products for one instruction: ``a``, ``b`` [N, K'] bits, ``c`` [N] bits.

    ``family`` [N] names the family each row was drawn from.  Pass straight to
    ``Instruction.dot_bits(batch.a, batch.b, batch.c)``.  Block-scaled instructions also get
    ``scale_a``, ``scale_b`` [N, K'/scale_block] scale bits (for ``tcnumerics.blockscale``);
    they are None otherwise.
    """

    instruction: str
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    family: np.ndarray
    scale_a: np.ndarray | None = None
    scale_b: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.c)

    def __getitem__(self, rows) -> "DotProducts":
        rows = np.atleast_1d(np.arange(len(self))[rows])
        scales = [None if x is None else x[rows] for x in (self.scale_a, self.scale_b)]
        return DotProducts(self.instruction, self.a[rows], self.b[rows], self.c[rows], self.family[rows], *scales)

    @staticmethod
    def concat(parts: Sequence["DotProducts"]) -> "DotProducts":
        """Join batches of the same instruction row-wise."""
        if not parts:
            raise ValueError("parts: need at least one batch")
        names = {p.instruction for p in parts}
        if len(names) != 1:
            raise ValueError(f"parts: batches of different instructions {sorted(names)}")
        fields = ["a", "b", "c", "family"] + (["scale_a", "scale_b"] if parts[0].scale_a is not None else [])
        return DotProducts(parts[0].instruction, *(np.concatenate([getattr(p, f) for p in parts]) for f in fields))

    def __repr__(self) -> str:  # hex bits: what a shrunk falsifying example should show
        width = self.a.dtype.itemsize * 2

        def hexes(x):
            return "[" + ", ".join(f"0x{int(v):0{width}x}" for v in x) + "]"

        rows = [f"  {self.family[i]}: a={hexes(self.a[i])} b={hexes(self.b[i])} c=0x{int(self.c[i]):x}"
                + ("" if self.scale_a is None else f" scale_a={hexes(self.scale_a[i])} scale_b={hexes(self.scale_b[i])}")
                for i in range(min(len(self), 4))]
        more = f"\n  ... {len(self) - 4} more" if len(self) > 4 else ""
        return f"DotProducts({self.instruction!r}, N={len(self)}, K={self.a.shape[1]}\n" + "\n".join(rows) + more + ")"


# ---------------------------------------------------------------------------------------
# argument checking
# ---------------------------------------------------------------------------------------
def _spec(instruction: Any) -> InstructionSpec:
    spec = getattr(instruction, "spec", instruction)  # an api.Instruction carries its spec
    return get_instruction(spec)


def _is_integer(spec: InstructionSpec) -> bool:
    return all(isinstance(f, IntFormat) for f in (spec.a_format, spec.b_format, spec.c_format))


def families(instruction: Any) -> tuple[str, ...]:
    """The families that apply to an instruction (integer units have no subnormals or NaNs).

    >>> families("hopper.mma.m16n8k32.s32.s8.s8.s32")
    ('int', 'bits', 'cancel', 'overflow')
    """
    return _INTEGER_FAMILIES if _is_integer(_spec(instruction)) else tuple(FAMILIES)


def _chosen_families(spec: InstructionSpec, family) -> tuple[str, ...]:
    allowed = families(spec)
    if family is None:
        return allowed
    chosen = tuple(canonical_family(f) for f in ((family,) if isinstance(family, str) else family))
    if not chosen:
        raise ValueError("family: empty selection")
    for f in chosen:
        if not isinstance(f, str) or f not in allowed:
            raise ValueError(f"family: {f!r} does not apply to {spec.name}; expected one of {', '.join(allowed)}")
    return chosen


def _positive_int(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}: expected an integer, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name}: must be >= {minimum}, got {value}")
    return int(value)


def _check_steps(spec: InstructionSpec, k_steps: int) -> int:
    k_steps = _positive_int("k_steps", k_steps)
    if k_steps > 1 and spec.c_format != spec.d_format:
        raise ValueError(f"k_steps: {spec.name} takes C as {spec.c_format.name} but writes D as "
                         f"{spec.d_format.name}, so it cannot be chained")
    return k_steps


def _generate(src, spec: InstructionSpec, family: str, k_steps: int) -> DotProducts:
    K = spec.k * k_steps
    a, b, c = _FAMILY_FUNCS[family](src, spec, K)
    for name, fmt in (("a", spec.a_format), ("b", spec.b_format)):
        pad = getattr(fmt, "pad_bits", 0)
        if pad:  # TF32-style containers: the unit must ignore whatever sits in the low bits
            garbage = src.ints(0, (1 << pad) - 1, (K,)) * src.chance(50)[:, None]
            x = (a if name == "a" else b).astype(np.int64) | garbage
            if name == "a":
                a = x
            else:
                b = x
    scales = _scales(src, spec, family, K) if getattr(spec.model, "scale_block", None) else (None, None)
    return DotProducts(spec.name, np.asarray(a).astype(spec.a_format.container_dtype),
                       np.asarray(b).astype(spec.b_format.container_dtype),
                       np.asarray(c).astype(spec.c_format.container_dtype).reshape(-1),
                       np.full(src.n, family, dtype=object), *scales)


def _scales(src, spec: InstructionSpec, family: str, K: int):
    """Block scales: near 1 (shrinking to exactly 1), wide in 'align' and 'overflow',
    with specials (NaN scales) in 'special'."""
    fmt = get_format(spec.model.scale_format)
    blocks = (K // spec.model.scale_block,)
    span = {"align": 20, "overflow": 60}.get(family, 3)
    out = []
    for _ in range(2):
        e = _around(src, max(fmt.emin, -span), min(fmt.emax, span), 0, blocks)
        x = _floats_at(src, fmt, e, negative=np.zeros(e.shape, bool))
        if family == "special":
            options = special_patterns(fmt)
            x = np.where(src.chance(10, blocks), options[src.ints(0, len(options) - 1, blocks)], x)
        out.append(x.astype(fmt.container_dtype))
    return tuple(out)


# ---------------------------------------------------------------------------------------
# public strategies
# ---------------------------------------------------------------------------------------
def bit_patterns(fmt: "Format | str", specials: bool = True, *, subnormals: bool = True,
                 low_bits: bool = False) -> st.SearchStrategy[int]:
    """Bit patterns of ``fmt`` as Python ints (shrinking toward +0).

    Mostly uniform finite patterns, with extra weight on notable values (zeros, +-1,
    the largest finite, the smallest normal and subnormal) and, if ``specials``, on
    infinities and NaNs with assorted payloads.  ``subnormals=False`` leaves out
    subnormal patterns; ``low_bits=True`` fills the ignored low container bits of
    padded formats (TF32) with garbage, as real float32 containers carry.

    >>> from hypothesis import given, settings
    >>> @settings(max_examples=30, deadline=None)
    ... @given(bit_patterns("bf16"))
    ... def test_roundtrip(bits):
    ...     f = get_format("bf16")
    ...     x = f.to_float(np.array([bits], np.uint16))
    ...     assert np.isnan(x[0]) or f.from_float(x)[0] == bits
    >>> test_roundtrip()
    """
    fmt = get_format(fmt)
    if isinstance(fmt, IntFormat):
        return st.integers(0, (1 << fmt.bits) - 1)
    if not isinstance(specials, bool) or not isinstance(subnormals, bool):
        raise TypeError("specials, subnormals: expected booleans")
    sign_bit = 1 << (fmt.width - 1)
    lowest = 0 if (subnormals or not fmt.subnormals) else 1 << fmt.man_bits
    notable = [0, fmt.max_code, 1 << fmt.man_bits]
    if fmt.emin <= 0 <= fmt.emax:
        notable.append((fmt.bias << fmt.man_bits))  # 1.0
    if subnormals and fmt.subnormals and fmt.man_bits:
        notable += [1, (1 << fmt.man_bits) - 1]
    special = [int(x) >> fmt.pad_bits for x in special_patterns(fmt)
               if fmt.decode(np.array([x])).kind[0] != 0] if specials else []

    @st.composite
    def patterns(draw):
        # every path makes the same three draws, so shrinking compares them choice by choice:
        # kind 0 (an ordinary finite pattern) beats notable values, which beat specials
        negative = draw(st.booleans())
        kind = draw(st.integers(0, 15))
        if kind >= 14 and special:
            value = special[draw(st.integers(0, len(special) - 1))]
        else:
            code = (notable[draw(st.integers(0, len(notable) - 1))] if kind >= 11
                    else draw(st.integers(lowest, fmt.max_code)))
            negative = fmt.signed and negative and (code != 0 or fmt.has_negative_zero)
            value = (sign_bit if negative else 0) | code
        garbage = draw(st.integers(0, (1 << fmt.pad_bits) - 1)) if (low_bits and fmt.pad_bits) else 0
        return (value << fmt.pad_bits) | garbage

    return patterns()


def values(fmt: "Format | str", *, exact: bool = True, specials: bool = False, subnormals: bool = True,
           min_value: float | None = None, max_value: float | None = None) -> st.SearchStrategy:
    """Values for ``fmt``: floats (ints for integer formats), shrinking toward 0.

    ``exact=True``: values the format represents exactly.  ``exact=False``: values a
    cast must round -- exact midpoints between neighbours (ties), points just beside
    them, arbitrary points between, values beyond the largest finite (overflow and
    saturation) and below the smallest subnormal; for integer formats, integers out
    of range.  ``specials`` adds inf and NaN.  ``min_value``/``max_value`` filter.

    >>> from hypothesis import given, settings
    >>> fp16 = get_format("fp16")
    >>> @settings(max_examples=50, deadline=None)
    ... @given(values(fp16, exact=False, min_value=-1e6, max_value=1e6))
    ... def test_truncation_never_grows(x):
    ...     assert abs(fp16.round(np.array([x]), "rz")[0]) <= abs(x)
    >>> test_truncation_never_grows()
    """
    fmt = get_format(fmt)
    for name, bound in (("min_value", min_value), ("max_value", max_value)):
        if bound is not None and not (isinstance(bound, (int, float, np.number)) and np.isfinite(bound)):
            raise ValueError(f"{name}: expected a finite number, got {bound!r}")
    if min_value is not None and max_value is not None and min_value > max_value:
        raise ValueError(f"min_value, max_value: empty range [{min_value}, {max_value}]")

    def in_range(x) -> bool:
        if isinstance(x, float) and not np.isfinite(x):
            return True
        return (min_value is None or x >= min_value) and (max_value is None or x <= max_value)

    if isinstance(fmt, IntFormat):
        lo, hi = fmt.min_value, fmt.max_value
        if not exact:
            span = max(hi - lo + 1, 2)
            lo, hi = lo - span, hi + span
        lo = lo if min_value is None else max(lo, int(np.ceil(min_value)))
        hi = hi if max_value is None else min(hi, int(np.floor(max_value)))
        if lo > hi:
            raise ValueError(f"min_value, max_value: no {fmt.name} value in [{min_value}, {max_value}]")
        return st.integers(lo, hi)
    if not exact and fmt.man_bits > 50:
        raise ValueError(f"exact: {fmt.name} is too wide for float64 values between its neighbours")

    def decode(bits: int) -> float:
        return float(fmt.to_float(np.array([bits], np.uint64).astype(fmt.container_dtype))[0])

    if exact:
        if fmt.width <= 16 and (min_value is not None or max_value is not None):
            every = fmt.to_float(fmt.all_bits())
            keep = [float(x) for x in sorted(set(every[np.isfinite(every)].tolist()), key=abs) if in_range(x)]
            if specials:
                keep += [float(x) for x in (np.inf, -np.inf, np.nan) if in_range(x) and _has_value(fmt, x)]
            if not keep:
                raise ValueError(f"min_value, max_value: no {fmt.name} value in [{min_value}, {max_value}]")
            return st.sampled_from(keep)
        if min_value is None and max_value is None:
            return bit_patterns(fmt, specials, subnormals=subnormals).map(decode)
        code_lo, code_hi, signs = _code_window(fmt, min_value, max_value)

        @st.composite
        def windowed(draw):  # draw inside the range's codes rather than filtering the whole format
            negative = draw(st.sampled_from(signs))
            x = decode(draw(st.integers(code_lo, code_hi)) << fmt.pad_bits)
            return -x if negative else x

        return windowed().filter(in_range)

    top = fmt.max_finite
    ulp_top = 2.0 ** (fmt.emax - fmt.man_bits)
    code_lo, code_hi, signs = _code_window(fmt, min_value, max_value)
    tiny = fmt.min_subnormal if subnormals else fmt.min_normal

    @st.composite
    def between(draw):
        kind = draw(st.integers(0, 7))
        negative = draw(st.sampled_from(signs))
        if kind == 6:  # beyond the largest finite: saturation / overflow boundary
            x = top + draw(st.sampled_from([0.5, 0.25, 0.75, 1.0, 2.0, 1e3])) * ulp_top
        elif kind == 7:  # below the smallest subnormal: the tie with zero
            x = tiny * draw(st.sampled_from([0.5, 0.25, 0.75, 1.0 - 2.0 ** -20]))
        else:
            code = draw(st.integers(code_lo, min(code_hi, fmt.max_code - 1)))
            lo = decode(code << fmt.pad_bits)
            hi = decode((code + 1) << fmt.pad_bits)
            gap = hi - lo
            if kind <= 2:  # the tie
                x = lo + gap / 2
            elif kind == 3:  # just beside the tie
                x = lo + gap / 2 + draw(st.sampled_from([-1, 1])) * gap * 2.0 ** -20
            else:  # anywhere between
                x = lo + gap * draw(st.integers(1, (1 << 20) - 1)) * 2.0 ** -20
        return -x if negative else x

    strategy = between()
    if specials:
        strategy = st.one_of(strategy, st.sampled_from([np.inf, -np.inf, np.nan]))
    return strategy.filter(in_range)


def _code_window(fmt: FloatFormat, min_value, max_value) -> tuple[int, int, list]:
    """Magnitude codes and signs that can reach values in [min_value, max_value]."""
    lo = -np.inf if min_value is None else float(min_value)
    hi = np.inf if max_value is None else float(max_value)
    signs = [s for s in (False, True) if (s is False and hi >= 0) or (s and lo <= 0 and fmt.signed)] or [False]
    m_hi = min(max(abs(lo), abs(hi)), fmt.max_finite)
    m_lo = 0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi))

    def code(x, rounding):
        return int(fmt.from_float(np.array([min(x, fmt.max_finite)]), rounding)[0]) >> fmt.pad_bits

    return code(m_lo, "rz"), max(code(m_hi, "ru"), code(m_lo, "rz")), signs


def _has_value(fmt: FloatFormat, x: float) -> bool:
    return (fmt.has_nan if np.isnan(x) else fmt.has_inf) and (fmt.signed or np.isnan(x) or x > 0)


def dot_products(instruction: Any, family: "str | Sequence[str] | None" = None, *, k_steps: int = 1,
                 batch: int = 1) -> st.SearchStrategy[DotProducts]:
    """Operand and accumulator bits for ``instruction`` (a catalog name, spec or Instruction).

    Each example is a ``DotProducts`` of ``batch`` rows, K' = ``k_steps * k``, all from one
    family (one of ``family`` when several are named; any that applies when None -- see
    ``FAMILIES`` and ``families()``).  Shrinks toward the first family listed and toward
    zeros, 1.0 and exponents near 0.

    >>> from hypothesis import given, settings
    >>> import tcnumerics as tc
    >>> inst = tc.instruction("hopper.mma.m16n8k16.f32.f16.f16.f32")
    >>> @settings(max_examples=20, deadline=None)
    ... @given(dot_products(inst, family="special", batch=4))
    ... def test_nan_is_canonical(case):
    ...     d = inst.dot_bits(case.a, case.b, case.c)
    ...     nan = np.isnan(inst.d_format.to_float(d))
    ...     assert (d[nan] == 0x7FFFFFFF).all()
    >>> test_nan_is_canonical()
    """
    spec = _spec(instruction)
    chosen = _chosen_families(spec, family)
    k_steps = _check_steps(spec, k_steps)
    batch = _positive_int("batch", batch)

    @st.composite
    def build(draw):
        fam = chosen[0] if len(chosen) == 1 else draw(st.sampled_from(chosen))
        return _generate(_DrawSource(draw, batch), spec, fam, k_steps)

    return build()


def sample_dot_products(instruction: Any, n: int, *, family: "str | Sequence[str] | None" = None,
                        k_steps: int = 1, seed: "int | np.random.Generator" = 0) -> DotProducts:
    """``n`` dot products drawn with numpy, split evenly over the families (bulk fuzzing).

    The same families as ``dot_products`` without shrinking, about a microsecond a vector;
    the same seed gives the same batch.

    >>> b = sample_dot_products("hopper.mma.m16n8k32.s32.s8.s8.s32", 8, seed=3)
    >>> len(b), list(b.family[:2])
    (8, ['int', 'int'])
    """
    spec = _spec(instruction)
    chosen = _chosen_families(spec, family)
    k_steps = _check_steps(spec, k_steps)
    n = _positive_int("n", n)
    if isinstance(seed, np.random.Generator):
        rng = seed
    elif isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        rng = np.random.default_rng(int(seed))
    else:
        raise TypeError(f"seed: expected an int or numpy Generator, got {type(seed).__name__}")
    counts = [n // len(chosen) + (i < n % len(chosen)) for i in range(len(chosen))]
    parts = [_generate(_NumpySource(rng, m), spec, fam, k_steps) for fam, m in zip(chosen, counts) if m]
    return DotProducts.concat(parts)


def matrices(fmt: "Format | str", shape, *, specials: bool = False, subnormals: bool = True,
             elements: st.SearchStrategy | None = None) -> st.SearchStrategy[np.ndarray]:
    """Arrays of ``fmt`` values in its numpy/ml_dtypes type (float32 containers for TF32,
    decoded integers for integer formats, exact float64 values where numpy has no type).  ``shape`` is a tuple or a strategy of tuples;
    ``elements`` (bit patterns) overrides the default ``bit_patterns(fmt, specials)``.

    >>> from hypothesis import given, settings
    >>> import ml_dtypes
    >>> @settings(max_examples=10, deadline=None)
    ... @given(matrices("bf16", (2, 3)))
    ... def test_dtype(x):
    ...     assert x.dtype == ml_dtypes.bfloat16 and x.shape == (2, 3)
    >>> test_dtype()
    """
    fmt = get_format(fmt)
    if elements is None:
        elements = bit_patterns(fmt, specials, subnormals=subnormals)
    elif not isinstance(elements, st.SearchStrategy):
        raise TypeError(f"elements: expected a hypothesis strategy, got {type(elements).__name__}")
    return hnp.arrays(fmt.container_dtype, shape, elements=elements).map(lambda bits: _as_values(fmt, bits))


def _as_values(fmt: Format, bits: np.ndarray) -> np.ndarray:
    """Bits as the format's array type; exact float64 values where numpy has no such type."""
    try:
        return fmt.to_array(bits)
    except TypeError:
        return fmt.to_float(bits)


def mma_operands(instruction: Any, *, family: "str | Sequence[str] | None" = None, max_m: int = 4,
                 max_n: int = 4, max_k_steps: int = 2) -> st.SearchStrategy[tuple]:
    """``(A, B, C)`` value arrays for ``Instruction.mma`` / ``tcnumerics.gemm``.

    A is [M, K'], B [K', N], C [M, N] with M <= max_m, N <= max_n and K' a multiple of the
    instruction's K up to ``max_k_steps`` of them (1 when C and D formats differ).  Row m
    of A and column n of B come from the m-th and n-th dot product of one family batch,
    so each output element sees that family's structure (crossed with another's).

    >>> from hypothesis import given, settings
    >>> import tcnumerics as tc
    >>> inst = tc.instruction("hopper.wgmma.m64n8k32.f32.e4m3.e4m3")
    >>> @settings(max_examples=10, deadline=None)
    ... @given(mma_operands(inst, family="normal"))
    ... def test_shapes(ops):
    ...     A, B, C = ops
    ...     assert A.shape[1] % 32 == 0 and inst.mma(A, B, C).shape == C.shape
    >>> test_shapes()
    """
    spec = _spec(instruction)
    chosen = _chosen_families(spec, family)
    max_m, max_n = _positive_int("max_m", max_m), _positive_int("max_n", max_n)
    max_k_steps = _positive_int("max_k_steps", max_k_steps)
    if spec.c_format != spec.d_format:
        max_k_steps = 1

    @st.composite
    def build(draw):
        m, n = draw(st.integers(1, max_m)), draw(st.integers(1, max_n))
        steps = draw(st.integers(1, max_k_steps))
        fam = chosen[0] if len(chosen) == 1 else draw(st.sampled_from(chosen))
        rows = _generate(_DrawSource(draw, m * n), spec, fam, steps)
        A = _as_values(spec.a_format, rows.a[:m])
        B = _as_values(spec.b_format, rows.b[:n]).T.copy()
        C = _as_values(spec.c_format, rows.c.reshape(m, n))
        return A, B, C

    return build()
