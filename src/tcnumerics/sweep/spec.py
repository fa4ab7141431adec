"""Sweep specifications: a TOML (or JSON) file parsed and validated into a ``SweepSpec``.

A spec names the units (catalog entries, optionally modified by a grid over ``UnitModel`` /
``InstructionSpec`` fields), the workloads (each with fixed parameters and a grid), the
number of seeds per cell and the base seed.  Every problem raises ``SpecError`` whose
message is one line starting with the dotted path of the offending field.

Example:
    >>> spec = parse_spec({"sweep": {"name": "demo", "seeds": 2},
    ...                    "units": {"base": "hopper.wgmma.m64n8k16.f32.bf16.bf16", "grid": {"frac_bits": [13, 25]}},
    ...                    "workloads": [{"kind": "gemm_error", "M": 8, "N": 8, "K": 64}]})
    >>> spec.name, spec.seeds, spec.units.grid
    ('demo', 2, {'frac_bits': [13, 25]})
    >>> parse_spec({"sweep": {"seeds": 0}, "units": {"entries": ["x"]}, "workloads": []})
    Traceback (most recent call last):
    ...
    tcnumerics.sweep.errors.SpecError: sweep.seeds: expected a positive integer, got 0
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any

from .errors import SpecError

__all__ = ["SpecError", "SweepSpec", "UnitsSpec", "WorkloadSpec", "load_spec", "parse_spec"]

_SCALAR = (str, int, float, bool)


@dataclass(frozen=True)
class UnitsSpec:
    """The unit axis: catalog ``entries`` (or one ``base``), fixed ``set`` overrides and a ``grid``."""

    entries: tuple[str, ...]
    set: dict = field(default_factory=dict)
    grid: dict = field(default_factory=dict)


@dataclass(frozen=True)
class WorkloadSpec:
    """One workload: its ``kind``, fixed ``params`` and a ``grid`` of parameter lists."""

    kind: str
    params: dict = field(default_factory=dict)
    grid: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SweepSpec:
    """A whole sweep; ``digest`` identifies it (the resumable store refuses a different spec)."""

    name: str
    seeds: int
    seed: int
    units: UnitsSpec
    workloads: tuple[WorkloadSpec, ...]
    source: dict = field(default_factory=dict, compare=False)
    engine: str = "auto"  # where the arithmetic runs; every engine gives the same bits, so not part of the digest

    @property
    def digest(self) -> str:
        sweep = {k: v for k, v in self.source.get("sweep", {}).items() if k != "engine"}
        text = json.dumps({**self.source, "sweep": sweep}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_spec(path: "str | os.PathLike") -> SweepSpec:
    """Read a ``.toml`` or ``.json`` spec file (SpecError for a missing or unparsable file)."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the spec ({exc.strerror or exc})") from None
    if path.endswith(".json"):
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise SpecError(f"{path}: not valid JSON ({exc})") from None
    else:
        toml = _toml()
        try:
            data = toml.loads(raw.decode("utf-8"))
        except (toml.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise SpecError(f"{path}: not valid TOML ({exc})") from None
    return parse_spec(data)


def _toml():
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib
        except ImportError:
            raise SpecError("reading TOML specs on Python 3.10 needs tomli (pip install tomli), or use JSON") from None
    return tomllib


def parse_spec(data: Any) -> SweepSpec:
    """Validate a spec dictionary (the parsed TOML/JSON) into a ``SweepSpec``."""
    _table("spec", data, {"sweep", "units", "workloads"})
    sweep = data.get("sweep", {})
    _table("sweep", sweep, {"name", "seeds", "seed", "engine"})
    name = sweep.get("name", "sweep")
    if not isinstance(name, str) or not name:
        raise SpecError(f"sweep.name: expected a non-empty string, got {name!r}")
    seeds = _int("sweep.seeds", sweep.get("seeds", 1), minimum=1)
    seed = _int("sweep.seed", sweep.get("seed", 0), minimum=0)
    if "units" not in data:
        raise SpecError("units: missing (give units.entries or units.base)")
    units = _units(data["units"])
    raw_workloads = data.get("workloads")
    if not isinstance(raw_workloads, list) or not raw_workloads:
        raise SpecError("workloads: expected a non-empty list of tables ([[workloads]] in TOML)")
    workloads = tuple(_workload(f"workloads[{i}]", w) for i, w in enumerate(raw_workloads))
    engine = sweep.get("engine", "auto")
    spec = SweepSpec(name, seeds, seed, units, workloads, source=data, engine=engine)
    check_engine("sweep.engine", spec, engine)
    return spec


def check_engine(where: str, spec: SweepSpec, engine: str) -> None:
    """SpecError unless ``engine`` names an engine every workload of ``spec`` can run on."""
    from ..engines import ENGINES
    from .workloads import WORKLOADS

    if engine not in ENGINES:
        raise SpecError(f"{where}: expected one of {', '.join(ENGINES)}, got {engine!r}")
    for i, w in enumerate(spec.workloads):
        if engine == "cuda" and not WORKLOADS[w.kind].on_gpu:
            raise SpecError(f"{where}: workloads[{i}] ({w.kind}) runs on the CPU engines only; engine 'cuda' "
                            "serves gemm_error and model_eval")


def _units(raw) -> UnitsSpec:
    from .units import check_fields

    _table("units", raw, {"base", "entries", "set", "grid"})
    if ("base" in raw) == ("entries" in raw):
        raise SpecError("units: give exactly one of units.base (a catalog entry) or units.entries (a list)")
    if "base" in raw:
        if not isinstance(raw["base"], str):
            raise SpecError(f"units.base: expected a catalog entry name, got {raw['base']!r}")
        entries = (raw["base"],)
    else:
        entries = raw["entries"]
        if not isinstance(entries, list) or not entries or not all(isinstance(e, str) for e in entries):
            raise SpecError("units.entries: expected a non-empty list of catalog entry names")
        if len(set(entries)) != len(entries):
            raise SpecError("units.entries: an entry is listed twice")
        entries = tuple(entries)
    from ..catalog import get_instruction

    for i, e in enumerate(entries):
        try:
            get_instruction(e)
        except (ValueError, TypeError) as exc:
            where = "units.base" if "base" in raw else f"units.entries[{i}]"
            raise SpecError(f"{where}: {exc}") from None
    fixed = raw.get("set", {})
    _table("units.set", fixed, None)
    for key, value in fixed.items():
        _scalar(f"units.set.{key}", value)
    grid = _grid("units.grid", raw.get("grid", {}))
    overlap = set(fixed) & set(grid)
    if overlap:
        raise SpecError(f"units.grid.{sorted(overlap)[0]}: also fixed in units.set")
    check_fields("units.set", fixed)
    check_fields("units.grid", grid)
    return UnitsSpec(entries, dict(fixed), grid)


def _workload(where: str, raw) -> WorkloadSpec:
    from .workloads import WORKLOADS

    if not isinstance(raw, dict):
        raise SpecError(f"{where}: expected a table, got {type(raw).__name__}")
    kind = raw.get("kind")
    if kind not in WORKLOADS:
        raise SpecError(f"{where}.kind: expected one of {', '.join(WORKLOADS)}, got {kind!r}")
    params = {k: v for k, v in raw.items() if k not in ("kind", "grid")}
    for key, value in params.items():
        _scalar(f"{where}.{key}", value)
    grid = _grid(f"{where}.grid", raw.get("grid", {}))
    overlap = set(params) & set(grid)
    if overlap:
        raise SpecError(f"{where}.grid.{sorted(overlap)[0]}: also given as a fixed parameter")
    WORKLOADS[kind].check(where, params, grid)
    return WorkloadSpec(kind, params, grid)


def _table(where: str, raw, allowed: "set | None") -> None:
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: expected a table, got {type(raw).__name__}")
    if allowed is not None:
        unknown = sorted(set(raw) - allowed)
        if unknown:
            raise SpecError(f"{where}.{unknown[0]}: unknown key (expected some of {', '.join(sorted(allowed))})")


def _grid(where: str, raw) -> dict:
    _table(where, raw, None)
    for key, values in raw.items():
        if not isinstance(values, list) or not values:
            raise SpecError(f"{where}.{key}: expected a non-empty list of values, got {values!r}")
        for i, v in enumerate(values):
            _scalar(f"{where}.{key}[{i}]", v)
        if len({json.dumps(v) for v in values}) != len(values):
            raise SpecError(f"{where}.{key}: a value is listed twice")
    return {k: list(v) for k, v in raw.items()}


def _scalar(where: str, value) -> None:
    if not isinstance(value, _SCALAR):
        raise SpecError(f"{where}: expected a string, number or boolean, got {type(value).__name__}")


def _int(where: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        bound = "a positive" if minimum == 1 else "a non-negative"
        raise SpecError(f"{where}: expected {bound} integer, got {value!r}")
    return value
