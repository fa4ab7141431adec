"""Run PyTorch models on emulated matrix units: Hopper's cuBLAS bit for bit, or any catalogued unit.

``emulate("hopper")`` (library mode) computes every GEMM as ``tcnumerics.library`` predicts
cuBLAS on Hopper computes it; ``emulate(instruction=...)`` (unit mode) computes it on one
matrix instruction under a quantisation recipe (``unit.py`` states the semantics).  Forward
and backward, CPU tensors; CUDA tensors through the GPU engine when CuPy sees a GPU (else
copied to the CPU and back, with a warning).

Example:
    >>> import torch, tcnumerics.torch as tct
    >>> x = torch.full((2, 32), 1 + 2**-9); w = torch.ones(32, 3)
    >>> with tct.emulate(instruction="hopper.wgmma.m64n8k16.f32.bf16.bf16") as run:
    ...     y = x @ w                    # FP32 tensors: operands rounded to BF16, FP32 result
    >>> y[0].tolist(), run.report().calls
    ([32.0, 32.0, 32.0], 1)
"""

from __future__ import annotations

import contextlib

from .._extras import require

torch = require("torch", "torch", "tcnumerics.torch")

from .backends import CallInfo, LibraryBackend, NotModelledWarning, UnitBackend
from .mode import CallSite, EmulationMode, Report
from .unit import SCALINGS, UnitRecipe

__all__ = ["emulate", "Emulation", "NotModelledWarning", "UnitRecipe", "Report", "CallSite", "CallInfo", "SCALINGS"]


class Emulation:
    """A context manager: inside ``with``, matrix ops run on the emulated unit.  ``report()`` lists the calls.

    Re-entering the same object accumulates into the same report.  Each thread enters its own
    ``with`` block (dispatch modes are per thread); forked children (DataLoader workers) may enter their own.
    """

    def __init__(self, backend, conv=None, check: bool = False, attribution: bool = False):
        self.backend = backend
        self.mode = EmulationMode(backend, conv)
        if attribution:
            from .attribution import Recorder

            self.mode.attribution = Recorder()
        self.check = check
        if check:
            from .check import Checker

            self.mode.checker = Checker()
        self._stack: contextlib.ExitStack | None = None

    def __repr__(self) -> str:
        return f"<tcnumerics.torch.Emulation {self.backend.describe()}>"

    def __enter__(self) -> "Emulation":
        stack = contextlib.ExitStack()
        # fused attention kernels are not GEMMs: the math backend decomposes SDPA into bmm/matmul
        from torch.nn.attention import SDPBackend, sdpa_kernel

        stack.enter_context(sdpa_kernel([SDPBackend.MATH]))
        if self.check:  # the profiler names the kernels of each native call (stopped last, on exit)
            self.mode.checker.start()
            stack.callback(self.mode.checker.stop)
        if self.mode.attribution is not None:  # module names for the call sites (torch's ModuleTracker)
            stack.enter_context(self.mode.attribution)
        stack.enter_context(self.mode)
        self._stack = stack
        return self

    def __exit__(self, *exc) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.__exit__(*exc)

    def report(self) -> Report:
        """Per call site (op, phase, shape, dtypes, layout): count, kernel or recipe, modelled or not."""
        return self.mode.report()

    def attribution(self, lr: float | None = None):
        """With ``attribution=True``: per call site (module, phase) the error split by stage and the loss effect
        (``tcnumerics.torch.attribution``).  The first-order estimate of forward sites accumulates over the backward
        passes run (inside or after the ``with``); ``lr``: an SGD learning rate (weight-gradient and input-gradient
        sites: the loss after one SGD step)."""
        return self._recorder("attribution").table(lr)

    def set_site(self, name: str, rule) -> None:
        """With ``attribution=True``: compute the calls of module ``name`` (or ``"name:phase"``) exactly
        (``rule="exact"``: float64, one RNE conversion), on another emulation's rule (an ``Emulation``), or as
        emulated again (``None``); every other site keeps its rule."""
        rec = self._recorder("set_site")
        if rule is None:
            rec.overrides.pop(name, None)
        else:
            rec.overrides[name] = rule if rule == "exact" else rule.backend

    def _recorder(self, what: str):
        if self.mode.attribution is None:
            raise ValueError(f"{what}: this emulation was not made with attribution=True")
        return self.mode.attribution

    def check_report(self):
        """With ``check=True``: per call site, how many calls were bit-exact, flagged and different, or
        silently wrong against the GPU's own cuBLAS, the largest fraction of outputs that differed and the
        kernels cuBLAS ran (``tcnumerics.torch.check``)."""
        if not self.check:
            raise ValueError("check_report: this emulation was not made with check=True")
        return self.mode.checker.report()

    def save_check(self, path: str, *, overwrite: bool = False) -> int:
        """With ``check=True``: write every checked call (the library's call, cuBLAS's kernels, whether the bits
        matched) as a capture file (``.json`` / ``.json.gz``) that ``lab/device_library/fold_gpu.py --captures``
        folds into the GPU's tables; returns how many calls it holds."""
        if not self.check:
            raise ValueError("save_check: this emulation was not made with check=True")
        return self.mode.checker.save(path, overwrite=overwrite)


def emulate(library: str | None = None, *, instruction=None, unit=None, operand_format=None,
            scaling: str | None = None, promote_every: int | None = None, split_k=None, rounding: str = "rne",
            seed: int = 0, backward_instruction=None, engine: str = "auto", convolutions: bool = True,
            check: bool = False, gpu: str | None = None, attribution: bool = False) -> Emulation:
    """An ``Emulation`` context: library mode (``emulate("hopper")``) or unit mode (``instruction=`` / ``unit=``).

    Args:
        library: architecture whose library GEMMs to reproduce ("hopper").
        instruction: catalog name or ``InstructionSpec`` of the unit (unit mode).
        unit: a custom ``InstructionSpec`` or ``UnitModel`` instead of a catalog entry.
        operand_format: format (or (A, B) pair) operands are rounded to; default the instruction's.
        scaling: None, "tensor", "row", "mx" or "nvfp4" (see ``tcnumerics.torch.unit``).
        promote_every, split_k: ``tcnumerics.gemm``'s promotion and split-K structure.
        rounding: "rne" or "stochastic" (operand conversion; ``seed`` makes it reproducible).
        backward_instruction: another instruction for the GEMMs autograd runs in backward.
        engine: "auto" (CUDA tensors: the GPU engine when usable), "fast", "reference", "exact".
        convolutions: unit mode only -- run convolutions as implicit GEMMs on the unit (a
            model, not cuDNN's bits); False runs them natively.
        check: library mode on CUDA tensors -- also run every GEMM natively and compare bits per call
            site (``run.check_report()``: exact / flagged / silent, kernels cuBLAS ran; ``run.save_check``).
        gpu: library mode -- the GPU model whose measured tables predict cuBLAS's choices ("h100", "h200", or
            any device name; calls its tables do not cover are flagged).  Default: the GPU the tensors are on;
            for CPU tensors the library's default, the H100.
        attribution: name each call by its module and phase and measure its error by stage
            (``run.attribution()``, ``run.set_site``; ``tcnumerics.torch.attribution``, docs/attribution.md).
    """
    if library is not None:
        if any(v is not None for v in (instruction, unit, operand_format, scaling, promote_every, split_k,
                                       backward_instruction)) or rounding != "rne":
            raise ValueError("emulate: library mode (emulate('hopper')) takes no unit options; pass either a "
                             "library architecture or instruction=/unit= with its recipe")
        if library != "hopper":
            raise ValueError(f"library: only 'hopper' (H100/H200 cuBLAS) is modelled, got {library!r}")
        return Emulation(LibraryBackend(library, engine, gpu), check=bool(check), attribution=bool(attribution))
    if instruction is None and unit is None:
        raise ValueError("emulate: pass a library architecture ('hopper') or instruction= / unit=")
    if gpu is not None:
        raise ValueError("gpu: a GPU model's tables belong to library mode (emulate('hopper', gpu=...)); a unit "
                         "recipe computes the same on every GPU")
    if check:
        raise ValueError("check: the self-check compares library mode (emulate('hopper')) with the GPU's cuBLAS; "
                         "a unit recipe is not a prediction of cuBLAS")
    recipe = UnitRecipe.create(instruction=instruction, unit=unit, operand_format=operand_format, scaling=scaling,
                               promote_every=promote_every, split_k=split_k, rounding=rounding, seed=seed,
                               engine=engine)
    backward = recipe.with_instruction(backward_instruction) if backward_instruction is not None else None
    conv = None
    if convolutions:
        from .conv import convolution

        conv = convolution
    return Emulation(UnitBackend(recipe, backward), conv, attribution=bool(attribution))

