"""Replay vector files through their instruction and count mismatches (per file, per family).

Sparse files replay with their ``sparse_index``, block-scaled ones with their ``scale_a``
and ``scale_b`` (so a corrupted scale shows as a mismatch like a corrupted ``d``).

Example:
    >>> import glob, os
    >>> from tcnumerics.vectors.verify import verify_file
    >>> sample = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..",
    ...                                        "shared", "hw-vectors", "wg_bf16_f32.npz")))
    >>> [verify_file(p).mismatches for p in sample] in ([0], [])
    True
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from .families import expected_d
from .io import VectorReader, is_hex_file, read_hex

__all__ = ["FileReport", "Mismatch", "verify_file"]


@dataclass
class Mismatch:
    """One vector whose recorded d differs from the model's."""

    index: int
    family: str
    recorded: int
    model: int


@dataclass
class FileReport:
    """What replaying one file found."""

    path: str
    instruction: str
    n: int
    K: int
    mismatches: int = 0
    families: dict = field(default_factory=dict)  # family -> [mismatches, total]
    first: list = field(default_factory=list)  # up to ``keep`` Mismatch records

    @property
    def ok(self) -> bool:
        return self.mismatches == 0

    def summary(self) -> str:
        """One line: the file, its instruction and size, and the verdict with per-family counts."""
        head = f"{self.path}: {self.instruction}, {self.n} vectors, K={self.K}"
        fams = ", ".join(f"{f} {m}/{t}" for f, (m, t) in self.families.items())
        if self.ok:
            return f"{head}: all match ({fams})" if fams else f"{head}: all match"
        return f"{head}: {self.mismatches} MISMATCH ({fams})"


def verify_file(path: "str | os.PathLike", *, engine: str = "auto", rows: int = 1 << 15, keep: int = 5) -> FileReport:
    """Replay every vector of a file (``.npz`` or hex) in chunks of ``rows``; count mismatches.

    Raises ``VectorFileError`` for a file that cannot be used.
    """
    path = os.fspath(path)
    if is_hex_file(path):
        vs = read_hex(path)
        meta, spec_name, n = vs.meta, vs.instruction, vs.n
        chunks = _memory_chunks(vs.arrays(), n, rows)
        return _replay(path, meta, spec_name, n, chunks, engine, keep)
    with VectorReader(path) as reader:
        return _replay(path, reader.meta, reader.spec.name, reader.n, reader.chunks(rows), engine, keep)


def _memory_chunks(arrays: dict, n: int, rows: int):
    for s in range(0, n, rows):
        yield {k: v[s:s + rows] for k, v in arrays.items() if np.ndim(v) and len(v) == n}


def _replay(path, meta, spec_name, n, chunks, engine, keep) -> FileReport:
    report = FileReport(path, meta["instruction"], n, int(meta["K"]))
    sparse = bool(meta.get("sparse"))
    scaled = bool(meta.get("block_scaled"))  # the readers have checked both scale keys are there
    families: dict[str, list] = {}
    start = 0
    for chunk in chunks:
        count = len(chunk["c"])
        with np.errstate(all="ignore"):
            model = expected_d(meta["instruction"], chunk["a"], chunk["b"], chunk["c"],
                               sparse_index=chunk.get("sparse_index") if sparse else None,
                               scale_a=chunk["scale_a"] if scaled else None,
                               scale_b=chunk["scale_b"] if scaled else None, engine=engine)
        bad = model != chunk["d"]
        fam = chunk.get("family")
        fam = np.full(count, "-") if fam is None else np.asarray(fam).astype(str)
        names, inverse = np.unique(fam, return_inverse=True)
        totals = np.bincount(inverse, minlength=len(names))
        wrong = np.bincount(inverse, weights=bad, minlength=len(names)).astype(int)
        for name, t, w in zip(names, totals, wrong):
            acc = families.setdefault(str(name), [0, 0])
            acc[0] += int(w)
            acc[1] += int(t)
        idx = np.flatnonzero(bad)
        report.mismatches += int(idx.size)
        for i in idx[:max(0, keep - len(report.first))]:
            report.first.append(Mismatch(start + int(i), str(fam[i]), int(chunk["d"][i]), int(model[i])))
        start += count
    if set(families) != {"-"}:
        report.families = families
    return report
