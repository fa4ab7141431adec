"""The launch table packed as runs along M (``export_kernels.py`` writes it, ``tcnumerics.library.launches`` reads it).

The dense surveys measure each (N, K) at up to 928 token counts, and cuBLAS's choice stays the same over long
stretches of M: a run is a stretch of measured token counts ``m_first, m_first + step, ..., m_last`` (one step)
of one call kind, N, K and batch whose launches share the activity signature, grid z and CTA rule -- a constant
CTA count, or (nvjet kernels) ``value`` CTAs per output tile.  Every measured launch is recovered exactly: a
token count inside a run but off its step was *not* measured, and stays a prediction.

    >>> import numpy as np
    >>> M = np.array([1, 2, 3, 4, 8, 16]); same = np.zeros(6, np.int64)
    >>> starts, steps = run_starts(np.zeros(6, bool), same, M)
    >>> starts.tolist(), steps.tolist()
    ([0, 4], [1, 8])
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tcnumerics.library.launches import pack_keys, signature_params, tiles_of


@njit(cache=True)
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


def run_starts(new_group: np.ndarray, choice: np.ndarray, M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first row, step) of every run; ``choice`` is one integer per row naming its launch (signature, grid z
    and CTA rule)."""
    return _starts(np.asarray(new_group, np.bool_), np.asarray(choice, np.int64), np.asarray(M, np.int64))


def cta_rule(p: np.ndarray, M, N, b, ctas) -> tuple[np.ndarray, np.ndarray]:
    """(mode, value) per launch (``p``: rows of ``launches.signature_params``): mode 1 -- nvjet, ``value`` CTAs per
    tile; mode 0 -- ``value`` CTAs."""
    t = tiles_of(p, M, N, b)
    per_tile = (p[:, 0] > 0) & (ctas % t == 0)
    return per_tile.astype(np.int8), np.where(per_tile, ctas // t, ctas)


def encode(kind, N, K, b, M, sig, ctas, gz, signatures: list[str]) -> dict:
    """Rows (one launch each) -> run arrays sorted by (kind, N, K, b, first M)."""
    order = np.lexsort((M, b, K, N, kind))
    kind, N, K, b, M, sig, ctas, gz = (np.asarray(a)[order] for a in (kind, N, K, b, M, sig, ctas, gz))
    mode, value = cta_rule(signature_params(signatures)[sig], M, N, b, ctas)
    new_group = np.ones(len(M), bool)
    new_group[1:] = (kind[1:] != kind[:-1]) | (N[1:] != N[:-1]) | (K[1:] != K[:-1]) | (b[1:] != b[:-1])
    _, choice = np.unique(np.column_stack([sig, gz, mode, value]), axis=0, return_inverse=True)
    starts, steps = run_starts(new_group, choice.ravel(), M)
    ends = np.append(starts[1:], len(M)) - 1
    return dict(kind=kind[starts].astype(np.int16), count=np.diff(np.append(starts, len(M))), N=N[starts].astype(np.int32), K=K[starts].astype(np.int32),
                b=b[starts].astype(np.int16), m_first=M[starts].astype(np.int16), m_last=M[ends].astype(np.int16),
                m_step=steps.astype(np.int16), signature=sig[starts].astype(np.int32),
                grid_z=gz[starts].astype(np.int16), cta_mode=mode[starts], cta_value=value[starts].astype(np.int32))


def per_kind(runs: dict, n_kinds: int) -> dict:
    """The file's members: for kind i, ``k{i}_N``, ``_K``, ``_b``, ``_m_first`` (sorted as ``launches.pack_key`` packs
    them) and the other run fields, each kind readable on its own (``launches`` loads a kind when first asked)."""
    key = pack_keys(runs["N"], runs["K"], runs["b"], runs["m_first"])
    out = {}
    for i in range(n_kinds):
        s = runs["kind"] == i
        order = np.argsort(key[s], kind="stable")
        for f in ("N", "K", "b", "m_first", "m_last", "m_step", "signature", "grid_z", "cta_mode", "cta_value"):
            out[f"k{i}_{'sig' if f == 'signature' else f}"] = runs[f][s][order]
    return out
