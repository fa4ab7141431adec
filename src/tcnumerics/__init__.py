"""tcnumerics: bit-exact models of low-precision matrix units (tensor cores, matrix cores).

Quick look:
    >>> import tcnumerics as tc
    >>> "hopper.wgmma.m64n8k16.f32.bf16.bf16" in tc.instructions()
    True
    >>> tc.instruction("hopper.wgmma.m64n8k32.f32.e4m3.e4m3").model.frac_bits
    13
"""

from .api import Instruction, instruction, instructions
from .gemm import gemm
from .library import library_gemm
from .engines.oracle import true_dot
from .formats import FloatFormat, IntFormat, Rounding, format_names, get_format
from .model import InstructionSpec, UnitModel
from .semiring import semiring_matmul

__version__ = "0.1.0"

__all__ = [
    "Instruction",
    "InstructionSpec",
    "UnitModel",
    "FloatFormat",
    "IntFormat",
    "Rounding",
    "gemm",
    "library_gemm",
    "semiring_matmul",
    "instruction",
    "instructions",
    "get_format",
    "format_names",
    "true_dot",
    "__version__",
]
