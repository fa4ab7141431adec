"""Grid expansion: a ``SweepSpec`` becomes an ordered list of independent ``Task`` s.

Order: units (entries, then their grid in the spec's key order), then workloads (each
with its grid), then seeds.  A task's seed is derived from the spec's base seed, the
workload's parameters and the seed index -- never from the task's position or from the
unit -- so every unit of a cell sees the same operands (common random numbers) and a
result never depends on how many workers ran or in which order.

Example:
    >>> from tcnumerics.sweep.spec import parse_spec
    >>> spec = parse_spec({"sweep": {"seeds": 2},
    ...                    "units": {"base": "hopper.wgmma.m64n8k16.f32.bf16.bf16", "grid": {"frac_bits": [13, 25]}},
    ...                    "workloads": [{"kind": "gemm_error", "M": 8, "N": 8, "K": 64}]})
    >>> tasks = expand(spec)
    >>> len(tasks), tasks[0].unit_params, tasks[0].seed == tasks[2].seed, tasks[0].seed == tasks[1].seed
    (4, {'frac_bits': 13}, True, False)
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass

from .spec import SpecError, SweepSpec
from .units import build_unit, unit_label

__all__ = ["Task", "expand", "derive_seed"]


@dataclass(frozen=True)
class Task:
    """One (unit, workload, seed) cell; plain data, so it travels to any worker."""

    index: int
    entry: str
    unit_params: dict
    workload: str
    params: dict
    seed_index: int
    seed: int

    @property
    def task_id(self) -> str:
        """A stable identifier of the cell's content (not of its position)."""
        return _digest({"entry": self.entry, "unit": self.unit_params, "workload": self.workload,
                        "params": self.params, "seed_index": self.seed_index, "seed": self.seed})

    @property
    def unit(self) -> str:
        return unit_label(self.entry, self.unit_params)


def derive_seed(base: int, workload: str, params: dict, seed_index: int) -> int:
    """A 63-bit seed from the spec's seed, the workload and its parameters, and the seed index.

    >>> derive_seed(0, "gemm_error", {"K": 64}, 0) == derive_seed(0, "gemm_error", {"K": 64}, 0)
    True
    """
    return int(_digest({"base": base, "workload": workload, "params": params, "i": seed_index}), 16) >> 1


def _digest(obj) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _combinations(grid: dict) -> list[dict]:
    keys = list(grid)
    return [dict(zip(keys, values)) for values in itertools.product(*(grid[k] for k in keys))]


def expand(spec: SweepSpec) -> list[Task]:
    """Every task of the sweep, in table order; every unit is built once here (SpecError if it cannot be)."""
    units = []
    for entry in spec.units.entries:
        for combo in _combinations(spec.units.grid):
            overrides = {**spec.units.set, **combo}
            try:
                build_unit(entry, overrides)
            except (ValueError, TypeError) as exc:
                raise SpecError(_unit_error(spec, entry, overrides, exc)) from None
            units.append((entry, overrides))
    cells = []
    for w in spec.workloads:
        for combo in _combinations(w.grid):
            cells.append((w.kind, {**w.params, **combo}))
    tasks = []
    for (entry, overrides), (kind, params) in itertools.product(units, cells):
        for s in range(spec.seeds):
            tasks.append(Task(len(tasks), entry, overrides, kind, params, s, derive_seed(spec.seed, kind, params, s)))
    return tasks


def _unit_error(spec: SweepSpec, entry: str, overrides: dict, exc: Exception) -> str:
    """Name the field: the first override that fails on its own, else the combination."""
    text = " ".join(str(exc).split())
    for key, value in overrides.items():
        try:
            build_unit(entry, {key: value})
        except (ValueError, TypeError) as single:
            section = "units.set" if key in spec.units.set else "units.grid"
            detail = " ".join(str(single).split())
            detail = detail[len(key) + 2:] if detail.startswith(key + ": ") else detail
            return f"{section}.{key}: {detail} (value {value!r}, unit {entry})"
    return f"units: {text} (unit {unit_label(entry, overrides)})"
