"""Mutation-adequate golden vectors: a small set that tells the unit from every neighbour design.

Candidates are drawn from the input families (``families.generate``); each candidate's
``d`` is computed by the unit (the reference engine) and by every mutant
(``tcnumerics.vectors.mutants``).  A candidate *kills* a mutant when the two differ.  A
greedy set cover then picks, each step, the candidate killing the most mutants not yet
killed (ties: the earliest candidate), until every killable mutant is killed.  Each chosen
vector keeps the names of the mutants it kills.  The *mutation score* is the killed share
of the non-equivalent mutants (equivalent ones are proven so in ``mutants``; mutants no
candidate kills and no argument covers are reported as survivors and lower the score).

Everything is drawn from one ``numpy.random.default_rng(seed)``: the same seed gives the
same set.  The ``d`` of the set is the unit's, so the set replays with ``vectors verify``
like any generated file and agrees with silicon wherever the catalogued model does.

Example:
    >>> from tcnumerics.vectors.adequate import adequate_set
    >>> s = adequate_set("volta.mma.m8n8k4.f32.f16.f16.f32", seed=0, per_family=32)
    >>> s.score, s.n <= 40
    (1.0, True)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from ..catalog import get_instruction
from ..formats import FloatFormat
from ..model import InstructionSpec, UnitModel
from .families import families_for, generate
from .faults import group_bounds
from .mutants import Mutant, as_spec, evaluate, mutants

__all__ = ["AdequateSet", "adequate_set", "adequacy_entries", "edge_vectors", "kill_matrix", "mutants_killed",
           "random_to_match", "ARCHS"]

ARCHS: tuple[str, ...] = ("volta", "ampere", "hopper", "blackwell")
_FP4_FP6 = ("e2m1", "e2m3", "e3m2")


@dataclass
class AdequateSet:
    """A chosen vector set with what it kills.  ``kills[i]``: the mutants vector i kills."""

    instruction: str
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    d: np.ndarray
    family: np.ndarray
    kills: list
    mutants: list  # names of the non-equivalent mutants
    equivalent: dict  # name -> the proof
    survivors: list  # non-equivalent mutants no candidate killed
    candidates: int
    seed: int
    extra: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(len(self.c))

    @property
    def score(self) -> float:
        return (len(self.mutants) - len(self.survivors)) / len(self.mutants) if self.mutants else 1.0

    def to_vector_set(self):
        """The set as a ``VectorSet`` (families and per-vector kills kept), ready for ``io.save``."""
        from .io import VectorSet

        meta = {"instruction": self.instruction, "K": int(self.a.shape[1]), "seed": self.seed,
                "source": "model: adequate set (greedy cover over family candidates, d from the reference engine)",
                "adequate": {"mutation_score": self.score, "mutants": self.mutants, "survivors": self.survivors,
                             "equivalent": self.equivalent, "candidates": self.candidates,
                             "kills": [list(k) for k in self.kills]}}
        return VectorSet(self.a, self.b, self.c, self.d, meta, {"family": self.family.astype(str)})


def _candidates(spec: InstructionSpec, per_family: int, rng: np.random.Generator):
    parts = [(generate(spec, fam, per_family, rng), fam) for fam in families_for(spec)]
    if isinstance(spec.a_format, FloatFormat):
        edge = edge_vectors(spec)
        parts.append((edge, "edge"))
    a = np.concatenate([p[0][0] for p in parts])
    b = np.concatenate([p[0][1] for p in parts])
    c = np.concatenate([p[0][2] for p in parts])
    fam = np.concatenate([np.full(len(p[0][2]), p[1]) for p in parts])
    return a, b, c, fam


def _exact(fmt: FloatFormat, value: float):
    """The bits of ``value`` in ``fmt`` if it is exactly representable there, else None."""
    bits = fmt.from_float(np.array([value]))
    return bits[0] if float(fmt.to_float(bits)[0]) == value else None


def _power_pair(spec: InstructionSpec, exponent: int, below: int):
    """Operand bits (a, b) whose product is exactly 2**exponent and aligns below exponent ``below``."""
    fa, fb = spec.a_format, spec.b_format
    for ea in range(fa.emin - fa.man_bits, fa.emax + 1):
        a, b = _exact(fa, 2.0 ** ea), _exact(fb, 2.0 ** (exponent - ea))
        if a is None or b is None:
            continue
        align = int(fa.decode(np.array([a])).exponent[0]) + int(fb.decode(np.array([b])).exponent[0])
        if align < below:
            return a, b
    return None


@functools.lru_cache(maxsize=64)
def _powers(fmt: FloatFormat) -> dict:
    """exponent -> the bits of 2**exponent, for every power of two ``fmt`` holds exactly."""
    exps = np.arange(fmt.emin - fmt.man_bits, fmt.emax + 1)
    values = 2.0 ** exps.astype(float)
    bits = fmt.from_float(values)
    exact = fmt.to_float(bits) == values
    return {int(e): bits[i] for i, e in enumerate(exps) if exact[i]}


def _aligned_pair(spec: InstructionSpec, exponent: int):
    """Operand bits (a, b) whose product is exactly 2**exponent, both normal in the unit's formats (so the
    product aligns at ``exponent``), the split as even as the formats allow; None if there is none."""
    pa, pb, m = _powers(spec.a_format), _powers(spec.b_format), spec.model
    for ea in sorted(pa, key=lambda e: (abs(2 * e - exponent), e)):
        eb = exponent - ea
        if ea >= m.a_format.emin and eb >= m.b_format.emin and eb in pb:
            return pa[ea], pb[eb]
    return None


def _negated(fmt: FloatFormat, bits):
    return fmt.container_dtype(bits | (((1 << (fmt.width - 1)) << fmt.pad_bits) if fmt.signed else 0))


class _Rows:
    """Edge rows under construction: operands placed at datapath positions (the unit's K order)."""

    def __init__(self, spec: InstructionSpec):
        self.spec = spec
        self.order = list(spec.k_order) if spec.k_order is not None else list(range(spec.k))
        self.rows: list = []

    def add(self, terms: dict, c) -> None:
        """``terms``: datapath position -> (a bits, b bits); ``c``: C bits."""
        fa, fb = self.spec.a_format, self.spec.b_format
        a, b = np.zeros(self.spec.k, fa.container_dtype), np.zeros(self.spec.k, fb.container_dtype)
        for pos, (x, y) in terms.items():
            a[self.order[pos]], b[self.order[pos]] = x, y
        self.rows.append((a, b, self.spec.c_format.container_dtype(c)))


def _subnormal_c_rows(rows: _Rows) -> None:
    """Zero products with a subnormal or tiny C: subnormal results."""
    fc = rows.spec.c_format
    for v in (fc.min_subnormal, 2.0 ** (fc.emin - 1), 2.0 ** (fc.emin - 1) + 2.0 ** (fc.emin - 7)):
        for sign in (1, -1):
            c = _exact(fc, sign * v)
            if c is not None:
                rows.add({}, c)


def _zero_exponent_rows(rows: _Rows) -> None:
    """One product just below the zero exponent, a second at the truncation grid it sets, F-1..F+1 bits
    below, negative, with nothing or a tie on the output rounding: the zero exponent and F."""
    spec = rows.spec
    m = spec.model
    if m.zero_exponent is None or m.frac_bits is None:
        return
    below = m.zero_exponent - 1
    for top in (m.zero_exponent - 3, m.zero_exponent - 1):
        ulp = max(top, m.output_format.emin) - m.output_format.man_bits  # the output's ulp at 2**top
        for s in (-1, 0, 1):
            big, small = _power_pair(spec, top, below), _power_pair(spec, m.zero_exponent - m.frac_bits + s, below)
            if big is None or small is None:
                continue
            for extra in _ties(lambda e: _power_pair(spec, e, below), ulp, top - 1):
                if extra is not None and 2 + len(extra) <= spec.k:
                    small_neg = (small[0], _negated(spec.b_format, small[1]))
                    rows.add(dict(enumerate([big, small_neg] + extra)), 0)


def _ties(pair, ulp: int, half: int) -> list:
    """Extra product lists for a sum at 2**top: none, one product at 2**half, and an odd ulp plus half an
    ulp (a tie of the output rounding that nearest rounding breaks apart); None where one is missing."""
    return [[]] + [None if any(e is None for e in extra) else extra for extra in ([pair(half)], [pair(ulp), pair(ulp - 1)])]


def _window_rows(rows: _Rows) -> None:
    """A big term at 2**T (C, a product of the same group or the previous group's result) with a small
    product of either sign at T - F - 3 .. T - F + 1 and nothing or a tie on the output rounding: the
    window's width (F), C's place in emax and in the chain, and sticky bits under nearest rounding."""
    spec = rows.spec
    m = spec.model
    if m.frac_bits is None:
        return
    for top in _window_tops(spec):
        ulp = max(top, m.output_format.emin) - m.output_format.man_bits
        places = _window_places(spec, top)
        for s in (-3, -2, -1, 0, 1):
            small = _aligned_pair(spec, top - m.frac_bits + s)
            for extra in _ties(lambda e: _aligned_pair(spec, e), ulp, ulp - 1):
                if small is None or extra is None:
                    continue
                for big, c, start, stop in places:
                    for sign in (0, 1):
                        rest = [(small[0], _negated(spec.b_format, small[1]) if sign else small[1])] + extra
                        if start + len(rest) <= stop:
                            rows.add({**big, **{start + i: x for i, x in enumerate(rest)}}, c)


def _window_places(spec: InstructionSpec, top: int) -> list:
    """Where a window probe's big term 2**top goes: ``(its terms, C bits, first position and end of the
    group the other terms go in)`` for C (fused units), a product of the first group, and a product of
    the first group whose result the second group then takes as its accumulator (chains)."""
    groups = group_bounds(spec)
    big = _aligned_pair(spec, top)
    c_big = _exact(spec.c_format, 2.0 ** top) if spec.c_entry == "fused" else None
    (first, end), places = groups[0], []
    if c_big is not None:
        places.append(({}, c_big, first, end))
    if big is not None:
        places.append(({first: big}, 0, first + 1, end))
        if len(groups) > 1 and spec.chunk_combine == "chain":
            places.append(({first: big}, 0, groups[1][0], groups[1][1]))
    return places


def _window_tops(spec: InstructionSpec) -> list:
    """Exponents T for the window probes: the tops of the product and C ranges and the lowest T whose
    small terms are products (T - F - 3 and T - F + 1 reachable), where they exist."""
    m = spec.model
    exps = [e for e in range(m.a_format.emin + m.b_format.emin, spec.a_format.emax + spec.b_format.emax + 1)
            if _aligned_pair(spec, e) is not None]
    if not exps:
        return []
    lo, hi = exps[0], exps[-1]
    top = max(hi, spec.c_format.emax if spec.c_entry == "fused" else hi)
    wanted = (hi, hi - 2, top, top - 2, lo + m.frac_bits + 3, lo + m.frac_bits - 1, (hi + lo + m.frac_bits + 3) // 2)
    return sorted({t for t in wanted if lo + m.frac_bits - 1 <= t <= top})


def _special_rows(rows: _Rows) -> None:
    """inf x 0 (C finite, so a zero product would show), +inf with -inf (two products, or a product and C),
    every product and C at the largest finite, both signs (overflow), and with C infinite."""
    spec = rows.spec
    fa, fb, fc = spec.a_format, spec.b_format, spec.c_format
    one = {"a": _exact(fa, 1.0), "b": _exact(fb, 1.0)}
    c_one, c_inf = _exact(fc, 1.0), (fc.inf_bits if fc.has_inf else None)
    for side, fmt, other in (("a", fa, "b"), ("b", fb, "a")):
        if not fmt.has_inf or one[other] is None:
            continue
        inf, ninf = fmt.container_dtype(fmt.inf_bits), _negated(fmt, fmt.inf_bits)
        pair = (lambda x, y: (x, y)) if side == "a" else (lambda x, y: (y, x))
        rows.add({0: pair(inf, 0)}, c_one if c_one is not None else 0)
        rows.add({0: pair(inf, one[other]), 1: pair(ninf, one[other])}, 0)
        if c_inf is not None:
            rows.add({0: pair(inf, one[other])}, _negated(fc, c_inf))
    big = [_exact(f, f.max_finite) for f in (fa, fb, fc)]
    for sign in (0, 1):
        b = _negated(fb, big[1]) if sign else big[1]
        rows.add({i: (big[0], b) for i in range(spec.k)}, _negated(fc, big[2]) if sign else big[2])
        if c_inf is not None:
            rows.add({i: (big[0], b) for i in range(spec.k)}, c_inf if sign else _negated(fc, c_inf))


def edge_vectors(spec: "str | InstructionSpec"):
    """Deterministic boundary vectors (family ``edge``) no random family reaches reliably.

    Zero products with a subnormal or tiny C (subnormal results); the zero exponent (a product just
    below it, a second at the grid it sets); the window probes (``_window_rows``: F, C in emax and
    in the chain, ties); inf x 0 and +inf with -inf; every product and C at the largest finite, both
    signs, and with an infinite C (overflow).  Returns ``(a, b, c)`` like ``families.generate``.

    >>> a, b, c = edge_vectors("hopper.wgmma.m64n8k32.f32.e4m3.e5m2")
    >>> a.shape[1], len(a) == len(b) == len(c) > 100
    (32, True)
    """
    rows = _Rows(get_instruction(spec))
    for build in (_subnormal_c_rows, _zero_exponent_rows, _window_rows, _special_rows):
        build(rows)
    a = np.stack([r[0] for r in rows.rows])
    b = np.stack([r[1] for r in rows.rows])
    c = np.array([r[2] for r in rows.rows], rows.spec.c_format.container_dtype)
    return a, b, c


def kill_matrix(spec: InstructionSpec, muts: list, a: np.ndarray, b: np.ndarray, c: np.ndarray):
    """The unit's d and a [N, M] boolean matrix: does vector i tell mutant j from the unit?"""
    from ..engines.reference import dot_bits

    with np.errstate(all="ignore"):
        d = np.asarray(dot_bits(spec, a, b, c))
        kills = np.stack([evaluate(m, a, b, c) != d for m in muts], axis=1) if muts else np.zeros((len(c), 0), bool)
    return d, kills


def _greedy(kills: np.ndarray) -> list:
    left = kills.any(axis=0)
    chosen = []
    while left.any():
        gain = (kills & left).sum(axis=1)
        best = int(np.argmax(gain))  # argmax returns the first maximum: deterministic ties
        chosen.append(best)
        left &= ~kills[best]
    return chosen


def adequate_set(spec_or_name: "str | InstructionSpec | UnitModel", seed: int = 0, per_family: int = 256,
                 k: int | None = None) -> AdequateSet:
    """A small vector set killing every killable mutant of the instruction (greedy set cover).

    A bare ``UnitModel`` is one instruction of ``k`` products (default: one group), as in ``mutants``.
    """
    spec = as_spec(spec_or_name, k)
    if isinstance(per_family, bool) or not isinstance(per_family, int) or per_family < 1:
        raise ValueError(f"per_family: expected a positive integer, got {per_family!r}")
    all_m = mutants(spec)
    live = [m for m in all_m if not m.equivalent]
    rng = np.random.default_rng(seed)
    a, b, c, fam = _candidates(spec, per_family, rng)
    d, kills = kill_matrix(spec, live, a, b, c)
    chosen = _greedy(kills)
    # top up: one vector of every family not yet represented (the one killing most), so that each
    # feature a family aims at is exercised even where no mutant models a bug there
    for f in dict.fromkeys(fam.tolist()):
        if f not in set(fam[chosen].tolist()):
            rows = np.nonzero(fam == f)[0]
            chosen.append(int(rows[np.argmax(kills[rows].sum(axis=1))]))
    survivors = [m.name for j, m in enumerate(live) if not kills[:, j].any()]
    return AdequateSet(spec.name, a[chosen], b[chosen], c[chosen], d[chosen], fam[chosen],
                       [tuple(m.name for j, m in enumerate(live) if kills[i, j]) for i in chosen],
                       [m.name for m in live], {m.name: m.equivalent for m in all_m if m.equivalent},
                       survivors, len(c), seed)


def mutants_killed(spec_or_name: "str | InstructionSpec | UnitModel", a: np.ndarray, b: np.ndarray,
                   c: np.ndarray) -> dict:
    """For a vector set: each non-equivalent mutant's name -> the index of the first vector killing it (or None).

    A bare ``UnitModel`` takes K from the operands (``a.shape[1]``)."""
    spec = as_spec(spec_or_name, a.shape[1])
    live = [m for m in mutants(spec) if not m.equivalent]
    _, kills = kill_matrix(spec, live, a, b, c)
    return {m.name: (int(np.argmax(kills[:, j])) if kills[:, j].any() else None) for j, m in enumerate(live)}


def random_to_match(spec_or_name: "str | InstructionSpec | UnitModel", target: int, seed: int = 0,
                    cap: int = 4096, batch: int = 128, families: tuple = ("normal", "bits"),
                    k: int | None = None) -> tuple:
    """How many random vectors (alternating batches of ``families``) kill ``target`` mutants.

    Returns ``(count, killed)``: the first count at which ``target`` non-equivalent mutants
    are killed, or ``(None, killed)`` with the number killed by ``cap`` vectors.  A bare ``UnitModel``
    is one instruction of ``k`` products (default: one group).
    """
    spec = as_spec(spec_or_name, k)
    live: list[Mutant] = [m for m in mutants(spec) if not m.equivalent]
    rng = np.random.default_rng(seed)
    dead = np.zeros(len(live), bool)
    drawn = 0
    step = 0
    while drawn < cap:
        fam = families[step % len(families)]
        step += 1
        a, b, c = generate(spec, fam, batch, rng)
        _, kills = kill_matrix(spec, live, a, b, c)
        for i in range(batch):
            dead |= kills[i]
            if dead.sum() >= target:
                return drawn + i + 1, int(dead.sum())
        drawn += batch
    return None, int(dead.sum())


def adequacy_entries(archs: tuple = ARCHS) -> list[str]:
    """Every catalog entry of ``archs`` that ``mutants`` covers (dense, unscaled, fused or integer):
    the FP16, BF16, FP8, TF32 and integer entries the adequacy acceptance names; FP4/FP6 operands left out.

    >>> names = adequacy_entries()
    >>> len(names) > 200, "volta.mma.m8n8k4.f32.f16.f16.f32" in names, any("e2m1" in n for n in names)
    (True, True, False)
    """
    from ..catalog import instruction_names

    out = []
    for name in instruction_names():
        if name.split(".")[0] not in archs or any(f in name.split(".") for f in _FP4_FP6):
            continue
        try:
            mutants(name)
        except ValueError:  # block-scaled, sparse, or not a fused / integer unit
            continue
        out.append(name)
    return out
