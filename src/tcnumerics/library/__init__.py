"""Library GEMMs on Hopper as cuBLAS / cuBLASLt run them for torch, bit for bit (see ``docs/gemm.md``).

Two layers, data flowing one way:

* ``presets`` -- ``library_gemm("torch.matmul", dtype=...)``: the first presets (kept as they were);
* ``structure`` -- a kernel family's numerics (chain, split-K, epilogue, FFMA) executed on numpy arrays;
* ``selection`` -- which family cuBLAS runs for a torch call (fitted to three H100 captures, 1,752 calls);
* ``ops`` -- one function per torch op (``matmul``, ``linear``, ``addmm``, ``bmm``, ``baddbmm``,
  ``scaled_mm``), each with a ``.plan()`` twin that says which family and whether it is modelled.
"""

from .ops import NotModelledWarning, addmm, baddbmm, bmm, linear, matmul, scaled_mm
from .presets import LIBRARY_FUNCTIONS, GemmPlan, LibraryGemm, library_gemm
from .selection import Call, Plan, select
from .structure import Structure

__all__ = ["library_gemm", "LibraryGemm", "GemmPlan", "LIBRARY_FUNCTIONS", "matmul", "linear", "addmm", "bmm",
           "baddbmm", "scaled_mm", "NotModelledWarning", "Plan", "Call", "Structure", "select"]
