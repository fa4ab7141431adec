"""What a cuBLAS activity name says: a GEMM kernel or not, and an nvjet kernel's tile and cluster.

Imports nothing but ``re``, so the device scripts load this file on its own (``graph_survey.py``: the device
needs only torch and numpy there).

    >>> is_gemm_kernel("nvjet_sm90_tst_64x16_64x16_4x1_v_bz_splitK_TNT"), is_gemm_kernel("Memset (Device)")
    (True, False)
    >>> nvjet_params("nvjet_sm90_tst_64x16_64x16_4x1_v_bz_splitK_TNT")
    (64, 16, 64, 4, 1)
"""

from __future__ import annotations

import re

NVJET = re.compile(r"nvjet_sm90_[a-z]+_(\d+)x(\d+)_(\d+)x\d+_(\d+)x(\d+)_")
NOT_GEMM = re.compile(r"scal_kernel|scal_64addr|splitKreduce|at::native::")
EPILOGUE_TAGS = (("_bias_", "bias"), ("_badd_", "badd"), ("_bx_", "bx"))  # an nvjet name's tag -> its fused epilogue


def is_gemm_kernel(name: str) -> bool:
    """A GEMM kernel's activity name (not a memset, copy, scaling, split-K reduction or torch elementwise kernel)."""
    return not name.startswith(("Memset", "Memcpy")) and not NOT_GEMM.search(name)


def nvjet_params(name: str) -> tuple[int, int, int, int, int] | None:
    """An nvjet kernel's (tile N, tile M, K-tile, cluster x, cluster y) as its name spells them, or None."""
    m = NVJET.search(name)
    return tuple(int(x) for x in m.groups()) if m else None


def nvjet_epilogue(name: str) -> str | None:
    """The fused epilogue an nvjet kernel's name tags (``EPILOGUE_TAGS``: "bias", "badd", "bx"), or None.

    >>> tagged, plain = "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_bias_TNT", "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT"
    >>> nvjet_epilogue(tagged), nvjet_epilogue(plain)
    ('bias', None)
    """
    return next((e for tag, e in EPILOGUE_TAGS if tag in name), None)
