"""Fragment layouts: which matrix element each thread's register bits hold.

A matrix instruction reads its operands from the registers of a whole warp (``mma``) or
warpgroup (``wgmma``).  A ``Fragment`` records, for every thread, register and sub-word
slot, the (row, column) of the matrix element found there, so that tiles can be packed
into register images on the host and the results unpacked again.  The kernels
themselves only load words, issue the instruction and store words: every layout fact
lives here, as data, and is checked on exact integer inputs on the GPU before any
capture is trusted (``tcnumerics.probe.runtime.self_check``).

Conventions (PTX ISA, "Matrix fragments for mma.m16n8k*"): ``group = lane >> 2``,
``tig = lane % 4`` (thread in group).  A is [M, K] row-major, B is held as [N, K]
(column-major K x N), C/D are [M, N].  Sub-word slot ``s`` of a register occupies bits
``[s*w, (s+1)*w)``, lowest K first.

Example:
    >>> import numpy as np
    >>> frag = mma_a(m=16, k=16, elem_bits=16)          # mma.m16n8k16 f16 A
    >>> frag.coords.shape                                # lanes, registers, halves, (row, k)
    (32, 4, 2, 2)
    >>> tuple(int(v) for v in frag.coords[5, 2, 1])      # lane 5 = group 1, tig 1; a5
    (1, 11)
    >>> tiles = np.arange(16 * 16, dtype=np.uint32).reshape(1, 16, 16)
    >>> bool((frag.unpack(frag.pack(tiles), (16, 16)) == tiles).all())
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Fragment", "MetadataLayout", "CHUNK_ELEMENTS", "mma_a", "mma_b", "mma_cd", "wgmma_a", "wgmma_cd",
           "wgmma_b_image", "sparse_metadata", "pack_metadata"]


@dataclass(frozen=True)
class Fragment:
    """Register slots of one operand across the threads of a warp or warpgroup.

    Attributes:
        coords: int array [threads, registers, slots, 2] of (row, column) per slot.
        elem_bits: bits each element occupies in a register (32 // slots).
    """

    coords: np.ndarray
    elem_bits: int

    @property
    def threads(self) -> int:
        return self.coords.shape[0]

    @property
    def registers(self) -> int:
        return self.coords.shape[1]

    def pack(self, tiles: np.ndarray) -> np.ndarray:
        """[T, rows, cols] element bits -> [T, threads, registers] uint32 register images."""
        tiles = np.asarray(tiles)
        if tiles.ndim != 3:
            raise ValueError(f"tiles: expected [T, rows, cols], got shape {tiles.shape}")
        mask = np.uint64((1 << self.elem_bits) - 1)
        vals = tiles[:, self.coords[..., 0], self.coords[..., 1]].astype(np.uint64) & mask
        shifts = (np.arange(self.coords.shape[2], dtype=np.uint64) * np.uint64(self.elem_bits))
        return (vals << shifts).sum(axis=-1, dtype=np.uint64).astype(np.uint32)

    def unpack(self, regs: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
        """[T, threads, registers] uint32 -> [T, rows, cols] element bits (uint32)."""
        regs = np.asarray(regs, dtype=np.uint64)
        if regs.ndim != 3 or regs.shape[1:] != self.coords.shape[:2]:
            raise ValueError(f"regs: expected [T, {self.threads}, {self.registers}], got shape {regs.shape}")
        slots = self.coords.shape[2]
        shifts = np.arange(slots, dtype=np.uint64) * np.uint64(self.elem_bits)
        vals = (regs[..., None] >> shifts) & np.uint64((1 << self.elem_bits) - 1)
        out = np.zeros((regs.shape[0],) + tuple(shape), dtype=np.uint32)
        out[:, self.coords[..., 0], self.coords[..., 1]] = vals.astype(np.uint32)
        return out


def _lanes(threads: int = 32):
    lane = np.arange(threads)
    return lane % 32 >> 2, lane % 4, lane // 32  # group, thread in group, warp


def _fragment(rows: np.ndarray, cols: np.ndarray, elem_bits: int) -> Fragment:
    coords = np.stack(np.broadcast_arrays(rows, cols), axis=-1).astype(np.int64)
    return Fragment(coords, elem_bits)


def mma_a(m: int, k: int, elem_bits: int, row_offset_per_warp: int = 0, threads: int = 32) -> Fragment:
    """Multiplicand A [m, k] of ``mma.m{m}n8k{k}`` (also wgmma's A from registers).

    Register j, slot s: row ``group + 8*(j & 1)`` (m16) or ``group`` (m8), column
    ``tig*e + (j >> 1)*4e + s`` with ``e = 32 // elem_bits`` elements per register.
    """
    per_reg = 32 // elem_bits
    regs = m * k * elem_bits // (32 * 32)
    if regs < 1 or m not in (8, 16):
        raise ValueError(f"mma_a: unsupported shape m={m}, k={k} for {elem_bits}-bit elements")
    g, t, w = _lanes(threads)
    j = np.arange(regs)[None, :, None]
    s = np.arange(per_reg)[None, None, :]
    g, t, w = g[:, None, None], t[:, None, None], w[:, None, None]
    if m == 16:
        rows = g + 8 * (j & 1) + row_offset_per_warp * w
        cols = t * per_reg + (j >> 1) * 4 * per_reg + s
    else:
        rows = g + 0 * j
        cols = t * per_reg + j * 4 * per_reg + s
    return _fragment(rows, cols, elem_bits)


def mma_b(k: int, elem_bits: int, n: int = 8) -> Fragment:
    """Multiplicand B held as [n, k]: register j, slot s is (``group``, ``tig*e + j*4e + s``)."""
    per_reg = 32 // elem_bits
    regs = n * k * elem_bits // (32 * 32)
    if regs < 1:
        raise ValueError(f"mma_b: unsupported k={k} for {elem_bits}-bit elements")
    g, t, _ = _lanes()
    j = np.arange(regs)[None, :, None]
    s = np.arange(per_reg)[None, None, :]
    rows = g[:, None, None] + 0 * j + 0 * s
    cols = t[:, None, None] * per_reg + j * 4 * per_reg + s
    return _fragment(rows, cols, elem_bits)


def mma_cd(m: int, elem_bits: int) -> Fragment:
    """Accumulator C / result D [m, 8]: 32-bit elements (f32, s32) or f16 pairs."""
    g, t, _ = _lanes()
    g, t = g[:, None, None], t[:, None, None]
    if elem_bits == 32:
        i = np.arange(4 if m == 16 else 2)[None, :, None]
        rows = g + 8 * (i >> 1)
        cols = 2 * t + (i & 1)
    elif elem_bits == 16 and m == 16:
        j = np.arange(2)[None, :, None]
        s = np.arange(2)[None, None, :]
        rows = g + 8 * j + 0 * s
        cols = 2 * t + s + 0 * j
    else:
        raise ValueError(f"mma_cd: unsupported m={m} with {elem_bits}-bit elements")
    return _fragment(rows, cols, elem_bits)


def wgmma_a(k: int, elem_bits: int) -> Fragment:
    """wgmma's A [64, k] from registers: four warps, each the mma.m16 A layout on 16 rows."""
    return mma_a(16, k, elem_bits, row_offset_per_warp=16, threads=128)


def wgmma_cd(n: int, elem_bits: int) -> Fragment:
    """wgmma's accumulator [64, n]: per warp 16 rows, the mma.m16n8 layout repeated over n / 8."""
    g, t, w = _lanes(128)
    g, t, w = g[:, None, None], t[:, None, None], w[:, None, None]
    if elem_bits == 32:
        i = np.arange(n // 2)[None, :, None]
        rows = 16 * w + g + 8 * ((i >> 1) & 1)
        cols = 8 * (i >> 2) + 2 * t + (i & 1)
    elif elem_bits == 16:
        j = np.arange(n // 4)[None, :, None]
        s = np.arange(2)[None, None, :]
        rows = 16 * w + g + 8 * (j & 1) + 0 * s
        cols = 8 * (j >> 1) + 2 * t + s
    else:
        raise ValueError(f"wgmma_cd: unsupported {elem_bits}-bit accumulator")
    return _fragment(rows, cols, elem_bits)


def wgmma_b_image(b_tiles: np.ndarray, elem_bits: int, lead_bytes: int, stride_bytes: int) -> np.ndarray:
    """Shared-memory image of B [T, n, k] for wgmma, K-major without swizzle, as uint32 words.

    The no-swizzle canonical layout stores 8 x 16-byte "core matrices" (8 rows of N,
    16 bytes of K each) contiguously; ``lead_bytes`` (the descriptor's leading byte
    offset) separates core matrices along K, ``stride_bytes`` (stride byte offset)
    along N.  Elements narrower than a byte fill each byte from its low bit up.
    """
    b_tiles = np.asarray(b_tiles)
    tiles, n, k = b_tiles.shape
    if (k * elem_bits) % 8:
        raise ValueError(f"b_tiles: a row of {k} {elem_bits}-bit elements is not whole bytes")
    row_bytes = k * elem_bits // 8
    # each row of K elements as little-endian bytes
    vals = b_tiles.astype(np.uint64) & np.uint64((1 << elem_bits) - 1)
    if elem_bits >= 8:
        per = elem_bits // 8
        shifts = np.arange(per, dtype=np.uint64) * np.uint64(8)
        rows = ((vals[..., None] >> shifts) & np.uint64(0xFF)).reshape(tiles, n, row_bytes)
    else:
        per = 8 // elem_bits
        shifts = np.arange(per, dtype=np.uint64) * np.uint64(elem_bits)
        rows = (vals.reshape(tiles, n, row_bytes, per) << shifts).sum(axis=-1, dtype=np.uint64)
    rows = rows.astype(np.uint8)
    kb = np.arange(row_bytes)
    nn = np.arange(n)
    offset = ((nn[:, None] // 8) * stride_bytes + (kb[None, :] // 16) * lead_bytes
              + (nn[:, None] % 8) * 16 + kb[None, :] % 16)
    size = (int(offset.max()) + 1 + 3) // 4 * 4
    image = np.zeros((tiles, size), dtype=np.uint8)
    image[:, offset.ravel()] = rows.reshape(tiles, -1)
    return image.view(np.uint32)


@dataclass(frozen=True)
class MetadataLayout:
    """Sparse ``mma.sp`` metadata: which (row, chunk) each 4-bit nibble of a lane's register
    describes (-1: not read).  A chunk is the run of consecutive K elements of A one code
    covers (4 for 16- and 8-bit types, 2 for TF32, 8 for s4/u4; ``tcnumerics.sparse``);
    its nibble holds two 2-bit slot indices, the lower one in the low bits.

    Attributes:
        coords: int array [32 lanes, 8 nibbles, 2] of (row, chunk) or (-1, -1).
        selector: the sparsity-selector immediate the layout belongs to.
    """

    coords: np.ndarray
    selector: int


# K elements one metadata nibble describes, by A's element width (PTX ISA "Sparse matrix
# storage": 2:4 for 16/8-bit, 1:2 for 32-bit TF32, pairwise 4:8 for 4-bit; tcnumerics.sparse)
CHUNK_ELEMENTS = {32: 2, 16: 4, 8: 4, 4: 8}


def sparse_metadata(m: int, k: int, selector: int = 0, elem_bits: int = 16) -> MetadataLayout:
    """Metadata layout of ``mma.sp.m{m}n8k{k}`` for A elements of ``elem_bits`` bits.

    A row has ``C = k / chunk`` metadata chunks (``CHUNK_ELEMENTS``); threads per group of
    four that carry metadata: ``P = 16 * C / 64``; with selector ``sel`` those are
    ``tig = sel*P .. sel*P + P-1``.  16-bit (and TF32) types: thread ``p`` of them holds, in
    nibbles 0..3, chunks ``4p .. 4p+3`` of row ``group`` and in nibbles 4..7 the same chunks
    of row ``group + 8``.  8-bit (and 4-bit) types: thread ``p`` holds chunks
    ``8*(p // 2) .. +7`` of row ``group + 8*(p % 2)``.  All four found on an H200 by
    ``tcnumerics.probe.runtime.discover_metadata``: TF32 (chunks of 2) lays its codes out
    exactly as the 16-bit types, s4/u4 (chunks of 8) exactly as the 8-bit types.

    >>> meta = sparse_metadata(16, 8, elem_bits=32)          # mma.sp.m16n8k8 .tf32
    >>> [tuple(int(v) for v in meta.coords[4, j]) for j in (0, 3, 4)]   # lane 4: group 1
    [(1, 0), (1, 3), (9, 0)]
    """
    if elem_bits not in CHUNK_ELEMENTS:
        raise ValueError(f"sparse_metadata: no structured sparsity for {elem_bits}-bit elements")
    chunks = k // CHUNK_ELEMENTS[elem_bits]
    per_group = m * chunks // 64
    if m != 16 or per_group not in (1, 2, 4) or not 0 <= selector < 4 // per_group:
        raise ValueError(f"sparse_metadata: unsupported m={m}, k={k}, selector={selector} "
                         f"for {elem_bits}-bit elements")
    coords = np.full((32, 8, 2), -1, dtype=np.int64)
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        p = t - selector * per_group
        if not 0 <= p < per_group:
            continue
        for j in range(8):
            if elem_bits in (16, 32):
                coords[lane, j] = (g + 8 * (j >= 4), 4 * p + j % 4)
            else:
                coords[lane, j] = (g + 8 * (p % 2), 8 * (p // 2) + j)
    return MetadataLayout(coords, selector)


def pack_metadata(layout: MetadataLayout, nibbles: np.ndarray) -> np.ndarray:
    """[T, rows, chunks] 4-bit chunk codes -> [T, 32] uint32 metadata registers."""
    nibbles = np.asarray(nibbles, dtype=np.uint64)
    used = layout.coords[..., 0] >= 0
    rows = np.where(used, layout.coords[..., 0], 0)
    chunks = np.where(used, layout.coords[..., 1], 0)
    vals = np.where(used[None], nibbles[:, rows, chunks], 0).astype(np.uint64)
    shifts = np.arange(8, dtype=np.uint64) * np.uint64(4)
    return (vals << shifts).sum(axis=-1, dtype=np.uint64).astype(np.uint32)
