"""Structured-sparse matrix instructions: ``mma.sp`` with metadata as PTX defines it.

A structured-sparse A keeps, in every *chunk* of consecutive K elements, a fixed number
of values; ``mma.sp`` takes only those (``a_compressed``, K/2 per row) and, as metadata,
their positions inside the chunk (``sparse_index``: one position per compressed value,
increasing within a chunk, as ``mma.sp::ordered_metadata`` requires).  The unit gathers
the matching B elements and feeds the K/2 selected products to its datapath.  A sparse
catalog entry (``hopper.mma.sp.m16n8k32.f32.f16.f16.f32``) is therefore an
``InstructionSpec`` whose ``k`` is the *compressed* K (what the datapath sees); the
logical K of its name is twice that.

The chunk structure follows from A's element type (PTX ISA, "Sparse matrix storage"),
see ``sparsity``:

- 16- and 8-bit types (f16, bf16, e4m3, e5m2, s8, u8): **2:4**, two values of every 4,
  positions 0..3;
- ``.tf32``: **1:2**, one value of every 2, position 0 or 1;
- ``.s4``/``.u4``: **pairwise 4:8**, two aligned pairs ``(2j, 2j+1)`` of every 8,
  positions 0..7.

Each chunk is described by one 4-bit metadata code: two 2-bit indices (low one in the
low bits) into the chunk's four equal *slots* (an element for 2:4, an aligned pair for
4:8, half a TF32 element for 1:2).  ``metadata_codes`` and ``index_from_metadata``
convert, the latter refusing every code PTX leaves undefined.

Example:
    >>> import numpy as np
    >>> from tcnumerics import sparse
    >>> spec = sparse.get_sparse("hopper.mma.sp.m16n8k32.f32.f16.f16.f32")
    >>> spec.k, sparse.logical_k(spec), sparse.sparsity(spec).name
    (16, 32, '2:4')
    >>> a = np.full((1, 16), 0x3C00, np.uint16)                 # sixteen fp16 ones
    >>> b = np.zeros((1, 32), np.uint16); b[0, 1::4] = 0x4000   # 2.0 at k = 1, 5, 9, ...
    >>> idx = np.tile([1, 3], (1, 8)).astype(np.uint8)           # each chunk keeps positions 1 and 3
    >>> hex(int(sparse.dot_bits(spec, a, b, np.zeros(1, np.uint32), idx)[0]))   # 8 x 2.0 = 16.0
    '0x41800000'
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .api import check_bits
from .catalog import get_instruction
from .model import InstructionSpec
from .plan import interpret
from .plan.nodes import PairedChain

__all__ = ["CHUNK", "Sparsity", "SPARSE_2_4", "SPARSE_1_2", "PAIRWISE_4_8", "sparsity", "sparsity_for_format",
           "is_sparse", "get_sparse", "logical_k", "select_b", "expand_a", "compress_a", "check_index",
           "positions", "random_index", "metadata_codes", "index_from_metadata", "dot_bits"]

CHUNK = 4  # 2:4 structure (16- and 8-bit types): two values kept out of every 4 consecutive K elements


@dataclass(frozen=True)
class Sparsity:
    """One structured-sparsity scheme of ``mma.sp``.

    Attributes:
        name: ``"2:4"``, ``"1:2"`` or ``"4:8 pairwise"``.
        chunk: consecutive K elements of A that one 4-bit metadata code describes.
        kept: values of a chunk stored in the compressed A.
        run: kept values come in aligned runs of this many consecutive elements.
        codes: the metadata codes PTX defines for ``mma.sp::ordered_metadata``; any other
            code is undefined behaviour and refused here.

    Example:
        >>> SPARSE_1_2.chunk, SPARSE_1_2.kept, [bin(c) for c in SPARSE_1_2.codes]
        (2, 1, ['0b100', '0b1110'])
    """

    name: str
    chunk: int
    kept: int
    run: int
    codes: tuple[int, ...]

    @property
    def runs(self) -> int:
        """Aligned runs in a chunk (candidates for keeping)."""
        return self.chunk // self.run

    @property
    def kept_runs(self) -> int:
        return self.kept // self.run

    def slot_mask(self) -> np.ndarray:
        """bool [chunk, 4]: which of the metadata's four slots each element of a chunk covers."""
        mask = np.zeros((self.chunk, 4), dtype=bool)
        for p in range(self.chunk):
            if self.chunk >= 4:   # a slot holds chunk/4 elements (2:4: one, 4:8: an aligned pair)
                mask[p, p // (self.chunk // 4)] = True
            else:                 # 1:2: one element spans 4/chunk slots
                w = 4 // self.chunk
                mask[p, p * w:(p + 1) * w] = True
        return mask

    def combinations(self) -> np.ndarray:
        """Every legal position tuple of one chunk, [C, kept], in lexicographic order."""
        rows = []
        for runs in itertools.combinations(range(self.runs), self.kept_runs):
            rows.append([r * self.run + i for r in runs for i in range(self.run)])
        return np.array(rows, dtype=np.uint8)


_ORDERED = (0b0100, 0b1000, 0b1001, 0b1100, 0b1101, 0b1110)  # two 2-bit indices, low < high
SPARSE_2_4 = Sparsity("2:4", chunk=4, kept=2, run=1, codes=_ORDERED)
SPARSE_1_2 = Sparsity("1:2", chunk=2, kept=1, run=1, codes=(0b0100, 0b1110))
PAIRWISE_4_8 = Sparsity("4:8 pairwise", chunk=8, kept=4, run=2, codes=_ORDERED)
# PTX ISA "Sparse matrix storage": A's element type decides the scheme
_BY_FORMAT = {"fp16": SPARSE_2_4, "bf16": SPARSE_2_4, "e4m3": SPARSE_2_4, "e5m2": SPARSE_2_4, "s8": SPARSE_2_4,
              "u8": SPARSE_2_4, "tf32": SPARSE_1_2, "s4": PAIRWISE_4_8, "u4": PAIRWISE_4_8}


def sparsity_for_format(fmt: str) -> Sparsity:
    """The sparsity scheme ``mma.sp`` uses for A elements of format ``fmt`` (a tcnumerics name).

    >>> sparsity_for_format("s4").name
    '4:8 pairwise'
    """
    if not isinstance(fmt, str):
        raise TypeError(f"fmt: expected a format name, got {type(fmt).__name__}")
    try:
        return _BY_FORMAT[fmt]
    except KeyError:
        raise ValueError(f"fmt: mma.sp has no structured sparsity for {fmt!r} "
                         f"(known: {', '.join(sorted(_BY_FORMAT))})") from None


def is_sparse(spec: "str | InstructionSpec") -> bool:
    """Whether a catalog entry is a structured-sparse ``mma.sp`` instruction.

    >>> is_sparse("hopper.mma.sp.m16n8k8.f32.tf32.tf32.f32"), is_sparse("hopper.mma.m16n8k8.f32.tf32.tf32.f32")
    (True, False)
    """
    name = spec if isinstance(spec, str) else spec.name
    return ".mma.sp." in name


def get_sparse(name: "str | InstructionSpec") -> InstructionSpec:
    """The sparse catalog entry ``name``; a dense name raises ValueError."""
    spec = get_instruction(name)
    if not is_sparse(spec):
        raise ValueError(f"instruction: {spec.name!r} is not a structured-sparse mma.sp entry")
    return spec


def sparsity(entry: "str | InstructionSpec | Sparsity") -> Sparsity:
    """The sparsity scheme of a sparse catalog entry, from its A operand's type.

    >>> sparsity("hopper.mma.sp.m16n8k16.f32.tf32.tf32.f32").name
    '1:2'
    """
    if isinstance(entry, Sparsity):
        return entry
    return sparsity_for_format(get_sparse(entry).a_format.name)


def _pattern(pattern: "str | InstructionSpec | Sparsity | None") -> Sparsity:
    return SPARSE_2_4 if pattern is None else sparsity(pattern)


def logical_k(spec: InstructionSpec) -> int:
    """K of the dense B operand (and of the name's shape): twice the compressed K."""
    return 2 * spec.k


def check_index(sparse_index, rows: int, k_compressed: int,
                pattern: "str | InstructionSpec | Sparsity | None" = None) -> np.ndarray:
    """Validate [rows, K/2] chunk positions for ``pattern`` (an entry or a ``Sparsity``; default 2:4).

    Positions lie in 0..chunk-1, increase strictly within a chunk and, for pairwise 4:8,
    form aligned pairs ``(2j, 2j+1)``.  Returns them as int64.

    >>> check_index(np.array([[1, 0, 1, 1]]), 1, 4, SPARSE_1_2).tolist()
    [[1, 0, 1, 1]]
    """
    sp = _pattern(pattern)
    idx = np.asarray(sparse_index)
    if idx.dtype.kind not in "ui":
        raise TypeError(f"sparse_index: expected integer positions 0..{sp.chunk - 1}, got dtype {idx.dtype}")
    if idx.shape != (rows, k_compressed):
        raise ValueError(f"sparse_index: expected shape ({rows}, {k_compressed}), got {idx.shape}")
    if k_compressed % sp.kept:
        raise ValueError(f"sparse_index: {sp.name} keeps {sp.kept} values per chunk; K/2={k_compressed} "
                         "is not whole chunks")
    if idx.size:
        if int(idx.min()) < 0 or int(idx.max()) >= sp.chunk:
            raise ValueError(f"sparse_index: positions must lie in 0..{sp.chunk - 1} within each chunk of "
                             f"{sp.chunk} ({sp.name} sparsity)")
        ch = idx.astype(np.int64).reshape(rows, -1, sp.kept)
        if sp.kept > 1 and not (np.diff(ch, axis=2) > 0).all():
            raise ValueError(f"sparse_index: the {sp.kept} positions of a chunk must be distinct and increasing "
                             "(mma.sp::ordered_metadata)")
        if sp.run > 1:
            starts = ch[:, :, 0::sp.run]
            whole = all((ch[:, :, i::sp.run] == starts + i).all() for i in range(1, sp.run))
            if not (whole and (starts % sp.run == 0).all()):
                raise ValueError(f"sparse_index: {sp.name} sparsity keeps aligned runs of {sp.run} elements "
                                 "(positions (2j, 2j+1) of each chunk of 8)")
    return idx.astype(np.int64)


def positions(sparse_index: np.ndarray, pattern: "str | InstructionSpec | Sparsity | None" = None) -> np.ndarray:
    """The K columns [N, K/2] of B (and of the dense A) the compressed values stand at.

    >>> positions(np.array([[1, 0, 0]]), SPARSE_1_2).tolist()
    [[1, 2, 4]]
    """
    sp = _pattern(pattern)
    idx = np.asarray(sparse_index, dtype=np.int64)
    return (np.arange(idx.shape[1]) // sp.kept * sp.chunk)[None, :] + idx


def select_b(b: np.ndarray, sparse_index: np.ndarray,
             pattern: "str | InstructionSpec | Sparsity | None" = None) -> np.ndarray:
    """The B elements the unit pairs with the compressed A: [N, K] -> [N, K/2]."""
    return np.take_along_axis(np.asarray(b), positions(sparse_index, pattern), axis=1)


def expand_a(a_compressed: np.ndarray, sparse_index: np.ndarray,
             pattern: "str | InstructionSpec | Sparsity | None" = None) -> np.ndarray:
    """The dense [N, K] A (zero bits elsewhere) that compressed A and metadata describe."""
    a = np.asarray(a_compressed)
    dense = np.zeros((a.shape[0], 2 * a.shape[1]), dtype=a.dtype)
    np.put_along_axis(dense, positions(sparse_index, pattern), a, axis=1)
    return dense


def compress_a(a_dense: np.ndarray, nonzero: np.ndarray | None = None,
               pattern: "str | InstructionSpec | Sparsity | None" = None) -> tuple[np.ndarray, np.ndarray]:
    """Split a structured-sparse dense A [N, K] into (compressed [N, K/2], sparse_index [N, K/2]).

    ``nonzero`` marks the kept elements (default: bit pattern != 0).  Chunks with fewer
    kept values (pairwise 4:8: pairs) than the scheme stores are padded with the lowest
    unused positions; more raise ValueError.

    >>> comp, idx = compress_a(np.array([[0, 5, 7, 0]], np.uint16), pattern=SPARSE_1_2)
    >>> comp.tolist(), idx.tolist()
    ([[5, 7]], [[1, 0]])
    """
    sp = _pattern(pattern)
    a = np.asarray(a_dense)
    if a.ndim != 2 or a.shape[1] % sp.chunk:
        raise ValueError(f"a_dense: expected [N, K] with K a multiple of {sp.chunk}, got shape {a.shape}")
    keep = (a != 0) if nonzero is None else np.asarray(nonzero, dtype=bool)
    if keep.shape != a.shape:
        raise ValueError(f"nonzero: expected shape {a.shape}, got {keep.shape}")
    n, k = a.shape
    # a run (an element, or a 4:8 pair) is kept when any of its elements is
    runs = keep.reshape(n, k // sp.chunk, sp.runs, sp.run).any(axis=3)
    if (runs.sum(axis=2) > sp.kept_runs).any():
        what = "non-zeros" if sp.run == 1 else "non-zero aligned pairs"
        raise ValueError(f"a_dense: some chunk of {sp.chunk} holds more than {sp.kept_runs} {what} "
                         f"(not {sp.name} sparse)")
    # rank runs: kept ones first, then the lowest unused; take kept_runs of them, sorted
    order = np.sort(np.argsort(~runs, axis=2, kind="stable")[:, :, :sp.kept_runs], axis=2)
    idx = (order[..., None] * sp.run + np.arange(sp.run)).reshape(n, k // 2)
    comp = np.take_along_axis(a, positions(idx, sp), axis=1)
    return comp, idx.astype(np.uint8)


def random_index(rng: np.random.Generator, rows: int, k: int,
                 pattern: "str | InstructionSpec | Sparsity | None" = None) -> np.ndarray:
    """Uniformly random legal positions [rows, k/2] for a logical K of ``k`` (uint8).

    >>> random_index(np.random.default_rng(0), 2, 8, PAIRWISE_4_8).shape
    (2, 4)
    """
    sp = _pattern(pattern)
    if k % sp.chunk:
        raise ValueError(f"k: {k} is not a multiple of the {sp.name} chunk ({sp.chunk})")
    table = sp.combinations()
    pick = rng.integers(0, len(table), size=(rows, k // sp.chunk))
    return table[pick].reshape(rows, k // 2)


def metadata_codes(sparse_index: np.ndarray, pattern: "str | InstructionSpec | Sparsity | None" = None) -> np.ndarray:
    """[N, K/2] positions -> [N, K/chunk] 4-bit metadata codes (two slot indices, low one in bits 0-1).

    >>> [bin(c) for c in metadata_codes(np.array([[0, 1]]), SPARSE_1_2)[0]]
    ['0b100', '0b1110']
    """
    sp = _pattern(pattern)
    idx = np.asarray(sparse_index, dtype=np.int64)
    n = idx.shape[0]
    slots = sp.slot_mask()[idx].reshape(n, -1, sp.kept, 4).any(axis=2)   # [N, chunks, 4]
    lo = np.argmax(slots, axis=2)
    hi = 3 - np.argmax(slots[:, :, ::-1], axis=2)
    return (lo | (hi << 2)).astype(np.uint32)


def index_from_metadata(codes: np.ndarray, pattern: "str | InstructionSpec | Sparsity | None" = None) -> np.ndarray:
    """[N, chunks] 4-bit metadata codes -> [N, K/2] positions; undefined codes raise ValueError.

    >>> index_from_metadata(np.array([[0b1110, 0b0100]]), SPARSE_1_2).tolist()
    [[1, 0]]
    """
    sp = _pattern(pattern)
    c = np.asarray(codes)
    if c.dtype.kind not in "ui" or c.ndim != 2:
        raise TypeError(f"codes: expected [N, chunks] integer metadata codes, got {c.dtype} {c.shape}")
    bad = ~np.isin(c, sp.codes)
    if bad.any():
        r, ch = (int(v) for v in np.argwhere(bad)[0])
        raise ValueError(f"metadata: code {int(c[r, ch]):#06b} (row {r}, chunk {ch}) is undefined for {sp.name} "
                         f"sparsity; mma.sp::ordered_metadata defines only "
                         f"{', '.join(f'{v:#06b}' for v in sp.codes)}")
    # an element is selected when every slot it covers is named by the code
    table = np.zeros((16, sp.kept), dtype=np.int64)
    mask = sp.slot_mask()
    for code in sp.codes:
        want = np.zeros(4, dtype=bool)
        want[[code & 3, code >> 2]] = True
        table[code] = np.flatnonzero((mask & want).any(axis=1) & ~(mask & ~want).any(axis=1))
    return table[c.astype(np.int64)].reshape(c.shape[0], -1).astype(np.uint8)


def dot_bits(spec: "str | InstructionSpec", a_compressed, b, c, sparse_index, *, engine: str = "auto") -> np.ndarray:
    """Sparse dot products on bit patterns: ``a_compressed`` [N, K/2], ``b`` [N, K], ``c`` [N],
    ``sparse_index`` [N, K/2] (positions in each chunk, see ``sparsity``) -> d [N] bits.
    K may be a multiple of the instruction's logical K (instructions chain in K order,
    each d the next c)."""
    spec = get_sparse(spec)
    sp = sparsity(spec)
    a = check_bits("a_compressed", a_compressed, spec.a_format, ndim=2)
    b = check_bits("b", b, spec.b_format, ndim=2)
    if b.shape != (a.shape[0], 2 * a.shape[1]):
        raise ValueError(f"b: expected shape ({a.shape[0]}, {2 * a.shape[1]}) (twice a_compressed's K), "
                         f"got {b.shape}")
    idx = check_index(sparse_index, a.shape[0], a.shape[1], sp)
    operands = {"A": a, "B": select_b(b, idx, sp), "C_acc": c}
    return interpret.evaluate(PairedChain(spec), operands, engine).bits  # the plan interpreter runs every chain
