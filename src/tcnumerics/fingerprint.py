"""Fingerprinting: infer a matrix unit's arithmetic from a black box, with discriminating vectors.

Given any ``dot(a_bits, b_bits, c_bits) -> d_bits`` for an instruction interface (its
operand, accumulator and output formats and its K), ``fingerprint`` works out, in order:

1. **Specials**: the NaN the unit writes (canonical or propagated payloads), inf*0,
   inf-inf, the sign of exact zeros.
2. **Group structure** (after FPRev, Xie et al.): with +B and -B at two K positions and a
   small u everywhere else, a fused unit returns u times the number of positions in the
   groups *after* the later of the two; over all pairs this gives every group, in
   processing order -- the products per group (L), any interleaving such as Hopper
   mma.sync FP8's halves -- and, with B in C, whether C is fused into the first group or
   added last by a separate addition.
3. **Fraction bits kept (F)**: +B, -B and t = B * 2**-s in one group return t exactly when
   s <= F and 0 when the alignment truncated it.
4. **Zero exponent**: a lone term below the zero exponent is truncated on a coarser grid;
   the surviving bits give every zero exponent consistent with the observations (an
   interval; values below what any representable input can reach are indistinguishable).
5. **Output rounding, output precision, overflow, C addition**: a narrowing search over
   the remaining candidates on accumulator-dominant, cancelling, wide-span vectors
   (trailing zero bits of the outputs propose a narrower output mantissa such as E8M13).

The inferred ``InstructionSpec`` is then checked on every input family against the box,
and every catalog entry with the same interface is replayed to name those that match.
Units that are not fused truncating ones (exact integer, IEEE per-operation, AMD's staged
sums, ...) are recognised by that catalog replay.

Example:
    >>> from tcnumerics.fingerprint import fingerprint, catalog_dot
    >>> fp = fingerprint(catalog_dot("hopper.mma.m16n8k32.f32.e4m3.e4m3.f32"),
    ...                  "hopper.mma.m16n8k32.f32.e4m3.e4m3.f32", validation=8)
    >>> fp.group_size, fp.frac_bits, fp.c_entry, fp.output_rounding
    (16, 25, 'ieee_add', ['rz'])
    >>> fp.groups[0][:6]
    [0, 1, 4, 5, 8, 9]
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable

import numpy as np

from ._extras import install_hint
from .catalog import all_instructions, get_instruction
from .formats import FloatFormat, IntFormat
from .model import InstructionSpec, UnitModel

__all__ = ["Fingerprint", "fingerprint", "catalog_dot", "register", "structure_of"]

Dot = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]

_ROUNDINGS = ("rz", "rne", "rna", "ru", "rd")
_OVERFLOWS = ("inf", "ieee", "saturate")
_SPAN = 60  # binades between the big and the small probe terms we try to reach


# --------------------------------------------------------------------------------------------
# the result

@dataclass
class Fingerprint:
    """What the probes found.  Lists hold every candidate the observations leave standing."""

    instruction: str
    k: int
    formats: dict
    kind: str = "unknown"  # fused | integer | binary | other
    groups: list | None = None  # K positions of each group, in processing order
    c_entry: str | None = None  # fused (C joins the first group) | ieee_add (C added last)
    group_size: int | None = None
    frac_bits: int | None = None
    frac_bits_at_least: int | None = None  # set when truncation was never observed up to this span
    zero_exponent: tuple | None = None  # (lo or None for unbounded below, hi) of consistent values
    output_rounding: list = field(default_factory=list)
    output_mantissa_bits: list = field(default_factory=list)
    output_overflow: list = field(default_factory=list)
    c_add_rounding: list = field(default_factory=list)
    operand_formats: list = field(default_factory=list)  # (a, b) formats the datapath reads
    specials: dict = field(default_factory=dict)
    integer: dict = field(default_factory=dict)
    spec: InstructionSpec | None = None
    reproduces: bool = False
    validation_vectors: int = 0
    matches: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    box_vectors: int = 0

    def to_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "spec"}
        d["spec"] = self.spec.describe() if self.spec is not None else None
        return json.loads(json.dumps(d, default=str))

    def report(self) -> str:
        """A human-readable multi-line report."""
        out = [f"fingerprint of {self.instruction} (K={self.k}, "
               f"{self.formats['a']} x {self.formats['b']} + {self.formats['c']} -> {self.formats['d']})"]
        if self.kind == "integer" or self.kind == "binary":
            out.append(f"  unit: {self.kind}, " + ", ".join(f"{k}={v}" for k, v in self.integer.items()))
        elif self.groups is not None:
            sizes = sorted({len(g) for g in self.groups})
            natural = [p for g in self.groups for p in g] == list(range(self.k))
            out.append(f"  groups: {len(self.groups)} of {'/'.join(map(str, sizes))} products "
                       f"({'natural K order' if natural else 'K order ' + str(self.groups)})")
            out.append(f"  C: {'fused into the first group' if self.c_entry == 'fused' else 'added last by a separate addition' if self.c_entry == 'ieee_add' else 'undetermined'}")
        if self.kind == "fused" or self.frac_bits is not None or self.frac_bits_at_least is not None:
            if self.frac_bits_at_least is not None:
                chosen = "exact (no truncation)" if self.frac_bits is None else f"F={self.frac_bits}"
                out.append(f"  fraction bits kept (F): no truncation seen up to {self.frac_bits_at_least} bits "
                           f"by the alignment probe; {chosen} fits every screening vector")
            elif self.frac_bits is not None:
                out.append(f"  fraction bits kept (F): {self.frac_bits}")
            if self.zero_exponent is not None:
                lo, hi = self.zero_exponent
                out.append(f"  zero exponent: {hi}" if lo == hi else
                           f"  zero exponent: any value <= {hi} (indistinguishable below)" if lo is None else
                           f"  zero exponent: {lo}..{hi}")
            if self.output_rounding:
                out.append(f"  output rounding: {' or '.join(r.upper() for r in self.output_rounding)}")
            if self.output_mantissa_bits:
                cut = [("full " + self.formats["d"]) if m is None else f"{m} bits" for m in self.output_mantissa_bits]
                out.append(f"  output mantissa: {' or '.join(cut)}")
            if self.output_overflow:
                out.append(f"  overflow: {' or '.join(self.output_overflow)}")
            if self.c_add_rounding:
                out.append(f"  C addition rounding: {' or '.join(r.upper() for r in self.c_add_rounding)}")
            if self.operand_formats and len(self.operand_formats) >= 1:
                f0 = self.operand_formats[0]
                if (f0[0], f0[1]) != (self.formats["a"], self.formats["b"]):
                    out.append(f"  datapath reads operands as {f0[0]} x {f0[1]} (converted exactly)")
        for k, v in self.specials.items():
            out.append(f"  {k}: {v}")
        for n in self.notes:
            out.append(f"  note: {n}")
        out.append(f"  inferred model reproduces the box on {self.validation_vectors} vectors: "
                   f"{'yes' if self.reproduces else 'NO'}")
        if self.spec is not None and self.reproduces:
            out.append("  model: " + self.spec.model.describe())
        if self.matches:
            out.append(f"  catalog entries that match on every vector ({len(self.matches)}): " +
                       ", ".join(self.matches[:12]) + (" ..." if len(self.matches) > 12 else ""))
        else:
            out.append("  catalog entries that match: none")
        out.append(f"  black-box vectors used: {self.box_vectors}")
        return "\n".join(out)


# --------------------------------------------------------------------------------------------
# black boxes

def catalog_dot(name: "str | InstructionSpec", engine: str = "auto") -> Dot:
    """A catalog entry as a black box (structured-sparse entries: their datapath's K)."""
    from .api import Instruction

    inst = Instruction(get_instruction(name), engine)

    def dot(a, b, c):
        with np.errstate(all="ignore"):
            return inst.dot_bits(a, b, c)

    return dot


class _Box:
    """Calls the black box in bounded batches and counts the vectors it was shown."""

    def __init__(self, dot: Dot, spec: InstructionSpec, batch: int = 1 << 14):
        self.dot, self.spec, self.batch, self.vectors = dot, spec, batch, 0

    def __call__(self, a, b, c) -> np.ndarray:
        spec = self.spec
        a = np.ascontiguousarray(a, spec.a_format.container_dtype)
        b = np.ascontiguousarray(b, spec.b_format.container_dtype)
        c = np.ascontiguousarray(c, spec.c_format.container_dtype)
        out = np.empty(len(c), spec.d_format.container_dtype)
        for s in range(0, len(c), self.batch):
            e = min(len(c), s + self.batch)
            d = np.asarray(self.dot(a[s:e], b[s:e], c[s:e]))
            if d.shape != (e - s,):
                raise ValueError(f"dot: the black box returned shape {d.shape}, expected ({e - s},)")
            out[s:e] = d
        self.vectors += len(c)
        return out


def _model_dot(spec: InstructionSpec) -> Dot:
    from .api import Instruction

    inst = Instruction(spec, "reference")

    def dot(a, b, c):
        with np.errstate(all="ignore"):
            return inst.dot_bits(a, b, c)

    return dot


# --------------------------------------------------------------------------------------------
# exact values as bit patterns

def _lo(fmt: FloatFormat) -> int:
    return fmt.emin - fmt.man_bits if fmt.subnormals else fmt.emin


@functools.lru_cache(maxsize=65536)
def _bits(fmt: FloatFormat, value: float) -> int | None:
    """Bits of ``value`` in ``fmt`` if exactly representable, else None."""
    if not np.isfinite(value):
        return None
    b = fmt.from_float(np.array([value]), "rz", overflow="saturate")
    return int(b[0]) if float(fmt.to_float(b)[0]) == value else None


def _split(fa: FloatFormat, fb: FloatFormat, e: int, subnormal: bool = False) -> tuple[int, int] | None:
    """Exponents (ea, eb), ea + eb = e, of powers of two representable in fa and fb."""
    la, lb = (_lo(fa), _lo(fb)) if subnormal else (fa.emin, fb.emin)
    lo, hi = max(la, e - fb.emax), min(fa.emax, e - lb)
    if lo > hi:
        return None
    return (min(max((e + 1) // 2, lo), hi), e - min(max((e + 1) // 2, lo), hi))


class _Terms:
    """Builds probe vectors term by term: products at K positions and C, all exact."""

    def __init__(self, spec: InstructionSpec, n: int):
        self.spec = spec
        self.a = np.zeros((n, spec.k), spec.a_format.container_dtype)
        self.b = np.zeros((n, spec.k), spec.b_format.container_dtype)
        self.c = np.zeros(n, spec.c_format.container_dtype)

    def product(self, row, pos, exponent: int, negative: bool = False, mantissa: float = 1.0,
                subnormal: bool = False) -> bool:
        """Set a*b = ±mantissa * 2**exponent at (row, pos) (numpy indices allowed)."""
        pair = _product_bits(self.spec.a_format, self.spec.b_format, exponent, negative, mantissa, subnormal)
        if pair is None:
            return False
        self.a[row, pos], self.b[row, pos] = pair
        return True

    def accumulator(self, row: int, value: float) -> bool:
        cv = _bits(self.spec.c_format, value)
        if cv is None:
            return False
        self.c[row] = cv
        return True


@functools.lru_cache(maxsize=65536)
def _product_bits(fa: FloatFormat, fb: FloatFormat, exponent: int, negative: bool, mantissa: float,
                  subnormal: bool) -> tuple[int, int] | None:
    sp = _split(fa, fb, exponent, subnormal)
    if sp is None:
        return None
    av = _bits(fa, (-1.0 if negative else 1.0) * mantissa * 2.0 ** sp[0])
    bv = _bits(fb, 2.0 ** sp[1])
    return None if av is None or bv is None else (av, bv)


def _product_range(spec: InstructionSpec, subnormal: bool = False) -> tuple[int, int]:
    fa, fb = spec.a_format, spec.b_format
    if subnormal:
        return _lo(fa) + _lo(fb), fa.emax + fb.emax
    return fa.emin + fb.emin, fa.emax + fb.emax


# --------------------------------------------------------------------------------------------
# probes for floating-point units

def _probe_specials(box: _Box, spec: InstructionSpec, fp: Fingerprint) -> None:
    fa, fb, fc, fd = spec.a_format, spec.b_format, spec.c_format, spec.d_format
    rows, labels = [], []
    one_a, one_b, one_c = _bits(fa, 1.0), _bits(fb, 1.0), _bits(fc, 1.0)
    if None in (one_a, one_b, one_c):
        return
    n_max = 8
    t = _Terms(spec, n_max)
    t.a[:] = one_a
    t.b[:] = one_b
    t.c[:] = one_c
    r = 0

    def nan_pattern(fmt: FloatFormat, payload: int, negative: bool) -> int | None:
        if fmt.specials != "ieee" or fmt.man_bits < 2:
            return fmt.nan_bits if fmt.has_nan else None
        code = (((1 << fmt.exp_bits) - 1) << fmt.man_bits) | (1 << (fmt.man_bits - 1)) | (payload % (1 << (fmt.man_bits - 1)))
        return (((1 << (fmt.width - 1)) if negative else 0) | code) << fmt.pad_bits

    for label, payload, neg in (("nan_a1", 1, False), ("nan_a2", 2, True)):
        v = nan_pattern(fa, payload, neg)
        if v is not None:
            t.a[r, 0] = v
            rows.append(r), labels.append(label)
            r += 1
    if fc.has_nan:
        t.c[r] = nan_pattern(fc, 3, False)
        rows.append(r), labels.append("nan_c")
        r += 1
    if fa.has_inf:
        t.a[r, 0] = fa.inf_bits
        t.b[r, 0] = 0
        rows.append(r), labels.append("inf_times_zero")
        r += 1
        t.a[r, 0] = fa.inf_bits
        t.a[r, 1 % spec.k] = fa.inf_bits | ((1 << (fa.width - 1)) << fa.pad_bits)
        rows.append(r), labels.append("inf_minus_inf")
        r += 1
        t.a[r, 0] = fa.inf_bits
        rows.append(r), labels.append("inf_plus_finite")
        r += 1
    neg_zero_a = ((1 << (fa.width - 1)) << fa.pad_bits) if fa.has_negative_zero else 0
    t.a[r, :] = neg_zero_a
    t.c[r] = ((1 << (fc.width - 1)) << fc.pad_bits) if fc.has_negative_zero else 0
    rows.append(r), labels.append("zero_sum_of_negative_zeros")
    r += 1
    d = box(t.a[:r], t.b[:r], t.c[:r])
    got = dict(zip(labels, (int(x) for x in d)))
    width = (fd.container_bits + 3) // 4
    nans = [got[k] for k in ("nan_a1", "nan_a2", "nan_c", "inf_times_zero", "inf_minus_inf") if k in got]
    decoded_nan = [bool(fd.decode(np.array([v], fd.container_dtype)).is_nan[0]) for v in nans]
    if nans and all(decoded_nan):
        fp.specials["NaN result"] = (f"canonical 0x{nans[0]:0{width}x}" if len(set(nans)) == 1 else
                                     "payload-dependent: " + ", ".join(f"0x{v:0{width}x}" for v in nans))
    elif nans:
        fp.specials["NaN result"] = "not always NaN: " + ", ".join(f"0x{v:0{width}x}" for v in nans)
    for key in ("inf_times_zero", "inf_minus_inf", "inf_plus_finite"):
        if key in got:
            fp.specials[key.replace("_", " ")] = _describe_bits(fd, got[key])
    fp.specials["zero from -0 terms"] = _describe_bits(fd, got["zero_sum_of_negative_zeros"])
    fp._nan_bits = sorted(set(nans)) if nans and all(decoded_nan) else []


def _describe_bits(fmt: FloatFormat, bits: int) -> str:
    v = float(fmt.to_float(np.array([bits], fmt.container_dtype))[0])
    width = (fmt.container_bits + 3) // 4
    if np.isnan(v):
        return f"NaN 0x{bits:0{width}x}"
    if v == 0:
        return f"{'-' if bits >> (fmt.container_bits - 1) else '+'}0"
    return repr(v)


def _decode(fmt, d: np.ndarray) -> list:
    """Exact values of output bits (Fractions; None for NaN/inf)."""
    vals = fmt.to_float(d)
    return [Fraction(float(v)) if np.isfinite(v) else None for v in vals]


def _out_lo(fd: FloatFormat, fp: Fingerprint) -> int:
    """Exponent of the output's finest step (its least subnormal, after any mantissa cut)."""
    bits = fp._out_bits if getattr(fp, "_out_bits", None) else fd.man_bits
    return fd.emin - bits if fd.subnormals else fd.emin


def _probe_structure(box: _Box, spec: InstructionSpec, fp: Fingerprint) -> tuple[int, int] | None:
    """Groups and C placement from +B/-B pairs among small u's; returns (B exponent, span)."""
    fd, fc = spec.d_format, spec.c_format
    k = spec.k
    pmin, _ = _product_range(spec, subnormal=True)
    pmax = _product_range(spec)[1]
    b_exp = min(pmax, fd.emax - 1, fc.emax - 1)
    # u's sums must be exact multiples of u in the output: u at or above its finest step
    u_exp = max(b_exp - _SPAN, pmin, _out_lo(fd, fp))
    span = b_exp - u_exp
    if span < 32 or k < 2:
        # u must vanish next to B even after k of them accumulate: span > F + log2(k)
        fp.notes.append(f"group structure not probed: products span only {max(span, 0)} binades here")
        return None
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    n = len(pairs) + k
    t = _Terms(spec, n)
    if not t.product(slice(None), slice(None), u_exp, subnormal=True):
        fp.notes.append("group structure not probed: no small term representable")
        return None
    rows = np.arange(len(pairs))
    t.product(rows, np.array([p[0] for p in pairs]), b_exp)
    t.product(rows, np.array([p[1] for p in pairs]), b_exp, negative=True)
    c_ok = True
    for j in range(k):
        r = len(pairs) + j
        c_ok &= t.accumulator(r, -(2.0 ** b_exp))
        t.product(r, j, b_exp)
    d = box(t.a, t.b, t.c)
    vals = _decode(fd, d)
    u = Fraction(2) ** u_exp
    counts = []
    for v in vals:
        q = None if v is None else v / u
        counts.append(int(q) if q is not None and q.denominator == 1 and q >= 0 else None)
    if any(x is None for x in counts[:len(pairs)]):
        fp.notes.append("pair probe gave non-integral counts: not a fused unit of this kind")
        return b_exp, span
    f = {}
    for r, (i, j) in enumerate(pairs):
        f[(i, j)] = f[(j, i)] = counts[r]
    h = [max(f[(p, q)] for q in range(k) if q != p) for p in range(k)]
    levels = sorted(set(h), reverse=True)
    groups = [[p for p in range(k) if h[p] == lv] for lv in levels]
    # check: each group's count is the number of positions in the groups after it, and the
    # pair results are min(h_i, h_j) throughout
    after = 0
    ok = True
    for g, lv in zip(reversed(groups), reversed(levels)):
        ok &= lv == after
        after += len(g)
    ok &= all(f[(i, j)] == min(h[i], h[j]) for i, j in pairs)
    if not ok:
        fp.notes.append("pair probe results do not fit a chain of fused groups")
        return b_exp, span
    fp.groups = groups
    if len(groups) > 1 and c_ok:
        fc_counts = counts[len(pairs):]
        if all(x == h[j] for j, x in enumerate(fc_counts)):
            fp.c_entry = "fused"
        elif all(x == 0 for x in fc_counts):
            fp.c_entry = "ieee_add"
    return b_exp, span


def _probe_frac_bits(box: _Box, spec: InstructionSpec, fp: Fingerprint, b_exp: int) -> None:
    """F from +B, -B and t = 2**(b_exp - s) in the first group (t a product, or C)."""
    fd = spec.d_format
    first = fp.groups[0] if fp.groups else list(range(spec.k))
    plo, _ = _product_range(spec, subnormal=True)
    results = []
    if len(first) >= 3:
        top = b_exp - max(plo, fd.emin)
        s_values = list(range(1, max(top, 0) + 1))
        t = _Terms(spec, len(s_values))
        for r, s in enumerate(s_values):
            t.product(r, first[0], b_exp)
            t.product(r, first[1], b_exp, negative=True)
            t.product(r, first[2], b_exp - s, subnormal=True)
        vals = _decode(fd, box(t.a, t.b, t.c))
        results = [(s, v == Fraction(2) ** (b_exp - s), v == 0) for s, v in zip(s_values, vals)]
    if fp.c_entry != "ieee_add" and len(first) >= 2 and (not results or all(x[1] for x in results)):
        # C can reach much smaller values than the products
        top = b_exp - max(_lo(spec.c_format), fd.emin)
        s_values = list(range(1, min(top, 80) + 1))
        t = _Terms(spec, len(s_values))
        valid = []
        for r, s in enumerate(s_values):
            t.product(r, first[0], b_exp)
            t.product(r, first[1], b_exp, negative=True)
            valid.append(t.accumulator(r, 2.0 ** (b_exp - s)))
        vals = _decode(fd, box(t.a, t.b, t.c))
        c_results = [(s, v == Fraction(2) ** (b_exp - s), v == 0) for s, v, ok in zip(s_values, vals, valid) if ok]
        if c_results and (not results or len(c_results) > len(results)):
            results = c_results
    if not results:
        fp.notes.append("fraction bits not probed: no three terms in one group")
        return
    kept = [s for s, same, _ in results if same]
    lost = [s for s, _, zero in results if zero]
    if len(kept) + len(lost) != len(results) or (kept and lost and max(kept) > min(lost)):
        fp.notes.append("alignment probe is not a clean truncation: not a fused truncating unit")
        return
    if not lost:
        fp.frac_bits_at_least = max(kept) if kept else 0
        fp.frac_bits = None
    else:
        fp.frac_bits = max(kept) if kept else 0


def _probe_c_entry(box: _Box, spec: InstructionSpec, fp: Fingerprint, b_exp: int) -> None:
    """Single-group units: is C inside the fused group (t in C truncated) or added afterwards?"""
    if fp.c_entry is not None or fp.frac_bits is None:
        return
    first = fp.groups[0] if fp.groups else list(range(spec.k))
    s = fp.frac_bits + 2
    t = _Terms(spec, 1)
    if len(first) < 2 or not t.accumulator(0, 2.0 ** (b_exp - s)):
        return
    t.product(0, first[0], b_exp)
    t.product(0, first[1], b_exp, negative=True)
    v = _decode(spec.d_format, box(t.a, t.b, t.c))[0]
    if v == 0:
        fp.c_entry = "fused"
    elif v == Fraction(2) ** (b_exp - s):
        fp.c_entry = "ieee_add"


def _ez_interval(sig: int, ulp: int, e_al: int, n: int, F: int, observed) -> tuple | None:
    """Zero exponents under which n terms sig * 2**ulp (alignment exponent e_al), alone in a
    group with zero terms, sum to ``observed``; an interval (lo or None for unbounded, hi)."""
    if observed is None:
        return None
    scaled = observed / Fraction(2) ** ulp
    if scaled.denominator != 1:
        return None
    target = int(scaled)

    def kept(ez: int) -> int:  # n * (the term truncated on the grid 2**(max(ez, e_al) - F)), in ulps
        shift = max(ez, e_al) - F - ulp
        if shift <= 0:
            return n * sig
        return 0 if shift >= sig.bit_length() else n * ((sig >> shift) << shift)

    top = e_al + F + sig.bit_length() + 2  # from here on the term is gone entirely
    matches = [ez for ez in range(e_al, top + 1) if kept(ez) == target]
    if not matches:
        return None
    hi = 10**6 if matches[-1] == top else matches[-1]  # kept(top) holds for every larger ez
    return (None if matches[0] == e_al else matches[0], hi)


def _probe_zero_exponent(box: _Box, spec: InstructionSpec, fp: Fingerprint) -> None:
    """Every zero exponent consistent with lone terms and with n equal single-bit terms."""
    F = fp.frac_bits
    if F is None:
        return
    fd, fa, fc = spec.d_format, spec.a_format, spec.c_format
    first = fp.groups[0] if fp.groups else list(range(spec.k))
    out_bits = (fp._out_bits or fd.man_bits) + 1
    d_lo = _out_lo(fd, fp)
    nb_a = min(fa.man_bits + 1, out_bits)
    mant_a = 2.0 - 2.0 ** (1 - nb_a)
    cases = []  # (row, sig, ulp, alignment exponent, n)
    pmin, pmax = _product_range(spec)
    plan = []
    # the zero exponent shows only where every term is small: sweep the lowest exponents
    # whose results the output still represents exactly, F + 40 binades of them
    window = F + 40
    e0 = max(pmin, d_lo + nb_a - 1)
    for e in range(e0, min(pmax, fd.emax, e0 + window) + 1):  # lone products with nb_a significant bits
        plan.append(("p", e))
    if fp.c_entry != "ieee_add":
        nb_c = min(fc.man_bits + 1, out_bits)
        e0 = max(fc.emin, d_lo + nb_c - 1)
        for e in range(e0, min(fc.emax, fd.emax, e0 + window) + 1):  # lone accumulators
            plan.append(("c", e))
    n = 1 << (len(first).bit_length() - 1)
    if n >= 2:
        plo, _ = _product_range(spec, subnormal=True)
        top = min(pmax, fd.emin + F + 8, fd.emax - n.bit_length())  # n * 2**q must stay finite
        for q in range(max(plo, d_lo - n.bit_length() + 1), top + 1):
            plan.append(("n", q))
    if not plan:
        return
    t = _Terms(spec, len(plan))
    for r, (kind, e) in enumerate(plan):
        if kind == "p":
            if t.product(r, first[0], e, mantissa=mant_a):
                cases.append((r, (1 << nb_a) - 1, e - (nb_a - 1), e, 1))
        elif kind == "c":
            if t.accumulator(r, (2.0 - 2.0 ** (1 - nb_c)) * 2.0 ** e):
                cases.append((r, (1 << nb_c) - 1, e - (nb_c - 1), e, 1))
        else:
            sp = _split(fa, fb := spec.b_format, e, subnormal=True)
            if sp is not None and t.product(r, np.array(first[:n]), e, subnormal=True):
                e_al = max(sp[0], fa.emin) + max(sp[1], fb.emin)
                cases.append((r, 1, e, e_al, n))
    if not cases:
        return
    vals = _decode(fd, box(t.a, t.b, t.c))
    lo, hi = None, None
    for row, sig, ulp, e_al, count in cases:
        iv = _ez_interval(sig, ulp, e_al, count, F, vals[row])
        if iv is None:
            fp.notes.append("lone-term probe fits no zero exponent: not a fused truncating unit")
            return
        lo = iv[0] if lo is None else (lo if iv[0] is None else max(lo, iv[0]))
        hi = iv[1] if hi is None else min(hi, iv[1])
    if lo is not None and hi is not None and lo > hi:
        fp.notes.append("the zero-exponent observations contradict each other")
        return
    fp.zero_exponent = (lo, hi)


def _trailing_zero_cut(box_d: np.ndarray, fd: FloatFormat) -> list:
    """Output mantissa widths worth trying: full, or as narrow as every finite output allows."""
    dec = fd.decode(box_d)
    normal = (dec.kind == 0) & (dec.significand >= (1 << fd.man_bits))
    if normal.sum() < 16:
        return [None]
    frac = dec.significand[normal] & ((1 << fd.man_bits) - 1)
    tz = fd.man_bits
    for f in frac:
        f = int(f)
        if f:
            tz = min(tz, (f & -f).bit_length() - 1)
    if tz == 0:
        return [None]
    return [None, fd.man_bits - tz]


# --------------------------------------------------------------------------------------------
# building and checking candidate specs

def structure_of(spec: InstructionSpec) -> tuple[list, str]:
    """The groups (K positions, processing order) a spec's datapath forms, and how C enters.

    >>> groups, c = structure_of(get_instruction("hopper.mma.m16n8k32.f32.e4m3.e4m3.f32"))
    >>> len(groups), groups[1][:4], c
    (2, [2, 3, 6, 7], 'ieee_add')
    """
    order = list(spec.k_order) if spec.k_order is not None else list(range(spec.k))
    chunk = spec.chunk or spec.k
    L = spec.model.group_size
    groups = []
    for s in range(0, spec.k, chunk):
        part = order[s:s + chunk]
        for g in range(0, len(part), L):
            groups.append(sorted(part[g:g + L]))
    return groups, spec.c_entry


def _templates(spec: InstructionSpec) -> list[InstructionSpec]:
    """Catalog entries with the same interface (operand, accumulator, output formats and K)."""
    key = _interface(spec)
    return [s for s in all_instructions() if _interface(s) == key]


def _behaviour(spec: InstructionSpec) -> tuple:
    """Everything of a spec that decides its results (the name aside)."""
    return (spec.a_format, spec.b_format, spec.c_format, spec.k, spec.model, spec.k_order, spec.chunk,
            spec.c_entry, spec.c_add_rounding)


def _interface(spec: InstructionSpec) -> tuple:
    return (spec.a_format, spec.b_format, spec.c_format, spec.d_format, spec.k, ".mma.sp." in spec.name)


def _build(spec: InstructionSpec, fp: Fingerprint, operand_formats, rounding, cut, overflow, c_add, nan_bits,
           ez=None, nan_policy="canonical") -> InstructionSpec | None:
    groups = fp.groups or [list(range(spec.k))]
    sizes = {len(g) for g in groups}
    if len(sizes) != 1:
        return None
    L = sizes.pop()
    order = [p for g in groups for p in g]
    fd = spec.d_format
    c_entry = fp.c_entry or "fused"
    ma, mb = operand_formats
    try:
        model = UnitModel(a_format=ma, b_format=mb, c_format=spec.c_format if c_entry == "fused" else fd,
                          d_format=fd, group_size=L, frac_bits=fp.frac_bits, zero_exponent=ez,
                          output_rounding=rounding, output_mantissa_bits=cut, output_overflow=overflow,
                          nan_bits=nan_bits, nan_policy=nan_policy)
        return InstructionSpec(name=f"fingerprint.{spec.name}", k=spec.k, model=model, a_format=spec.a_format,
                               b_format=spec.b_format, c_format=spec.c_format,
                               k_order=None if order == list(range(spec.k)) else tuple(order),
                               c_entry=c_entry, c_add_rounding=c_add or "rne")
    except (ValueError, TypeError):
        return None


def _agree(candidate: InstructionSpec, vectors, expected: np.ndarray) -> bool:
    a, b, c = vectors
    try:
        got = _model_dot(candidate)(a, b, c)
    except (ValueError, TypeError, NotImplementedError):
        return False
    return bool(np.array_equal(got, expected))


def _family_vectors(spec: InstructionSpec, families, count: int, seed: int):
    from .vectors.families import families_for, generate

    rng = np.random.default_rng(seed)
    parts = [generate(spec, f, count, rng) for f in families if f in families_for(spec)]
    if not parts:
        return None
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))


def _search_output(box: _Box, spec: InstructionSpec, fp: Fingerprint, seed: int) -> None:
    """Narrow output rounding, mantissa cut, operand formats, overflow and C-add rounding."""
    screen = _family_vectors(spec, ("normal", "cdom", "align", "cancel"), 24, seed + 1)
    d = box(*screen)
    cuts = _trailing_zero_cut(d, spec.d_format)
    formats = [(spec.a_format, spec.b_format)]
    for s in _templates(spec):
        pair = (s.model.a_format, s.model.b_format)
        if s.model.algorithm == "fused" and pair not in formats:
            formats.append(pair)
    nan = fp._nan_bits[0] if len(fp._nan_bits) == 1 else None
    c_adds = ["rne", "rz", "rna", "ru", "rd"] if fp.c_entry == "ieee_add" else [None]
    fused_templates = [t.model for t in _templates(spec) if t.model.algorithm == "fused"]
    if fp.frac_bits_at_least is not None:
        # truncation was out of the probes' reach: the catalog's F values that fit, exact, then more
        least = fp.frac_bits_at_least
        f_cands = sorted({m.frac_bits for m in fused_templates if m.frac_bits is not None and m.frac_bits >= least})
        f_cands += [None] + [f for f in range(least, min(least + 16, 57)) if f not in f_cands]
    else:
        f_cands = [fp.frac_bits]
    survivors = []
    for F in f_cands:
        fp.frac_bits = F
        # zero exponent: the catalog's values inside the observed interval first, then its top
        lo, hi = fp.zero_exponent if fp.zero_exponent is not None else (None, 10**6)
        ezs = sorted({m.zero_exponent for m in fused_templates if m.zero_exponent is not None
                      and (lo is None or m.zero_exponent >= lo) and m.zero_exponent <= hi}, reverse=True)
        if hi < 10**6 and hi not in ezs:
            ezs.append(hi)
        if F is None or not ezs:
            ezs = ezs[:1] or [None]
        for ez in ezs:
            for fmts in formats:
                for rounding in _ROUNDINGS:
                    for cut in cuts:
                        for c_add in c_adds:
                            cand = _build(spec, fp, fmts, rounding, cut, "inf", c_add, nan, ez)
                            if cand is not None and _agree(cand, screen, d):
                                survivors.append((fmts, rounding, cut, c_add, ez))
        if survivors:
            break
    if len(survivors) > 1:
        # several candidates fit the screen: keep those that also fit tiny and subnormal terms,
        # where the zero exponent and the operand formats the datapath reads show
        extra = _family_vectors(spec, ("bits", "align", "special"), 96, seed + 3)
        d_extra = box(*extra)
        fitting = [s for s in survivors
                   if (cand := _build(spec, fp, s[0], s[1], s[2], "inf", s[3], nan, s[4])) is not None
                   and _agree(cand, extra, d_extra)]
        survivors = fitting or survivors
    if not survivors:
        fp.frac_bits = None if fp.frac_bits_at_least is not None else fp.frac_bits
        fp.notes.append("no fused candidate reproduces the screening vectors")
        return
    fp.operand_formats = sorted({(f[0].name, f[1].name) for f, *_ in survivors},
                                key=lambda p: p != (spec.a_format.name, spec.b_format.name))
    fp.output_rounding = [r for r in _ROUNDINGS if any(s[1] == r for s in survivors)]
    fp.output_mantissa_bits = [c for c in cuts if any(s[2] == c for s in survivors)]
    if fp.c_entry == "ieee_add":
        fp.c_add_rounding = [r for r in c_adds if any(s[3] == r for s in survivors)]
    over = _family_vectors(spec, ("overflow",), 48, seed + 2)
    fmts, rounding, cut, c_add, ez = survivors[0]
    if over is not None:
        d_over = box(*over)
        fp.output_overflow = [o for o in _OVERFLOWS
                              if (cand := _build(spec, fp, fmts, rounding, cut, o, c_add, nan, ez)) is not None
                              and _agree(cand, over, d_over)]
    fp._choice = (fmts, rounding, cut, (fp.output_overflow or ["inf"])[0], c_add, nan, ez)
    # the other candidates, in case validation rules the first one out
    fp._alternatives = [(f, r, c, fp._choice[3], a, nan, e) for f, r, c, a, e in survivors[1:]]


# --------------------------------------------------------------------------------------------
# integer units

def _fingerprint_integer(box: _Box, spec: InstructionSpec, fp: Fingerprint) -> None:
    fa, fb, fc = spec.a_format, spec.b_format, spec.c_format
    binary = fa.bits == 1 and fb.bits == 1
    fp.kind = "binary" if binary else "integer"
    if binary:
        k = spec.k
        a = np.zeros((3, k), fa.container_dtype)
        b = np.zeros((3, k), fb.container_dtype)
        a[0, :] = 1  # 1 & 0 = 0, 1 ^ 0 = 1
        a[1, :] = 1
        b[1, :] = 1  # 1 & 1 = 1, 1 ^ 1 = 0
        c = np.zeros(3, fc.container_dtype)
        d = fc.decode_int(box(a, b, c))
        op = "and" if (d[0], d[1]) == (0, k) else "xor" if (d[0], d[1]) == (k, 0) else None
        fp.integer["bit_op"] = op or f"unknown (1,0 -> {d[0]}, 1,1 -> {d[1]} over {k} bits)"
        model_kw = dict(algorithm="binary", bit_op=op or "and", group_size=spec.model.group_size)
    else:
        k = spec.k
        a = np.zeros((2, k), fa.container_dtype)
        b = np.zeros((2, k), fb.container_dtype)
        a[:, 0] = fa.encode_int(np.array([fa.max_value]))[0]
        b[:, 0] = fb.encode_int(np.array([fb.max_value]))[0]
        c = fc.encode_int(np.array([fc.max_value, fc.min_value]))
        a[1, 0] = fa.encode_int(np.array([fa.min_value if fa.signed else fa.max_value]))[0]
        b[1, 0] = fb.encode_int(np.array([fb.max_value if fa.signed else (fb.min_value if fb.signed else 0)]))[0]
        d = fc.decode_int(box(a, b, c))
        exact = [int(fa.decode_int(a[i, :1])[0]) * int(fb.decode_int(b[i, :1])[0]) + int(fc.decode_int(c[i:i + 1])[0])
                 for i in range(2)]
        sat = [min(max(x, fc.min_value), fc.max_value) for x in exact]
        wrap = [int(fc.decode_int(fc.encode_int(np.array([x]), "wrap"))[0]) for x in exact]
        if list(d) == sat and sat != wrap:
            fp.integer["overflow"] = "saturate"
        elif list(d) == wrap and sat != wrap:
            fp.integer["overflow"] = "wrap"
        else:
            fp.integer["overflow"] = "unknown"
        model_kw = dict(algorithm="integer", saturate=fp.integer["overflow"] == "saturate",
                        group_size=spec.model.group_size)
    try:
        model = UnitModel(a_format=spec.model.a_format, b_format=spec.model.b_format, c_format=spec.model.c_format,
                          d_format=spec.d_format, frac_bits=None, zero_exponent=None, **model_kw)
        fp.spec = InstructionSpec(name=f"fingerprint.{spec.name}", k=spec.k, model=model, a_format=spec.a_format,
                                  b_format=spec.b_format, c_format=spec.c_format)
    except (ValueError, TypeError) as exc:
        fp.notes.append(f"could not build an integer model: {exc}")


# --------------------------------------------------------------------------------------------
# the driver

def fingerprint(dot: Dot, interface: "str | InstructionSpec", *, validation: int = 32, seed: int = 0,
                match_catalog: bool = True) -> Fingerprint:
    """Infer the arithmetic behind ``dot`` for the instruction interface ``interface``.

    ``dot(a, b, c)`` takes [N, K] operand bits and [N] accumulator bits in the formats of
    the catalog entry ``interface`` and returns [N] result bits.  ``validation`` vectors
    per input family check the inferred model (and, with ``match_catalog``, every catalog
    entry of the same interface) against the box.
    """
    spec = get_instruction(interface)
    if not callable(dot):
        raise TypeError(f"dot: expected a callable dot(a_bits, b_bits, c_bits) -> d_bits, got {type(dot).__name__}")
    if isinstance(validation, bool) or not isinstance(validation, int) or validation < 1:
        raise ValueError(f"validation: expected a positive integer, got {validation!r}")
    box = _Box(dot, spec)
    fp = Fingerprint(spec.name, spec.k, {k: getattr(spec, f"{k}_format").name for k in "abcd"})
    fp._nan_bits, fp._choice, fp._out_bits, fp._alternatives = [], None, None, []
    if isinstance(spec.a_format, IntFormat):
        _fingerprint_integer(box, spec, fp)
    else:
        _probe_specials(box, spec, fp)
        screen = _family_vectors(spec, ("normal", "align"), 48, seed + 7)
        cuts = _trailing_zero_cut(box(*screen), spec.d_format)
        fp._out_bits = cuts[-1]  # the narrowest output mantissa the outputs allow
        probe = _probe_structure(box, spec, fp)
        b_exp = probe[0] if probe else min(_product_range(spec)[1], spec.d_format.emax - 1,
                                           spec.c_format.emax - 1)
        if fp.groups is not None:
            structures = [(fp.groups, fp.c_entry)]
        else:
            # the inputs cannot separate the groups: try the structures of the catalog's
            # entries with this interface, then one group of all K
            structures = []
            for t in _templates(spec):
                st = structure_of(t)
                if st not in structures:
                    structures.append(st)
            if ([list(range(spec.k))], "fused") not in structures:
                structures.append(([list(range(spec.k))], None))
        for groups, c_entry in structures:
            fp.groups, fp.c_entry = groups, c_entry
            fp.frac_bits = fp.frac_bits_at_least = fp.zero_exponent = None
            fp.notes = [n for n in fp.notes if not n.startswith(("alignment", "lone-term", "the zero", "no fused"))]
            _probe_frac_bits(box, spec, fp, b_exp)
            _probe_c_entry(box, spec, fp, b_exp)
            _probe_zero_exponent(box, spec, fp)
            _search_output(box, spec, fp, seed)
            if fp._choice is not None:
                break
        if fp._choice is not None:
            sizes = {len(g) for g in fp.groups}
            fp.group_size = sizes.pop() if len(sizes) == 1 else None
            fp.spec = _build(spec, fp, *fp._choice)
            fp.kind = "fused"
            if len(structures) > 1 or probe is None:
                fp.notes.append("group structure chosen among the catalog's candidates: the representable "
                                "inputs cannot separate the groups")
        else:
            fp.groups = fp.c_entry = None
    check = _family_vectors(spec, ("int", "normal", "bits", "cancel", "align", "cdom", "special", "overflow", "tf32"),
                            validation, seed + 3)
    d = box(*check)
    fp.validation_vectors = len(d)
    if fp.spec is not None:
        fp.reproduces = _agree(fp.spec, check, d)
        if not fp.reproduces and fp.kind == "fused":
            # screening left several candidates: take one the validation vectors accept, then
            # confirm it on fresh vectors so the verdict does not rest on the set that chose it
            for alt in getattr(fp, "_alternatives", []):
                cand = _build(spec, fp, *alt)
                if cand is not None and _agree(cand, check, d):
                    fresh = _family_vectors(spec, ("normal", "bits", "cancel", "align", "cdom", "special"),
                                            validation, seed + 4)
                    if _agree(cand, fresh, box(*fresh)):
                        fp.spec, fp._choice, fp.reproduces = cand, alt, True
                        fp.operand_formats = [(alt[0][0].name, alt[0][1].name)]
                        fp.notes.append("chosen among the screening survivors by the validation vectors, "
                                        "confirmed on fresh ones")
                        break
        if not fp.reproduces and fp.kind == "fused":
            fp.notes.append("the inferred fused model misses some validation vectors")
    if match_catalog:
        verdicts: dict = {}  # entries that differ only in name behave alike: replay each behaviour once
        for t in _templates(spec):
            key = _behaviour(t)
            if key not in verdicts:
                verdicts[key] = _agree(t, check, d)
            if verdicts[key]:
                fp.matches.append(t.name)
        if not fp.reproduces and fp.matches:
            algos = sorted({get_instruction(m).model.algorithm for m in fp.matches})
            fp.kind = fp.kind if fp.kind in ("integer", "binary") else "other: " + "/".join(algos)
    fp.box_vectors = box.vectors
    del fp._nan_bits, fp._choice, fp._out_bits, fp._alternatives
    return fp


# --------------------------------------------------------------------------------------------
# CLI

def register(subparsers) -> None:
    p = subparsers.add_parser("fingerprint", help="infer a unit's arithmetic from discriminating vectors")
    p.add_argument("--instruction", required=True, help="catalog name giving the interface (formats, K)")
    p.add_argument("--gpu", action="store_true",
                   help="probe the GPU through tcnumerics.probe.gpu_dot (needs CuPy and a matching GPU); "
                        "default: the catalog entry itself, as a black box on the CPU")
    p.add_argument("--engine", default="auto", help="engine evaluating the catalog entry without --gpu")
    p.add_argument("--validation", type=int, default=256, help="validation vectors per input family")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--no-match", action="store_true", help="skip replaying the catalog entries")
    p.set_defaults(func=_cmd_fingerprint)


def _gpu_dot(name: str) -> Dot:
    try:
        from .probe import gpu_dot
    except ImportError as exc:
        raise ValueError(f"--gpu: the GPU probe is not available ({exc}); {install_hint('gpu')}") from None
    try:
        dot = gpu_dot(name)
    except ImportError as exc:
        raise ValueError(f"--gpu: CuPy / CUDA is not available here ({exc})") from None
    except Exception as exc:  # any device-side failure becomes one line
        raise ValueError(f"--gpu: cannot run {name} on this machine ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
    return _selected_products(dot, get_instruction(name))


def _selected_products(dot: Callable[..., np.ndarray], spec: InstructionSpec) -> Dot:
    """A structured-sparse unit seen through its datapath: ``(a, b_sel, c) -> d`` on the K/2 products.

    ``dot(a_compressed, b, c, sparse_index)`` is the sparse unit (the GPU's ``GpuDot``).  Every
    chunk keeps the first legal positions of the entry's own scheme (``tcnumerics.sparse``:
    positions 0, 1 of 4 for 2:4, 0 of 2 for TF32 1:2, the pairs 0..3 of 8 for s4/u4 pairwise
    4:8); ``b_sel`` is scattered there and the rest of B is zero.  Dense entries: ``dot`` itself.

    >>> from tcnumerics import sparse
    >>> spec = get_instruction("hopper.mma.sp.m16n8k8.f32.tf32.tf32.f32")
    >>> box = _selected_products(lambda a, b, c, idx: sparse.dot_bits(spec, a, b, c, idx), spec)
    >>> one = np.full((1, spec.k), 0x3F800000, np.uint32)         # four TF32 ones
    >>> hex(int(box(one, one, np.zeros(1, np.uint32))[0]))
    '0x40800000'
    """
    from . import sparse

    if not sparse.is_sparse(spec):
        return dot
    scheme = sparse.sparsity(spec)
    first = scheme.combinations()[0]   # e.g. 2:4: positions (0, 1) of every chunk

    def box(a, b_sel, c):
        n, half = a.shape
        if half % scheme.kept:
            raise ValueError(f"a: K/2={half} is not whole {scheme.name} chunks of {scheme.kept} kept values")
        idx = np.tile(first, (n, half // scheme.kept))
        b = np.zeros((n, 2 * half), b_sel.dtype)
        np.put_along_axis(b, sparse.positions(idx, scheme), b_sel, axis=1)
        return dot(a, b, c, idx)

    return box


def _cmd_fingerprint(args) -> int:
    from .engines import get_engine

    spec = get_instruction(args.instruction)
    if args.validation < 1:
        raise ValueError(f"--validation: must be >= 1, got {args.validation}")
    if args.gpu:
        dot = _gpu_dot(spec.name)
    else:
        get_engine(args.engine)
        dot = catalog_dot(spec, args.engine)
    fp = fingerprint(dot, spec, validation=args.validation, seed=args.seed, match_catalog=not args.no_match)
    print(json.dumps(fp.to_dict(), indent=1) if args.json else fp.report())
    return 0 if fp.reproduces or fp.matches else 1
