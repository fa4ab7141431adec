"""Check the short-K no-split frontier against the launch table: no surveyed split (or non-nvjet) launch may be
one that ``selection`` would model as plain unsplit when its own launch was not measured.

    PYTHONPATH=src:lab/device_library python3 lab/device_library/check_frontier.py

Every BF16/FP16/FP8 launch with K < 3072 that is not the plain unsplit nvjet kernel is planned with the launch
table hidden (only the bit table and the frontier rule left); a modelled plan there would be a silent miss on
an unmeasured call of that shape.  Prints the count (0 expected) and exits 1 otherwise.
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import replace
from functools import lru_cache

import numpy as np

from tcnumerics.library import launches
from tcnumerics.library import selection as sel
from tcnumerics.library.calls import call_from_kind

def _call_of_row(kind: str, M: int, N: int, K: int, b: int) -> sel.Call:
    return call_from_kind(kind, M, N, K, b)


@lru_cache(maxsize=1)
def _plain_signatures(sigs: tuple[str, ...]) -> np.ndarray:
    """Per signature: its main kernel is the plain (unsplit) nvjet kernel."""
    mains = [launches.Launch(tuple(s.split(" | ")), 0, 1).main for s in sigs]
    return np.array([m.startswith("nvjet") and "splitK" not in m for m in mains])


@lru_cache(maxsize=4)
def split_launches(max_k: int = 3072, every: int = 1) -> list[tuple[sel.Call, launches.Launch]]:
    """Every measured BF16/FP16/FP8 launch with K < ``max_k`` that is not the plain unsplit nvjet kernel, with its
    call (expanded from the table's runs); ``every``: only every n-th of the runs' expanded shapes, in table
    order (a sample that skips building the others: expanding all of them is most of the check's time)."""
    t = launches.table("h100")
    sigs = t["signatures"]
    bit_calls = sel.measured_table("h100")["calls"]
    rows = []
    position = 0
    for kind in t["kinds"].names():
        if kind.split("|")[1] == "fp32":
            continue
        runs = t["kinds"][kind]
        Ns, K, bs, firsts = launches.unpack_keys(runs.keys)
        plain = _plain_signatures(tuple(sigs))
        for i in np.flatnonzero((K < max_k) & ~plain[runs.sig]):
            first, N, b = int(firsts[i]), int(Ns[i]), int(bs[i])
            L0 = tuple(sigs[runs.sig[i]].split(" | "))
            c0 = _call_of_row(kind, first, int(N), int(K[i]), int(b))
            if c0.kind() != kind:
                continue
            step = int(runs.m_step[i])
            Ms = range(first, int(runs.m_last[i]) + 1, step)
            start = (-position) % every  # the first of this run's shapes at a multiple of ``every`` overall
            position += len(Ms)
            for M in Ms[start::every]:
                L = launches.Launch(L0, int(runs.ctas(i, M, int(N), int(b))), int(runs.grid_z[i]))
                c = replace(c0, M=M)
                if c.key() not in bit_calls:
                    rows.append((c, L))
    return rows


def frontier_violations(max_k: int = 3072, every: int = 1) -> tuple[int, list[tuple]]:
    """(launches checked, [(kind, M, N, K, b, kernel)] the frontier would model although they split); ``every``:
    check every n-th launch only (CI; the whole check is this script's)."""
    rows = split_launches(max_k, every)
    saved = launches.table("h100")
    launches.set_table("h100", {})  # hidden: as if no launch were measured
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bad = [(c.kind(), c.M, c.N, c.K, c.b, L.main[:60]) for c, L in rows if sel.select(c).modelled]
    finally:
        launches.set_table("h100", saved)
    return len(rows), bad


if __name__ == "__main__":
    n, bad = frontier_violations()
    print(f"{n} split or non-nvjet launches with K < 3072 checked; {len(bad)} modelled by the frontier")
    for row in bad[:20]:
        print("  ", row)
    sys.exit(1 if bad else 0)
