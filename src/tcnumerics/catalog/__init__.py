"""The instruction catalog: real instructions as rows of data built from the unit model.

Names follow PTX order: ``<arch>.<op>.<shape>[.satfinite].<dtype>.<atype>.<btype>[.<ctype>]``
(AMD entries use AMD's own suffix).  Hopper ``wgmma`` accepts any legal N: the numerics do
not depend on it, so ``hopper.wgmma.m64n256k16.f32.bf16.bf16`` resolves to the same
entry as ``...m64n8k16...``.

Example:
    >>> from tcnumerics.catalog import get_instruction, instruction_names
    >>> spec = get_instruction("hopper.wgmma.m64n128k32.f32.e4m3.e5m2")
    >>> spec.k, spec.model.frac_bits, spec.model.output_mantissa_bits
    (32, 13, 13)
"""

from __future__ import annotations

import difflib
import re

from ..model import InstructionSpec

__all__ = ["register", "get_instruction", "instruction_names", "all_instructions"]

_REGISTRY: dict[str, InstructionSpec] = {}
_WGMMA_N = re.compile(r"^(?P<arch>[\w-]+)\.wgmma\.m64n(?P<n>\d+)k(?P<k>\d+)\.(?P<rest>.+)$")


def register(spec: InstructionSpec, replace: bool = False) -> InstructionSpec:
    """Add an instruction to the catalog (names are unique)."""
    if spec.name in _REGISTRY and not replace:
        raise ValueError(f"instruction {spec.name!r} is already catalogued")
    _REGISTRY[spec.name] = spec
    return spec


# one module per architecture family; each registers its entries on import
ARCH_MODULES = ("hopper", "ampere", "volta", "turing", "ada", "blackwell", "cdna", "integer", "sparse", "contrast",
                "toolchain", "verified")


def _load() -> None:
    if _REGISTRY:
        return
    import importlib
    import importlib.util

    for module in ARCH_MODULES:
        if importlib.util.find_spec(f"{__name__}.{module}") is not None:
            importlib.import_module(f"{__name__}.{module}")


def natural_key(name: str) -> list:
    """Sort key that orders the numbers inside a name numerically, so shapes list k8 < k16 < k128.

    >>> sorted(["mma.m16n8k128", "mma.m16n8k16", "mma.m16n8k8"], key=natural_key)
    ['mma.m16n8k8', 'mma.m16n8k16', 'mma.m16n8k128']
    """
    # re.split with a group alternates text and digit runs, so equal positions always compare like with like
    return [int(part) if i % 2 else part for i, part in enumerate(re.split(r"(\d+)", name))]


def instruction_names(arch: str | None = None) -> list[str]:
    """Every catalogued instruction name (optionally of one architecture), numbers in numeric order.

    >>> [n for n in instruction_names("hopper") if n.startswith("hopper.mma.m8n8k")][-3:]
    ['hopper.mma.m8n8k32.satfinite.s32.u4.u4.s32', 'hopper.mma.m8n8k128.s32.b1.b1.s32.and.popc', 'hopper.mma.m8n8k128.s32.b1.b1.s32.xor.popc']
    """
    _load()
    names = sorted((n for n in _REGISTRY if arch is None or n.split(".", 1)[0] == arch), key=natural_key)
    if arch is not None and not names:
        known = sorted({n.split(".", 1)[0] for n in _REGISTRY})
        raise ValueError(f"arch: unknown architecture {arch!r} (known: {', '.join(known)})")
    return names


def all_instructions() -> list[InstructionSpec]:
    _load()
    return [_REGISTRY[n] for n in sorted(_REGISTRY, key=natural_key)]


def get_instruction(name: "str | InstructionSpec") -> InstructionSpec:
    """Look an instruction up by catalog name; wgmma names may use any legal N.

    Unknown names raise ValueError naming the closest catalogued ones.
    """
    if isinstance(name, InstructionSpec):
        return name
    if not isinstance(name, str):
        raise TypeError(f"instruction: expected a catalog name, got {type(name).__name__}")
    _load()
    key = name.strip()
    if key in _REGISTRY:
        return _REGISTRY[key]
    m = _WGMMA_N.match(key)
    if m:
        n = int(m["n"])
        canonical = f"{m['arch']}.wgmma.m64n8k{m['k']}.{m['rest']}"
        if canonical in _REGISTRY:
            if not (8 <= n <= 256 and n % 8 == 0):
                raise ValueError(f"instruction: wgmma N must be a multiple of 8 in 8..256, got {n} in {name!r}")
            return _REGISTRY[canonical]
    close = difflib.get_close_matches(key, list(_REGISTRY), n=3, cutoff=0.5)
    hint = f"; closest: {', '.join(close)}" if close else ""
    raise ValueError(f"instruction: unknown name {name!r}{hint} (tcnumerics.instructions() lists all)")
