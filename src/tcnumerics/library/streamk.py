"""cuBLAS TF32 stream-K on Hopper (``sm90_xmma_gemm_*tf32*_segment_k_on``, launched after a Memset), bit for bit.

Identified from the H100 bit captures (``lab/device_library/probe_tf32.py``: all 30 captured calls, every
sampled output bit-exact).  With T output tiles (TM x TN from the kernel name; TM along the output's columns,
i.e. cuBLAS m = torch N, TN along its rows) of ``ipt = ceil(K / TK)`` K-iterations each and C CTAs:

* **Which tiles are shared.**  ``r = T mod C`` if T > C, else ``r = T``.  The first ``T - r`` tiles of the
  schedule order are data-parallel (one CTA, one chain over all of K, as ``segment_k_off``); the last ``r``
  tiles are each shared by ``s = C // r`` CTAs (C - r * s CTAs idle in that phase).
* **Segments.**  A shared tile's iterations split into s consecutive segments of ``q = ipt // s``
  iterations, the last ``ipt mod s`` segments one longer (160 = 53 + 53 + 54; 2048 = 6 x 157 + 7 x 158);
  each segment is a TF32 wgmma k8 chain from +0 (operands FP32 -> TF32 RNE).
* **Fix-up.**  The segment partials are added in FP32 (RNE) as a binary tree over segment indices paired
  from the end: level by level, (s-2, s-1), (s-4, s-3), ... are summed and an odd first element passes up
  unpaired: s = 3 -> p0 + (p1 + p2); 4 -> (p0 + p1) + (p2 + p3); 6 -> (p0 + p1) + ((p2 + p3) + (p4 + p5)).
  With a separate ``execute_split_k`` kernel after it (captured once: 384x384x65536, 13 segments) the
  partials are instead summed from the last: p0 + (p1 + (... + (p11 + p12))).
* **Schedule order** (only matters when T > C and the grid has more than one tile row and column): the
  tiles go in bands of W ("swizzle") consecutive tiles of the grid's longer side (m-tiles, the output's
  column tiles, when ``tiles_m >= tiles_n``; n-tiles otherwise: 16384x4096x14336); inside band b the other
  index runs upward for even b, downward for odd b, the banded index fastest.  W is not visible in the
  kernel name; ``swizzle_for`` gives the rule found from the device probe (``probe_tf32_device.py``, 24
  stream-K shapes on an H100) and the captures: W = base(C) (C = 99 -> 1, 132 -> 2, 120 -> 4), doubled
  when the band length L (the shorter side in tiles) does not divide r (seen at C = 120 only); both per-GPU
  facts are data (``gpus.json``: ``streamk_swizzle``, ``streamk_swizzle_doubled``).  ``FITTED_SWIZZLE``: the
  widths the captures needed, all reproduced.

Example (one 128 x 128 tile shared by 3 CTAs, K = 96: segments of one 32-element iteration each):
    >>> import numpy as np
    >>> A = np.ones((1, 96), np.float32); B = np.ones((96, 1), np.float32)
    >>> streamk_tf32(A, B, [0], [0], M=128, N=128, K=96, ctas=3, tile=(128, 128, 32)).tolist()
    [[96.0]]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np

from ..catalog import get_instruction
from ..plan import interpret
from ..plan.nodes import Chain, LayOut, Node, OrderedSum, TileGroups
from . import gpus

__all__ = ["StreamKPlan", "plan", "parse_tile", "schedule_index", "segment_lengths", "pair_tree",
           "streamk_tf32", "tiled_outputs", "reduction", "swizzle_for", "position_dependent", "swizzle_matters",
           "FITTED_SWIZZLE", "PROBED_SWIZZLE", "BASE_SWIZZLE", "DOUBLED_SWIZZLE"]

INSTRUCTION = "hopper.wgmma.m64n8k8.f32.tf32.tf32"

# Band widths that reproduce the captured calls whose shared tiles depend on it, (M, N, K) -> swizzle
# (H100, cuBLAS 13.1).  Other captured shapes are reproduced by any width (one tile row, or T <= C).
FITTED_SWIZZLE = {(448, 5632, 4608): 2, (400, 6144, 6144): 2, (464, 27648, 5120): 4, (1024, 1024, 8192): 4,
                  (864, 5120, 13824): 8, (880, 5120, 13824): 8, (4096, 8192, 4096): 8}

# The device probe (``lab/device_library/probe_tf32_device.py``, H100, cuBLAS 13.1): (M, N, K) -> the
# power-of-two band widths consistent with the measured shared-tile mask, at shapes where the probe ran
# ``segment_k_on`` with T > C and a tile grid of several rows and columns (28 of the 51 probed shapes ran
# ``segment_k_off``).  16384x4096x14336 has more tile rows than columns: its bands cut the rows.
PROBED_SWIZZLE = {
    (1024, 1024, 8192): {4}, (1024, 8192, 4096): {1, 2, 4}, (1500, 3072, 768): {1, 2, 4},
    (1536, 4096, 4096): {4}, (1536, 4096, 8192): {1, 2}, (1536, 8192, 4096): {1, 2, 4},
    (1536, 8192, 8192): {1, 2, 4}, (16384, 4096, 14336): {8, 16, 32}, (256, 4096, 4096): {1, 2, 4, 8, 16, 32, 64},
    (365, 32064, 5120): {1, 2, 4, 8, 16, 32, 64, 128}, (384, 5632, 4096): {1}, (384, 5632, 8192): {1},
    (384, 8192, 8192): {1, 2, 4}, (400, 6144, 6144): {2}, (4096, 8192, 4096): {8, 16, 32}, (448, 5632, 4608): {2},
    (464, 27648, 5120): {4}, (512, 5632, 4096): {2}, (768, 11008, 4096): {1, 2, 4, 8, 16},
    (768, 4096, 4096): {1, 2}, (768, 8192, 4096): {1, 2, 4}, (768, 8192, 8192): {1, 2, 4},
    (864, 5120, 13824): {8, 16}, (880, 5120, 13824): {8, 16}}

# The band width's base per CTA count C of the launch: a per-GPU fact, read from gpus.json (``streamk_swizzle`` of the
# reference model, whose probe and captures found it: the CTA counts of all probed and captured T > C launches; one
# of them inferred from a shape whose launch the table lacks, as docs/tables.md says).
BASE_SWIZZLE = gpus.streamk_swizzle(gpus.reference_gpu())
# The CTA counts at which the probe saw the width doubled (``streamk_swizzle_doubled``, the same model's): a per-GPU
# fact too -- at the others the doubling was never observed, so ``swizzle_for`` does not claim it there.
DOUBLED_SWIZZLE = gpus.streamk_swizzle_doubled(gpus.reference_gpu())


def parse_tile(kernel: str) -> tuple[int, int, int]:
    """(TM, TN, TK) of an ``sm90_xmma_gemm`` kernel name.

    >>> parse_tile("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize64x128x32_warpgroupsize1x1x1_execute_segment_k_on")
    (64, 128, 32)
    """
    m = re.search(r"tilesize(\d+)x(\d+)x(\d+)", kernel)
    if not m:
        raise ValueError(f"kernel: no tilesize in {kernel!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


@dataclass(frozen=True)
class StreamKPlan:
    """The stream-K schedule of one call: tile grid, shared tiles and their segments."""

    tiles_m: int  # tiles along the output's columns (cuBLAS m = torch N)
    tiles_n: int  # tiles along the output's rows (cuBLAS n = torch M)
    iters: int  # K-iterations per tile, ceil(K / TK)
    shared: int  # r: tiles processed stream-K (the last r of the schedule)
    splits: int  # s: CTAs (segments) per shared tile
    swizzle: int
    along_n: bool = False  # bands cut the n-tiles (more tile rows than columns), else the m-tiles

    @property
    def tiles(self) -> int:
        return self.tiles_m * self.tiles_n

    def segments(self, tm: int, tn: int) -> list[tuple[int, int]]:
        """Iteration ranges [i0, i1) of tile (tm, tn)'s segments, in K order (one range: not shared)."""
        order = schedule_index(tm, tn, self.tiles_m, self.tiles_n, self.swizzle, self.along_n)
        if self.splits <= 1 or order < self.tiles - self.shared:
            return [(0, self.iters)]
        bounds = np.concatenate([[0], np.cumsum(segment_lengths(self.iters, self.splits))])
        return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def plan(M: int, N: int, K: int, ctas: int, tile: tuple[int, int, int], swizzle: int | None = 1) -> StreamKPlan:
    """The schedule of an M x N x K call on ``ctas`` CTAs with ``tile`` = (TM, TN, TK); ``swizzle=None``:
    ``swizzle_for``'s width (ValueError where it is not determined and matters).

    >>> p = plan(256, 4096, 4096, 120, (64, 128, 32)); (p.tiles, p.shared, p.splits)
    (128, 8, 15)
    """
    TM, TN, TK = tile
    tm, tn = -(-N // TM), -(-M // TN)
    T = tm * tn
    r = T % ctas if T > ctas else T
    s = ctas // r if r else 1
    if swizzle is None:
        swizzle = swizzle_for(M, N, K, ctas, tile)
        if swizzle is None:
            raise ValueError(f"{M}x{N}x{K} on {ctas} CTAs: the schedule's band width is not determined")
    return StreamKPlan(tm, tn, -(-K // TK), r, s, swizzle, tn > tm)


def _grid(M: int, N: int, K: int, ctas: int, tile: tuple[int, int, int]) -> StreamKPlan:
    return plan(M, N, K, ctas, tile, 1)


def position_dependent(M: int, N: int, K: int, ctas: int, tile: tuple[int, int, int]) -> bool:
    """True when some but not all tiles are shared by several CTAs: an output's bits depend on its tile.

    >>> position_dependent(256, 4096, 4096, 120, (64, 128, 32)), position_dependent(512, 512, 16384, 108, (64, 256, 32))
    (True, False)
    """
    p = _grid(M, N, K, ctas, tile)
    # T <= C: every tile shared alike; s = 1: the "shared" tiles are one chain, as the data-parallel ones
    return p.tiles > ctas and p.shared > 0 and p.splits > 1


def swizzle_matters(M: int, N: int, K: int, ctas: int, tile: tuple[int, int, int]) -> bool:
    """True when position dependent and the tile grid has more than one row and column (the band width
    then decides which tiles are shared).

    >>> swizzle_matters(256, 4096, 4096, 120, (64, 128, 32)), swizzle_matters(58, 36864, 4608, 132, (128, 128, 32))
    (True, False)
    """
    p = _grid(M, N, K, ctas, tile)
    return position_dependent(M, N, K, ctas, tile) and p.tiles_m > 1 and p.tiles_n > 1


def swizzle_for(M: int, N: int, K: int, ctas: int, tile: tuple[int, int, int]) -> int | None:
    """The schedule's band width W cuBLAS uses for this launch; None where the evidence does not determine it.

    Rule (fits all 24 probed stream-K masks and the 7 captured shapes that need a width, see the tests):
    W = ``BASE_SWIZZLE[ctas]`` (C = 99 -> 1, 132 -> 2, 120 -> 4), doubled when the band length L (the grid's
    shorter side in tiles, which each band spans) does not divide the shared-tile count r.  Where the
    width does not change any output (``swizzle_matters`` False) it is 1.  None: an unseen C, a square tile
    grid (which side the bands cut is unmeasured), or the doubling at a C not in ``DOUBLED_SWIZZLE`` (on the H100
    only 120: never observed at 99 or 132); also where "L divides r" and "L divides C" (the same on all
    evidence) disagree.

    >>> swizzle_for(1024, 1024, 8192, 120, (64, 128, 32)), swizzle_for(864, 5120, 13824, 120, (128, 128, 32))
    (4, 8)
    >>> swizzle_for(448, 5632, 4608, 132, (128, 128, 32)), swizzle_for(58, 36864, 4608, 132, (128, 128, 32))
    (2, 1)
    """
    if not swizzle_matters(M, N, K, ctas, tile):
        return 1
    p = _grid(M, N, K, ctas, tile)
    if p.tiles_m == p.tiles_n or ctas not in BASE_SWIZZLE:
        return None
    length = min(p.tiles_m, p.tiles_n)
    doubled = p.shared % length != 0
    if doubled != (ctas % length != 0) or (doubled and ctas not in DOUBLED_SWIZZLE):
        return None
    return BASE_SWIZZLE[ctas] * (2 if doubled else 1)


def schedule_index(tm: int, tn: int, tiles_m: int, tiles_n: int, swizzle: int, along_n: bool = False) -> int:
    """Position of tile (tm, tn) in the schedule: bands of ``swizzle`` m-tiles, n serpentine across bands
    (``along_n``: bands of n-tiles, m serpentine).

    >>> [schedule_index(m, n, 4, 2, 2) for n in range(2) for m in range(4)]
    [0, 1, 6, 7, 2, 3, 4, 5]
    >>> [schedule_index(m, n, 2, 4, 2, along_n=True) for n in range(4) for m in range(2)]
    [0, 2, 1, 3, 6, 4, 7, 5]
    """
    if along_n:  # the same walk with the roles of the two sides swapped
        tm, tn, tiles_m, tiles_n = tn, tm, tiles_n, tiles_m
    band = tm // swizzle
    width = min(swizzle, tiles_m - band * swizzle)
    row = tn if band % 2 == 0 else tiles_n - 1 - tn
    return band * swizzle * tiles_n + row * width + tm % swizzle


def segment_lengths(iters: int, splits: int) -> list[int]:
    """``splits`` consecutive segments of ``iters // splits`` iterations, the remainder one each to the last.

    >>> segment_lengths(160, 3), segment_lengths(128, 15)[:2], segment_lengths(128, 15)[-1]
    ([53, 53, 54], [8, 8], 9)
    """
    q, rem = divmod(iters, splits)
    return [q + (1 if k >= splits - rem else 0) for k in range(splits)]


def pair_tree(s: int):
    """The fix-up's addition tree over segments 0..s-1 (nested pairs), pairing from the last segment.

    >>> pair_tree(3), pair_tree(4), pair_tree(6)
    ((0, (1, 2)), ((0, 1), (2, 3)), ((0, 1), ((2, 3), (4, 5))))
    """
    items: list = list(range(s))
    while len(items) > 1:
        head = [items[0]] if len(items) % 2 else []
        rest = items[len(head):]
        items = head + [(rest[k], rest[k + 1]) for k in range(0, len(rest), 2)]
    return items[0]


def _fold_from_last(s: int):
    tree: object = s - 1
    for k in range(s - 2, -1, -1):
        tree = (k, tree)
    return tree


def streamk_tf32(A, B, rows, cols, *, M: int, N: int, K: int, ctas: int, tile: tuple[int, int, int],
                 swizzle: int | None = 1, reduce_kernel: bool = False, engine: str = "auto") -> np.ndarray:
    """FP32 outputs of the TF32 stream-K kernel for A rows [R, K] and B columns [K, C] of an M x N x K call.

    ``rows``/``cols``: the output rows (0..M-1) and columns (0..N-1) the given A rows and B columns are
    (they decide each output's tile); ``ctas``: the launch's CTA count; ``tile``: (TM, TN, TK) from the
    kernel name; ``swizzle``: the schedule's band width (see the module docstring; None: ``swizzle_for``'s);
    ``reduce_kernel``: an ``execute_split_k`` kernel follows (partials summed from the last).
    ``reduction``'s plan, run by the interpreter.  Returns float32 [R, C].
    """
    A, B = np.asarray(A, np.float32), np.asarray(B, np.float32)
    rows, cols = np.asarray(rows), np.asarray(cols)
    if A.shape != (len(rows), K) or B.shape != (K, len(cols)):
        raise ValueError(f"A, B: expected [{len(rows)}, {K}] and [{K}, {len(cols)}], got {A.shape}, {B.shape}")
    node = reduction(M, N, K, ctas, tile, swizzle, reduce_kernel)
    out = interpret.run(node, {"A": A, "B": B, "rows": rows, "cols": cols}, engine)
    return np.asarray(out, np.float64).astype(np.float32)


@lru_cache(maxsize=256)
def reduction(M: int, N: int, K: int, ctas: int, tile: tuple[int, int, int], swizzle: int | None = 1,
              reduce_kernel: bool = False) -> Node:
    """The K reduction of an M x N x K stream-K launch as a plan: operands rounded to TF32 (RNE), each output
    tile's segments TF32 wgmma k8 chains from +0 joined by the fix-up tree (or, with ``reduce_kernel``, summed from
    the last); the shared tiles (the last ``shared`` of the schedule) apart from the data-parallel ones.

    >>> from tcnumerics.plan import Plan
    >>> print(Plan(reduction(128, 128, 96, 3, (128, 128, 32))).explain())  # doctest: +ELLIPSIS
    operands rounded to TF32 (RNE), as tf32 x tf32 bits: K[0:96), each padded with +0 to 8-element ...
      tree sum of 3 terms (0, (1, 2)), FP32 RNE additions
        chain hopper.wgmma.m64n8k8.f32.tf32.tf32 over K[0:32) (4 instructions) from +0
        chain hopper.wgmma.m64n8k8.f32.tf32.tf32 over K[32:64) (4 instructions) from +0
        chain hopper.wgmma.m64n8k8.f32.tf32.tf32 over K[64:96) (4 instructions) from +0
    """
    p = plan(M, N, K, ctas, tile, swizzle)
    tree = _fold_from_last if reduce_kernel else pair_tree
    whole = _segments_node([(0, p.iters)], tile[2], K, tree)
    if p.splits <= 1 or p.shared == 0:
        return _tf32_operands(whole, K)
    tm, tn = np.meshgrid(np.arange(p.tiles_m), np.arange(p.tiles_n), indexing="ij")
    tm, tn = tm.ravel(), tn.ravel()
    order = _schedule_indices(tm, tn, p)
    shared = _segments_node(p.segments(int(tm[order.argmax()]), int(tn[order.argmax()])), tile[2], K, tree)
    if p.shared >= p.tiles:  # every tile shared alike
        return _tf32_operands(shared, K)
    at = np.flatnonzero(order >= p.tiles - p.shared)
    tiles = tuple((int(tm[i]), int(tn[i])) for i in at)
    return _tf32_operands(TileGroups(tile[:2], (tiles, None), (shared, whole)), K)


def _schedule_indices(tm: np.ndarray, tn: np.ndarray, p: StreamKPlan) -> np.ndarray:
    """``schedule_index`` of every tile (tm[i], tn[i]) at once (the same arithmetic on arrays).

    >>> p = plan(256, 4096, 4096, 120, (64, 128, 32))
    >>> tm, tn = np.arange(p.tiles_m).repeat(p.tiles_n), np.tile(np.arange(p.tiles_n), p.tiles_m)
    >>> bool((_schedule_indices(tm, tn, p) == [schedule_index(m, n, p.tiles_m, p.tiles_n, p.swizzle, p.along_n)
    ...                                        for m, n in zip(tm, tn)]).all())
    True
    """
    tiles_m, tiles_n, w = p.tiles_m, p.tiles_n, p.swizzle
    if p.along_n:
        tm, tn, tiles_m, tiles_n = tn, tm, tiles_n, tiles_m
    band = tm // w
    width = np.minimum(w, tiles_m - band * w)
    row = np.where(band % 2 == 0, tn, tiles_n - 1 - tn)
    return band * w * tiles_n + row * width + tm % w


def _segments_node(segs, TK: int, K: int, tree: Callable[[int], object]) -> Node:
    """A tile's segments, each a TF32 chain from +0 over its iterations' K range (the last one padded with +0 to
    the instruction's K), joined by ``tree``."""
    k = get_instruction(INSTRUCTION).k
    kp = -(-K // k) * k
    chains = tuple(Chain(get_instruction(INSTRUCTION), min(kp, a * TK), min(kp, b * TK)) for a, b in segs)
    return chains[0] if len(chains) == 1 else OrderedSum(chains, "tree", tree=tree(len(chains)))


def _tf32_operands(term: Node, K: int) -> LayOut:
    """The operands as TF32 bits (FP32 values rounded RNE), K padded to the instruction's K at the end."""
    spec = get_instruction(INSTRUCTION)
    return LayOut(term, spec, ((0, K),), spec.k, "last", "rne")


def tiled_outputs(A, B, rows, cols, *, tile: tuple[int, int, int], K: int,
                  segments: Callable[[int, int], list[tuple[int, int]]], tree: Callable[[int], object],
                  engine: str = "auto") -> np.ndarray:
    """Outputs of any segment map and fix-up tree: ``segments(tm, tn)`` gives a tile's iteration ranges,
    each a TF32 chain from +0, combined by ``tree(len(segments))`` (nested index pairs) with FP32 adds: a plan of
    the given outputs' tiles grouped by their segments, run by the interpreter.  Used to score other hypotheses
    (``probe_tf32.py``).  Returns float32 [R, C]."""
    A, B = np.asarray(A, np.float32), np.asarray(B, np.float32)
    rows, cols = np.asarray(rows), np.asarray(cols)
    TM, TN, TK = tile
    groups: dict[tuple, list[tuple[int, int]]] = {}
    for tn in np.unique(rows // TN):
        for tm in np.unique(cols // TM):
            groups.setdefault(tuple(segments(int(tm), int(tn))), []).append((int(tm), int(tn)))
    terms = tuple(_segments_node(segs, TK, K, tree) for segs in groups)
    node = _tf32_operands(TileGroups((TM, TN), tuple(tuple(g) for g in groups.values()), terms), K)
    out = interpret.run(node, {"A": A, "B": B, "rows": rows, "cols": cols}, engine)
    return np.asarray(out, np.float64).astype(np.float32)
