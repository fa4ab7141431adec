"""Inference: candidate specs built from the probes' findings, narrowed on discriminating vectors, checked on
every input family and matched against the catalog (``fingerprint``)."""

from __future__ import annotations

import numpy as np

from ..catalog import all_instructions, get_instruction
from ..formats import IntFormat
from ..model import InstructionSpec, UnitModel
from .result import Dot, Fingerprint, _Box, _OVERFLOWS, _ROUNDINGS, _model_dot
from .probes import (_probe_c_entry, _probe_frac_bits, _probe_specials, _probe_structure, _probe_zero_exponent,
                     _product_range, _trailing_zero_cut)

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
    from ..vectors.families import families_for, generate

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
