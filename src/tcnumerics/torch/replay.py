"""Replay GEMM calls captured from real models on a GPU through an emulation, call by call, bit for bit.

The capture files (``lab/device_models/capture.py``; a bounded set ships in
``vectors/models/``) hold, per aten call, the operands as torch passed them (layout kept),
the addend/scales, the result's bits and the kernels cuBLAS ran.  Calls too large to keep
whole hold sampled rows of A and columns of B; they are replayed with the call's full shape
(``full_shape``), since the kernel cuBLAS picks depends on it.

Each call ends in one of three outcomes:

* ``exact`` -- the emulation returned the captured bits and called the call modelled;
* ``flagged`` -- the emulation said "not modelled" (a ``NotModelledWarning``); bits may differ;
* ``silent`` -- called modelled, but the bits differ: the outcome that must never happen.

Example (a capture shipped with the repository):
    >>> from pathlib import Path
    >>> files = sorted(Path(__file__).resolve().parents[3].joinpath("vectors", "models").glob("*.npz"))
    >>> calls = load_calls(files[0]) if files else []
    >>> all(c.meta["op"] in ("mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "_scaled_mm")
    ...     for c in calls)
    True
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .calls import GemmCall

__all__ = ["CapturedCall", "ReplayOutcome", "ReplaySummary", "load_calls", "replay"]

_DTYPES = {"bfloat16": (torch.bfloat16, np.int16), "float16": (torch.float16, np.int16),
           "float32": (torch.float32, np.int32), "float8_e4m3fn": (torch.float8_e4m3fn, np.uint8),
           "float8_e5m2": (torch.float8_e5m2, np.uint8)}
FORMAT = "tcnumerics.model_calls/1"


@dataclass
class CapturedCall:
    """One captured call: its metadata (JSON) and arrays (bit patterns)."""

    meta: dict
    arrays: dict
    source: str = ""

    def tensor(self, name: str) -> torch.Tensor:
        """An operand as torch passed it: stored K-major operands come back as transposed views."""
        info = self.meta[name]
        t = _from_bits(self.arrays[name], info["dtype"])
        return t.transpose(-1, -2) if info.get("transposed") else t

    def call(self) -> GemmCall:
        m = self.meta
        a, b = self.tensor("a"), self.tensor("b")
        batched = a.dim() == 3
        c = self._addend(a, b) if "c" in m else None
        extra = {}
        scale_a = scale_b = bias = None
        if "scale_a" in m:
            scale_a = self._scale("scale_a", rows=True)
            scale_b = self._scale("scale_b", rows=False)
        if "bias" in m:
            bias = _from_bits(self.arrays["bias"], m["bias"]["dtype"]).reshape(-1)
        op = m["op"]
        reshape = "addbmm" if op == "addbmm" and batched else None
        return GemmCall(op, a, b, c, m["alpha"], m["beta"], out_dtype=_DTYPES[m["out_dtype"]][0],
                        scale_a=scale_a, scale_b=scale_b, bias=bias, use_fast_accum=m.get("use_fast_accum", False),
                        reshape=reshape, extra=extra)

    def _addend(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """The addend in its original form: leading broadcast dims dropped, stride-0 dims expanded."""
        info = self.meta["c"]
        grid = _from_bits(self.arrays["c"], info["dtype"])
        shape, stride = info["shape"], info["stride"]
        nd = len(shape)
        t = grid.reshape(grid.shape[grid.dim() - nd:]) if nd else grid.reshape(())
        out_sizes = (a.shape[:-2] if self.meta["op"] != "addbmm" else ()) + (a.shape[-2], b.shape[-1])
        target = list(t.shape)
        for d in range(nd):
            if shape[d] > 1 and stride[d] == 0:
                target[d] = out_sizes[len(out_sizes) - nd + d]
        return t.expand(target) if target != list(t.shape) else t

    def _scale(self, name: str, rows: bool) -> torch.Tensor:
        info = self.meta[name]
        t = _from_bits(self.arrays[name], info["dtype"])
        if info["numel"] == 1:
            return t.reshape(info["shape"])
        return t.reshape(-1, 1) if rows else t.reshape(1, -1)

    @property
    def expected(self) -> np.ndarray:
        return self.arrays["out"]

    @property
    def full_shape(self) -> tuple | None:
        return None if self.meta["whole"] else tuple(self.meta["full_shape"])


@dataclass
class ReplayOutcome:
    call: CapturedCall
    outcome: str  # "exact", "flagged" or "silent"
    kernel: str
    reason: str
    mismatches: int
    elements: int


@dataclass
class ReplaySummary:
    outcomes: list = field(default_factory=list)

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes if o.outcome == outcome)

    @property
    def flagged_exact(self) -> int:
        return sum(1 for o in self.outcomes if o.outcome == "flagged" and o.mismatches == 0)

    def __str__(self) -> str:
        n = len(self.outcomes)
        lines = [f"{n} calls: {self.count('exact')} bit-exact, {self.count('flagged')} flagged not modelled "
                 f"({self.flagged_exact} of them exact anyway), {self.count('silent')} silently wrong"]
        for o in self.outcomes:
            if o.outcome != "exact":
                m = o.call.meta
                lines.append(f"  {o.outcome:<8} {m['workload']} #{m['index']} {m['op']} "
                             f"{'x'.join(map(str, m['full_shape']))} {m['a']['dtype']} "
                             f"({o.mismatches}/{o.elements} differ) cuBLAS: {','.join(_short(m['kernels']))}; "
                             f"emulated: {o.kernel}" + (f" -- {o.reason}" if o.reason else ""))
        return "\n".join(lines)


def load_calls(path) -> list[CapturedCall]:
    """The calls of one capture file (``np.load`` without pickles; metadata JSON in ``meta``)."""
    path = Path(path)
    with np.load(path, allow_pickle=False) as z:
        if "meta" not in z.files:
            raise ValueError(f"{path}: not a model-call capture (no 'meta' entry)")
        meta = json.loads(bytes(z["meta"]).decode())
        if meta.get("format") != FORMAT:
            raise ValueError(f"{path}: format {meta.get('format')!r}, expected {FORMAT!r}")
        arrays = {k: z[k] for k in z.files if k != "meta"}
    calls = []
    for m in meta["calls"]:
        key = f"c{m['index']}_"
        own = {k[len(key):]: v for k, v in arrays.items() if k.startswith(key)}
        calls.append(CapturedCall(m, own, str(path)))
    return calls


def replay(paths, emulation=None, *, select=None) -> ReplaySummary:
    """Replay capture files through ``emulation`` (default ``emulate("hopper")``); ``select(meta)`` filters calls."""
    if emulation is None:
        from . import emulate

        emulation = emulate("hopper")
    if isinstance(paths, (str, Path)):
        paths = [paths]
    summary = ReplaySummary()
    for path in paths:
        for captured in load_calls(path):
            if select is not None and not select(captured.meta):
                continue
            summary.outcomes.append(_replay_one(captured, emulation))
    return summary


def _replay_one(captured: CapturedCall, emulation) -> ReplayOutcome:
    call = captured.call()
    options = {} if captured.full_shape is None else {"full_shape": captured.full_shape}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result, info = emulation.mode.compute(call, **options)
    want = captured.expected
    got = _bits(result).reshape(want.shape)
    mismatches = int(np.count_nonzero(got != want))
    if not info.modelled:
        outcome = "flagged"
    else:
        outcome = "exact" if mismatches == 0 else "silent"
    return ReplayOutcome(captured, outcome, info.kernel, info.reason, mismatches, int(want.size))


def _from_bits(bits: np.ndarray, dtype: str) -> torch.Tensor:
    torch_dtype, int_type = _DTYPES[dtype]
    arr = np.ascontiguousarray(bits).view(int_type)
    t = torch.from_numpy(arr)
    return t.view(torch_dtype)


def _bits(t: torch.Tensor) -> np.ndarray:
    view = {2: torch.int16, 4: torch.int32, 1: torch.uint8}[t.element_size()]
    return t.contiguous().view(view).numpy()


def _short(kernels: list) -> list:
    return [k.split("(")[0].replace("void ", "")[:60] for k in kernels if "Memcpy" not in k]
