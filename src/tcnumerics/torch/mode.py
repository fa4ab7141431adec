"""The dispatch mode: intercept aten GEMMs (forward and backward) and hand them to a backend.

A ``TorchDispatchMode`` sits below autograd, so it sees what ``matmul``, ``linear``, ``einsum``
and eager attention decompose into, and the GEMMs autograd runs in backward.  Other ops run
natively.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ._tensors import to_tensor
from .backends import CallInfo, NotModelledWarning
from .calls import GEMM_OPS, GemmCall, finish, normalise
from .devices import engine_for, on_torch_stream as _on_torch_stream

__all__ = ["EmulationMode", "CallSite", "Report"]

_CUDA_WARNED = set()
_LOCK = threading.Lock()


@dataclass
class CallSite:
    """One row of ``run.report()``: calls of one op with one signature, in one phase."""

    op: str
    phase: str
    shape: tuple
    dtypes: str
    layout: str
    kernel: str
    modelled: bool
    reason: str
    count: int = 0


class Report(list):
    """``run.report()``: a list of CallSite rows that prints as a table."""

    def __str__(self) -> str:
        if not self:
            return "(no GEMM calls intercepted)"
        cells = [(r.op, r.phase, "x".join(str(v) for v in r.shape), r.dtypes, r.layout, str(r.count)) for r in self]
        heads = ("op", "phase", "shape", "dtypes", "layout", "count")
        # each column as wide as its widest cell: a long dtypes string (FP8 in, BF16 out) never pushes into layout
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(heads)]

        def row(values) -> str:
            return " ".join(v.rjust(w) if i == 5 else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths)))

        lines = [row(heads) + "  modelled  kernel / recipe"]
        for r, c in zip(self, cells):
            flag = "yes" if r.modelled else "NO"
            lines.append(row(c) + f"  {flag:<8}  {r.kernel}" + (f"  ({r.reason})" if r.reason else ""))
        n = sum(r.count for r in self)
        bad = sum(r.count for r in self if not r.modelled)
        lines.append(f"{n} call{'' if n == 1 else 's'}, {bad} not modelled")
        return "\n".join(lines)

    @property
    def calls(self) -> int:
        return sum(r.count for r in self)

    @property
    def not_modelled(self) -> int:
        return sum(r.count for r in self if not r.modelled)


def _import_distributed_functional() -> None:
    """Import ``torch.distributed.nn.functional`` now, while no process group exists.

    Its collectives take ``group=group.WORLD`` as a default argument, evaluated when the module is imported.
    Imported later -- ``DistributedDataParallel``'s constructor imports it through ``torch._dynamo`` -- ten
    defaults hold the live default group, so ``destroy_process_group()`` cannot free it and gloo's worker threads
    run on into interpreter finalisation, the window of issue 33's abort at exit (see ``_collective``).  Imported
    first, the defaults are None and ``destroy_process_group()`` joins the threads (tests/test_torch_parallel.py).
    """
    if torch.distributed.is_available() and not torch.distributed.is_initialized():
        try:
            importlib.import_module("torch.distributed.nn.functional")
        except ImportError:  # a torch without it: nothing can capture the group this way
            pass


_import_distributed_functional()


# Python objects torch keeps in the thread-local state (torch._C._stash_obj_in_tls): autograd's backward stashes a
# contextvars.Context under "context" for its whole run (torch/autograd/graph.py); inductor's cudagraph trees the others
_TLS_OBJECT_KEYS = ("context", "tree_manager_containers", "tree_manager_locks")


def _collective(func, args, kwargs):
    """Run a c10d collective (DDP's gradient all-reduce, a barrier) natively, with no Python object in the
    thread-local state it launches from.

    A collective is no arithmetic of ours.  The process group's work captures the thread-local state at launch
    (``at::ThreadLocalState``): the dispatch-mode stack (our mode) and torch's stashed Python objects -- during
    ``backward``, where DDP launches its all-reduce, autograd's ``contextvars.Context``.  gloo's worker thread
    drops its reference to the work after completing it, which can be the last one, possibly after the
    interpreter began to finalise (the caller was woken by the completion, ran its barrier and exited; a group
    that outlives ``destroy_process_group`` keeps its threads: ``_import_distributed_functional``).  Decref-ing a
    Python object then needs the GIL; the finalising interpreter ends the thread with a forced unwind through a
    noexcept destructor, and the process aborts ("terminate called without an active exception", SIGABRT, no
    Python frame) -- issue 33's rare DDP abort at exit.  Launched with neither the mode nor the stashed objects,
    the work holds no Python object; both are back in place when the launch returns.
    """
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes(), _without_stashed_objects():
        return func(*args, **kwargs)


@contextlib.contextmanager
def _without_stashed_objects():
    """Lift torch's stashed thread-local Python objects for the duration of the block (restored after)."""
    C = torch._C
    if not hasattr(C, "_remove_obj_from_tls"):  # an older torch: nothing stashed this way
        yield
        return
    lifted = {}
    for key in _TLS_OBJECT_KEYS:
        if C._is_key_in_tls(key):
            lifted[key] = C._get_obj_in_tls(key)
            C._remove_obj_from_tls(key)
    try:
        yield
    finally:
        for key, obj in lifted.items():
            C._stash_obj_in_tls(key, obj)


class EmulationMode(TorchDispatchMode):
    """Routes every GEMM op to ``backend`` and records it in ``sites``; ``conv`` handles convolutions or None."""

    def __init__(self, backend, conv=None, native_warning: str | None = None):
        super().__init__()
        self.backend = backend
        self.conv = conv
        self.sites: "OrderedDict[tuple, CallSite]" = OrderedDict()
        self.counter = 0
        self._lock = threading.Lock()
        self._warned: set = set()
        self.checker = None  # a check.Checker when emulate(..., check=True)
        self.attribution = None  # an attribution.Recorder when emulate(..., attribution=True): names, routes, measures
        self._checked_calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "namespace", None) == "c10d":
            return _collective(func, args, kwargs)
        name = func.overloadpacket.__name__
        if name in GEMM_OPS and _floating(args):
            call = normalise(func, args, kwargs)
            reason = self.backend.unsupported(call)
            if reason:  # e.g. float64 in library mode: native, flagged, in the report
                self._record_native_call(call, f"native aten.{name}", reason)
                return func(*args, **kwargs)
            if self.checker is not None:
                return self._checked(func, args, kwargs, call)
            return self.gemm(call)
        if name in ("convolution", "convolution_backward"):
            return self.convolution(func, name, args, kwargs)
        return func(*args, **kwargs)

    # --- GEMMs ----------------------------------------------------------------------------------

    def gemm(self, call: GemmCall, **options) -> torch.Tensor:
        """Compute and record one call; the op's result."""
        return finish(call, self.compute(call, **options)[0])

    def compute(self, call: GemmCall, **options) -> tuple[torch.Tensor, CallInfo]:
        """The [batch?, M, N] result of one call and what computed it (recorded in the report)."""
        if call.reshape == "addbmm":  # one addmm per batch entry, each onto the previous result
            if call.a.shape[0] == 0:  # no entries: one addmm of K = 0 (torch: beta * C)
                M, N = call.a.shape[1], call.b.shape[2]
                return self.compute(GemmCall("addbmm", call.a.new_empty((M, 0)), call.b.new_empty((0, N)), call.c,
                                             call.alpha, call.beta, out_dtype=call.out_dtype), **options)
            result, info = None, None
            for i in range(call.a.shape[0]):
                first = i == 0
                result, info = self.compute(call.entry(i, call.c if first else result, call.beta if first else 1),
                                            **options)
            return result, info
        backward = torch._C._current_autograd_node() is not None
        with self._lock:
            index = self.counter
            self.counter += 1
        device = call.a.device
        stream = contextlib.nullcontext()
        if device.type != "cpu":
            engine = engine_for(device.type, getattr(self.backend, "engine", "auto"))
            if engine == "cuda":
                options.setdefault("engine", engine)
                stream = _on_torch_stream(device)
            else:
                _warn_cuda_copy(device)
        with stream:
            if self.attribution is None:
                result, info = self.backend.execute(call, backward=backward, index=index, **options)
            else:
                result, info = self.attribution.execute(self.backend, call, backward=backward, index=index, **options)
            out = to_tensor(result, device)
        if self.attribution is not None and not backward:
            self.attribution.bind(out)
        self.record(call, "backward" if backward else "forward", info)
        return out, info

    def _checked(self, func, args, kwargs, call: GemmCall) -> torch.Tensor:
        """Self-check: the native result, then the emulated one (returned), compared bit for bit."""
        if not call.a.is_cuda:
            _warn_once(self, "check-cpu", "check=True compares with cuBLAS on CUDA tensors; CPU calls are not "
                       "checked")
            return self.gemm(call)
        with self._lock:
            index = self._checked_calls
            self._checked_calls += 1
        native = self.checker.native(index, func, args, kwargs)
        result, info = self.compute(call)
        out = finish(call, result)
        phase = "backward" if torch._C._current_autograd_node() is not None else "forward"
        row = dict(op=call.op, phase=phase, shape=call.shape, dtypes=_dtypes(call), layout=call.layout,
                   predicted=info.kernel, modelled=info.modelled, reason=info.reason)
        self.checker.compare(index, (call.op, phase, call.shape, row["dtypes"], call.layout), row, native, out,
                             call=info.call)
        return out

    def record(self, call: GemmCall, phase: str, info: CallInfo) -> None:
        dtypes = _dtypes(call)
        key = (call.op, phase, call.shape, dtypes, call.layout, info.kernel, info.modelled)
        with self._lock:
            site = self.sites.get(key)
            if site is None:
                site = self.sites[key] = CallSite(call.op, phase, call.shape, dtypes, call.layout, info.kernel,
                                                  info.modelled, info.reason)
            site.count += 1
            first = key not in self._warned
            self._warned.add(key)
        if not info.modelled and first:
            warnings.warn(_not_modelled_message(call, phase, dtypes, info), NotModelledWarning,
                          stacklevel=_caller_stacklevel())

    # --- convolutions ---------------------------------------------------------------------------

    def convolution(self, func, name: str, args, kwargs):
        if self.conv is None:
            info = CallInfo("cuDNN convolution", False, "convolutions are not modelled in library mode; ran natively")
            self._record_native(name, args, info)
            return func(*args, **kwargs)
        return self.conv(self, func, name, args, kwargs)

    def _record_native_call(self, call: GemmCall, kernel: str, reason: str) -> None:
        backward = torch._C._current_autograd_node() is not None
        self.record(call, "backward" if backward else "forward", CallInfo(kernel, False, reason))

    def _record_native(self, name: str, args, info: CallInfo) -> None:
        tensors = [a for a in args if isinstance(a, torch.Tensor)][:2]
        call = GemmCall(name, tensors[0], tensors[1], out_dtype=tensors[0].dtype)
        backward = torch._C._current_autograd_node() is not None
        self.record(call, "backward" if backward else "forward", info)

    def report(self) -> Report:
        with self._lock:
            return Report(CallSite(**vars(s)) for s in self.sites.values())


def _dtypes(call: GemmCall) -> str:
    names = "x".join(str(t.dtype).replace("torch.", "") for t in (call.a, call.b))
    return names + "->" + str(call.out_dtype).replace("torch.", "")


def _warn_once(mode: EmulationMode, key: str, message: str) -> None:
    with mode._lock:
        if key in mode._warned:
            return
        mode._warned.add(key)
    warnings.warn(message, RuntimeWarning, stacklevel=5)
def _not_modelled_message(call: GemmCall, phase: str, dtypes: str, info: CallInfo) -> str:
    """One line per call site; FP32 calls say what library mode models instead of the kernel's long reason."""
    where = f"aten.{call.op} {'x'.join(str(v) for v in call.shape)} ({dtypes}, {phase})"
    if call.a.dtype == torch.float32 and call.op in GEMM_OPS and call.op != "dot":  # dot: its own reason
        return (f"{where}: cuBLAS's FP32 kernel is not modelled at this shape, a best guess (library mode is "
                "verified on BF16/FP16 models: model.bfloat16(); run.report() says why)")
    return (f"{where}: {info.kernel} is not modelled" + (f": {info.reason}" if info.reason else "")
            + "; the result is a best guess")


# frames in these packages are torch's dispatch machinery or ours, not the code a user would fix
_OWN_DIRS = (os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
             os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep)


def _caller_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the user's code: the first frame outside torch and tcnumerics
    (a warning located in this module would name the same line of ours for every call site)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_OWN_DIRS):
        frame, level = frame.f_back, level + 1
    return level if frame is not None else 1


def _floating(args) -> bool:
    """GEMMs on floating-point tensors are emulated; integer ones run natively."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    return bool(tensors) and all(t.is_floating_point() for t in tensors[:2]) and not any(t.is_complex()
                                                                                          for t in tensors)


def _warn_cuda_copy(device: torch.device) -> None:
    with _LOCK:
        if device.type in _CUDA_WARNED:
            return
        _CUDA_WARNED.add(device.type)
    warnings.warn(f"tcnumerics.torch: {device.type} tensors are copied to the CPU for emulation and back "
                  "(no GPU engine available); results are the same bits, only slower", RuntimeWarning, stacklevel=5)
