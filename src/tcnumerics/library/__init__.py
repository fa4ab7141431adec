"""Library GEMMs on Hopper as cuBLAS / cuBLASLt run them for torch, bit for bit (see ``docs/gemm.md``).

A kernel's numerics are the silicon's; which kernel and split-K cuBLAS chooses is a statement about one GPU model
(``gpus.py``: the H100 is measured, the default on the CPU; ``gpu=`` on every op).  The modules form one flow, each
importing only from lower layers (``LAYERS``; ``tests/test_library_imports.py`` fails on a cycle or an upward
import):

0. value types, kernel facts and numerics, shared by every GPU model: ``gpus`` (model names, the manifest of
   tables), ``calls`` (``Call``, ``TableKey``), ``kernel_names``, ``structure`` (a kernel family's reduction and
   epilogue, executed), ``simt``, ``streamk``, ``cutlass_half`` (families' orders, structures read off a launch);
1. measured tables, per GPU model: ``launches`` (what cuBLAS launched), ``measured`` (bit-captured structures),
   ``launch_frontier`` (the no-split frontier a model without bit captures draws from its own launches);
2. kernel choice, per GPU model: ``choice`` (measured launch, then the bracket / split rule, then the k-NN),
   ``split_rule``, ``unseen`` (the k-NN over the launch table);
3. plans: ``selection`` (``select(call)`` -> ``Plan``: the structure of the chosen kernel, flagged where not
   verified on the call's GPU model);
4. ops: ``ops`` (``matmul``, ``linear``, ``addmm``, ``bmm``, ``baddbmm``, ``scaled_mm``, each with ``.plan()``),
   ``check`` (the self-check's comparison of what cuBLAS ran, capture files), ``presets`` (``h200_presets``, the
   first H200 presets, their kernel choices as they were, planned as ``Plan``; ``library_gemm`` its deprecated
   alias, ``GemmPlan`` a deprecated name of ``Plan``).
"""

LAYERS = {
    "gpus": 0, "calls": 0, "kernel_names": 0, "structure": 0, "simt": 0, "streamk": 0, "cutlass_half": 0,
    "launches": 1, "measured": 1, "launch_frontier": 1,
    "choice": 2, "split_rule": 2, "unseen": 2,
    "selection": 3,
    "ops": 4, "check": 4, "presets": 4,
    "__init__": 5,
}

from .calls import Call  # noqa: E402 - LAYERS first: the import test reads it without importing the rest
from .check import LaunchCheck, Observation, compare_launch, read_capture, verdict, write_capture  # noqa: E402
from .gpus import DEFAULT_GPU, coverage, model_key  # noqa: E402
from .launches import measured_launch  # noqa: E402
from .ops import NotModelledWarning, addmm, baddbmm, bmm, linear, matmul, scaled_mm  # noqa: E402
from .presets import LIBRARY_FUNCTIONS, LibraryGemm, h200_presets, library_gemm  # noqa: E402
from .selection import Plan, select  # noqa: E402
from .structure import Structure  # noqa: E402

__all__ = ["library_gemm", "h200_presets", "LibraryGemm", "LIBRARY_FUNCTIONS", "matmul", "linear",
           "addmm", "bmm", "baddbmm", "scaled_mm", "NotModelledWarning", "Plan", "Call", "Structure", "select", "measured_launch",
           "model_key", "coverage", "DEFAULT_GPU", "compare_launch", "LaunchCheck", "verdict", "Observation",
           "write_capture", "read_capture"]


def __getattr__(name: str):
    """Deprecated names: ``GemmPlan`` (the presets' plan is ``Plan``)."""
    if name == "GemmPlan":
        from . import presets

        return presets.GemmPlan
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
