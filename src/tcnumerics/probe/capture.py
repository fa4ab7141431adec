"""Capturing golden vectors from the GPU: families in, hardware results out, files written.

``capture_entry`` generates each applicable input family for a catalog entry
(``tcnumerics.vectors.families``), runs the vectors through the probe (one instruction
per vector) and returns them with the hardware's ``d``.  Sparse entries get random legal
positions (2:4, TF32 1:2 or s4/u4 pairwise 4:8, ``tcnumerics.sparse``); the B elements
the metadata does *not* select are filled with zeros in half of the vectors and with
arbitrary bit patterns (NaN and inf included) in the other half, so the captures also
show that unselected elements are never read.

Example (needs a GPU, so not run here):
    >>> import numpy as np                                              # doctest: +SKIP
    >>> from tcnumerics.probe.capture import capture_entry               # doctest: +SKIP
    >>> vs = capture_entry("hopper.mma.m16n8k8.f32.tf32.tf32.f32", 64,   # doctest: +SKIP
    ...                    np.random.default_rng(0))
"""

from __future__ import annotations

import json
import os

import numpy as np

from ..catalog import get_instruction
from ..formats import IntFormat
from .runtime import PROBE_VERSION, Probe, random_sparse_index

__all__ = ["capture_entry", "write_vectors", "file_stem", "subsample"]


def file_stem(name: str) -> str:
    """A file name for an entry: ``hopper.mma.m16n8k16.f32.bf16.bf16.f32`` -> ``mma_m16n8k16_f32_bf16_bf16_f32``."""
    return name.split(".", 1)[1].replace(".", "_").replace(":", "_")


def _filler(rng: np.random.Generator, fmt, shape) -> np.ndarray:
    width = fmt.bits if isinstance(fmt, IntFormat) else fmt.container_bits
    hi = (1 << width) - 1
    return rng.integers(0, hi, size=shape, endpoint=True, dtype=np.uint64).astype(fmt.container_dtype)


def capture_entry(name: str, count: int, rng: np.random.Generator, probe: Probe | None = None,
                  families: list[str] | None = None, device: str = "") -> dict:
    """Capture ``count`` vectors of every applicable family for catalog entry ``name``.

    Returns the arrays of a vector file (``a``, ``b``, ``c``, ``d``, ``family``, sparse:
    ``sparse_index``) plus ``meta``.
    """
    from ..vectors.families import families_for, generate

    spec = get_instruction(name)
    probe = probe or Probe(name)
    t = probe.target
    fams = families or families_for(spec)
    parts: dict[str, list] = {"a": [], "b": [], "c": [], "family": [], "sparse_index": []}
    for fam in fams:
        a, b, c = generate(spec, fam, count, rng)
        if t.kind == "mma.sp":
            from ..sparse import positions

            idx = random_sparse_index(rng, count, t.k, t.sparsity)
            full = np.zeros((count, t.k), dtype=b.dtype)
            noisy = np.arange(count) % 2 == 1
            full[noisy] = _filler(rng, spec.b_format, (int(noisy.sum()), t.k))
            np.put_along_axis(full, positions(idx, t.sparsity), b, axis=1)
            b = full
            parts["sparse_index"].append(idx)
        parts["a"].append(a)
        parts["b"].append(b)
        parts["c"].append(c)
        parts["family"].append(np.full(count, fam))
    out = {k: np.concatenate(v) for k, v in parts.items() if v}
    d = probe.dot(out["a"], out["b"], out["c"], out.get("sparse_index"))
    out["d"] = d.astype(spec.d_format.container_dtype)
    meta = {"instruction": name, "K": int(t.k), **t.formats(), "device": device, "probe": PROBE_VERSION,
            "ptx": t.ptx, "sass": probe.sass_note(), "instruction_note": "single instruction per vector",
            "encoding": "raw bit patterns, little-endian unsigned ints of each format width; tf32 in 32-bit "
                        "containers; s32 two's complement; s4/u4 one value per uint8 (low nibble); b1 one bit "
                        "per uint8"}
    if t.kind == "mma.sp":
        meta["sparse"] = True
        sp = t.sparsity
        meta["sparse_note"] = (f"a is the compressed A [N, K/2]; sparse_index gives each value's position "
                               f"0..{sp.chunk - 1} in its chunk of {sp.chunk} ({sp.name}); unselected b elements "
                               "are zero (even rows) or random bits (odd rows)")
    else:
        out.pop("sparse_index", None)
    out["meta"] = meta
    return out


def subsample(arrays: dict, per_family: int, rng: np.random.Generator, prefer: np.ndarray | None = None) -> dict:
    """At most ``per_family`` vectors of each family (those flagged in ``prefer`` first)."""
    fam = np.asarray(arrays["family"])
    keep = []
    for f in np.unique(fam):
        rows = np.flatnonzero(fam == f)
        rows = rng.permutation(rows)
        if prefer is not None:
            rows = np.concatenate([rows[prefer[rows]], rows[~prefer[rows]]])
        keep.append(np.sort(rows[:per_family]))
    rows = np.concatenate(keep) if keep else np.zeros(0, np.int64)
    return {k: (v[rows] if isinstance(v, np.ndarray) and v.ndim and len(v) == len(fam) else v)
            for k, v in arrays.items()}


def write_vectors(path: str, arrays: dict, overwrite: bool = False) -> None:
    """Write a vector file (validated by ``tcnumerics.vectors.io.save``)."""
    from ..vectors.io import VectorSet, save

    extra = {k: v for k, v in arrays.items() if k not in ("a", "b", "c", "d", "meta")}
    vs = VectorSet(arrays["a"], arrays["b"], arrays["c"], arrays["d"], dict(arrays["meta"]), extra)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    save(path, vs, overwrite=overwrite)


def meta_json(arrays: dict) -> str:
    return json.dumps(arrays["meta"])
