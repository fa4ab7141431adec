"""The self-check: run each emulated GEMM natively too and say, per call site, where the prediction holds.

``emulate("hopper", check=True)`` on CUDA tensors runs every intercepted GEMM twice -- natively (cuBLAS on
the user's GPU, inside a ``torch.profiler`` range so the kernels it launched are known) and emulated -- and
compares the two results bit for bit.  Each call is then

* **exact** -- the same bits (whether or not the library vouched for it);
* **flagged** -- different bits, and the library said beforehand the call was not modelled;
* **silent** -- different bits although the library said the call was modelled: a wrong prediction, the
  thing this check exists to find.

The model continues on the emulated results.  ``run.check_report()`` lists call sites with these counts,
the largest fraction of outputs that differed and the kernels cuBLAS ran; ``run.save_check(path)`` writes
every observed call -- the library's call, the kernels cuBLAS ran, whether the bits matched -- as a capture
file (``tcnumerics.library.check.write_capture``: JSON, no pickles) that ``lab/device_library/fold_gpu.py
--captures`` folds into the GPU's tables; ``Checker.summary()`` is the per-site table as JSON.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

import torch

__all__ = ["Checker", "CheckSite", "CheckReport"]

_RANGE = "tcnumerics.check."


@dataclass
class CheckSite:
    """One call site (op, phase, shape, dtypes, layout) of a checked run."""

    op: str
    phase: str
    shape: tuple
    dtypes: str
    layout: str
    predicted: str
    modelled: bool
    reason: str = ""
    calls: int = 0
    exact: int = 0
    flagged: int = 0
    silent: int = 0
    max_fraction_differing: float = 0.0
    native_kernels: list = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return "silent" if self.silent else "flagged" if self.flagged else "exact"


class CheckReport(list):
    """``run.check_report()``: CheckSite rows that print as a table, with totals."""

    def totals(self) -> dict:
        return {k: sum(getattr(s, k) for s in self) for k in ("calls", "exact", "flagged", "silent")}

    def __str__(self) -> str:
        if not self:
            return "(no GEMM calls checked)"
        lines = [f"{'op':<9} {'phase':<8} {'shape':<22} {'layout':<6} {'calls':>5} {'exact':>5} {'flag':>5} "
                 f"{'SILENT':>6} {'max diff':>8}  cuBLAS kernels (predicted)"]
        for s in self:
            shape = "x".join(str(v) for v in s.shape)
            kernels = ", ".join(s.native_kernels) or "?"
            lines.append(f"{s.op:<9} {s.phase:<8} {shape:<22} {s.layout:<6} {s.calls:>5} {s.exact:>5} {s.flagged:>5} "
                         f"{s.silent:>6} {s.max_fraction_differing:>8.2%}  {kernels} ({s.predicted})")
        t = self.totals()
        lines.append(f"{t['calls']} calls: {t['exact']} bit-exact, {t['flagged']} flagged and different, "
                     f"{t['silent']} silently wrong")
        return "\n".join(lines)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """An integer view of a tensor's bits, for comparisons that see -0 and NaN payloads."""
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.contiguous().view(width)


class Checker:
    """Collects native results, their kernels and the comparisons of one emulation."""

    def __init__(self) -> None:
        self.sites: dict = {}
        self._pending: dict = {}
        self._profiler = None
        self.gpu: str | None = None
        self.calls: dict = {}  # call index -> (library Call, bits match, fraction differing, site key)
        self.kernels: dict = {}  # call index -> the kernels its native run launched
        self.grids: dict = {}  # call index -> {kernel name: its launch grid (x, y, z)} (Kineto's trace)

    # --- the profiler spans the emulation, each native call is one labelled range ---------------------
    def start(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        if not torch.cuda.is_available():  # nothing to check on a machine without a GPU
            return
        self._profiler = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        self._profiler.__enter__()

    def stop(self) -> None:
        prof, self._profiler = self._profiler, None
        if prof is None:
            return
        prof.__exit__(None, None, None)
        kernels = _kernels_by_range(prof)
        self.kernels.update(kernels)
        self.grids.update(_grids_of(prof))
        for index, (key, _) in list(self._pending.items()):
            site = self.sites[key]
            for name in kernels.get(index, []):
                if name not in site.native_kernels:
                    site.native_kernels.append(name)
        self._pending.clear()

    def native(self, index: int, func, args, kwargs) -> torch.Tensor:
        """The op's native result (a copy), computed inside a profiler range named after the call."""
        if self.gpu is None:
            device = next(a.device for a in args if isinstance(a, torch.Tensor))
            self.gpu = torch.cuda.get_device_name(device)
        with torch.profiler.record_function(f"{_RANGE}{index}"):
            out = func(*args, **kwargs)
        return out.clone()

    def compare(self, index: int, key: tuple, row: dict, native: torch.Tensor, emulated: torch.Tensor,
                call=None) -> None:
        """Record one call: ``row`` has op, phase, shape, dtypes, layout, predicted, modelled, reason; ``call`` is
        the library's Call of it (kept for the capture file)."""
        site = self.sites.get(key)
        if site is None:
            site = self.sites[key] = CheckSite(**row)
        a, b = _bits(native), _bits(emulated)
        differ = a.shape != b.shape or not torch.equal(a, b)
        fraction = 1.0 if a.shape != b.shape else float((a != b).float().mean()) if differ else 0.0
        site.calls += 1
        if not differ:
            site.exact += 1
        elif row["modelled"]:
            site.silent += 1
        else:
            site.flagged += 1
        site.max_fraction_differing = max(site.max_fraction_differing, fraction)
        self._pending[index] = (key, None)
        if call is not None:
            self.calls[index] = (call, not differ, fraction, key)

    def report(self) -> CheckReport:
        return CheckReport(self.sites.values())

    def summary(self) -> dict:
        """The checked call sites as JSON-ready data: the GPU, versions and one entry per site with its verdict."""
        return dict(format="tcnumerics.check/1", gpu=self.gpu, torch=torch.__version__, cuda=torch.version.cuda,
                    cublas=_cublas_version(), sites=[_as_json(s) for s in self.sites.values()])

    def observations(self) -> list:
        """The checked calls as ``tcnumerics.library.check.Observation`` (calls whose kernels the profiler saw)."""
        from ..library.check import observation

        out = []
        for index, (call, same, fraction, key) in sorted(self.calls.items()):
            kernels = self.kernels.get(index)
            if kernels:
                grids = self.grids.get(index, {})
                out.append(observation(call, kernels, [grids.get(k) for k in kernels], bits_match=same,
                                       differing=fraction, device=self.gpu or "", site=" ".join(str(k) for k in key)))
        return out

    def save(self, path: str, *, overwrite: bool = False) -> int:
        """Write the observed calls as a capture file (``library.check.write_capture``); returns how many."""
        from ..library.check import write_capture

        if os.path.exists(path) and not overwrite:
            raise FileExistsError(f"{path}: exists; pass overwrite=True or another name")
        env = dict(device=self.gpu, torch=torch.__version__, cuda=torch.version.cuda, cublas=_cublas_version())
        return write_capture(path, self.observations(), env)


def _as_json(site: CheckSite) -> dict:
    d = asdict(site)
    d["shape"] = list(site.shape)
    d["verdict"] = site.verdict
    return d


def _cublas_version() -> int | None:
    try:
        return int(torch._C._cuda_getCompiledVersion()) if torch.cuda.is_available() else None
    except Exception:  # an older torch: the version is not essential to the record
        return None


def _grids_of(prof) -> dict:
    """{call index: {kernel name: launch grid}} from the profiler's Kineto trace, or {} where it has none."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        try:
            prof.export_chrome_trace(path)
            with open(path) as f:
                trace = json.load(f)
        except (OSError, ValueError, RuntimeError):  # no trace (CPU-only profile, an old torch): names only
            return {}
    return grids_by_range(trace.get("traceEvents", []))


def grids_by_range(events: list) -> dict:
    """{call index: {kernel name: (x, y, z)}} from Kineto trace events: a kernel belongs to the call whose
    ``tcnumerics.check.<index>`` range holds the CPU launch (runtime or driver API event) of the same correlation
    id -- how ``lab/device_library/kernel_survey.py`` matches launches.

    >>> ev = [dict(cat="user_annotation", name="tcnumerics.check.4", ts=10, dur=5),
    ...       dict(cat="cuda_driver", name="cuLaunchKernelEx", ts=12, dur=1, args=dict(correlation=7)),
    ...       dict(cat="kernel", name="nvjet_x_splitK", ts=30, dur=2, args=dict(correlation=7, grid=[8, 1, 3]))]
    >>> grids_by_range(ev)
    {4: {'nvjet_x_splitK': (8, 1, 3)}}
    """
    ranges = sorted((e["ts"], e["ts"] + e.get("dur", 0), int(e["name"][len(_RANGE):])) for e in events
                    if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(_RANGE))
    launch_ts = {e["args"]["correlation"]: e["ts"] for e in events
                 if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    found: dict = {}
    for e in events:
        args = e.get("args", {})
        if e.get("cat") != "kernel" or "grid" not in args or args.get("correlation") not in launch_ts:
            continue
        ts = launch_ts[args["correlation"]]
        for t0, t1, index in ranges:
            if t0 <= ts <= t1:
                found.setdefault(index, {}).setdefault(e["name"], tuple(int(g) for g in args["grid"]))
                break
    return found


def _kernels_by_range(prof) -> dict:
    """{call index: names of the GPU kernels launched inside its ``tcnumerics.check.<index>`` range}."""
    found: dict = {}
    for event in prof.events():
        if not event.name.startswith(_RANGE):
            continue
        index = int(event.name[len(_RANGE):])
        names = found.setdefault(index, [])
        stack = [event]
        while stack:
            e = stack.pop()
            for k in getattr(e, "kernels", []):
                if k.name not in names:
                    names.append(k.name)
            stack.extend(e.cpu_children)
    return found
