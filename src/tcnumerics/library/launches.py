"""What cuBLAS launches for a torch GEMM call: the measured launch tables, one per GPU model.

A GPU model's launch table (``library/gpus.json`` names the file: ``h100_launches.npz`` for the H100) holds, for
every call it measured, the kernels cuBLAS launched in order and the main kernel's launch grid
(``launch_count(gpu)`` says how many; ``docs/tables.md`` what each table holds).  The H100's: four profiled kernel surveys (every projection of 75 published model configurations x
token counts 1..16384, a log-spaced (M, N, K) grid, attention bmm, FP32/TF32 and FP8, transposed views and odd
vocabulary widths over 95 configurations, every op kind of ``library.ops``; plus the bit captures' calls) and
the dense surveys read off CUDA-graph captures (``lab/device_library/graph_survey.py``: the 95 configurations'
projections at 928 token counts, a model-shaped (N, K) grid of 22,431 pairs at 52, attention bmm at batch x heads
1..128, six head dims and every sequence length to 256, every 8 to 4,096).  It is stored as runs along M
(``KindRuns``), one call kind loaded when first asked for.  The grid is what makes this table a measurement of
the *numerics*, not only of the kernel name: nvjet split-K kernels launch ``tiles x S`` CTAs (tiles of the kernel's tile shape, rounded up to its
cluster) while that stays within one wave (``gpus.sms`` CTAs, ``gpus.clustered_wave`` for clusters of 4 or 8), so
the slice count S
is read off the grid -- it reproduced every sampled output bit of all 338 such captured calls; CUTLASS
and xmma split-K kernels put S in grid z (docs/gemm.md, "The launch table").

Which model's table answers a call is ``gpus.coverage(call.gpu, call.kind())``: the call's own model where it
measured that kind, then models it was shown to agree with; a measured launch of the first that has one wins.

    >>> from tcnumerics.library.calls import Call
    >>> launch = measured_launch(Call("linear", "bf16", "bf16", 16, 1024, 14336, b_t=True))
    >>> launch.main.split("_")[3], nvjet_split_count(launch, Call("linear", "bf16", "bf16", 16, 1024, 14336, b_t=True))
    ('64x16', 8)
"""

from __future__ import annotations

import bisect
import math
import os
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from . import gpus
from .calls import Call
from .kernel_names import NVJET as _NVJET, is_gemm_kernel

_TABLES: dict[str, dict] = {}  # model key -> its loaded launch table ({} where it has none)


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


# A launch's shape packed into one int64 (N: 19 bits, K: 19, batch: 10, M: 15 -- 63 bits), so each call kind's runs
# are one sorted array: exact lookups and "the same N, K at other token counts" are binary searches, not a dict of
# millions.  N and K to 524,287 (the misaligned survey reaches 295,812; an LM head's input gradient has K = the
# vocabulary); M to 32,767 (token counts to 16,384).  A call beyond these is never measured: predicted, flagged --
# e.g. an LM head's weight gradient, M = a vocabulary of 32,768 or more.  (Until 2026-11-27 K had 17 bits, and the
# k-NN's decoding of the dense_misaligned launches with K >= 131,072 read a wrong N and K: lookups refused them.)
class KeyBits(NamedTuple):
    """The widths of a packed launch key's fields, most significant first: N, K, batch, M."""

    N: int
    K: int
    b: int
    M: int


KEY_BITS = KeyBits(N=19, K=19, b=10, M=15)
_M_BITS, _B_BITS, _K_BITS, _N_BITS = KEY_BITS.M, KEY_BITS.b, KEY_BITS.K, KEY_BITS.N


# --- the table API: packed keys, read (``load_table``) and written (``write_table``, below) in this module -----
def pack_key(M: int, N: int, K: int, b: int) -> int | None:
    """The packed key of one launch shape, or None where the shape cannot be stored (``KEY_BITS``).

    >>> key = pack_key(16, 1024, 14336, 1)
    >>> unpack_keys(np.array([key]))
    (array([1024]), array([14336]), array([1]), array([16]))
    >>> pack_key(1 << 15, 8, 8, 1) is None
    True
    """
    if not (0 <= M < 1 << _M_BITS and 0 < N < 1 << _N_BITS and 0 < K < 1 << _K_BITS and 0 < b < 1 << _B_BITS):
        return None
    return ((N << _K_BITS | K) << _B_BITS | b) << _M_BITS | M


def fits(M: int, N: int, K: int, b: int = 1) -> bool:
    """The shape can be stored in (and looked up from) a launch table."""
    return pack_key(M, N, K, b) is not None


def fits_keys(M, N, K, b) -> np.ndarray:
    """``fits`` over arrays: which shapes a launch table can store."""
    M, N, K, b = (np.asarray(x, np.int64) for x in (M, N, K, b))
    return (M >= 0) & (M < 1 << _M_BITS) & (N > 0) & (N < 1 << _N_BITS) & (K > 0) & (K < 1 << _K_BITS) & \
        (b > 0) & (b < 1 << _B_BITS)


def pack_keys(N, K, b, M) -> np.ndarray:
    """``pack_key`` over arrays (int64); a shape that does not fit raises (the table's rows must all fit)."""
    N, K, b, M = (np.asarray(x, np.int64) for x in (N, K, b, M))
    bad = ~fits_keys(M, N, K, b)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"launch table: shape (M, N, K, b) = {(int(M[i]), int(N[i]), int(K[i]), int(b[i]))} does not "
                         f"fit the packing (M < 2^{_M_BITS}, N < 2^{_N_BITS}, K < 2^{_K_BITS}, b < 2^{_B_BITS})")
    return ((N << _K_BITS | K) << _B_BITS | b) << _M_BITS | M


def unpack_keys(keys) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Packed keys back to their (N, K, b, M) arrays (a run's key holds its first M)."""
    keys = np.asarray(keys, np.int64)
    M, base = keys & ((1 << _M_BITS) - 1), keys >> _M_BITS
    b, K, N = base & ((1 << _B_BITS) - 1), base >> _B_BITS & ((1 << _K_BITS) - 1), base >> (_B_BITS + _K_BITS)
    return N, K, b, M


def tiles_of(p: np.ndarray, M, N, b):
    """Output tiles of nvjet kernels with (tile N, tile M, cluster x, cluster y) rows ``p`` over N x M, rounded to
    whole clusters (numpy-friendly; 1 for other kernels' zero rows)."""
    tm, tn, cx, cy = (np.maximum(p[..., i], 1) for i in range(4))
    return -(-(-(-N // tm)) // cx) * cx * (-(-(-(-M // tn)) // cy) * cy) * b


@dataclass
class KindRuns:
    """One call kind's measured launches as runs along M (``encode_runs``): run i covers
    the token counts ``first M, first M + m_step[i], ..., m_last[i]`` at one (N, K, batch), all measured, with one
    activity signature, grid z and CTA rule -- ``value`` CTAs (mode 0) or ``value`` CTAs per nvjet output tile
    (mode 1).  A token count inside a run but off its step was not measured."""

    keys: np.ndarray  # pack_key(first M, N, K, b), sorted
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
        key = pack_keys(a["N"], a["K"], a["b"], a["m_first"])
        order = np.argsort(key, kind="stable") if len(key) > 1 and np.any(key[1:] < key[:-1]) else slice(None)
        a = {f: v[order] for f, v in a.items()}  # files written with another packing are sorted by it: re-sort
        runs = KindRuns(key[order], a["m_last"].astype(np.int64), a["m_step"].astype(np.int64), a["sig"],
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


def load_table(path: str) -> dict:
    """The launch table file at ``path``: ``kinds`` (call kind -> ``KindRuns``, each read when first asked for),
    ``signatures`` (activity texts), ``grid`` and ``launch_count``.  The file's members (written by ``write_table``
    or ``write_runs``): ``kinds``, ``signatures``, ``launch_count``, ``grid_m``,
    ``grid_nk``, ``provenance`` and per kind i ``k{i}_N``, ``_K``, ``_b``, ``_m_first``, ``_m_last``, ``_m_step``,
    ``_sig``, ``_grid_z``, ``_cta_mode``, ``_cta_value`` (``KindRuns``)."""
    with np.load(path, allow_pickle=False) as z:
        names, sigs = [str(k) for k in z["kinds"]], [str(x) for x in z["signatures"]]
        grid = (z["grid_m"].tolist(), z["grid_nk"].tolist())
        count = int(z["launch_count"])
    return {"kinds": _Kinds(path, names, signature_params(sigs)), "signatures": sigs, "grid": grid,
            "launch_count": count}


# --- writing a table: the file ``load_table`` reads -----------------------------------------------------------
# A dense survey measures each (N, K) at up to 928 token counts, and cuBLAS's choice stays the same over long
# stretches of M: a run is a stretch of measured token counts ``m_first, m_first + step, ..., m_last`` (one step)
# of one call kind, N, K and batch whose launches share the activity signature, grid z and CTA rule -- a constant
# CTA count, or (nvjet kernels) ``value`` CTAs per output tile.  Every measured launch is recovered exactly: a
# token count inside a run but off its step was *not* measured, and stays a prediction.
_RUN_FIELDS = ("N", "K", "b", "m_first", "m_last", "m_step", "signature", "grid_z", "cta_mode", "cta_value")


def _starts(new_group: np.ndarray, choice: np.ndarray, M: np.ndarray):
    """Greedy runs over rows sorted by (group, M): a run ends where the group or choice changes or the step
    between consecutive token counts does."""
    n = len(M)
    starts = np.empty(n, np.int64)
    steps = np.empty(n, np.int64)
    r = -1
    length = 0
    for i in range(n):
        if i == 0 or new_group[i] or choice[i] != choice[i - 1] or (length >= 2 and M[i] - M[i - 1] != steps[r]):
            r += 1
            starts[r], steps[r], length = i, 1, 1
        else:
            if length == 1:
                steps[r] = M[i] - M[i - 1]
            length += 1
    return starts[:r + 1], steps[:r + 1]


_STARTS: list = []  # the compiled ``_starts``, made on first use: only table writers need it (tens of millions of rows)


def run_starts(new_group: np.ndarray, choice: np.ndarray, M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first row, step) of every run over rows sorted by (group, M); ``new_group`` marks a row starting a new
    (kind, N, K, batch), ``choice`` is one integer per row naming its launch (signature, grid z and CTA rule).

    >>> starts, steps = run_starts(np.zeros(6, bool), np.zeros(6, np.int64), np.array([1, 2, 3, 4, 8, 16]))
    >>> starts.tolist(), steps.tolist()
    ([0, 4], [1, 8])
    """
    if not _STARTS:
        try:
            from numba import njit
            _STARTS.append(njit(cache=True)(_starts))
        except ImportError:  # numba is a declared dependency; without it the same loop, slower
            _STARTS.append(_starts)
    return _STARTS[0](np.asarray(new_group, np.bool_), np.asarray(choice, np.int64), np.asarray(M, np.int64))


def cta_rule(p: np.ndarray, M, N, b, ctas) -> tuple[np.ndarray, np.ndarray]:
    """(mode, value) per launch (``p``: rows of ``signature_params``): mode 1 -- nvjet, ``value`` CTAs per output
    tile (``tiles_of``); mode 0 -- ``value`` CTAs.

    >>> p = signature_params(["nvjet_sm90_tst_64x32_64x16_1x2_h_bz_splitK_NNT", "cutlass_80_tensorop_s1688gemm"])
    >>> [v.tolist() for v in cta_rule(p, np.array([16, 16]), np.array([1024, 1024]), np.array([1, 1]),
    ...                               np.array([128, 96]))]
    [[1, 0], [4, 96]]
    """
    t = tiles_of(p, M, N, b)
    per_tile = (p[:, 0] > 0) & (ctas % t == 0)
    return per_tile.astype(np.int8), np.where(per_tile, ctas // t, ctas)


def encode_runs(kind, N, K, b, M, sig, ctas, gz, signatures: list[str]) -> dict:
    """Launches (one per row: call-kind index, N, K, batch, M, signature index into ``signatures``, the main
    kernel's CTAs and grid z) as run arrays sorted by (kind, N, K, b, first M): ``kind``, ``count`` (launches per
    run) and the fields ``write_runs`` stores.

    >>> runs = encode_runs([0, 0, 0], [64, 64, 64], [64, 64, 64], [1, 1, 1], [8, 16, 24], [0, 0, 0], [1, 1, 1],
    ...                    [1, 1, 1], ["cutlass_80_tensorop_s1688gemm"])
    >>> runs["count"].tolist(), runs["m_first"].tolist(), runs["m_last"].tolist(), runs["m_step"].tolist()
    ([3], [8], [24], [8])
    """
    order = np.lexsort((M, b, K, N, kind))
    kind, N, K, b, M, sig, ctas, gz = (np.asarray(a)[order] for a in (kind, N, K, b, M, sig, ctas, gz))
    mode, value = cta_rule(signature_params(signatures)[sig], M, N, b, ctas)
    new_group = np.ones(len(M), bool)
    new_group[1:] = (kind[1:] != kind[:-1]) | (N[1:] != N[:-1]) | (K[1:] != K[:-1]) | (b[1:] != b[:-1])
    _, choice = np.unique(np.column_stack([sig, gz, mode, value]), axis=0, return_inverse=True)
    starts, steps = run_starts(new_group, choice.ravel(), M)
    ends = np.append(starts[1:], len(M)) - 1
    return dict(kind=kind[starts].astype(np.int16), count=np.diff(np.append(starts, len(M))),
                N=N[starts].astype(np.int32), K=K[starts].astype(np.int32), b=b[starts].astype(np.int16),
                m_first=M[starts].astype(np.int16), m_last=M[ends].astype(np.int16), m_step=steps.astype(np.int16),
                signature=sig[starts].astype(np.int32), grid_z=gz[starts].astype(np.int16), cta_mode=mode[starts],
                cta_value=value[starts].astype(np.int32))


def _members(runs: dict, n_kinds: int) -> dict:
    """The file's per-kind members: for kind i, ``k{i}_N``, ``_K``, ``_b``, ``_m_first`` (sorted as ``pack_key``
    packs them) and the other run fields, each kind readable on its own (``_Kinds`` loads a kind when first asked)."""
    key = pack_keys(runs["N"], runs["K"], runs["b"], runs["m_first"])
    out = {}
    for i in range(n_kinds):
        s = runs["kind"] == i
        order = np.argsort(key[s], kind="stable")
        for f in _RUN_FIELDS:
            out[f"k{i}_{'sig' if f == 'signature' else f}"] = runs[f][s][order]
    return out


def write_runs(path: str, kinds: list[str], signatures: list[str], runs: dict, provenance: str,
               grid: tuple = ((), ())) -> dict:
    """Write encoded runs (``encode_runs``, kind indices into ``kinds``) as the launch table file ``load_table``
    reads; ``grid``: the (M, N/K) axes of a profiled survey's grid (its corners are the bracketing rule's
    neighbours), empty where none was surveyed.  Returns the counts (launches, runs, kinds, signatures).  For
    writers that encode kind by kind (a table too large to expand at once); ``write_table`` does both steps.

    >>> import os, tempfile
    >>> runs = encode_runs([0], [64], [64], [1], [8], [0], [1], [1], ["cutlass_80_tensorop_s1688gemm"])
    >>> with tempfile.TemporaryDirectory() as d:
    ...     write_runs(os.path.join(d, "t.npz"), ["k"], ["cutlass_80_tensorop_s1688gemm"], runs, "example")
    {'launches': 1, 'runs': 1, 'kinds': 1, 'signatures': 1}
    """
    np.savez_compressed(
        path, kinds=np.array(kinds), signatures=np.array(signatures), **_members(runs, len(kinds)),
        launch_count=np.int64(runs["count"].sum()),
        grid_m=np.array(grid[0], np.int32), grid_nk=np.array(grid[1], np.int32), provenance=np.array(provenance))
    return dict(launches=int(runs["count"].sum()), runs=len(runs["m_first"]), kinds=len(kinds),
                signatures=len(signatures))


def write_table(path: str, launches: dict, signatures: list[str], provenance: str, grid: tuple = ((), ())) -> dict:
    """Write launches as the launch table file ``load_table`` reads, packed as runs along M (``encode_runs``).
    ``launches``: equal-length columns, one launch per shape -- ``kind`` (call kind texts, ``Call.kind()``),
    ``M``, ``N``, ``K``, ``b``, ``sig`` (indices into ``signatures``: activity names joined by " | "), ``ctas`` and
    ``gz`` (the main kernel's CTA count and grid z); ``provenance``: what measured them; ``grid``: as
    ``write_runs``.  Returns the counts (launches, runs, kinds, signatures).

    >>> import os, tempfile
    >>> c = Call("linear", "bf16", "bf16", 16, 1024, 14336, b_t=True)
    >>> sig = "nvjet_sm90_tst_64x16_64x16_1x1_h_bz_splitK_TNT | splitKreduce_kernel"
    >>> cols = dict(kind=np.array([c.kind()] * 2, object), M=np.array([16, 32]), N=np.array([1024, 1024]),
    ...             K=np.array([14336, 14336]), b=np.array([1, 1]), sig=np.array([0, 0]), ctas=np.array([128, 256]),
    ...             gz=np.array([1, 1]))
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = os.path.join(d, "t.npz")
    ...     counts = write_table(path, cols, [sig], "example")
    ...     t = load_table(path)
    ...     launch = launch_in(t, c)
    >>> counts["launches"], counts["runs"], launch.ctas, launch.kernels[-1]
    (2, 1, 128, 'splitKreduce_kernel')
    """
    kinds = sorted(set(launches["kind"].tolist()))
    ki = {k: i for i, k in enumerate(kinds)}
    runs = encode_runs(np.array([ki[k] for k in launches["kind"]]), launches["N"], launches["K"], launches["b"],
                       launches["M"], launches["sig"], launches["ctas"], launches["gz"], signatures)
    return write_runs(path, kinds, signatures, runs, provenance, grid)


def table(gpu: str) -> dict:
    """GPU model ``gpu``'s launch table (``{}`` where it has none), loaded when first asked for."""
    if gpu not in _TABLES:
        path = gpus.table_path(gpu, "launches")
        _TABLES[gpu] = load_table(path) if path and os.path.exists(path) else {}
    return _TABLES[gpu]


def set_table(gpu: str, t: dict | str | None) -> None:
    """Use ``t`` as model ``gpu``'s launch table: a loaded table, a file's path, ``{}`` (none: as if nothing were
    measured), or None (the installed one again).  For tools replaying against another table, and tests."""
    _TABLES.pop(gpu, None)
    if t is not None:
        _TABLES[gpu] = load_table(t) if isinstance(t, str) else t
    gpus.tables_changed()


def sources(c: Call) -> tuple[str, ...]:
    """The models whose launch tables answer ``c`` (``gpus.coverage``), in order."""
    return gpus.coverage(c.gpu, c.kind()).tables


def _run_at(runs: KindRuns, key: int) -> int | None:
    """The run holding packed shape ``key`` (measured there), or None."""
    i = int(np.searchsorted(runs.keys, key, side="right")) - 1
    if i < 0 or runs.keys[i] >> _M_BITS != key >> _M_BITS:
        return None
    first, M = int(runs.keys[i]) & ((1 << _M_BITS) - 1), key & ((1 << _M_BITS) - 1)
    return i if M <= runs.m_last[i] and (M - first) % runs.m_step[i] == 0 else None


def launch_in(t: dict, c: Call) -> Launch | None:
    """The launch table ``t`` measured for exactly this call kind and shape, or None."""
    runs, key = t.get("kinds", {}).get(c.kind()), pack_key(c.M, c.N, c.K, c.b)
    if runs is None or key is None:
        return None
    i = _run_at(runs, key)
    if i is None:
        return None
    return Launch(tuple(t["signatures"][runs.sig[i]].split(" | ")), int(runs.ctas(i, c.M, c.N, c.b)),
                  int(runs.grid_z[i]))


def find_launch(c: Call) -> tuple[Launch, str] | None:
    """(launch, model that measured it) for exactly this call kind and shape: the call's GPU model's own, else one
    of a model shown to agree with it on this kind (``sources``); None where none measured it."""
    for g in sources(c):
        launch = launch_in(table(g), c)
        if launch is not None:
            return launch, g
    return None


def measured_launch(c: Call) -> Launch | None:
    """The launch measured for exactly this call kind and shape (``find_launch``), or None."""
    found = find_launch(c)
    return found[0] if found else None


def measured_token_counts(c: Call, same_alignment: bool = False) -> list[int]:
    """The token counts M measured for this call kind at the call's N, K and batch (sorted, over the call's
    sources); ``same_alignment``: only those in the call's TMA alignment class where M is A's contiguous side
    (A passed transposed: cuBLAS runs other kernel families when it is not a multiple of 8)."""
    base = pack_key(0, c.N, c.K, c.b)
    if base is None:
        return []
    found: set[int] = set()
    for g in sources(c):
        runs = table(g).get("kinds", {}).get(c.kind())
        if runs is None:
            continue
        lo, hi = np.searchsorted(runs.keys, [base, base + (1 << _M_BITS)])
        for i in range(lo, hi):
            found.update(range(int(runs.keys[i]) & ((1 << _M_BITS) - 1), int(runs.m_last[i]) + 1, int(runs.m_step[i])))
    out = sorted(found)
    if same_alignment and c.a_t:
        out = [m for m in out if (m % 8 == 0) == (c.M % 8 == 0)]
    return out


def launch_count(gpu: str | None = None) -> int:
    """How many launches model ``gpu``'s table holds (default: the default model's)."""
    return table(gpu or gpus.default_gpu()).get("launch_count", 0)


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
    ms = measured_token_counts(c, same_alignment=True)
    if ms:
        return [(cc, measured_launch(cc)) for cc in (_with_shape(c, m, c.N, c.K) for m in _bracket(c.M, ms))], \
            "the same N and K at the nearest measured token counts"
    grid_m, grid_nk = next((g for g in (table(s).get("grid") for s in sources(c)) if g and g[0]), ([], []))
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
