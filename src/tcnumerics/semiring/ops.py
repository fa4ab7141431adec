"""The nine SIMD2 semiring-like operations as data: a reduction (⊕) and a combination (⊗).

Names follow SIMD2 (Zhang et al., ISCA 2022): ``"<⊕>-<⊗>"``, e.g. ``min-plus`` reduces with
min the sums ``a + b``.  The ordinary matrix product is catalogued as ``mul-plus`` (the
issue's name) with ``plus-mul`` and ``mma`` as aliases.

Example:
    >>> from tcnumerics.semiring.ops import get_op
    >>> op = get_op("min-plus")
    >>> op.reduce, op.combine, op.kind
    ('min', 'plus', 'select')
    >>> get_op("plus-mul").name
    'mul-plus'
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["SemiringOp", "OPS", "get_op", "op_names"]

Reduce = Literal["min", "max", "plus", "or"]
Combine = Literal["plus", "mul", "min", "max", "and", "sqdiff"]


@dataclass(frozen=True)
class SemiringOp:
    """One semiring-like matrix operation ``D[i,j] = C[i,j] ⊕ (⊕_k A[i,k] ⊗ B[k,j])``.

    Attributes:
        name: canonical name (``"min-plus"``).
        reduce: ⊕ -- ``"min"``/``"max"`` (selecting), ``"plus"`` (accumulating), ``"or"``.
        combine: ⊗ -- ``"plus"``, ``"mul"``, ``"min"``, ``"max"``, ``"and"``, or ``"sqdiff"``
            (the squared difference ``(a - b)**2`` of plus-norm).
        kind: how the numerics work -- ``"select"`` (exact ⊗, exact min/max, one rounding),
            ``"accumulate"`` (the fused truncating group model of a unit), ``"boolean"``.
        use: the graph / data problem the operation is known for.
    """

    name: str
    reduce: Reduce
    combine: Combine
    use: str
    aliases: tuple[str, ...] = field(default=(), compare=False)

    @property
    def kind(self) -> str:
        if self.reduce in ("min", "max"):
            return "select"
        if self.reduce == "plus":
            return "accumulate"
        return "boolean"

    @property
    def symbol(self) -> str:
        """``⊕/⊗`` in words, e.g. ``min over k of (a + b)``."""
        combine = {"plus": "a + b", "mul": "a * b", "min": "min(a, b)", "max": "max(a, b)", "and": "a and b",
                   "sqdiff": "(a - b)**2"}[self.combine]
        reduce = {"min": "min", "max": "max", "plus": "sum", "or": "any"}[self.reduce]
        return f"{reduce} over k of ({combine})"


OPS: dict[str, SemiringOp] = {op.name: op for op in (
    SemiringOp("mul-plus", "plus", "mul", "ordinary matrix product (the catalogued unit itself)",
               aliases=("plus-mul", "mma", "gemm")),
    SemiringOp("min-plus", "min", "plus", "all-pairs shortest paths"),
    SemiringOp("max-plus", "max", "plus", "critical (longest) path in a DAG"),
    SemiringOp("min-mul", "min", "mul", "minimum reliability / minimum product path"),
    SemiringOp("max-mul", "max", "mul", "maximum reliability path"),
    SemiringOp("min-max", "min", "max", "minimax path, minimum spanning tree"),
    SemiringOp("max-min", "max", "min", "maximum capacity (widest) path"),
    SemiringOp("or-and", "or", "and", "transitive closure (reachability)"),
    SemiringOp("plus-norm", "plus", "sqdiff", "squared Euclidean distances, k-nearest neighbours",
               aliases=("plus-sqdiff", "l2")),
)}

_BY_NAME: dict[str, SemiringOp] = {}
for _op in OPS.values():
    for _n in (_op.name, *_op.aliases):
        _BY_NAME[_n] = _op


def op_names() -> list[str]:
    """Canonical names of the nine operations, in SIMD2's order."""
    return list(OPS)


def get_op(op: "str | SemiringOp") -> SemiringOp:
    """Look an operation up by name or alias (case-insensitive, ``_`` accepted for ``-``)."""
    if isinstance(op, SemiringOp):
        return op
    if not isinstance(op, str):
        raise TypeError(f"op: expected an operation name such as 'min-plus', got {type(op).__name__}")
    key = op.strip().lower().replace("_", "-")
    if key in _BY_NAME:
        return _BY_NAME[key]
    close = difflib.get_close_matches(key, list(_BY_NAME), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ValueError(f"op: unknown semiring operation {op!r}{hint} (known: {', '.join(OPS)})")
