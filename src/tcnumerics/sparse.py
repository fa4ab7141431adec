"""Structured-sparse (2:4) matrix instructions: ``mma.sp`` with metadata as PTX defines it.

A row of a 2:4 sparse A holds, in every chunk of 4 consecutive K elements, at most two
non-zeros.  ``mma.sp`` takes only those two values per chunk (``a_compressed``, K/2 per
row) and, as metadata, their positions 0..3 inside the chunk (``sparse_index``, the two
positions of a chunk in increasing order, as ``mma.sp::ordered_metadata`` requires).
The unit gathers the matching B elements and feeds the K/2 selected products to its
datapath.  A sparse catalog entry (``hopper.mma.sp.m16n8k32.f32.f16.f16.f32``) is
therefore an ``InstructionSpec`` whose ``k`` is the *compressed* K (what the datapath
sees); the logical K of its name is twice that.

Example:
    >>> import numpy as np
    >>> from tcnumerics import sparse
    >>> spec = sparse.get_sparse("hopper.mma.sp.m16n8k32.f32.f16.f16.f32")
    >>> spec.k, sparse.logical_k(spec)
    (16, 32)
    >>> a = np.full((1, 16), 0x3C00, np.uint16)                 # sixteen fp16 ones
    >>> b = np.zeros((1, 32), np.uint16); b[0, 1::4] = 0x4000   # 2.0 at k = 1, 5, 9, ...
    >>> idx = np.tile([1, 3], (1, 8)).astype(np.uint8)           # each chunk keeps positions 1 and 3
    >>> hex(int(sparse.dot_bits(spec, a, b, np.zeros(1, np.uint32), idx)[0]))   # 8 x 2.0 = 16.0
    '0x41800000'
"""

from __future__ import annotations

import numpy as np

from .api import Instruction, check_bits
from .catalog import get_instruction
from .model import InstructionSpec

__all__ = ["CHUNK", "is_sparse", "get_sparse", "logical_k", "select_b", "expand_a", "compress_a",
           "check_index", "dot_bits"]

CHUNK = 4  # 2:4 structure: two values kept out of every 4 consecutive K elements


def is_sparse(spec: "str | InstructionSpec") -> bool:
    """Whether a catalog entry is a structured-sparse ``mma.sp`` instruction."""
    name = spec if isinstance(spec, str) else spec.name
    return ".mma.sp." in name


def get_sparse(name: "str | InstructionSpec") -> InstructionSpec:
    """The sparse catalog entry ``name``; a dense name raises ValueError."""
    spec = get_instruction(name)
    if not is_sparse(spec):
        raise ValueError(f"instruction: {spec.name!r} is not a structured-sparse mma.sp entry")
    return spec


def logical_k(spec: InstructionSpec) -> int:
    """K of the dense B operand (and of the name's shape): twice the compressed K."""
    return 2 * spec.k


def check_index(sparse_index, rows: int, k_compressed: int) -> np.ndarray:
    """Validate [rows, K/2] chunk positions: integers 0..3, each chunk's two strictly increasing."""
    idx = np.asarray(sparse_index)
    if idx.dtype.kind not in "ui":
        raise TypeError(f"sparse_index: expected integer positions 0..3, got dtype {idx.dtype}")
    if idx.shape != (rows, k_compressed):
        raise ValueError(f"sparse_index: expected shape ({rows}, {k_compressed}), got {idx.shape}")
    if idx.size:
        if int(idx.min()) < 0 or int(idx.max()) >= CHUNK:
            raise ValueError("sparse_index: positions must lie in 0..3 within each chunk of 4")
        if not (idx[:, 0::2] < idx[:, 1::2]).all():
            raise ValueError("sparse_index: the two positions of a chunk must be distinct and increasing "
                             "(mma.sp::ordered_metadata)")
    return idx.astype(np.int64)


def select_b(b: np.ndarray, sparse_index: np.ndarray) -> np.ndarray:
    """The B elements the unit pairs with the compressed A: [N, K] -> [N, K/2]."""
    idx = np.asarray(sparse_index, dtype=np.int64)
    cols = (np.arange(idx.shape[1]) // 2 * CHUNK)[None, :] + idx
    return np.take_along_axis(np.asarray(b), cols, axis=1)


def expand_a(a_compressed: np.ndarray, sparse_index: np.ndarray) -> np.ndarray:
    """The dense [N, K] A (zero bits elsewhere) that compressed A and metadata describe."""
    a = np.asarray(a_compressed)
    idx = np.asarray(sparse_index, dtype=np.int64)
    dense = np.zeros((a.shape[0], 2 * a.shape[1]), dtype=a.dtype)
    cols = (np.arange(idx.shape[1]) // 2 * CHUNK)[None, :] + idx
    np.put_along_axis(dense, cols, a, axis=1)
    return dense


def compress_a(a_dense: np.ndarray, nonzero: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Split a 2:4 dense A [N, K] into (compressed [N, K/2], sparse_index [N, K/2]).

    ``nonzero`` marks the kept elements (default: bit pattern != 0).  Chunks with fewer
    than two kept elements are padded with the lowest unused positions; more than two
    raise ValueError.
    """
    a = np.asarray(a_dense)
    if a.ndim != 2 or a.shape[1] % CHUNK:
        raise ValueError(f"a_dense: expected [N, K] with K a multiple of {CHUNK}, got shape {a.shape}")
    keep = (a != 0) if nonzero is None else np.asarray(nonzero, dtype=bool)
    n, k = a.shape
    chunks = keep.reshape(n, k // CHUNK, CHUNK)
    if (chunks.sum(axis=2) > 2).any():
        raise ValueError("a_dense: some chunk of 4 holds more than 2 non-zeros (not 2:4 sparse)")
    # rank positions: kept ones first, then the lowest unused; take two, sorted
    order = np.argsort(~chunks, axis=2, kind="stable")[:, :, :2]
    order = np.sort(order, axis=2)
    idx = order.reshape(n, k // 2)
    comp = np.take_along_axis(a, (np.arange(k // 2) // 2 * CHUNK)[None, :] + idx, axis=1)
    return comp, idx.astype(np.uint8)


def dot_bits(spec: "str | InstructionSpec", a_compressed, b, c, sparse_index, *, engine: str = "auto") -> np.ndarray:
    """Sparse dot products on bit patterns: ``a_compressed`` [N, K/2], ``b`` [N, K], ``c`` [N],
    ``sparse_index`` [N, K/2] -> d [N] bits.  K may be a multiple of the instruction's
    logical K (instructions chain in K order, each d the next c)."""
    spec = get_sparse(spec)
    a = check_bits("a_compressed", a_compressed, spec.a_format, ndim=2)
    b = check_bits("b", b, spec.b_format, ndim=2)
    if b.shape != (a.shape[0], 2 * a.shape[1]):
        raise ValueError(f"b: expected shape ({a.shape[0]}, {2 * a.shape[1]}) (twice a_compressed's K), "
                         f"got {b.shape}")
    idx = check_index(sparse_index, a.shape[0], a.shape[1])
    return Instruction(spec, engine).dot_bits(a, select_b(b, idx), c)
