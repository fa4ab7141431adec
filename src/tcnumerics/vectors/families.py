"""Input families for golden vectors: each one aims at a feature of the unit's arithmetic.

A family turns a random generator into operand and accumulator bit patterns for one
instruction.  The GPU probe feeds these same inputs to real hardware; ``expected_d``
computes what the catalogued model says the hardware returns.

Families (``FAMILIES``; the names are the one vocabulary of ``tcnumerics.family_names``, shared with
``tcnumerics.strategies``):

``int``       small integers: every result exact, a layout and sign check.
``normal``    N(0, 1) values rounded to each format (the everyday case).
``bits``      uniform random bit patterns (subnormals, huge spans, NaN and inf included).
``cancel``    catastrophic cancellation: C (or half the products) cancels the rest, leaving
              what alignment and truncation lost.
``align``     wide exponent spans: a big term with small terms straddling the truncation
              point (2**-4 .. 2**-45 below it), plus exponents spread over the whole range.
``cdom``      accumulator-dominant: small products worth exactly half (or 3/4, 1/4) of an
              ulp of C at some precision, plus tiny sticky terms -- ties on the output rounding.
``special``   zeros of both signs, subnormals, the largest finite, inf, NaN payloads,
              inf*0, inf-inf, inf in C.
``tf32``      TF32 operands with garbage in the low 13 container bits (only for tf32).
``overflow``  integer wraparound/saturation; for floats, results beyond the output range.

Block-scaled instructions (``tcnumerics.blockscale``) also take per-block scales:
``generate_scaled`` returns them with the operands, chosen per family (``scale_policy``):
unit and moderate power-of-two scales mostly, uniform scale bit patterns for ``bits``,
the extremes (UE8M0 0x00, 0xFE and the NaN code 0xFF; UE4M3 zero, the least subnormal,
the largest, the NaN code 0x7F and codes with the ignored bit 7 set) for ``special`` and
a few ``normal`` vectors, one power of two per vector for families whose C is built
from the products (C scaled along with them), and scales reaching the top of the output
range for ``overflow``.

Example:
    >>> import numpy as np
    >>> from tcnumerics.vectors.families import generate, families_for
    >>> "tf32" in families_for("hopper.wgmma.m64n8k8.f32.tf32.tf32")
    True
    >>> a, b, c = generate("hopper.wgmma.m64n8k16.f32.bf16.bf16", "int", 4, np.random.default_rng(0))
    >>> a.shape, a.dtype, c.shape, c.dtype
    ((4, 16), dtype('uint16'), (4,), dtype('uint32'))
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..catalog import get_instruction
from ..family_names import canonical_family
from ..formats import FloatFormat, Format, IntFormat
from ..model import InstructionSpec

__all__ = ["FAMILIES", "families_for", "generate", "generate_scaled", "expected_d", "resolve_k",
           "is_block_scaled", "scale_extremes"]

FAMILIES: tuple[str, ...] = ("int", "normal", "bits", "cancel", "align", "cdom", "special", "tf32", "overflow")

_FLOAT_FAMILIES = ("int", "normal", "bits", "cancel", "align", "cdom", "special", "overflow")
_INT_FAMILIES = ("int", "normal", "bits", "cancel", "special", "overflow")


def _spec(spec_or_name: "str | InstructionSpec") -> InstructionSpec:
    return get_instruction(spec_or_name)


def _is_integer(spec: InstructionSpec) -> bool:
    return isinstance(spec.a_format, IntFormat)


def families_for(spec_or_name: "str | InstructionSpec") -> list[str]:
    """The families that apply to an instruction, in ``FAMILIES`` order.

    >>> families_for("hopper.mma.m16n8k32.s32.s8.s8.s32")
    ['int', 'normal', 'bits', 'cancel', 'special', 'overflow']
    """
    spec = _spec(spec_or_name)
    if _is_integer(spec):
        return list(_INT_FAMILIES)
    fams = list(_FLOAT_FAMILIES)
    if "tf32" in (spec.a_format.name, spec.b_format.name):
        fams.append("tf32")
    return [f for f in FAMILIES if f in fams]


def resolve_k(spec: InstructionSpec, k: int | None) -> int:
    """The K of generated vectors: the instruction's own, or a positive multiple of it."""
    if k is None:
        return spec.k
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"k: expected an integer, got {type(k).__name__}")
    k = int(k)
    if k <= 0 or k % spec.k:
        raise ValueError(f"k: {k} is not a positive multiple of {spec.name}'s K={spec.k}")
    if k > spec.k and spec.c_format != spec.d_format:
        raise ValueError(f"k: K={k} chains instructions, but {spec.name} takes C as {spec.c_format.name} "
                         f"and writes D as {spec.d_format.name}")
    return k


def generate(spec_or_name: "str | InstructionSpec", family: str, count: int, rng: np.random.Generator,
             k: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``count`` vectors of one family: ``a``, ``b`` [count, K] and ``c`` [count] bit arrays.

    ``a``/``b`` are in the instruction's operand container dtypes (TF32: uint32), ``c`` in
    the accumulator's.  ``K`` is the instruction's K, or ``k`` (a multiple of it: the
    instruction is then chained, each D the next C).
    """
    spec = _spec(spec_or_name)
    family = canonical_family(family)
    if not isinstance(family, str) or family not in FAMILIES:
        raise ValueError(f"family: unknown {family!r}; expected one of {', '.join(FAMILIES)}")
    if family not in families_for(spec):
        raise ValueError(f"family: {family!r} does not apply to {spec.name} "
                         f"(its families: {', '.join(families_for(spec))})")
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
        raise ValueError(f"count: expected a non-negative integer, got {count!r}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng: expected a numpy.random.Generator, got {type(rng).__name__}")
    K = resolve_k(spec, k)
    ctx = _Ctx(spec, int(count), K, rng)
    if _is_integer(spec):
        a, b, c = _INT_GENERATORS[family](ctx)
    else:
        a, b, c = _FLOAT_GENERATORS[family](ctx)
    a = np.ascontiguousarray(a, dtype=spec.a_format.container_dtype).reshape(int(count), K)
    b = np.ascontiguousarray(b, dtype=spec.b_format.container_dtype).reshape(int(count), K)
    c = np.ascontiguousarray(c, dtype=spec.c_format.container_dtype).reshape(int(count))
    return a, b, c


def expected_d(spec_or_name: "str | InstructionSpec", a: np.ndarray, b: np.ndarray, c: np.ndarray, *,
               sparse_index: np.ndarray | None = None, scale_a: np.ndarray | None = None,
               scale_b: np.ndarray | None = None, engine: str = "auto", chunk_rows: int = 1 << 16) -> np.ndarray:
    """What the catalogued model says the instruction returns, evaluated in bounded row chunks.

    Block-scaled instructions take ``scale_a``/``scale_b`` ([N, K/scale_block] scale bits,
    both or neither; neither: unit scales), evaluated by ``tcnumerics.blockscale`` (the
    ``exact`` engine: the oracle; any other: the reference engine).

    >>> import numpy as np
    >>> a = np.full((1, 16), 0x3C00, np.uint16)                  # fp16 ones
    >>> hex(int(expected_d("hopper.wgmma.m64n8k16.f32.f16.f16", a, a, np.zeros(1, np.uint32))[0]))
    '0x41800000'
    >>> name = "blackwell.tcgen05.mma.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0"
    >>> ones = np.full((1, 32), 0x38, np.uint8)                  # E4M3 1.0
    >>> d = expected_d(name, ones, ones, np.zeros(1, np.uint32),
    ...                scale_a=np.array([[128]], np.uint8), scale_b=np.array([[126]], np.uint8))
    >>> float(d.view(np.float32)[0])                            # 32 * (2 * 0.5)
    32.0
    """
    from ..api import Instruction

    spec = _spec(spec_or_name)
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows: must be >= 1, got {chunk_rows}")
    n = len(c)
    out = np.empty(n, dtype=spec.d_format.container_dtype)
    if scale_a is not None or scale_b is not None:
        if not is_block_scaled(spec):
            raise ValueError(f"scale_a, scale_b: {spec.name} is not a block-scaled instruction")
        if scale_a is None or scale_b is None:
            raise ValueError("scale_a, scale_b: give both scale arrays or neither")
        if sparse_index is not None:
            raise ValueError("sparse_index: block-scaled instructions are dense")
        from .. import blockscale

        for s in range(0, n, chunk_rows):
            e = min(n, s + chunk_rows)
            out[s:e] = blockscale.dot_bits(spec.name, a[s:e], b[s:e], c[s:e], scale_a=scale_a[s:e],
                                           scale_b=scale_b[s:e], packed=False, engine=engine)
        return out
    if sparse_index is not None:
        sparse = _sparse_module()
        for s in range(0, n, chunk_rows):
            e = min(n, s + chunk_rows)
            out[s:e] = sparse.dot_bits(spec, a[s:e], b[s:e], c[s:e], sparse_index[s:e])
        return out
    inst = Instruction(spec, engine)
    for s in range(0, n, chunk_rows):
        e = min(n, s + chunk_rows)
        out[s:e] = inst.dot_bits(a[s:e], b[s:e], c[s:e])
    return out


def is_block_scaled(spec_or_name: "str | InstructionSpec") -> bool:
    """Whether an instruction takes block scales (``scale_a``/``scale_b``).

    >>> is_block_scaled("blackwell.tcgen05.mma.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3")
    True
    >>> is_block_scaled("hopper.wgmma.m64n8k16.f32.f16.f16")
    False
    """
    return bool(getattr(_spec(spec_or_name).model, "is_block_scaled", False))


def scale_extremes(spec_or_name: "str | InstructionSpec") -> list[int]:
    """The extreme scale bit patterns of a block-scaled instruction's scale format.

    UE8M0: 0x00 (2**-127), 0xFE (2**127), 0xFF (NaN).  UE4M3: zero, the least subnormal,
    the largest finite, NaN (0x7F), and zero and one with the ignored bit 7 set.

    >>> [hex(x) for x in scale_extremes("blackwell.tcgen05.mma.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0")]
    ['0x0', '0xfe', '0xff']
    >>> [hex(x) for x in scale_extremes("blackwell.tcgen05.mma.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3")]
    ['0x0', '0x1', '0x7e', '0x7f', '0x80', '0xb8']
    """
    spec = _spec(spec_or_name)
    if not is_block_scaled(spec):
        raise ValueError(f"instruction: {spec.name} is not block-scaled")
    sf = spec.model.scale_format
    out = [0]
    if sf.subnormals and sf.man_bits:
        out.append(1)
    out.append(int(sf.max_code))
    if sf.has_nan:
        out.append(int(sf.nan_bits))
    spare = sf.container_bits - sf.width  # bits the unit ignores (UE4M3's bit 7)
    if spare > 0:
        top = 1 << (sf.container_bits - 1)
        out += [top, top | _pow2_code(sf, 0)]
    return out


def generate_scaled(spec_or_name: "str | InstructionSpec", family: str, count: int, rng: np.random.Generator,
                    k: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``count`` vectors of one family for a block-scaled instruction, with their scales:
    ``a``, ``b`` [count, K], ``c`` [count], ``scale_a``, ``scale_b`` [count, K/scale_block].

    The operands are ``generate``'s; the scales follow the family (module doc), and where
    the family builds C from the products (``cancel``, ``align``, ``cdom``) C is scaled
    along with them by the vector's power of two.

    >>> import numpy as np
    >>> name = "blackwell.tcgen05.mma.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3"
    >>> a, b, c, sa, sb = generate_scaled(name, "normal", 3, np.random.default_rng(0))
    >>> a.shape, sa.shape, sa.dtype
    ((3, 64), (3, 4), dtype('uint8'))
    """
    spec = _spec(spec_or_name)
    if not is_block_scaled(spec):
        raise ValueError(f"instruction: {spec.name} is not block-scaled (generate() makes its vectors)")
    a, b, c = generate(spec, family, count, rng, k=k)
    K = a.shape[1]
    ctx = _Ctx(spec, int(count), K, rng)
    sa, sb, c = _family_scales(ctx, family, a, b, c)
    return a, b, c, sa, sb


def _sparse_module():
    try:
        from .. import sparse  # written with the GPU probe; optional here
    except ImportError as exc:
        raise ValueError("sparse vectors need tcnumerics.sparse (structured-sparse mma), "
                         f"which is not available in this installation ({exc})") from None
    return sparse


# --------------------------------------------------------------------------------------------
# building blocks

class _Ctx:
    """What every family generator needs: the instruction, the shape and the generator."""

    def __init__(self, spec: InstructionSpec, n: int, k: int, rng: np.random.Generator):
        self.spec, self.n, self.k, self.rng = spec, n, k, rng
        self.fa, self.fb, self.fc, self.fd = spec.a_format, spec.b_format, spec.c_format, spec.d_format


def _lo(fmt: FloatFormat) -> int:
    """Exponent of the smallest positive value (the least subnormal)."""
    return fmt.emin - fmt.man_bits if fmt.subnormals else fmt.emin


def _vals(fmt: FloatFormat, x: np.ndarray, rounding: str = "rne") -> np.ndarray:
    """Round finite float64 values into ``fmt`` bit patterns, saturating instead of overflowing."""
    return fmt.from_float(np.asarray(x, dtype=np.float64), rounding, overflow="saturate")


def _scaled(rng: np.random.Generator, fmt: FloatFormat, exps: np.ndarray, signs: np.ndarray | None = None,
            mantissa: bool = True) -> np.ndarray:
    """Bits of ``±(1 + u) * 2**exps`` (random u, or 0), truncated into ``fmt``.

    Exponents are clipped to the format's range; below its normal range the value
    becomes a (truncated) subnormal, keeping the requested scale.
    """
    exps = np.clip(np.asarray(exps, dtype=np.int64), _lo(fmt), fmt.emax)
    frac = rng.random(exps.shape) if mantissa else np.zeros(exps.shape)
    if signs is None:
        signs = rng.random(exps.shape) < 0.5
    v = np.ldexp(1.0 + frac, exps.astype(np.int32))
    return _vals(fmt, np.where(signs, -v, v), "rz")


def _uniform_bits(rng: np.random.Generator, fmt: Format, shape) -> np.ndarray:
    """Uniform bit patterns over the format's value bits (container padding left zero)."""
    width = fmt.width
    raw = rng.integers(0, 1 << width, size=shape, dtype=np.uint64)
    pad = getattr(fmt, "pad_bits", 0)
    return (raw << np.uint64(pad)).astype(fmt.container_dtype)


def _product_split(rng: np.random.Generator, fa: FloatFormat, fb: FloatFormat, t: np.ndarray):
    """Exponents (ea, eb) with ea + eb = t, each within its format's range (t clipped to fit)."""
    t = np.clip(t, _lo(fa) + _lo(fb), fa.emax + fb.emax)
    lo = np.maximum(_lo(fa), t - fb.emax)
    hi = np.minimum(fa.emax, t - _lo(fb))
    ea = lo + np.floor(rng.random(t.shape) * (hi - lo + 1)).astype(np.int64)
    return ea, t - ea


def _product_range(ctx: _Ctx) -> tuple[int, int]:
    return _lo(ctx.fa) + _lo(ctx.fb), ctx.fa.emax + ctx.fb.emax


def _special_bits(fmt: FloatFormat, kind: str, negative: np.ndarray | bool = False,
                  rng: np.random.Generator | None = None, shape=()) -> np.ndarray:
    """Bit patterns of a special value of ``fmt``: zero, inf, nan (random payloads), max, subnormal.

    A format without NaN (FP6, FP4) gets its largest finite magnitude where a NaN is asked for.
    """
    neg = np.broadcast_to(np.asarray(negative, dtype=bool), shape)
    sign = (neg.astype(np.uint64) << np.uint64(fmt.width - 1)) if fmt.signed else np.zeros(shape, np.uint64)
    ones_e = (1 << fmt.exp_bits) - 1
    if kind == "zero":
        code = np.zeros(shape, np.uint64)
        if not fmt.has_negative_zero:
            sign = np.zeros(shape, np.uint64)
    elif kind == "max":
        code = np.full(shape, fmt.max_code, np.uint64)
    elif kind == "inf":
        if not fmt.has_inf:
            raise ValueError(f"format {fmt.name} has no infinity")
        code = np.full(shape, ones_e << fmt.man_bits, np.uint64)
    elif kind == "nan" and not fmt.has_nan:
        code = np.full(shape, fmt.max_code, np.uint64)  # FP6/FP4 have no NaN: their extreme instead
    elif kind == "nan":
        if fmt.specials == "ieee" and rng is not None and fmt.man_bits:
            payload = rng.integers(1, 1 << fmt.man_bits, size=shape, dtype=np.uint64)
            code = (np.uint64(ones_e << fmt.man_bits) | payload).astype(np.uint64)
        else:
            return np.broadcast_to(np.asarray(fmt.nan_bits, dtype=fmt.container_dtype), shape).copy()
    elif kind == "subnormal":
        if not fmt.subnormals or fmt.man_bits == 0:
            code = np.full(shape, 1 << fmt.man_bits, np.uint64)  # the least normal instead
        else:
            code = rng.integers(1, 1 << fmt.man_bits, size=shape, dtype=np.uint64)
    else:
        raise ValueError(f"kind: unknown special {kind!r}")
    return ((sign | code) << np.uint64(fmt.pad_bits)).astype(fmt.container_dtype)


def _nudge(rng: np.random.Generator, fmt: FloatFormat, bits: np.ndarray, prob: float) -> np.ndarray:
    """Move a fraction ``prob`` of finite nonzero values by one unit in the last place (either way)."""
    step = np.uint64(1 << fmt.pad_bits)
    raw = bits.astype(np.uint64)
    mag_mask = np.uint64(((1 << (fmt.exp_bits + fmt.man_bits)) - 1) << fmt.pad_bits)
    code = (raw & mag_mask) // step
    move = np.where(rng.random(bits.shape) < prob, rng.choice(np.array([-1, 1]), bits.shape), 0)
    new = code.astype(np.int64) + move
    ok = (code > 0) & (code <= fmt.max_code) & (new > 0) & (new <= fmt.max_code)
    moved = (raw & ~mag_mask) | (new.astype(np.uint64) * step)
    return np.where(ok, moved, raw).astype(bits.dtype)


# --------------------------------------------------------------------------------------------
# floating-point families

def _f_int(ctx: _Ctx):
    rng = ctx.rng

    def ints(fmt: FloatFormat, shape, cap: int) -> np.ndarray:
        bound = min(1 << (fmt.man_bits + 1), cap)  # every integer up to here is exact in fmt
        return _vals(fmt, rng.integers(-bound, bound + 1, size=shape).astype(np.float64))

    return ints(ctx.fa, (ctx.n, ctx.k), 8), ints(ctx.fb, (ctx.n, ctx.k), 8), ints(ctx.fc, ctx.n, 256)


def _f_normal(ctx: _Ctx):
    rng = ctx.rng
    return (_vals(ctx.fa, rng.standard_normal((ctx.n, ctx.k))), _vals(ctx.fb, rng.standard_normal((ctx.n, ctx.k))),
            _vals(ctx.fc, rng.standard_normal(ctx.n)))


def _finite_rows(fmt: FloatFormat, bits: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """In the chosen rows, turn inf/NaN patterns finite by clearing their top exponent bit."""
    special = fmt.decode(bits).kind != 0
    flip = np.uint64(1 << (fmt.pad_bits + fmt.man_bits + fmt.exp_bits - 1))
    cleared = (bits.astype(np.uint64) & ~flip).astype(bits.dtype)
    return np.where(rows[:, None] & special, cleared, bits)


def _f_bits(ctx: _Ctx):
    rng, n = ctx.rng, ctx.n
    # uniform patterns; half the vectors keep their operands finite, or NaN would hide the rest
    finite = rng.random(n) < 0.5
    a = _finite_rows(ctx.fa, _uniform_bits(rng, ctx.fa, (n, ctx.k)), finite)
    b = _finite_rows(ctx.fb, _uniform_bits(rng, ctx.fb, (n, ctx.k)), finite)
    # C: half uniform patterns, a quarter signed zeros (the zero exponent decides the
    # alignment), a quarter scaled into the products' range so both sides matter
    c = _uniform_bits(rng, ctx.fc, n)
    pick = rng.integers(0, 4, n)
    zeros = _special_bits(ctx.fc, "zero", rng.random(n) < 0.5, shape=(n,))
    plo, phi = _product_range(ctx)
    scaled = _scaled(rng, ctx.fc, rng.integers(plo, phi + 1, n))
    c = np.where(pick == 2, zeros, np.where(pick == 3, scaled, c))
    return a, b, c


def _f_cancel(ctx: _Ctx):
    rng, n, k = ctx.rng, ctx.n, ctx.k
    a = _vals(ctx.fa, rng.standard_normal((n, k)))
    b = _vals(ctx.fb, rng.standard_normal((n, k)))
    paired = rng.random(n) < 0.5
    if k >= 2:
        # half the vectors: the second half of the products negates the first, with a
        # quarter of those b's moved by one unit in the last place so a small residue remains
        h = k // 2
        a2 = _vals(ctx.fa, -ctx.fa.to_float(a[:, :h]))
        b2 = _nudge(rng, ctx.fb, b[:, :h], 0.25)
        a[:, h:2 * h] = np.where(paired[:, None], a2, a[:, h:2 * h])
        b[:, h:2 * h] = np.where(paired[:, None], b2, b[:, h:2 * h])
    # C cancels the (float64-rounded) sum of the products
    s = (ctx.fa.to_float(a) * ctx.fb.to_float(b)).sum(axis=1)
    s = np.where(np.isfinite(s), s, 0.0)
    c = _vals(ctx.fc, -s)
    c = np.where(paired & (rng.random(n) < 0.5), _vals(ctx.fc, rng.standard_normal(n) * 2.0 ** -20), c)
    return a, b, c


def _f_align(ctx: _Ctx):
    rng, n, k = ctx.rng, ctx.n, ctx.k
    plo, phi = _product_range(ctx)
    clo, chi = _lo(ctx.fc), ctx.fc.emax
    # half: one big term (C or the first product) at 2**E, the rest 4..45 binades below it
    e_lo, e_hi = max(plo + 8, clo), min(phi, chi)
    if e_lo > e_hi:
        e_lo = e_hi
    E = rng.integers(e_lo, e_hi + 1, n)
    gaps = rng.integers(4, 46, (n, k))
    c_big = rng.random(n) < 0.5
    t = E[:, None] - gaps
    t[:, 0] = np.where(c_big, t[:, 0], E)
    ea, eb = _product_split(rng, ctx.fa, ctx.fb, t)
    a = _scaled(rng, ctx.fa, ea)
    b = _scaled(rng, ctx.fb, eb)
    c = _scaled(rng, ctx.fc, np.where(c_big, E, E - rng.integers(4, 46, n)))
    # other half: every exponent uniform over a range whose products stay finite in D
    spread = rng.random(n) < 0.5
    half_d = ctx.fd.emax // 2 if isinstance(ctx.fd, FloatFormat) else 0
    ua = _scaled(rng, ctx.fa, rng.integers(_lo(ctx.fa), min(ctx.fa.emax, half_d) + 1, (n, k)))
    ub = _scaled(rng, ctx.fb, rng.integers(_lo(ctx.fb), min(ctx.fb.emax, half_d) + 1, (n, k)))
    uc = _scaled(rng, ctx.fc, rng.integers(clo, min(chi, ctx.fd.emax) + 1, n))
    return (np.where(spread[:, None], ua, a), np.where(spread[:, None], ub, b), np.where(spread, uc, c))


def _f_cdom(ctx: _Ctx):
    rng, n, k = ctx.rng, ctx.n, ctx.k
    plo, phi = _product_range(ctx)
    # j: the precision (bits below C's leading bit) at which the products make a tie
    j = rng.integers(1, ctx.fd.man_bits + 4, n)
    cmin = ctx.fc.emin
    e_lo = np.maximum(cmin, plo + j + 1)
    e_hi = np.minimum(ctx.fc.emax - 1, phi + j + 1)
    e_hi = np.maximum(e_hi, e_lo)
    E = e_lo + np.floor(rng.random(n) * (e_hi - e_lo + 1)).astype(np.int64)
    c = _scaled(rng, ctx.fc, E)
    c_neg = ctx.fc.decode(c).sign
    # first product: half an ulp at precision j (a tie), or 1/4, 3/4 of it, with either sign
    t0 = E - j - 1
    ea, eb = _product_split(rng, ctx.fa, ctx.fb, t0)
    mult = rng.choice(np.array([1.0, 1.0, 1.5, 0.5]), n)
    sign0 = np.where(rng.random(n) < 0.7, c_neg, ~c_neg)
    a0 = _vals(ctx.fa, np.where(sign0, -1.0, 1.0) * mult * np.ldexp(1.0, ea.astype(np.int32)), "rz")
    b0 = _scaled(rng, ctx.fb, eb, signs=np.zeros(n, bool), mantissa=False)
    # the other products: zeros of either sign, or tiny sticky terms far below the tie
    zero_a = _special_bits(ctx.fa, "zero", rng.random((n, k)) < 0.5, shape=(n, k))
    tiny_t = t0[:, None] - rng.integers(2, 40, (n, k))
    ta, tb = _product_split(rng, ctx.fa, ctx.fb, tiny_t)
    tiny_a = _scaled(rng, ctx.fa, ta)
    tiny_b = _scaled(rng, ctx.fb, tb)
    use_tiny = rng.random((n, k)) < 0.15
    a = np.where(use_tiny, tiny_a, zero_a)
    b = np.where(use_tiny, tiny_b, _vals(ctx.fb, rng.standard_normal((n, k))))
    pos = rng.integers(0, k, n)
    rows = np.arange(n)
    a[rows, pos] = a0
    b[rows, pos] = b0
    return a, b, c


def _f_special(ctx: _Ctx):
    rng, n, k = ctx.rng, ctx.n, ctx.k
    fa, fb, fc = ctx.fa, ctx.fb, ctx.fc
    a = _vals(fa, rng.standard_normal((n, k)))
    b = _vals(fb, rng.standard_normal((n, k)))
    c = _vals(fc, rng.standard_normal(n))
    rows = np.arange(n)
    scenario = rng.permutation(np.arange(n) % 12)
    p = rng.integers(0, k, n)
    q = (p + 1 + rng.integers(0, max(k - 1, 1), n)) % k
    neg = rng.random((n, k)) < 0.5

    def put(arr, fmt, sel, cols, kind, negative):
        idx = np.flatnonzero(sel)
        if idx.size:
            arr[idx, cols[idx]] = _special_bits(fmt, kind, np.asarray(negative)[idx] if np.ndim(negative) else negative,
                                                rng, shape=(idx.size,))

    def inf_or(fmt, other="max"):
        return "inf" if fmt.has_inf else other

    s = scenario
    # 0: all zeros of random signs, C a signed zero -> the sign of an exact zero result
    z = s == 0
    a = np.where(z[:, None], _special_bits(fa, "zero", neg, shape=(n, k)), a)
    b = np.where(z[:, None], _special_bits(fb, "zero", ~neg, shape=(n, k)), b)
    c = np.where(z, _special_bits(fc, "zero", rng.random(n) < 0.5, shape=(n,)), c)
    # 1: zero products against a negative-zero C
    z1 = s == 1
    a = np.where(z1[:, None] & (rng.random((n, k)) < 0.7), _special_bits(fa, "zero", neg, shape=(n, k)), a)
    c = np.where(z1, _special_bits(fc, "zero", True, shape=(n,)), c)
    b = np.where(z1[:, None], _special_bits(fb, "zero", neg, shape=(n, k)), b)
    # 2: subnormal operands and C
    sub = s == 2
    a = np.where(sub[:, None] & (rng.random((n, k)) < 0.6), _special_bits(fa, "subnormal", neg, rng, (n, k)), a)
    b = np.where(sub[:, None] & (rng.random((n, k)) < 0.6), _special_bits(fb, "subnormal", ~neg, rng, (n, k)), b)
    c = np.where(sub, _special_bits(fc, "subnormal", rng.random(n) < 0.5, rng, (n,)), c)
    # 3: largest finite magnitudes
    mx = s == 3
    a = np.where(mx[:, None] & (rng.random((n, k)) < 0.5), _special_bits(fa, "max", neg, shape=(n, k)), a)
    b = np.where(mx[:, None] & (rng.random((n, k)) < 0.5), _special_bits(fb, "max", neg, shape=(n, k)), b)
    c = np.where(mx & (rng.random(n) < 0.5), _special_bits(fc, "max", rng.random(n) < 0.5, shape=(n,)), c)
    # 4: an infinite operand (formats without inf: their NaN)
    put(a, fa, s == 4, p, inf_or(fa, "nan"), neg[rows, p])
    # 5: a NaN operand with a random payload, in a or b
    put(a, fa, (s == 5) & (p % 2 == 0), p, "nan", neg[rows, p])
    put(b, fb, (s == 5) & (p % 2 == 1), p, "nan", neg[rows, p])
    # 6: a NaN accumulator
    c = np.where(s == 6, _special_bits(fc, "nan", rng.random(n) < 0.5, rng, (n,)), c)
    # 7: inf * 0
    put(a, fa, s == 7, p, inf_or(fa, "nan"), neg[rows, p])
    put(b, fb, s == 7, p, "zero", neg[rows, q])
    # 8: +inf and -inf products
    put(a, fa, s == 8, p, inf_or(fa, "max"), False)
    put(a, fa, s == 8, q, inf_or(fa, "max"), True)
    put(b, fb, s == 8, p, "max" if not fa.has_inf else "subnormal", False)
    put(b, fb, s == 8, q, "max" if not fa.has_inf else "subnormal", False)
    # 9: an infinite C against an infinite product of the other sign
    c_neg = rng.random(n) < 0.5
    if fc.has_inf:
        c = np.where(s == 9, _special_bits(fc, "inf", c_neg, shape=(n,)), c)
    put(a, fa, s == 9, p, inf_or(fa, "max"), ~c_neg)
    put(b, fb, s == 9, p, "max", False)
    # 10: an infinite C with finite products
    if fc.has_inf:
        c = np.where(s == 10, _special_bits(fc, "inf", c_neg, shape=(n,)), c)
    # 11: products of negative zeros (exact zero sums from signed zeros) and C = +0
    z11 = s == 11
    a = np.where(z11[:, None], _special_bits(fa, "zero", True, shape=(n, k)), a)
    c = np.where(z11, _special_bits(fc, "zero", False, shape=(n,)), c)
    return a, b, c


def _f_tf32(ctx: _Ctx):
    rng, n, k = ctx.rng, ctx.n, ctx.k

    def garbage(fmt: FloatFormat, vals: np.ndarray) -> np.ndarray:
        if fmt.pad_bits == 0:
            return vals
        junk = rng.integers(0, 1 << fmt.pad_bits, size=vals.shape, dtype=np.uint64)
        return (vals.astype(np.uint64) | junk).astype(fmt.container_dtype)

    def operand(fmt: FloatFormat) -> np.ndarray:
        v = _vals(fmt, rng.standard_normal((n, k)))
        # some infinities and zeros: garbage below an inf pattern must not make it a NaN
        pick = rng.random((n, k))
        neg = rng.random((n, k)) < 0.5
        if fmt.has_inf:
            v = np.where(pick < 0.03, _special_bits(fmt, "inf", neg, shape=(n, k)), v)
        v = np.where((pick >= 0.03) & (pick < 0.08), _special_bits(fmt, "zero", neg, shape=(n, k)), v)
        return garbage(fmt, v)

    return operand(ctx.fa), operand(ctx.fb), _vals(ctx.fc, rng.standard_normal(n))


def _f_overflow(ctx: _Ctx):
    rng, n, k = ctx.rng, ctx.n, ctx.k
    fd, fc = ctx.fd, ctx.fc
    plo, phi = _product_range(ctx)
    neg = rng.random(n) < 0.5
    # C in the output's top binade (60%), the largest finite (20%) or zero (20%: products alone)
    pick = rng.random(n)
    c = _scaled(rng, fc, np.full(n, min(fc.emax, fd.emax)), signs=neg)
    c = np.where(pick >= 0.6, _special_bits(fc, "max", neg, shape=(n,)), c)
    c = np.where(pick >= 0.8, _special_bits(fc, "zero", neg, shape=(n,)), c)
    # a random number of products, each up to 12 binades below the top the output (or the
    # operands) allow, mostly of C's sign: sums land below, between and beyond the largest
    # finite and, for cut outputs such as E8M13, between that format's and D's largest
    top = min(phi, fd.emax)
    t = top - rng.integers(0, 13, (n, k))
    ea, eb = _product_split(rng, ctx.fa, ctx.fb, t)
    same = rng.random((n, k)) < 0.85
    a = _scaled(rng, ctx.fa, ea, signs=np.where(same, neg[:, None], ~neg[:, None]))
    b = _scaled(rng, ctx.fb, eb, signs=np.zeros((n, k), bool))
    active = rng.random((n, k)) < rng.random((n, 1))
    a = np.where(active, a, _special_bits(ctx.fa, "zero", False, shape=(n, k)))
    return a, b, c


# --------------------------------------------------------------------------------------------
# integer families

def _i_range(fmt: IntFormat) -> tuple[int, int]:
    return fmt.min_value, fmt.max_value


def _i_vals(fmt: IntFormat, x) -> np.ndarray:
    lo, hi = _i_range(fmt)
    return fmt.encode_int(np.clip(np.asarray(x, dtype=np.int64), lo, hi))


def _i_int(ctx: _Ctx):
    rng = ctx.rng

    def small(fmt: IntFormat, shape, bound: int):
        lo = max(fmt.min_value, -bound)
        return _i_vals(fmt, rng.integers(lo, min(fmt.max_value, bound) + 1, size=shape))

    return small(ctx.fa, (ctx.n, ctx.k), 8), small(ctx.fb, (ctx.n, ctx.k), 8), small(ctx.fc, ctx.n, 1000)


def _i_normal(ctx: _Ctx):
    rng = ctx.rng

    def gauss(fmt: IntFormat, shape):
        lo, hi = _i_range(fmt)
        centre = 0 if fmt.signed else (hi + 1) // 2
        return _i_vals(fmt, np.rint(centre + rng.standard_normal(shape) * (hi - lo) / 8).astype(np.int64))

    c = _i_vals(ctx.fc, np.rint(rng.standard_normal(ctx.n) * 1e4).astype(np.int64))
    return gauss(ctx.fa, (ctx.n, ctx.k)), gauss(ctx.fb, (ctx.n, ctx.k)), c


def _i_bits(ctx: _Ctx):
    rng = ctx.rng
    return (_uniform_bits(rng, ctx.fa, (ctx.n, ctx.k)), _uniform_bits(rng, ctx.fb, (ctx.n, ctx.k)),
            _uniform_bits(rng, ctx.fc, ctx.n))


def _i_cancel(ctx: _Ctx):
    rng, n = ctx.rng, ctx.n
    a, b, _ = _i_normal(ctx)
    s = (ctx.fa.decode_int(a) * ctx.fb.decode_int(b)).sum(axis=1)
    c = _i_vals(ctx.fc, -s + np.where(rng.random(n) < 0.5, rng.integers(-2, 3, n), 0))
    return a, b, c


def _i_special(ctx: _Ctx):
    rng, n, k = ctx.rng, ctx.n, ctx.k

    def extremes(fmt: IntFormat, shape):
        lo, hi = _i_range(fmt)
        choices = np.array(sorted({lo, hi, 0, 1, max(lo, -1), lo + 1, hi - 1}), dtype=np.int64)
        return _i_vals(fmt, rng.choice(choices, size=shape))

    return extremes(ctx.fa, (n, k)), extremes(ctx.fb, (n, k)), extremes(ctx.fc, n)


def _i_overflow(ctx: _Ctx):
    rng, n, k = ctx.rng, ctx.n, ctx.k
    fa, fb, fc = ctx.fa, ctx.fb, ctx.fc
    # products near their largest magnitude, all of one sign: positive (crossing the top of
    # the accumulator's range) or, where a signed operand allows, negative (the bottom)
    down = (rng.random(n) < 0.5)[:, None] & (fa.signed or fb.signed)
    a_down, b_down = (down, np.zeros_like(down)) if fa.signed else (np.zeros_like(down), down)
    jitter = rng.integers(0, 4, (n, k))
    a = _i_vals(fa, np.where(a_down, fa.min_value + jitter, fa.max_value - jitter))
    jitter = rng.integers(0, 4, (n, k))
    b = _i_vals(fb, np.where(b_down, fb.min_value + jitter, fb.max_value - jitter))
    total = (fa.decode_int(a) * fb.decode_int(b)).sum(axis=1)
    # C inside the range on the side the products push towards: about half the sums cross
    margin = rng.integers(0, 2 * np.abs(total) + 2)
    c_val = np.where(total >= 0, fc.max_value - margin, fc.min_value + margin)
    return a, b, _i_vals(fc, c_val)


_FLOAT_GENERATORS: dict[str, Callable] = {
    "int": _f_int, "normal": _f_normal, "bits": _f_bits, "cancel": _f_cancel, "align": _f_align,
    "cdom": _f_cdom, "special": _f_special, "tf32": _f_tf32, "overflow": _f_overflow,
}
_INT_GENERATORS: dict[str, Callable] = {
    "int": _i_int, "normal": _i_normal, "bits": _i_bits, "cancel": _i_cancel, "special": _i_special,
    "overflow": _i_overflow,
}


# --------------------------------------------------------------------------------------------
# block scales

def _pow2_code(sf: FloatFormat, e) -> np.ndarray:
    """Scale bits of ``2**e`` (e clipped to the powers of two the scale format holds)."""
    lo = sf.emin - sf.man_bits if sf.subnormals else sf.emin
    e = np.clip(np.asarray(e, dtype=np.int64), lo, sf.emax)
    return sf.from_float(np.ldexp(1.0, e.astype(np.int32))).astype(sf.container_dtype)


def _pow2_range(sf: FloatFormat) -> tuple[int, int]:
    return (sf.emin - sf.man_bits if sf.subnormals else sf.emin), sf.emax


def _moderate(ctx: _Ctx, sf: FloatFormat, shape, spread: int = 6) -> np.ndarray:
    """Mostly unit scales, else a power of two within ``spread`` binades of 1, else (formats
    with a significand) a random finite code in that range."""
    rng = ctx.rng
    pick = rng.random(shape)
    out = _pow2_code(sf, rng.integers(-spread, spread + 1, shape))
    out = np.where(pick < 0.4, _pow2_code(sf, np.zeros(shape, np.int64)), out)
    if sf.man_bits:
        lo_e, hi_e = max(sf.emin, -spread), min(sf.emax, spread)
        lo_code = int(_pow2_code(sf, lo_e))
        hi_code = min(int(_pow2_code(sf, hi_e)) | ((1 << sf.man_bits) - 1), int(sf.max_code))
        codes = rng.integers(lo_code, hi_code + 1, shape).astype(sf.container_dtype)
        out = np.where(pick > 0.75, codes, out)
    return out.astype(sf.container_dtype)


def _family_scales(ctx: _Ctx, family: str, a: np.ndarray, b: np.ndarray, c: np.ndarray):
    """Scale bits (scale_a, scale_b) for one family's vectors, and C (rescaled where it follows the products)."""
    spec, rng, n = ctx.spec, ctx.rng, ctx.n
    model = spec.model
    sf: FloatFormat = model.scale_format
    nb = ctx.k // model.scale_block
    shape = (n, nb)
    extremes = np.array(scale_extremes(spec), dtype=sf.container_dtype)
    lo, hi = _pow2_range(sf)
    if family == "int":
        # small powers of two: the scaled sums stay exact integers or simple fractions
        sa = _pow2_code(sf, rng.integers(-2, 3, shape))
        sb = _pow2_code(sf, rng.integers(-2, 3, shape))
    elif family == "bits":
        sa = rng.integers(0, 1 << sf.container_bits, shape).astype(sf.container_dtype)
        sb = rng.integers(0, 1 << sf.container_bits, shape).astype(sf.container_dtype)
    elif family in ("normal", "special", "tf32"):
        sa, sb = _moderate(ctx, sf, shape), _moderate(ctx, sf, shape)
        # special: every vector one extreme scale (cycling through them all), in A or B;
        # normal: 5% of vectors
        hit = np.ones(n, bool) if family == "special" else rng.random(n) < 0.05
        rows = np.flatnonzero(hit)
        which = extremes[(np.arange(rows.size) + rng.integers(0, len(extremes))) % len(extremes)]
        cols = rng.integers(0, nb, rows.size)
        in_a = rng.random(rows.size) < 0.5
        sa[rows[in_a], cols[in_a]] = which[in_a]
        sb[rows[~in_a], cols[~in_a]] = which[~in_a]
        if family == "special" and rows.size:
            # a quarter: the extreme in both operands at once (2**-254, 2**254, NaN*NaN, 0*huge)
            both = rows[rng.random(rows.size) < 0.25]
            pick = extremes[rng.integers(0, len(extremes), both.size)]
            cc = rng.integers(0, nb, both.size)
            sa[both, cc] = pick
            sb[both, cc] = extremes[rng.integers(0, len(extremes), both.size)]
    elif family == "overflow":
        # one power of two per vector lifting the products' top to the output's largest
        # binade (as far as the scale format reaches); C already sits there
        _plo, phi = _product_range(ctx)
        want = max(ctx.fd.emax - phi, 0) if isinstance(ctx.fd, FloatFormat) else 0
        s = np.minimum(want - rng.integers(0, 3, n), 2 * hi)
        ea = np.minimum(s // 2, hi)
        sa = np.repeat(_pow2_code(sf, ea)[:, None], nb, axis=1)
        sb = np.repeat(_pow2_code(sf, s - ea)[:, None], nb, axis=1)
    else:
        # cancel, align, cdom: C is built from the products, so one power of two per vector
        # scales them all and C with them (exactly, unless C would leave its range: then 1);
        # align also gets per-block powers of two far apart in half its vectors
        span = min(8, hi)
        ea = rng.integers(max(-span, lo), span + 1, n)
        eb = rng.integers(max(-span, lo), span + 1, n)
        unit = rng.random(n) < 0.25
        ea, eb = np.where(unit, 0, ea), np.where(unit, 0, eb)
        fc = ctx.fc
        cv = fc.to_float(c)
        scaled = cv * np.ldexp(1.0, (ea + eb).astype(np.int32))
        with np.errstate(all="ignore"):
            fits = (np.abs(scaled) <= fc.max_finite) & ((np.abs(scaled) >= fc.min_normal) | (ea + eb >= 0))
        keep = ~np.isfinite(cv) | (cv == 0) | fits
        ea, eb = np.where(keep, ea, 0), np.where(keep, eb, 0)
        finite = np.isfinite(cv) & (cv != 0) & keep
        c_new = _vals(fc, np.where(finite, cv * np.ldexp(1.0, (ea + eb).astype(np.int32)), 0.0))
        c = np.where(finite, c_new, c).astype(c.dtype)
        sa = np.repeat(_pow2_code(sf, ea)[:, None], nb, axis=1)
        sb = np.repeat(_pow2_code(sf, eb)[:, None], nb, axis=1)
        if family == "align" and nb > 1:
            far = rng.random(n) < 0.5
            wide = min(40, hi)
            sa = np.where(far[:, None], _pow2_code(sf, rng.integers(max(-wide, lo), wide + 1, shape)), sa)
            sb = np.where(far[:, None], _pow2_code(sf, rng.integers(max(-wide, lo), wide + 1, shape)), sb)
    return (np.ascontiguousarray(sa, dtype=sf.container_dtype), np.ascontiguousarray(sb, dtype=sf.container_dtype), c)
