"""What cuBLAS launches for a torch GEMM call on Hopper: the measured launch table.

``hopper_launches.npz`` holds, for 21,872,070 calls, the kernels cuBLAS launched in order and the main
kernel's launch grid: four profiled kernel surveys (every projection of 75 published model configurations x
token counts 1..16384, a log-spaced (M, N, K) grid, attention bmm, FP32/TF32 and FP8, transposed views and odd
vocabulary widths over 95 configurations, every op kind of ``library.ops``; plus the bit captures' calls) and
the dense surveys read off CUDA-graph captures (``tools/device_library/graph_survey.py``: the 95 configurations'
projections at 928 token counts, a model-shaped (N, K) grid of 22,431 pairs at 52, attention bmm at batch x heads
1..128, six head dims and every sequence length to 256, every 8 to 4,096).  It is stored as runs along M (``KindRuns``), one call kind
loaded when first asked for.  The grid is what makes this table a measurement of
the *numerics*, not only of the kernel name: nvjet split-K kernels launch ``tiles x S`` CTAs (tiles of the kernel's tile shape, rounded up to its
cluster) while that stays within one wave (132 CTAs, 120 for clusters of 4 or 8), so the slice count S
is read off the grid -- it reproduced every sampled output bit of all 338 such captured calls; CUTLASS
and xmma split-K kernels put S in grid z (docs/gemm.md, "The launch table").

    >>> from tcnumerics.library.selection import Call
    >>> launch = measured_launch(Call("linear", "bf16", "bf16", 16, 1024, 14336, b_t=True))
    >>> launch.main.split("_")[3], nvjet_split_count(launch, Call("linear", "bf16", "bf16", 16, 1024, 14336, b_t=True))
    ('64x16', 8)
"""

from __future__ import annotations

import bisect
import math
import os
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .selection import Call

_PATH = os.path.join(os.path.dirname(__file__), "hopper_launches.npz")
_NVJET = re.compile(r"nvjet_sm90_[a-z]+_(\d+)x(\d+)_(\d+)x\d+_(\d+)x(\d+)_")
_TABLE: dict | None = None


@dataclass(frozen=True)
class Launch:
    """One measured launch: the activity names in order, the main kernel's CTA count and grid z."""

    kernels: tuple[str, ...]
    ctas: int
    grid_z: int

    @property
    def main(self) -> str:
        """The GEMM kernel (not a memset, scaling or split-K reduction)."""
        return next((k for k in self.kernels if is_gemm_kernel(k)), self.kernels[0])

    @property
    def text(self) -> str:
        return " | ".join(self.kernels)

    @property
    def in_place(self) -> bool:
        """A memset before one GEMM kernel and no reduction kernel: split-K slices accumulate in the output."""
        return self.kernels[0].startswith("Memset") and "splitKreduce" not in self.text


def is_gemm_kernel(name: str) -> bool:
    """A GEMM kernel's activity name (not a memset, copy, scaling, split-K reduction or torch elementwise kernel)."""
    return not name.startswith(("Memset", "Memcpy")) and not re.search(r"scal_kernel|scal_64addr|splitKreduce|at::native::", name)


# A launch's shape packed into one int64 (N: 18 bits, K: 17, batch: 10, M: 15), so each call kind's runs are one
# sorted array: exact lookups and "the same N, K at other token counts" are binary searches, not a dict of millions.
_M_BITS, _B_BITS, _K_BITS, _N_BITS = 15, 10, 17, 18


def _pack(M: int, N: int, K: int, b: int) -> int | None:
    if not (0 <= M < 1 << _M_BITS and 0 < N < 1 << _N_BITS and 0 < K < 1 << _K_BITS and 0 < b < 1 << _B_BITS):
        return None
    return ((N << _K_BITS | K) << _B_BITS | b) << _M_BITS | M


def tiles_of(p: np.ndarray, M, N, b):
    """Output tiles of nvjet kernels with (tile N, tile M, cluster x, cluster y) rows ``p`` over N x M, rounded to
    whole clusters (numpy-friendly; 1 for other kernels' zero rows)."""
    tm, tn, cx, cy = (np.maximum(p[..., i], 1) for i in range(4))
    return -(-(-(-N // tm)) // cx) * cx * (-(-(-(-M // tn)) // cy) * cy) * b


@dataclass
class KindRuns:
    """One call kind's measured launches as runs along M (``tools/device_library/launch_runs.py``): run i covers
    the token counts ``first M, first M + m_step[i], ..., m_last[i]`` at one (N, K, batch), all measured, with one
    activity signature, grid z and CTA rule -- ``value`` CTAs (mode 0) or ``value`` CTAs per nvjet output tile
    (mode 1).  A token count inside a run but off its step was not measured."""

    keys: np.ndarray  # _pack(first M, N, K, b), sorted
    m_last: np.ndarray
    m_step: np.ndarray
    sig: np.ndarray
    grid_z: np.ndarray
    cta_mode: np.ndarray
    cta_value: np.ndarray
    params: np.ndarray  # per run: the nvjet kernel's (tile N, tile M, cluster x, cluster y), zeros otherwise
    _points: tuple | None = None

    def ctas(self, i, M, N, b):
        """The main kernel's CTA count of run(s) ``i`` at token count ``M`` (numpy-friendly)."""
        per_tile = self.cta_mode[i] == 1
        return np.where(per_tile, tiles_of(self.params[i], M, N, b) * self.cta_value[i], self.cta_value[i])

    def points(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every run's first and last launch as (packed key, signature, CTAs, grid z) arrays: the measured points
        the k-nearest-neighbour prediction (``unseen.py``) votes with."""
        if self._points is None:
            first = self.keys & ((1 << _M_BITS) - 1)
            both = np.flatnonzero(self.m_last != first)
            i = np.concatenate([np.arange(len(self.keys)), both])
            M = np.concatenate([first, self.m_last[both].astype(np.int64)])
            base = self.keys[i] >> _M_BITS
            b, N = base & ((1 << _B_BITS) - 1), base >> (_B_BITS + _K_BITS)
            keys = base << _M_BITS | M
            order = np.argsort(keys, kind="stable")
            i, keys, M, N, b = i[order], keys[order], M[order], N[order], b[order]
            self._points = (keys, self.sig[i], self.ctas(i, M, N, b).astype(np.int64), self.grid_z[i].astype(np.int64))
        return self._points


class _Kinds(dict):
    """Call kind -> ``KindRuns``, each read from the table file the first time it is asked for (a kind's runs
    are up to ~1M rows; most sessions touch a few kinds)."""

    def __init__(self, path: str, names: list[str], signature_params: np.ndarray) -> None:
        super().__init__()
        self._path, self._index, self._params = path, {n: i for i, n in enumerate(names)}, signature_params

    def __missing__(self, kind: str) -> KindRuns:
        i = self._index[kind]  # KeyError for a kind the table lacks, as a dict would
        with np.load(self._path, allow_pickle=False) as z:
            a = {f: z[f"k{i}_{f}"] for f in ("N", "K", "b", "m_first", "m_last", "m_step", "sig", "grid_z",
                                               "cta_mode", "cta_value")}
        key = ((a["N"].astype(np.int64) << _K_BITS | a["K"]) << _B_BITS | a["b"]) << _M_BITS | a["m_first"]
        runs = KindRuns(key, a["m_last"].astype(np.int64), a["m_step"].astype(np.int64), a["sig"],
                        a["grid_z"], a["cta_mode"], a["cta_value"].astype(np.int64), self._params[a["sig"]])
        self[kind] = runs
        return runs

    def __contains__(self, kind: object) -> bool:
        return kind in self._index

    def get(self, kind, default=None):
        return self[kind] if kind in self._index else default

    # iteration and size are over every kind of the table, loaded or not (a dict's own would show only those
    # already loaded); items()/values() load each kind in turn
    def __iter__(self):
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def keys(self):
        return self._index.keys()

    def values(self):
        return (self[k] for k in self._index)

    def items(self):
        return ((k, self[k]) for k in self._index)

    def names(self) -> list[str]:
        return list(self._index)


def signature_params(signatures: list[str]) -> np.ndarray:
    """Per activity signature: its nvjet kernel's (tile N, tile M, cluster x, cluster y), zeros for other kernels."""
    out = np.zeros((len(signatures), 4), np.int64)
    for i, s in enumerate(signatures):
        m = _NVJET.search(s)
        if m:
            tm, tn, _, cx, cy = (int(x) for x in m.groups())
            out[i] = tm, tn, cx, cy
    return out


def _load(path: str) -> dict:
    """The launch table at ``path``: its index now, each kind's runs when first asked for."""
    with np.load(path, allow_pickle=False) as z:
        names, sigs = [str(k) for k in z["kinds"]], [str(x) for x in z["signatures"]]
        grid = (z["grid_m"].tolist(), z["grid_nk"].tolist())
        count = int(z["launch_count"])
    return {"kinds": _Kinds(path, names, signature_params(sigs)), "signatures": sigs, "grid": grid,
            "launch_count": count}


def _table() -> dict:
    global _TABLE
    if _TABLE is None:
        _TABLE = _load(_PATH) if os.path.exists(_PATH) else {}
    return _TABLE


def _run_at(runs: KindRuns, key: int) -> int | None:
    """The run holding packed shape ``key`` (measured there), or None."""
    i = int(np.searchsorted(runs.keys, key, side="right")) - 1
    if i < 0 or runs.keys[i] >> _M_BITS != key >> _M_BITS:
        return None
    first, M = int(runs.keys[i]) & ((1 << _M_BITS) - 1), key & ((1 << _M_BITS) - 1)
    return i if M <= runs.m_last[i] and (M - first) % runs.m_step[i] == 0 else None


def measured_launch(c: Call) -> Launch | None:
    """The launch measured for exactly this call kind and shape, or None."""
    t = _table()
    runs, key = t.get("kinds", {}).get(c.kind()), _pack(c.M, c.N, c.K, c.b)
    if runs is None or key is None:
        return None
    i = _run_at(runs, key)
    if i is None:
        return None
    return Launch(tuple(t["signatures"][runs.sig[i]].split(" | ")), int(runs.ctas(i, c.M, c.N, c.b)),
                  int(runs.grid_z[i]))


def measured_token_counts(c: Call, same_alignment: bool = False) -> list[int]:
    """The token counts M measured for this call kind at the call's N, K and batch (sorted); ``same_alignment``:
    only those in the call's TMA alignment class where M is A's contiguous side (A passed transposed: cuBLAS runs
    other kernel families when it is not a multiple of 8)."""
    runs, base = _table().get("kinds", {}).get(c.kind()), _pack(0, c.N, c.K, c.b)
    if runs is None or base is None:
        return []
    lo, hi = np.searchsorted(runs.keys, [base, base + (1 << _M_BITS)])
    out: list[int] = []
    for i in range(lo, hi):
        out += range(int(runs.keys[i]) & ((1 << _M_BITS) - 1), int(runs.m_last[i]) + 1, int(runs.m_step[i]))
    if same_alignment and c.a_t:
        out = [m for m in out if (m % 8 == 0) == (c.M % 8 == 0)]
    return out


def launch_count() -> int:
    """How many launches the table holds."""
    return _table().get("launch_count", 0)


def nvjet_tiles(name: str, c: Call) -> int | None:
    """Output tiles of an nvjet kernel over the call (cuBLAS sees the column-major product, N x M), rounded up
    to whole clusters; None for other kernels."""
    m = _NVJET.search(name)
    if not m:
        return None
    tm, tn, _, cx, cy = (int(x) for x in m.groups())
    return math.ceil(math.ceil(c.N / tm) / cx) * cx * math.ceil(math.ceil(c.M / tn) / cy) * cy * c.b


def nvjet_split_count(launch: Launch, c: Call) -> int | None:
    """The split-K slice count S of an nvjet launch, read off its grid (CTAs = tiles x S), or None where the
    grid does not say (unsplit kernel, or more work units than one wave of CTAs)."""
    if "splitK" not in launch.main:
        return 1
    tiles = nvjet_tiles(launch.main, c)
    if not tiles or launch.ctas % tiles or launch.ctas // tiles < 2:
        return None
    return launch.ctas // tiles


def _with_shape(c: Call, M: int, N: int, K: int) -> Call:
    return replace(c, M=M, N=N, K=K)


def _bracket(v: int, axis: list[int]) -> list[int]:
    """``v`` itself if measured on this axis, else the nearest measured values below and above it."""
    j = bisect.bisect_left(axis, v)
    if j < len(axis) and axis[j] == v:
        return [v]
    return [axis[i] for i in (j - 1, j) if 0 <= i < len(axis)]


def bracketing_launches(c: Call) -> tuple[list[tuple[Call, Launch | None]], str]:
    """Measured launches around an unmeasured call, and how they were found: the same (N, K) at the token
    counts either side of M; else the corners of the surveyed (M, N, K) grid cell holding the call."""
    t = _table()
    ms = measured_token_counts(c, same_alignment=True)
    if ms:
        return [(cc, measured_launch(cc)) for cc in (_with_shape(c, m, c.N, c.K) for m in _bracket(c.M, ms))], \
            "the same N and K at the nearest measured token counts"
    grid_m, grid_nk = t.get("grid", ([], []))
    if not grid_m:
        return [], ""
    corners = [_with_shape(c, m, n, k) for m in _bracket(c.M, grid_m) for n in _bracket(c.N, grid_nk)
               for k in _bracket(c.K, grid_nk)]
    return [(cc, measured_launch(cc)) for cc in corners], "the corners of the surveyed (M, N, K) grid cell"


def predicted_nvjet_split(c: Call) -> tuple[int | None, str]:
    """cuBLAS's split-K slice count for an unmeasured call, from the measured launches around it (a
    prediction: ~99.8% right where they all run the same unsplit kernel, ~94% where they agree on a split,
    in leave-out tests on the survey; docs/gemm.md).  Returns (S, how) with S = 1 for no split, or
    (None, reason) where the neighbours are not all nvjet launches with a readable split."""
    near, how = bracketing_launches(c)
    if not near or any(L is None for _, L in near):
        return None, "no complete set of measured neighbours"
    tile = 128 if c.op == "scaled_mm" else 64
    kt = -(-c.K // tile)
    per_slice = {}
    for cc, L in near:
        if not L.main.startswith("nvjet"):
            return None, f"a neighbour runs {L.main[:40]}"
        S = nvjet_split_count(L, cc)
        if S is None:
            return None, "a neighbour's split count is not readable"
        per_slice[(cc.M, cc.N, cc.K)] = S
    slicing = {S if S == 1 else -(-kt // S) for S in per_slice.values()}  # K-tiles per slice at the call's K
    if len(slicing) == 1:
        S = next(iter(per_slice.values()))
        return S, how + " agree"
    def dist(shape):
        return sum(abs(math.log2(a) - math.log2(b)) for a, b in zip(shape, (c.M, c.N, c.K)))
    nearest = min(per_slice, key=dist)
    return per_slice[nearest], how + " disagree; the nearest one's choice"


def nearest_launch(c: Call) -> tuple[tuple[Call, Launch] | None, str]:
    """The measured launch nearest an unmeasured call (log distance in M, N, K) among ``bracketing_launches``,
    with how it was found; a prediction (FP32/TF32 kernels: right family and grid for ~87% of leave-out calls
    bracketed along M, ~62% from grid corners)."""
    near, how = bracketing_launches(c)
    near = [(cc, L) for cc, L in near if L is not None]
    if not near:
        return None, "no measured neighbour"
    def dist(cc):
        return sum(abs(math.log2(a) - math.log2(b)) for a, b in zip((cc.M, cc.N, cc.K), (c.M, c.N, c.K)))
    return min(near, key=lambda p: dist(p[0])), how
