"""What the probe issues for a catalog name: the PTX instruction, its operand fragments and shapes.

A ``Target`` is derived from the catalog name alone (PTX order,
``<arch>.<op>[.sp].<shape>[.satfinite].<dtype>.<atype>.<btype>[.<ctype>][.<bop>.popc]``),
so any catalogued Hopper entry -- and any legal variant not yet catalogued -- can be
issued on the GPU.  The operand formats come from the catalog when the name is there.

Example:
    >>> t = target("hopper.mma.m16n8k16.f32.bf16.bf16.f32")
    >>> t.ptx
    'mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32'
    >>> t.m, t.n, t.k, t.a.registers, t.b.registers, t.cd.registers
    (16, 8, 16, 4, 2, 4)
    >>> target("hopper.wgmma.m64n8k32.satfinite.s32.s8.u8").ptx
    'wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.u8.satfinite'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import layouts
from .layouts import Fragment, MetadataLayout

__all__ = ["Target", "target", "ELEMENT_BITS"]

# PTX type -> bits per element in a register
ELEMENT_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8,
                "s4": 4, "u4": 4, "b1": 1, "s32": 32}
# PTX type -> tcnumerics format name
FORMAT_NAMES = {"f16": "fp16", "bf16": "bf16", "tf32": "tf32", "f32": "fp32", "e4m3": "e4m3", "e5m2": "e5m2",
                "s8": "s8", "u8": "u8", "s4": "s4", "u4": "u4", "b1": "b1", "s32": "s32"}
_SHAPE = re.compile(r"^m(\d+)n(\d+)k(\d+)$")


@dataclass(frozen=True)
class Target:
    """One instruction as the probe issues it.

    Attributes:
        name: the catalog name; ``kind``: ``"mma"``, ``"mma.sp"`` or ``"wgmma"``.
        ptx: the PTX opcode with every modifier.
        m, n, k: the tile shape (k is the logical K; a sparse A holds k/2 per row).
        atype, btype, ctype, dtype: PTX element types.
        a, b, cd: register fragments (wgmma's B lives in shared memory: ``b`` is None).
        metadata: sparse metadata layout (``mma.sp`` only).
        bop: ``"and"``/``"xor"`` for single-bit ``.popc`` instructions.
    """

    name: str
    kind: str
    ptx: str
    m: int
    n: int
    k: int
    atype: str
    btype: str
    ctype: str
    dtype: str
    a: Fragment
    b: Fragment | None
    cd: Fragment
    c_fragment: Fragment
    metadata: MetadataLayout | None = None
    bop: str | None = None
    satfinite: bool = False

    @property
    def threads(self) -> int:
        return 128 if self.kind == "wgmma" else 32

    @property
    def a_k(self) -> int:
        """Columns of A as stored: k, or k/2 for sparse A."""
        return self.k // 2 if self.kind == "mma.sp" else self.k

    @property
    def sparsity(self):
        """The ``tcnumerics.sparse.Sparsity`` of A (``mma.sp`` only; None otherwise)."""
        if self.kind != "mma.sp":
            return None
        from ..sparse import sparsity_for_format  # lazily: tcnumerics.sparse pulls in the catalog

        return sparsity_for_format(FORMAT_NAMES[self.atype])

    @property
    def vectors_per_tile(self) -> int:
        """Independent dot products one tile yields (operands on the diagonal)."""
        return min(self.m, self.n)

    def formats(self) -> dict[str, str]:
        return {"a_format": FORMAT_NAMES[self.atype], "b_format": FORMAT_NAMES[self.btype],
                "c_format": FORMAT_NAMES[self.ctype], "d_format": FORMAT_NAMES[self.dtype]}


def _cd_bits(t: str) -> int:
    return 16 if t == "f16" else 32


def target(name: str, n: int | None = None) -> Target:
    """The probe target of a catalog name (``n`` overrides wgmma's N, default from the name).

    Raises ValueError naming the part of ``name`` that cannot be issued.
    """
    if not isinstance(name, str):
        raise TypeError(f"name: expected a catalog name, got {type(name).__name__}")
    parts = name.strip().split(".")
    if len(parts) < 6 or parts[0] != "hopper":
        raise ValueError(f"name: the probe issues Hopper instructions 'hopper.<op>.<shape>...', got {name!r}")
    op = parts[1]
    rest = parts[2:]
    sparse = False
    if op == "mma" and rest and rest[0] == "sp":
        sparse, rest = True, rest[1:]
    if op not in ("mma", "wgmma"):
        raise ValueError(f"name: unknown operation {op!r} in {name!r} (mma, mma.sp or wgmma)")
    shape = _SHAPE.match(rest[0]) if rest else None
    if not shape:
        raise ValueError(f"name: expected a shape like m16n8k16 after {op!r} in {name!r}")
    m, n_name, k = (int(v) for v in shape.groups())
    rest = rest[1:]
    satfinite = bool(rest) and rest[0] == "satfinite"
    if satfinite:
        rest = rest[1:]
    bop = None
    if len(rest) >= 2 and rest[-1] == "popc":
        bop, rest = rest[-2], rest[:-2]
        if bop not in ("and", "xor"):
            raise ValueError(f"name: unknown single-bit operation {bop!r}.popc in {name!r}")
    if op == "wgmma":
        if len(rest) != 3:
            raise ValueError(f"name: wgmma names end in .<dtype>.<atype>.<btype>, got {name!r}")
        dtype, atype, btype = rest
        ctype = dtype
    else:
        if len(rest) != 4:
            raise ValueError(f"name: mma names end in .<dtype>.<atype>.<btype>.<ctype>, got {name!r}")
        dtype, atype, btype, ctype = rest
    for t in (dtype, atype, btype, ctype):
        if t not in ELEMENT_BITS:
            raise ValueError(f"name: unknown PTX type {t!r} in {name!r}")
    sat = ".satfinite" if satfinite else ""
    popc = f".{bop}.popc" if bop else ""
    a_bits, b_bits = ELEMENT_BITS[atype], ELEMENT_BITS[btype]
    if op == "wgmma":
        if m != 64:
            raise ValueError(f"name: wgmma has M=64, got m{m} in {name!r}")
        n = n_name if n is None else int(n)
        if not (8 <= n <= 256 and n % 8 == 0):
            raise ValueError(f"n: wgmma N must be a multiple of 8 in 8..256, got {n}")
        ptx = f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.{dtype}.{atype}.{btype}{sat}{popc}"
        cd = layouts.wgmma_cd(n, _cd_bits(dtype))
        return Target(name, "wgmma", ptx, 64, n, k, atype, btype, ctype, dtype,
                      layouts.wgmma_a(k, a_bits), None, cd, cd, None, bop, satfinite)
    if n is not None and int(n) != n_name:
        raise ValueError(f"n: mma shapes fix N={n_name}, got {n}")
    n = n_name
    if n != 8 or m not in (8, 16):
        raise ValueError(f"name: unsupported mma shape m{m}n{n}k{k} in {name!r}")
    spv = ".sp::ordered_metadata" if sparse else ""
    ptx = f"mma{spv}.sync.aligned.m{m}n{n}k{k}.row.col{sat}.{dtype}.{atype}.{btype}.{ctype}{popc}"
    a_k = k // 2 if sparse else k
    cd = layouts.mma_cd(m, _cd_bits(dtype))
    cf = layouts.mma_cd(m, _cd_bits(ctype))
    meta = layouts.sparse_metadata(m, k, elem_bits=a_bits) if sparse else None
    return Target(name, "mma.sp" if sparse else "mma", ptx, m, n, k, atype, btype, ctype, dtype,
                  layouts.mma_a(m, a_k, a_bits), layouts.mma_b(k, b_bits), cd, cf, meta, bop, satfinite)
