"""Check the short-K no-split frontier against the launch table: no surveyed split (or non-nvjet) launch may be
one that ``selection`` would model as plain unsplit when its own launch was not measured.

    PYTHONPATH=src:tools/device_library python3 tools/device_library/check_frontier.py

Every BF16/FP16/FP8 launch with K < 3072 that is not the plain unsplit nvjet kernel is planned with the launch
table hidden (only the bit table and the frontier rule left); a modelled plan there would be a silent miss on
an unmeasured call of that shape.  Prints the count (0 expected) and exits 1 otherwise.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np

from tcnumerics.library import launches
from tcnumerics.library import selection as sel

EPILOGUE_ARGS = {"plain": 0.0, "bias": 1.0, "badd": 1.0, "bx": 0.5}


def _call_of_row(kind: str, M: int, N: int, K: int, b: int) -> sel.Call:
    op, fmt, b_fmt, out, a_t, b_t, epi, alpha_one, _prec, scales, fast = kind.split("|")
    c_kind = "row" if op == "addmm" and epi == "bias" else ("full" if op in ("addmm", "baddbmm") and epi != "plain"
                                                            else "none")
    return sel.Call(op, fmt, out, M, N, K, b=b, b_fmt=b_fmt or None, a_t=a_t == "1", b_t=b_t == "1",
                    bias=epi == "bias" and op == "linear", c_kind=c_kind, alpha=1.0 if alpha_one == "1" else 0.5,
                    beta=EPILOGUE_ARGS[epi], scales=scales or "tensor", fast_accum=fast == "1")


def frontier_violations(max_k: int = 3072) -> tuple[int, list[tuple]]:
    """(launches checked, [(kind, M, N, K, b, kernel)] the frontier would model although they split)."""
    with np.load(launches._PATH, allow_pickle=False) as z:
        t = {k: z[k] for k in z.files}
    kinds, sigs = [str(k) for k in t["kinds"]], [str(s) for s in t["signatures"]]
    rows = []
    for i in np.where(t["K"] < max_k)[0]:
        kind = kinds[t["kind"][i]]
        if kind.split("|")[1] == "fp32":
            continue
        L = launches.Launch(tuple(sigs[t["signature"][i]].split(" | ")), int(t["ctas"][i]), int(t["grid_z"][i]))
        if L.main.startswith("nvjet") and "splitK" not in L.main:
            continue
        c = _call_of_row(kind, *(int(t[a][i]) for a in ("M", "N", "K", "b")))
        if c.kind() == kind and c.key() not in sel.measured_table()["calls"]:
            rows.append((c, L))
    saved = launches._TABLE
    launches._TABLE = {}  # hidden: as if no launch were measured
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bad = [(c.kind(), c.M, c.N, c.K, c.b, L.main[:60]) for c, L in rows if sel.select(c).modelled]
    finally:
        launches._TABLE = saved
    return len(rows), bad


if __name__ == "__main__":
    n, bad = frontier_violations()
    print(f"{n} split or non-nvjet launches with K < 3072 checked; {len(bad)} modelled by the frontier")
    for row in bad[:20]:
        print("  ", row)
    sys.exit(1 if bad else 0)
