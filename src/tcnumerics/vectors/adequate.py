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

from dataclasses import dataclass, field

import numpy as np

from ..catalog import get_instruction
from ..formats import FloatFormat
from ..model import InstructionSpec
from .families import families_for, generate
from .mutants import Mutant, evaluate, mutants

__all__ = ["AdequateSet", "adequate_set", "edge_vectors", "kill_matrix", "mutants_killed", "random_to_match"]


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


def edge_vectors(spec: "str | InstructionSpec"):
    """Deterministic boundary vectors (family ``edge``) no random family reaches reliably.

    Zero products with a subnormal or tiny C (subnormal results); one product just below the
    zero exponent with a second product at the truncation grid it sets, F-1..F+1 bits below
    (the zero exponent and F); every product and C at the largest finite, both signs
    (overflow).  Returns ``(a, b, c)`` like ``families.generate``.
    """
    spec = get_instruction(spec)
    fa, fb, fc, m = spec.a_format, spec.b_format, spec.c_format, spec.model
    K = spec.k
    zero_a, zero_b = np.zeros(K, fa.container_dtype), np.zeros(K, fb.container_dtype)
    rows = []
    for v in (fc.min_subnormal, 2.0 ** (fc.emin - 1), 2.0 ** (fc.emin - 1) + 2.0 ** (fc.emin - 7)):
        for sign in (1, -1):
            c = _exact(fc, sign * v)
            if c is not None:
                rows.append((zero_a, zero_b, c))
    if m.zero_exponent is not None and m.frac_bits is not None:
        for top in (m.zero_exponent - 3, m.zero_exponent - 1):
            for s in (-1, 0, 1):
                below = m.zero_exponent - 1
                big, small = (_power_pair(spec, top, below),
                              _power_pair(spec, m.zero_exponent - m.frac_bits + s, below))
                if big is None or small is None:
                    continue
                out = m.output_format
                ulp = max(top, out.emin) - out.man_bits  # the output's ulp at 2**top
                odd_tie = [_power_pair(spec, ulp, below), _power_pair(spec, ulp - 1, below)]
                half = [_power_pair(spec, top - 1, below)]
                for extra in ([], half, odd_tie):  # ties (an odd ulp plus half an ulp) nearest rounding breaks
                    if any(e is None for e in extra) or 2 + len(extra) > K:
                        continue
                    a, b = zero_a.copy(), zero_b.copy()
                    a[0], b[0] = big
                    a[1], b[1] = small
                    b[1] |= fb.container_dtype(((1 << (fb.width - 1)) << fb.pad_bits) if fb.signed else 0)
                    for j, (ea, eb) in enumerate(extra):
                        a[2 + j], b[2 + j] = ea, eb
                    rows.append((a, b, fc.container_dtype(0)))
    big = [_exact(f, f.max_finite) for f in (fa, fb, fc)]
    for sign in (0, 1):
        a = np.full(K, big[0], fa.container_dtype)
        b = np.full(K, big[1], fb.container_dtype) | fb.container_dtype(((sign << (fb.width - 1)) << fb.pad_bits))
        c = fc.container_dtype(big[2] | ((sign << (fc.width - 1)) << fc.pad_bits))
        rows.append((a, b, c))
    a = np.stack([r[0] for r in rows])
    b = np.stack([r[1] for r in rows])
    c = np.array([r[2] for r in rows], fc.container_dtype)
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


def adequate_set(spec_or_name: "str | InstructionSpec", seed: int = 0, per_family: int = 256) -> AdequateSet:
    """A small vector set killing every killable mutant of the instruction (greedy set cover)."""
    spec = get_instruction(spec_or_name)
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


def mutants_killed(spec_or_name: "str | InstructionSpec", a: np.ndarray, b: np.ndarray,
                   c: np.ndarray) -> dict:
    """For a vector set: each non-equivalent mutant's name -> the index of the first vector killing it (or None)."""
    spec = get_instruction(spec_or_name)
    live = [m for m in mutants(spec) if not m.equivalent]
    _, kills = kill_matrix(spec, live, a, b, c)
    return {m.name: (int(np.argmax(kills[:, j])) if kills[:, j].any() else None) for j, m in enumerate(live)}


def random_to_match(spec_or_name: "str | InstructionSpec", target: int, seed: int = 0, cap: int = 4096,
                    batch: int = 128, families: tuple = ("normal", "bits")) -> tuple:
    """How many random vectors (alternating batches of ``families``) kill ``target`` mutants.

    Returns ``(count, killed)``: the first count at which ``target`` non-equivalent mutants
    are killed, or ``(None, killed)`` with the number killed by ``cap`` vectors.
    """
    spec = get_instruction(spec_or_name)
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
