"""The no-split frontier of a GPU model that has a launch table but no bit table, read off its own launches.

The H100's frontier (``measured.frontier``) comes from its bit captures: a call inside it -- some measured call with
no more output tiles and at least as long a K ran the plain unsplit kernel, and none with at least as many tiles and
no longer a K ran anything else -- runs that kernel too.  A model with no bit captures of its own (the H200) had no
frontier, so every unmeasured BF16/FP16 shape of it went to the k-NN prediction and was flagged, even a weight
gradient with K = 256 tokens.  Its launch table says the same thing the captures would: which kernel each call ran.
"Plain" is a launch whose GEMM kernel is an unsplit nvjet kernel -- one wgmma k16 chain over the whole of K, the
structure the H100's captures verified bit for bit, and a launch is the silicon's numerics on either GPU model;
"other" is any other launch (split-K, CUTLASS).  Only aligned launches count (N, K multiples of 8; where A is passed
transposed, M too: misaligned weight gradients run CUTLASS kernels), as only aligned calls are planned on nvjet.

On the H200's table (2026-11-28): 979,460 aligned launches with K < 2,561 over its 17 BF16/FP16 call kinds, every
one plain; the 3,768 non-plain weight-gradient launches below that K all have an M that is not a multiple of 8
(docs/gemm.md, "Flags that cry wolf").  The frontier decides only what the bit-table frontier decides for the H100:
a call is modelled on it only where K < ``choice.SHORT_K``.

    >>> from tcnumerics.library.calls import Call
    >>> c = Call("matmul", "bf16", "bf16", 131072, 3072, 256, a_t=True, gpu="h200")  # an LM head's weight gradient
    >>> applies(c), kind_frontier("h200", c.kind()).inside(tiles(c), c.K)
    (True, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import gpus, launches
from .kernel_names import is_gemm_kernel
from .launches import unpack_keys


@dataclass(frozen=True)
class KindFrontier:
    """A kind's aligned launches as (K, tiles) points: plain ones sorted by K with the fewest tiles at or above each
    K, other ones sorted by K with the most tiles at or below each K."""

    plain_k: np.ndarray
    plain_min_tiles: np.ndarray  # min tiles over plain points with K >= plain_k[i]
    other_k: np.ndarray
    other_max_tiles: np.ndarray  # max tiles over other points with K <= other_k[i]

    def dominated(self, tiles: int, K: int) -> bool:
        """A plain launch with no more tiles and at least this K."""
        i = int(np.searchsorted(self.plain_k, K, side="left"))
        return bool(i < len(self.plain_k) and self.plain_min_tiles[i] <= tiles)

    def near_other(self, tiles: int, K: int) -> bool:
        """Another launch with at least these tiles and no more K."""
        j = int(np.searchsorted(self.other_k, K, side="right")) - 1
        return bool(j >= 0 and self.other_max_tiles[j] >= tiles)

    def inside(self, tiles: int, K: int) -> bool:
        return self.dominated(tiles, K) and not self.near_other(tiles, K)


def _plain_signatures(signatures: list[str]) -> np.ndarray:
    def main(sig: str) -> str:
        names = sig.split(" | ")
        return next((n for n in names if is_gemm_kernel(n)), names[0])
    return np.array([main(s).startswith("nvjet") and "splitK" not in main(s) for s in signatures], bool)


@lru_cache(maxsize=64)
def _frontier(gpu: str, kind: str, epoch: int) -> KindFrontier | None:
    t = launches.table(gpu)
    runs = t.get("kinds", {}).get(kind) if t else None
    if runs is None or not len(runs.keys):
        return None
    plain_sig = _plain_signatures(list(t["signatures"]))
    ok, K, n_tiles, _ = _aligned_runs(runs, kind)
    plain = plain_sig[runs.sig]
    lo = -(-unpack_keys(runs.keys)[3] // 128) * n_tiles  # a plain run vouches for its fewest tiles
    hi = -(-runs.m_last // 128) * n_tiles  # another for its most
    pk, pt = K[ok & plain], lo[ok & plain]
    ok_other = ok & ~plain
    ok_k, ot = K[ok_other], hi[ok_other]
    order = np.argsort(pk, kind="stable")
    pk, pt = pk[order], pt[order]
    suffix_min = np.minimum.accumulate(pt[::-1])[::-1] if len(pt) else pt
    order = np.argsort(ok_k, kind="stable")
    ok_k, ot = ok_k[order], ot[order]
    prefix_max = np.maximum.accumulate(ot) if len(ot) else ot
    return KindFrontier(pk, suffix_min, ok_k, prefix_max)


def _aligned_runs(runs, kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(aligned mask, K, N x batch tiles, launches) per run: aligned as an nvjet plan needs it (N, K multiples of 8;
    M too where A is passed transposed)."""
    N, K, b, m_first = unpack_keys(runs.keys)
    ok = (K % 8 == 0) & (N % 8 == 0)
    if kind.split("|")[4] == "1":  # A transposed: M is A's contiguous side
        ok &= (m_first % 8 == 0) & (runs.m_step % 8 == 0)
    return ok, K, -(-N // 128) * b, (runs.m_last - m_first) // runs.m_step + 1


def evidence(gpu: str, below_k: int) -> dict:
    """Over model ``gpu``'s BF16/FP16 call kinds: its aligned launches with K < ``below_k``, and how many of them are
    not an unsplit nvjet kernel (the premise of the frontier: none, on the H200's table of 2026-11-28)."""
    t = launches.table(gpu)
    plain_sig = _plain_signatures(list(t["signatures"])) if t else np.zeros(0, bool)
    out = dict(kinds=0, launches=0, not_plain=0)
    for kind in (t.get("kinds", {}) if t else {}):
        f = kind.split("|")
        if f[0] == "scaled_mm" or f[1] not in ("bf16", "fp16"):
            continue
        runs = t["kinds"][kind]
        ok, K, _, count = _aligned_runs(runs, kind)
        sel = ok & (K < below_k)
        out["kinds"] += 1
        out["launches"] += int(count[sel].sum())
        out["not_plain"] += int(count[sel & ~plain_sig[runs.sig]].sum())
    return out


def kind_frontier(gpu: str, kind: str) -> KindFrontier | None:
    """Model ``gpu``'s frontier for call kind ``kind`` from its own launch table, or None where it measured none."""
    return _frontier(gpu, kind, gpus.tables_epoch())


def applies(c) -> bool:
    """The launch frontier speaks for ``c``: a BF16/FP16 call (not FP8, FP32 or TF32) of a GPU model that has no bit
    table but measured the call's kind itself."""
    m = gpus.model(c.gpu)
    return (c.op != "scaled_mm" and c.fmt in ("bf16", "fp16") and m is not None and not m.measured
            and c.gpu in gpus.coverage(c.gpu, c.kind()).tables)


def tiles(c) -> int:
    """Output tiles of 128 x 128 (the frontiers' measure of the grid)."""
    return math.ceil(c.M / 128) * math.ceil(c.N / 128) * c.b
