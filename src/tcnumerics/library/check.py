"""The self-check's library side: what cuBLAS ran on the user's GPU against the plan, and capture files of it.

A self-check (``tcnumerics.torch``'s ``check=True``) runs each GEMM natively as well, compares the bits and records
the kernels cuBLAS ran (torch.profiler: activity names, the main kernel's launch grid).  This module says what such
an observation means and stores it:

* ``compare_launch(call, kernels, grid)`` -> ``LaunchCheck``: did cuBLAS run a launch whose numerics are the plan's
  (kernel family, split-K slices, epilogue: the structure built from the observed launch as ``select`` builds a
  measured one, compared with the plan's)?  ``verdict(modelled, bits_match)``: "exact", "flagged" (the plan said it
  was not modelled) or "silent" (the plan claimed bit-exactness and the bits differ: a defect to report).
* ``Observation``, ``write_capture`` / ``read_capture``: observed calls in the kernel surveys' JSON format
  (``lab/device_library/kernel_survey.py``: ``names``, ``calls`` id -> [[name index, grid, block]], ``errors``,
  ``env``) plus ``records``, id -> the call as a survey record (``calls.call_record``) with whether its bits
  matched; ``lab/device_library/fold_gpu.py --captures`` folds such files into the GPU model's launch table.

    >>> from tcnumerics.library.calls import Call
    >>> c = Call("linear", "bf16", "bf16", 16, 1024, 14336, b_t=True)
    >>> split = ("nvjet_sm90_tst_64x16_64x16_2x1_v_bz_splitK_TNT", "void cublasLt::splitKreduce_kernel<32, 16>")
    >>> compare_launch(c, split, grid=(128, 1, 1)).agrees
    True
    >>> r = compare_launch(c, ("nvjet_sm90_tst_64x16_64x16_2x1_v_bz_TNT",), grid=(16, 1, 1))
    >>> r.agrees, r.verdict(bits_match=False)
    (False, 'silent')
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass, replace
from typing import Iterable, Sequence

from .calls import Call, call_from_record, call_record
from .kernel_names import is_gemm_kernel
from .launches import Launch, nvjet_tiles
from .selection import Plan, plan_from_launch, select
from .structure import Structure

FORMAT = "tcnumerics capture 1"  # the kernel surveys' JSON plus records; fold_gpu.py reads both
VERDICTS = ("exact", "flagged", "silent", "unchecked")


def verdict(modelled: bool, bits_match: bool | None) -> str:
    """"exact" (bits equal), "flagged" (they differ where the plan said it was not modelled), "silent" (they differ
    where it claimed bit-exactness), "unchecked" (no bits compared).

    >>> verdict(True, True), verdict(False, False), verdict(True, False), verdict(True, None)
    ('exact', 'flagged', 'silent', 'unchecked')
    """
    if bits_match is None:
        return "unchecked"
    if bits_match:
        return "exact"
    return "silent" if modelled else "flagged"


@dataclass(frozen=True)
class LaunchCheck:
    """What cuBLAS ran against what the plan assumed.

    ``agrees``: True where the observed launch gives the plan's structure, False where it gives another, None where
    the observation cannot tell (no grid for a kernel whose grid holds the split count; an unidentified family)."""

    agrees: bool | None
    planned: str  # the plan's family (kernel and split)
    observed: str  # the main kernel cuBLAS ran, with what its grid says
    reason: str
    modelled: bool  # the plan claimed bit-exactness
    gpu: str

    def verdict(self, bits_match: bool | None) -> str:
        return verdict(self.modelled, bits_match)

    def explain(self, bits_match: bool | None) -> str:
        """One line for a report: the verdict and why."""
        v = self.verdict(bits_match)
        if v == "exact":
            return f"exact on {self.gpu}: {self.observed}" + ("" if self.modelled else " (flagged, exact anyway)")
        if v == "unchecked":
            return f"{self.gpu}: {self.reason}"
        where = ("cuBLAS ran another launch than the plan's" if self.agrees is False else
                 "cuBLAS ran the planned launch, whose numerics then differ from the model's" if self.agrees else
                 "the launch could not be compared")
        return f"{v} on {self.gpu}: {where} -- {self.reason}"


def _numerics(s: Structure) -> Structure:
    """The structure without its family label: what the output bits depend on."""
    return replace(s, family="")


def _short(name: str) -> str:
    return name.replace("void ", "").split("(")[0][:80]


def compare_launch(call: Call, kernels: Sequence[str], grid: Sequence[int] | None = None,
                   plan: Plan | None = None) -> LaunchCheck:
    """Compare the launch cuBLAS ran for ``call`` on ``call.gpu`` (activity ``kernels`` in order, the main GEMM
    kernel's launch ``grid`` (x, y, z) where known) with ``plan`` (default: ``select(call)``)."""
    if not kernels or not all(isinstance(k, str) for k in kernels):
        raise ValueError(f"kernels: expected the activity names cuBLAS ran (non-empty strings), got {kernels!r}")
    if grid is not None and (len(grid) != 3 or any(int(g) < 1 for g in grid)):
        raise ValueError(f"grid: expected the main kernel's (x, y, z) launch grid of positive ints, got {grid!r}")
    plan = plan or select(call)
    main = next((k for k in kernels if is_gemm_kernel(k)), kernels[0])
    base = dict(planned=plan.family, modelled=bool(plan.modelled), gpu=call.gpu)
    if grid is None:
        return _compare_names(call, tuple(kernels), main, plan, base)
    launch = Launch(tuple(kernels), math.prod(int(g) for g in grid), int(grid[2]))
    seen = plan_from_launch(call, launch)
    if seen is None:
        return LaunchCheck(None, observed=_short(main), reason=f"cuBLAS ran {_short(main)}, a family whose "
                           "structure is not identified: only the bits can tell", **base)
    same = _numerics(seen.structure) == _numerics(plan.structure)
    why = (f"the launch gives the planned structure ({plan.structure.describe()})" if same else
           f"cuBLAS ran {seen.family} ({seen.structure.describe()}); the plan assumed {plan.family} "
           f"({plan.structure.describe()})")
    if not seen.modelled:  # the observed launch's own structure is a guess here (e.g. its grid hides S)
        named_apart = plan.launch is not None and plan.launch.main != main
        return LaunchCheck(False if named_apart else None, observed=seen.family,
                           reason=f"{why}; the structure of the launch cuBLAS ran is not identified here "
                           f"({seen.reason})", **base)
    return LaunchCheck(same, observed=seen.family, reason=why, **base)


def _compare_names(call: Call, kernels: tuple[str, ...], main: str, plan: Plan, base: dict) -> LaunchCheck:
    """Without a grid: an unsplit nvjet kernel still says everything (S = 1); otherwise the names alone."""
    if main.startswith("nvjet") and "splitK" not in main:
        tiles = nvjet_tiles(main, call) or 1
        return compare_launch(call, kernels, grid=(tiles, 1, 1), plan=plan)
    planned = plan.launch.main if plan.launch is not None else None
    if planned is not None and planned != main:
        return LaunchCheck(False, observed=_short(main), reason=f"cuBLAS ran {_short(main)}; the plan assumed "
                           f"{_short(planned)}", **base)
    if "splitK" in main and not plan.structure.split_k:
        return LaunchCheck(False, observed=_short(main), reason=f"cuBLAS ran {_short(main)} (split-K); the plan "
                           "assumed no split", **base)
    return LaunchCheck(None, observed=_short(main), reason=f"cuBLAS ran {_short(main)}; without its launch grid the "
                       "split count (CTAs, grid z) cannot be compared", **base)


@dataclass(frozen=True)
class Observation:
    """One GEMM call a self-check (or a survey) saw: the call, what cuBLAS ran, and whether the bits matched."""

    call: Call
    kernels: tuple[str, ...]  # activity names, in order (memsets, the GEMM, reduction kernels)
    grids: tuple = ()  # per activity, its launch grid (x, y, z) or None; () where none was recorded
    bits_match: bool | None = None
    differing: float | None = None  # the share of outputs whose bits differ
    device: str = ""  # the device's name as it reports it
    site: str = ""  # where in the user's program the call was made
    planned: str = ""  # the plan's family
    modelled: bool | None = None  # whether the plan claimed bit-exactness

    def __post_init__(self) -> None:
        if not self.kernels:
            raise ValueError("Observation: kernels is empty (a GEMM call launches at least one kernel)")
        if self.grids and len(self.grids) != len(self.kernels):
            raise ValueError(f"Observation: {len(self.grids)} grids for {len(self.kernels)} kernels")

    @property
    def main_grid(self) -> tuple[int, int, int] | None:
        """The launch grid of the main GEMM kernel, where recorded."""
        if not self.grids:
            return None
        i = next((i for i, k in enumerate(self.kernels) if is_gemm_kernel(k)), 0)
        g = self.grids[i]
        return tuple(int(x) for x in g) if g else None

    def launch(self) -> Launch | None:
        """The launch as the tables store it (needs the main kernel's grid), or None."""
        g = self.main_grid
        return None if g is None else Launch(self.kernels, math.prod(g), g[2])

    def verdict(self) -> str:
        return verdict(bool(self.modelled), self.bits_match)


def observation(call: Call, kernels: Sequence[str], grids: Sequence | None = None, *, bits_match: bool | None = None,
                differing: float | None = None, device: str = "", site: str = "", plan: Plan | None = None
                ) -> Observation:
    """An ``Observation`` with its plan's family and claim (``plan``: default ``select(call)``)."""
    plan = plan or select(call)
    return Observation(call, tuple(kernels), tuple(tuple(g) if g else None for g in grids) if grids else (),
                       bits_match, differing, device, site, plan.family, bool(plan.modelled))


def write_capture(path: str, observations: Iterable[Observation], env: dict | None = None) -> int:
    """Write ``observations`` to ``path`` (``.json`` or ``.json.gz``; no pickles): the kernel surveys' format plus
    ``records``.  ``env``: where they ran (device, torch, cuda, cublas, driver: the tables' provenance).  Returns
    how many calls were written."""
    if not path.endswith((".json", ".json.gz")):
        raise ValueError(f"path: a capture file is JSON, .json or .json.gz, got {path!r}")
    names: list[str] = []
    index: dict[str, int] = {}
    calls, records = {}, {}
    for i, ob in enumerate(observations):
        if not isinstance(ob, Observation):
            raise TypeError(f"observations: expected Observation items, got {type(ob).__name__}")
        grids = ob.grids or (None,) * len(ob.kernels)
        calls[str(i)] = [[index.setdefault(k, len(index)), list(g) if g else None, None]
                         for k, g in zip(ob.kernels, grids)]
        records[str(i)] = dict(call_record(ob.call), id=i, bits_match=ob.bits_match, differing=ob.differing,
                               device=ob.device, site=ob.site, planned=ob.planned, modelled=ob.modelled)
    names = list(index)
    doc = dict(format=FORMAT, set="selfcheck", env=dict(env or {}), names=names, calls=calls, errors={},
               records=records, ran=len(calls), total=len(calls))
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt") as fh:
        json.dump(doc, fh)
    return len(calls)


def read_capture(path: str) -> tuple[dict, list[Observation]]:
    """(env, observations) of a capture file ``write_capture`` wrote."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as fh:
        doc = json.load(fh)
    if doc.get("format") != FORMAT:
        raise ValueError(f"{path}: not a capture file (format {doc.get('format')!r}, expected {FORMAT!r}); kernel "
                         "survey files without records are read by lab/device_library/export_kernels.py")
    names, out = doc["names"], []
    for i, acts in doc["calls"].items():
        rec = doc["records"][i]
        grids = tuple(tuple(a[1]) if a[1] else None for a in acts) if any(a[1] for a in acts) else ()
        out.append(Observation(call_from_record(rec), tuple(names[a[0]] for a in acts), grids, rec.get("bits_match"),
                               rec.get("differing"), rec.get("device", ""), rec.get("site", ""),
                               rec.get("planned", ""), rec.get("modelled")))
    return doc.get("env", {}), out
