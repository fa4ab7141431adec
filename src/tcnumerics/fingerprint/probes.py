"""The probes of a floating-point unit: specials, group structure, fraction bits kept, C's entry, zero exponent."""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np

from ..formats import FloatFormat
from ..model import InstructionSpec
from .result import Fingerprint, _Box, _SPAN

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
