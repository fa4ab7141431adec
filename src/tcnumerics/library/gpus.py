"""GPU models: a kernel *choice* is a statement about one GPU model, cuBLAS and driver; a kernel's numerics are not.

cuBLAS picks its kernel, tile and split-K slice count by heuristics that differ between GPU models of one
architecture: on an H200 the split-K choices of some long-K calls differ from an H100's (issue 23: 11 of 136
training-step GEMMs of five published models), while what a given kernel computes is the same silicon's.  So
the library keys its *measured tables* (launch table, bit table; ``library/gpus.json`` lists them) by the GPU
model as the device reports it, and shares the *structures* (what each kernel family computes) across models.

``model_key`` turns a device name into the key: the measured models' exact device names map to their short key
("NVIDIA H100 80GB HBM3" -> "h100", "NVIDIA H200" -> "h200"); any other name to a lowercase slug ("NVIDIA H100
PCIe" -> "h100-pcie": another SM count, another heuristic -- not the H100 that was measured).  On the CPU, with
no device to ask, the default is ``DEFAULT_GPU`` ("h100").

``coverage(gpu, kind)`` says which models' tables may choose the kernel of a call kind (``Call.kind()``) on
``gpu``: the model's own tables where they measured that kind, then the tables of every model it was *shown to
agree with* on that kind (``agrees_with`` in the manifest: at least ``MIN_AGREEING`` launches measured on both,
none differing in its numerics).  Anything else is not covered: the plan is then built from the reference
model's tables as a best guess and flagged, with a reason that names the GPU and what is missing.

    >>> model_key("NVIDIA H100 80GB HBM3"), model_key("H200"), model_key("NVIDIA A100-SXM4-80GB")
    ('h100', 'h200', 'a100-sxm4-80gb')
    >>> coverage("h100", "matmul|bf16||bf16|0|0|plain|1|||0").covered
    True
    >>> cov = coverage("a100", "matmul|bf16||bf16|0|0|plain|1|||0")
    >>> cov.covered, cov.tables, "a100" in cov.reason
    (False, ('h100',), True)
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache

_DIR = os.path.dirname(__file__)
MANIFEST_PATH = os.path.join(_DIR, "gpus.json")
MIN_AGREEING = 1000  # launches compared before a kind may borrow another model's tables (a measured statement)
ARCHITECTURES = ("hopper",)  # names of an architecture, not of a GPU model (``arch=``)
_MANIFEST: dict | None = None
_EPOCH = [0]  # bumped whenever a manifest or table is replaced (tables_epoch)


@dataclass(frozen=True)
class GpuModel:
    """One GPU model's entry in the manifest: its device names, table files and what they measured."""

    key: str
    device_names: tuple[str, ...]
    launches: str | None  # launch table file (library/), or None
    measured: str | None  # bit table file (library/), or None
    kinds: frozenset[str] | None  # call kinds its own tables measured; None: every kind (the reference model)
    agrees_with: dict = field(default_factory=dict, compare=False)  # other model -> kind -> counts
    provenance: dict = field(default_factory=dict, compare=False)
    sms: int | None = None
    presets: str | None = None  # presets table file (library/), or None

    def measures(self, kind: str) -> bool:
        """Its own tables measured this call kind."""
        return self.kinds is None or kind in self.kinds

    def borrows_from(self, kind: str) -> tuple[str, ...]:
        """The models whose tables this one may use for ``kind``: every measured launch of the kind agreed."""
        out = []
        for other, per_kind in self.agrees_with.items():
            n = per_kind.get(kind) or {}
            compared = int(n.get("compared", 0))
            if compared >= MIN_AGREEING and int(n.get("same_structure", -1)) == compared:
                out.append(other)
        return tuple(out)

    def describe(self) -> str:
        """``'h100' (NVIDIA H100 80GB HBM3)``."""
        return f"{self.key!r} ({self.device_names[0]})" if self.device_names else repr(self.key)


def manifest() -> dict:
    """The manifest (``library/gpus.json``), read once."""
    global _MANIFEST
    if _MANIFEST is None:
        with open(MANIFEST_PATH) as fh:
            _MANIFEST = json.load(fh)
    return _MANIFEST


def set_manifest(m: dict | None) -> None:
    """Use manifest ``m`` instead of the installed one (None: the installed one again); for tools and tests."""
    global _MANIFEST
    if m is not None:
        _check_manifest(m)
    _MANIFEST = m
    model.cache_clear()
    coverage.cache_clear()
    tables_changed()


def tables_changed() -> None:
    """Note that a manifest or a table was replaced (``launches.set_table``, ``measured.set_table`` call it)."""
    _EPOCH[0] += 1


def tables_epoch() -> int:
    """A number that changes whenever the manifest or a table is replaced: a cache of plans keyed by
    ``(call, tables_epoch())`` -- the call holds its GPU model -- is never stale."""
    return _EPOCH[0]


def _check_manifest(m: dict) -> None:
    for k in ("default", "reference", "models"):
        if k not in m:
            raise ValueError(f"GPU manifest: missing {k!r}")
    for k in (m["default"], m["reference"]):
        if k not in m["models"]:
            raise ValueError(f"GPU manifest: {k!r} is named default/reference but has no entry")


def default_gpu() -> str:
    """The GPU model assumed where no device says which (the CPU): the manifest's default, ``'h100'``."""
    return manifest()["default"]


DEFAULT_GPU = manifest()["default"]  # the installed manifest's default (docs); ``default_gpu()`` reads a replaced one


def reference_gpu() -> str:
    """The model whose tables every method was built on (``'h100'``): the best guess where others are silent."""
    return manifest()["reference"]


def model_key(name: str) -> str:
    """The key of a GPU model from a device name (``torch.cuda.get_device_name()``) or a key.

    >>> model_key("nvidia h200"), model_key(" h100 "), model_key("NVIDIA L40S"), model_key("B200")
    ('h200', 'h100', 'l40s', 'b200')
    """
    if not isinstance(name, str):
        raise TypeError(f"gpu: expected a GPU model name (str, e.g. 'h100' or 'NVIDIA H200'), got {type(name).__name__}")
    s = name.strip()
    low = s.lower()
    if low in ARCHITECTURES:
        raise ValueError(f"gpu: {name!r} is an architecture; name a GPU model ('h100', 'h200', or the device's name)")
    for key, entry in manifest()["models"].items():
        if low == key or low in (n.lower() for n in entry.get("device_names", ())):
            return key
    slug = re.sub(r"[^a-z0-9]+", "-", low).strip("-")
    slug = slug[len("nvidia-"):] if slug.startswith("nvidia-") else slug
    if not slug:
        raise ValueError(f"gpu: expected a GPU model name, got {name!r}")
    return slug


def resolve_gpu(arch: str = "hopper", gpu: str | None = None, *, default: str | None = None) -> str:
    """The one normalisation of the GPU model a library call is planned for, from its ``arch=`` and ``gpu=``:
    ``arch`` is the architecture (``"hopper"``) or, as older calls pass it, a GPU model (``"h100"``, ``"h200"``);
    ``gpu`` any model name (``model_key``).  Neither names a model: ``default`` (the manifest's default model).

    >>> resolve_gpu(), resolve_gpu("h200"), resolve_gpu(gpu="NVIDIA H200"), resolve_gpu(gpu="h200", arch="h200")
    ('h100', 'h200', 'h200', 'h200')
    """
    named = arch not in ARCHITECTURES  # an older call's GPU model in arch=: one the manifest has tables for
    if named and arch not in measured_models():
        raise ValueError(f"arch: only {'/'.join(ARCHITECTURES)} library kernels (the cuBLAS of "
                         f"{'/'.join(k.upper() for k in measured_models())}) are modelled, got {arch!r}")
    key = model_key(gpu) if gpu is not None else None
    if named and key is not None and key != arch:
        raise ValueError(f"arch={arch!r} and gpu={gpu!r} name different GPU models; pass one of them")
    return key or (arch if named else (default or default_gpu()))


@lru_cache(maxsize=None)
def model(key: str) -> GpuModel | None:
    """The manifest's entry for a model key, or None (no table measured on that model)."""
    e = manifest()["models"].get(key)
    if e is None:
        return None
    kinds = e.get("kinds", [])
    return GpuModel(key, tuple(e.get("device_names", ())), e.get("launches"), e.get("measured"),
                    None if kinds == "all" else frozenset(kinds), e.get("agrees_with", {}), e.get("provenance", {}),
                    e.get("sms"), e.get("presets"))


def fact(key: str | None, name: str):
    """A per-GPU fact, ``name`` in model ``key``'s manifest entry (default: the default model).  A model the manifest
    does not know, or whose entry lacks it, gets the reference model's (its calls are planned as the reference
    model's anyway, and flagged); a ValueError where neither gives it.

    >>> fact("h200", "sms") == fact("h100", "sms")
    True
    >>> fact("NVIDIA L40S", "clustered_wave") == fact(None, "clustered_wave")   # no entry: the reference model's
    True
    """
    key = model_key(key) if key is not None else default_gpu()
    models = manifest()["models"]
    value = (models.get(key) or {}).get(name)
    if value is None:
        value = models[reference_gpu()].get(name)
    if value is None:
        raise ValueError(f"GPU manifest: neither {key!r} nor the reference model {reference_gpu()!r} gives {name!r}")
    return value


def sms(key: str | None = None) -> int:
    """GPU model ``key``'s streaming multiprocessors (the manifest's ``sms``): the one wave cuBLAS's split-K and
    stream-K choices fill (``fact``: an unknown model gets the reference model's).

    >>> sms("h100"), sms("NVIDIA H200"), sms("l40s") == sms(reference_gpu())
    (132, 132, True)
    """
    return int(fact(key, "sms"))


def clustered_wave(key: str | None = None) -> int:
    """The most CTAs one wave of GPU model ``key`` holds for a kernel launched in clusters of 4 or 8 CTAs (the
    manifest's ``clustered_wave``: fewer than ``sms``, as a cluster's CTAs share one GPC).

    >>> clustered_wave("h100") < sms("h100")
    True
    """
    return int(fact(key, "clustered_wave"))


def wave(key: str | None = None, cluster: int = 1) -> int:
    """The most CTAs one wave of GPU model ``key`` holds for a kernel launched in clusters of ``cluster`` CTAs:
    ``clustered_wave`` for clusters of 4 or 8, else every SM (``sms``).

    >>> wave("h100"), wave("h100", cluster=4)
    (132, 120)
    """
    return clustered_wave(key) if cluster >= 4 else sms(key)


def wave_slices(tiles: int, key: str | None = None, cluster: int = 1) -> int:
    """The most split-K slices of ``tiles`` CTAs each (one per output tile) that one wave of GPU model ``key`` holds
    (``wave``; 0 where the tiles alone fill more): the cap every split-count rule keeps to -- cuBLAS fills at most
    one wave with split-K CTAs (``split_rule``, ``unseen.split_for``, the FP32 guess of ``selection``, the H200
    presets).

    >>> wave_slices(16, "h100"), wave_slices(16, "h100", cluster=4), wave_slices(200, "h100")
    (8, 7, 0)
    """
    return wave(key, cluster) // tiles


def streamk_swizzle(key: str | None = None) -> dict[int, int]:
    """TF32 stream-K on GPU model ``key``: the schedule's base band width per launch CTA count (the manifest's
    ``streamk_swizzle``, from the device probe and the captures; ``library/streamk.py``).

    >>> sorted(streamk_swizzle("h100").values())
    [1, 2, 4]
    """
    return {int(ctas): int(width) for ctas, width in fact(key, "streamk_swizzle").items()}


def streamk_swizzle_doubled(key: str | None = None) -> frozenset[int]:
    """TF32 stream-K on GPU model ``key``: the launch CTA counts at which the band width was seen doubled (the
    manifest's ``streamk_swizzle_doubled``, from the device probe; ``streamk.swizzle_for`` leaves a doubling at any
    other count undetermined).

    >>> sorted(streamk_swizzle_doubled("h100"))
    [120]
    """
    return frozenset(int(ctas) for ctas in fact(key, "streamk_swizzle_doubled"))


def measured_models() -> list[str]:
    """Keys of the models with a table of their own."""
    return [k for k in manifest()["models"] if (m := model(k)) and (m.launches or m.measured)]


def table_path(key: str, which: str) -> str | None:
    """The file of a model's ``which`` table ("launches", "measured" or "presets"), or None where it has none."""
    if which not in ("launches", "measured", "presets"):
        raise ValueError(f"which: expected 'launches', 'measured' or 'presets', got {which!r}")
    m = model(key)
    name = getattr(m, which) if m else None
    return os.path.join(_DIR, name) if name else None


@dataclass(frozen=True)
class Coverage:
    """Which models' tables choose a call kind's kernel on ``gpu``, and whether that is a measured statement.

    ``tables``: model keys consulted in order (a measured launch of the first that has one wins); ``covered``:
    False where none of them is ``gpu`` or shown to agree with it -- the plan is then a guess from the reference
    model's tables, flagged with ``reason``."""

    gpu: str
    kind: str
    tables: tuple[str, ...]
    covered: bool
    reason: str = ""


@lru_cache(maxsize=4096)
def coverage(gpu: str, kind: str) -> Coverage:
    """The tables that may choose ``kind``'s kernel on ``gpu`` (a model key), and why not where none may."""
    m = model(gpu)
    ref = reference_gpu()
    if m is not None:
        tables = ((gpu,) if m.measures(kind) and (m.launches or m.measured) else ()) + m.borrows_from(kind)
        if tables:
            return Coverage(gpu, kind, tables, True)
    guess = f"the kernel choice below is the {ref}'s, a guess never verified on {gpu!r}"
    if m is None:
        have = ", ".join(model(k).describe() for k in measured_models())
        why = f"gpu {gpu!r}: no table measured on this GPU model (measured: {have})"
    elif not (m.launches or m.measured):
        why = f"gpu {m.describe()}: no table measured on it yet ({m.provenance.get('status', 'no table')})"
    else:
        n = "every" if m.kinds is None else str(len(m.kinds))
        agreed = ", ".join(m.agrees_with) or "no other model"
        why = (f"gpu {m.describe()}: call kind {kind} was neither measured on it (its tables measured {n} call kinds) "
               f"nor shown to agree with {agreed} on it")
    return Coverage(gpu, kind, (ref,), False, f"{why}; {guess}")


def selection_provenance(key: str) -> str:
    """Where the tables that plan a call from model ``key``'s own measurements come from, as a plan's reason says it:
    the manifest's ``provenance.selection`` line where it gives one, else ``provenance_line``.

    >>> selection_provenance("h100").startswith("NVIDIA H100 (sm_90)")
    True
    >>> selection_provenance("h200") == provenance_line("h200")   # no line of its own
    True
    """
    m = model(key)
    return (m.provenance.get("selection") if m else None) or provenance_line(key)


def launch_survey(key: str) -> str | None:
    """The manifest's ``provenance.launch_survey`` line of model ``key`` (the survey its own launches come from, as a
    plan built from one of them quotes it), or None where it gives none."""
    m = model(key)
    return m.provenance.get("launch_survey") if m else None


def provenance_line(key: str) -> str:
    """One line of where a model's tables come from.

    >>> provenance_line("h100")
    'NVIDIA H100 80GB HBM3 (SXM5, 132 SMs), torch 2.11.0+cu130, CUDA 13.0, cuBLAS 13.1.0.3, driver 580.159.04'
    """
    m = model(key)
    if m is None:
        return f"{key}: no measured table"
    p = m.provenance
    parts = [p.get("device", m.device_names[0] if m.device_names else key)]
    parts += [f"{name} {p[k]}" for k, name in (("torch", "torch"), ("cuda", "CUDA"), ("cublas", "cuBLAS"),
                                               ("driver", "driver")) if k in p]
    return ", ".join(parts)
