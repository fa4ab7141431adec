"""The GPU engine's build choices read from the environment (private): for timing one kernel form against another
on the same inputs -- every choice gives the same bits.

Example:
    >>> import os
    >>> os.environ.pop("TCNUMERICS_CUDA_ALIGN", None) and None
    >>> env_align()
    'auto'
"""

from __future__ import annotations

import os

from ._cuda_build import ALIGNS, EXP_PASSES, Tile

__all__ = ["env_align", "env_exp_pass", "env_fchain", "env_tcalign", "env_native", "env_tile_override"]


def env_align() -> str:
    """The tiled kernel's truncating pass (``TCNUMERICS_CUDA_ALIGN``, for timing one against another): "auto" (the
    default: FP32 FMA for the FP8 chains, the integer pass elsewhere, see ``_align_choice``), "fma" (FP32 or FP64
    FMA where either fits) or "int" (the integer pass everywhere); every choice gives the same bits."""
    value = os.environ.get("TCNUMERICS_CUDA_ALIGN", "auto")
    if value not in ALIGNS:
        raise ValueError(f"TCNUMERICS_CUDA_ALIGN must be one of {ALIGNS}, not {value!r}")
    return value


def env_exp_pass() -> str:
    """The tiled kernel's exponent pass (``TCNUMERICS_CUDA_EXP``): "alu" (default: the CUDA-core max) or "mma" (the
    tensor-core power sum where ``_cuda_build.exp_mma`` allows, with its 16,16,4,4 tile; same bits, host-checked;
    same bits on an H200 but 0.7x the CUDA-core pass there -- docs/gpu.md)."""
    value = os.environ.get("TCNUMERICS_CUDA_EXP", "alu")
    if value not in EXP_PASSES:
        raise ValueError(f"TCNUMERICS_CUDA_EXP must be one of {EXP_PASSES}, not {value!r}")
    return value


def env_fchain() -> bool:
    """Whether the GPU engine runs ``gemm_fchain`` where ``fchain_reason`` allows (``TCNUMERICS_CUDA_FCHAIN``: "auto",
    the default, or "off" -- the tiled kernel then, for timing one against the other; same bits)."""
    value = os.environ.get("TCNUMERICS_CUDA_FCHAIN", "auto")
    if value not in ("auto", "off"):
        raise ValueError(f"TCNUMERICS_CUDA_FCHAIN must be 'auto' or 'off', not {value!r}")
    return value == "auto"


def env_tcalign() -> bool:
    """Whether the GPU engine runs ``gemm_tcalign`` where ``tcalign_reason`` allows and the GPU's mma passed the
    self-test (``TCNUMERICS_CUDA_TCALIGN``: "auto", the default, or "off" -- ``gemm_fchain`` then; same bits)."""
    value = os.environ.get("TCNUMERICS_CUDA_TCALIGN", "auto")
    if value not in ("auto", "off"):
        raise ValueError(f"TCNUMERICS_CUDA_TCALIGN must be 'auto' or 'off', not {value!r}")
    return value == "auto"


def env_native() -> bool:
    """Whether the GPU engine runs ``gemm_native`` (a unit that is the GPU's own mma, run as that mma) where
    ``native_reason`` allows and the GPU's mma passed the self-test (``TCNUMERICS_CUDA_NATIVE``: "auto", the default,
    or "off"; same bits)."""
    value = os.environ.get("TCNUMERICS_CUDA_NATIVE", "auto")
    if value not in ("auto", "off"):
        raise ValueError(f"TCNUMERICS_CUDA_NATIVE must be 'auto' or 'off', not {value!r}")
    return value == "auto"


def env_tile_override() -> Tile | None:
    """``TCNUMERICS_CUDA_TILE="tx,ty,tm,tn"`` as a ``Tile`` (tm, tn even; for timing other shapes -- every shape
    gives the same bits), or None when unset (``device_tiles`` chooses)."""
    value = os.environ.get("TCNUMERICS_CUDA_TILE")
    if not value:
        return None
    try:
        tx, ty, tm, tn = (int(v) for v in value.split(","))
    except ValueError:
        raise ValueError(f"TCNUMERICS_CUDA_TILE must be 'tx,ty,tm,tn', not {value!r}") from None
    if tm % 2 or tn % 2 or min(tx, ty, tm, tn) < 1 or tm * tn > 64:
        raise ValueError(f"TCNUMERICS_CUDA_TILE {value!r}: tm and tn must be even, tm * tn at most 64")
    return Tile(tx=tx, ty=ty, tm=tm, tn=tn)
