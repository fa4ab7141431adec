"""Units of a sweep: a catalog entry with some ``UnitModel`` / ``InstructionSpec`` fields changed.

``build_unit(entry, overrides)`` returns an ``InstructionSpec`` named after the entry and
its overrides.  When ``group_size`` changes and ``k`` is not given, the instruction's K
becomes the least common multiple of the entry's K and the group size, so that every
instruction holds whole groups.  Integer fields that may be None take the string
``"none"`` (TOML has no null).

Example:
    >>> spec = build_unit("hopper.wgmma.m64n8k16.f32.bf16.bf16", {"group_size": 32, "frac_bits": 13})
    >>> spec.k, spec.model.group_size, spec.model.frac_bits
    (32, 32, 13)
    >>> spec.name
    'hopper.wgmma.m64n8k16.f32.bf16.bf16[group_size=32,frac_bits=13]'
"""

from __future__ import annotations

import dataclasses
import math

from ..catalog import get_instruction
from ..model import InstructionSpec, UnitModel
from .errors import SpecError

__all__ = ["MODEL_FIELDS", "INSTRUCTION_FIELDS", "build_unit", "unit_label", "check_fields"]

MODEL_FIELDS = tuple(f.name for f in dataclasses.fields(UnitModel))
INSTRUCTION_FIELDS = ("k", "chunk", "c_entry", "c_add_rounding")
_NULLABLE = {"frac_bits", "zero_exponent", "output_mantissa_bits", "nan_bits", "chunk", "bit_op", "scale_block",
             "scale_format"}


def check_fields(where: str, fields: dict) -> None:
    """Refuse names that are neither UnitModel nor InstructionSpec fields (SpecError naming the field)."""
    for name in fields:
        if name not in MODEL_FIELDS and name not in INSTRUCTION_FIELDS:
            raise SpecError(f"{where}.{name}: not a UnitModel or InstructionSpec field (UnitModel: "
                            f"{', '.join(MODEL_FIELDS)}; InstructionSpec: {', '.join(INSTRUCTION_FIELDS)})")


def unit_label(entry: str, overrides: dict) -> str:
    """The entry's name with its overrides in brackets (the entry itself when there are none)."""
    if not overrides:
        return entry
    return f"{entry}[{','.join(f'{k}={v}' for k, v in overrides.items())}]"


def build_unit(entry: str, overrides: dict) -> InstructionSpec:
    """The catalog entry ``entry`` with ``overrides`` applied (ValueError/TypeError name the field)."""
    base = get_instruction(entry)
    values = {k: (None if k in _NULLABLE and v == "none" else v) for k, v in overrides.items()}
    model_changes = {k: v for k, v in values.items() if k in MODEL_FIELDS}
    spec_changes = {k: v for k, v in values.items() if k in INSTRUCTION_FIELDS}
    model = base.model.with_(**model_changes) if model_changes else base.model
    if "k" not in spec_changes and model.group_size != base.model.group_size:
        spec_changes["k"] = math.lcm(base.k, model.group_size)
    if spec_changes.get("k", base.k) != base.k and (base.k_order is not None or base.chunk is not None):
        raise ValueError(f"k: {base.name} feeds its K in a fixed order or chunks; its K cannot change")
    fmt_changes = {}
    for name in ("a_format", "b_format", "c_format"):  # the instruction takes what its datapath takes
        if name in model_changes:
            fmt_changes[name] = getattr(model, name)
    return dataclasses.replace(base, name=unit_label(base.name, overrides), model=model, **fmt_changes,
                               **spec_changes)
