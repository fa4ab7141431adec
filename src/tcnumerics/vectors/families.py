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

import numpy as np

from ..catalog import get_instruction
from ..family_names import canonical_family
from ..formats import FloatFormat, IntFormat
from ..model import InstructionSpec
from .generators import _Ctx, _FLOAT_GENERATORS, _INT_GENERATORS, _product_range, _vals

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
