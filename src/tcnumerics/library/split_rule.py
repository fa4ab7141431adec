"""cuBLAS's split-K choice for nvjet BF16/FP16 GEMMs on the H100, as fitted to the op survey (a prediction).

cuBLAS 13.1 picks an nvjet kernel (tile, cluster, and optionally ``*_splitK_*`` with S slices of
``ceil(K-tiles / S)`` 64-element K-tiles) by its own heuristic, which is not published.  This module
predicts the slice count S (1: no split) of a call that was *not* measured, in two steps:

1. **Measured neighbours** (``cell_vote``): survey calls with the same N, K, batch, output type
   (FP32 or not) and M class (M rounded up to 8 below 64 -- the width of the nvjet tile cuBLAS
   uses along M for decode shapes -- and to 64 above) ran the same kernel family in the survey
   with few exceptions.  Their majority decides split or not, their most common S is the slice count.
2. **Formula** (``formula_split``) elsewhere, with ``c = ceil(M/64) * ceil(N/64) * b`` 64x64 output
   tiles and ``kt = ceil(K/64)`` K-tiles:

   * split only when ``b == 1`` and ``kt >= 44`` and (``c <= 24``, or the unsplit grid wastes
     more than 20% of the last wave of the GPU's ``sms`` SMs (``gpus.sms``; ``1 - c / (sms * ceil(c/sms)) > 0.2``)
     and ``kt >= 128``, or ``kt >= 256``);
   * S = ``min(sms // t, ceil(3 * kt / 64))`` (``gpus.wave_slices``), t the output tiles of the smallest nvjet tile
     width along N (64, 128, 192, 256, 384; 8..64 along M, as M needs) that gives at most 64
     tiles: cuBLAS fills about one wave of CTAs (tiles x S, a few short of ``sms``) and keeps at least ~21
     K-tiles per slice.

Evidence (``lab/device_library/fit_split_rule.py``, on the H100 op survey's 896 nvjet
BF16/FP16 calls, 303 of them split): an S counts as right when it reproduces every sampled output
bit of the call (BF16 outputs often admit several S; 180 split calls admit at most 3).

=======================================================  ===============  =========
rule                                                     split decision   S right
=======================================================  ===============  =========
earlier ``min(ceil(kt/22), sms/CTAs)``                   820 / 896        746
formula, parameters fitted on the whole survey           857              783
formula, 5-fold cross-validation (folds by shape)        858              781
neighbour vote + formula, leave-one-shape-out            872              808
formula given the real kernel's tile count (split only)  300 / 303        251 / 303
=======================================================  ===============  =========

Most of the remaining error is the tile choice, which follows cuBLAS's cost model (e.g. 48 tiles
of 64x8 with 4x1 clusters split into 5 slices: 240 CTAs; 64x8 vs 64x24 tiles at the same shape
for F.linear with and without bias).  On the held-out capture (115 nvjet calls, 17 split; not
used for fitting): decision 112, S right 107 (earlier rule: 108, 103).  The rule is therefore a
*prediction*: calls it decides are flagged not modelled (``selection._select_nvjet``), except
inside the measured no-split frontier, which takes precedence.

Example:
    >>> formula_split(M=8, N=1024, K=14336)   # 16 tiles of 64 x 8: 8 slices fill 128 CTAs
    8
    >>> formula_split(M=4096, N=4096, K=4096)  # a full grid: no split
    1
"""

from __future__ import annotations

import math
from collections import Counter

from . import gpus
from .calls import TableKey
from .cutlass_half import tile_slices

K_TILE = 64
MIN_K_TILES = 44  # no split below this many 64-element K-tiles (no survey call split below 48)
ALWAYS_SPLIT_TILES = 24  # at most this many 64x64 output tiles: split whenever K is long enough
WASTE = 0.2  # unsplit grids leaving more than this share of the last wave idle split at ...
WASTE_K_TILES = 128  # ... this many K-tiles or more
LONG_K_TILES = 256  # any grid splits at this many K-tiles (within the measured range)
TILE_WIDTHS_N = (64, 128, 192, 256, 384)  # nvjet tile sizes along N seen in split kernels
TARGET_TILES = 64  # grow the tile along N until at most this many output tiles remain
SLICE_K_TILES = 64 / 3  # at least ~21.3 K-tiles per slice (3 slices at 4096, 6 at 8192, 48 at 65536)


def _tiles(M: int, N: int, b: int, width_n: int) -> int:
    """Output tiles of an nvjet tile ``width_n`` along N and, along M, 8..64 (decode) or 64 wide."""
    width_m = min(-(-M // 8) * 8, 64)
    return math.ceil(N / width_n) * math.ceil(M / width_m) * b


def formula_split(M: int, N: int, K: int, b: int = 1, gpu: str | None = None) -> int:
    """Predicted slice count (1: no split) from the shape alone (see the module docstring), on GPU model ``gpu``
    (default: the default GPU model; its ``gpus.sms`` multiprocessors are the wave)."""
    sms = gpus.sms(gpu)
    kt = -(-K // K_TILE)
    if b > 1 or kt < MIN_K_TILES:
        return 1
    c = math.ceil(M / 64) * math.ceil(N / 64) * b
    waste = 1 - c / (sms * math.ceil(c / sms))
    if not (c <= ALWAYS_SPLIT_TILES or (waste > WASTE and kt >= WASTE_K_TILES) or kt >= LONG_K_TILES):
        return 1
    t = next((t for w in TILE_WIDTHS_N if (t := _tiles(M, N, b, w)) <= TARGET_TILES), _tiles(M, N, b, 384))
    return max(1, min(gpus.wave_slices(t, gpu), math.ceil(3 * kt / 64)))


def effective_slices(S: int, K: int) -> int:
    """The slices S equal slices of ``ceil(kt / S)`` K-tiles really make (empty trailing slices dropped): those of
    ``cutlass_half.tile_slices`` over 64-element K-tiles, the cut nvjet's split-K kernels make.

    >>> effective_slices(48, 65536), effective_slices(6, 8192), effective_slices(4, 64)
    (47, 6, 1)
    """
    return len(tile_slices(K, S, K_TILE) or (K,)) if S > 1 else 1


def m_class(M: int) -> int:
    """M rounded as the nvjet tile along M sees it: to 8 up to 64 (decode tiles 64x8 .. 64x64), else to 64."""
    return min(-(-M // 8) * 8, 64) if M <= 64 else 64 * -(-M // 64)


def cell_of(M: int, N: int, K: int, b: int, out: str) -> tuple:
    """The neighbourhood key: calls sharing it ran the same nvjet split choice in the survey (mostly)."""
    return (N, K, b, m_class(M), out == "fp32")


_CELLS: list = [None, None]  # [the calls dict last indexed (held, so its identity stays unique), its cells]


def _cells(calls: dict) -> dict:
    """cell -> list of slice counts (1: unsplit, None: split with S not identified) of the measured nvjet calls."""
    if _CELLS[0] is calls:
        return _CELLS[1]
    cells: dict[tuple, list] = {}
    for key, entry in calls.items():
        k = TableKey.parse(key)
        kernel = str(entry.get("kernel", ""))
        if k.op == "scaled_mm" or k.fmt not in ("bf16", "fp16") or not kernel.startswith("nvjet"):
            continue
        split = entry.get("split")
        S = len(split) if split else (None if "splitK" in kernel else 1)
        cells.setdefault(cell_of(k.M, k.N, k.K, k.b, k.out), []).append(S)
    _CELLS[:] = [calls, cells]
    return cells


def cell_vote(M: int, N: int, K: int, b: int, out: str, calls: dict, gpu: str | None = None) -> int | None:
    """The measured neighbours' choice: 1 (no split), S, or None when no survey call shares the cell.

    Ties go to split; S is the most common identified slice count (the formula's when none was identified)."""
    seen = _cells(calls).get(cell_of(M, N, K, b, out))
    if not seen:
        return None
    split = [S for S in seen if S != 1]
    if 2 * len(split) < len(seen):
        return 1
    known = Counter(effective_slices(S, K) for S in split if S)
    if known:
        return known.most_common(1)[0][0]
    return max(2, formula_split(M, N, K, b, gpu))


def predicted_split(c, calls: dict | None = None, *, no_split_verified: bool = False) -> int:
    """cuBLAS's predicted slice count for the nvjet call ``c`` (a ``calls.Call``; 1: no split).

    ``calls``: the measured table's calls (neighbours); ``no_split_verified``: the call lies inside
    the measured no-split frontier, which overrides the prediction.

    >>> from tcnumerics.library.calls import Call
    >>> predicted_split(Call("linear", "bf16", "bf16", 8, 1024, 14336, b_t=True))
    8
    """
    if no_split_verified:
        return 1
    voted = cell_vote(c.M, c.N, c.K, c.b, c.out, calls, c.gpu) if calls else None
    return effective_slices(voted if voted is not None else formula_split(c.M, c.N, c.K, c.b, c.gpu), c.K)
