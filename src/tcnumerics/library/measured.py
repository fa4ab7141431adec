"""The bit tables: per GPU model, the structure identified for every bit-captured call kind.

``lab/device_library/fit_table.py`` identifies, for each call a bit capture ran on a device, the structure that
reproduces every sampled output bit, and writes one entry per call kind and shape (``Call.key()`` -> family,
kernel, split, verified, ...), plus the *no-split frontier* (the (output tiles, K) points of measured unsplit and
split calls, per class).  The H100's table is ``h100_measured.json`` (``library/gpus.json`` names each model's).
A kernel's *structure* is the silicon's, but which kernel and split a call gets is the model's: a call reads the
tables of the models ``gpus.coverage`` lists for it, the call's own first.

    >>> from tcnumerics.library.calls import Call
    >>> e = entry(Call("addmm", "bf16", "bf16", 1000, 32000, 8192, c_kind="row", beta=1.0))
    >>> e["verified"], e["kernel"][:14]
    (True, 'nvjet_sm90_tst')
"""

from __future__ import annotations

import json
import os

from . import gpus
from .calls import Call

_TABLES: dict[str, dict] = {}  # model key -> its bit table
_MERGED: dict[tuple[str, ...], dict] = {}  # sources -> their calls merged (kept: split_rule caches by identity)
CLASSES = ("half", "fp8", "tf32", "fp32")


def _empty() -> dict:
    return {"calls": {}, "frontier": {}}


def measured_table(gpu: str | None = None) -> dict:
    """Model ``gpu``'s bit table (default: the default model's); an empty one where it has none."""
    gpu = gpu or gpus.default_gpu()
    if gpu not in _TABLES:
        path = gpus.table_path(gpu, "measured")
        if path and os.path.exists(path):
            with open(path) as fh:
                _TABLES[gpu] = json.load(fh)
        else:  # no table: nothing measured, every prediction flagged
            _TABLES[gpu] = _empty()
    return _TABLES[gpu]


def set_table(gpu: str, t: dict | str | None) -> None:
    """Use ``t`` as model ``gpu``'s bit table: a table, a JSON file's path, or None (the installed one again)."""
    _TABLES.pop(gpu, None)
    _MERGED.clear()
    if isinstance(t, str):
        with open(t) as fh:
            t = json.load(fh)
    if t is not None:
        if not isinstance(t, dict) or "calls" not in t:
            raise ValueError("bit table: expected a dict with 'calls' (and 'frontier'), as fit_table.py writes")
        _TABLES[gpu] = t
    gpus.tables_changed()


def sources(c: Call) -> tuple[str, ...]:
    """The models whose bit tables answer ``c`` (``gpus.coverage``), in order."""
    return gpus.coverage(c.gpu, c.kind()).tables


def entry(c: Call) -> dict | None:
    """The bit table entry of ``c``'s call kind and shape: the first of its sources that measured it, or None."""
    key = c.key()
    for g in sources(c):
        e = measured_table(g)["calls"].get(key)
        if e is not None:
            return e
    return None


def calls_for(c: Call) -> dict:
    """Every measured entry ``c``'s sources hold (one dict, the first source's entry winning a shared key)."""
    src = sources(c)
    if len(src) == 1:
        return measured_table(src[0])["calls"]
    if src not in _MERGED:
        merged: dict = {}
        for g in reversed(src):
            merged.update(measured_table(g)["calls"])
        _MERGED[src] = merged
    return _MERGED[src]


def frontier(c: Call, cls: str) -> dict:
    """The no-split frontier points of class ``cls`` over ``c``'s sources: {"plain": [(tiles, K)], "other": [...]}."""
    if cls not in CLASSES:
        raise ValueError(f"cls: expected one of {', '.join(CLASSES)}, got {cls!r}")
    src = sources(c)
    if len(src) == 1:
        return measured_table(src[0])["frontier"].get(cls, {"plain": [], "other": []})
    out: dict = {"plain": [], "other": []}
    for g in src:
        fr = measured_table(g)["frontier"].get(cls, {})
        out["plain"] += fr.get("plain", [])
        out["other"] += fr.get("other", [])
    return out
