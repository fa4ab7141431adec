"""Helpers for the MMA-Sim differential tests: our catalog names -> MMA-Sim operations,
bit arrays -> torch tensors.  Imported only by tests that skip without mmasim."""

from __future__ import annotations

import re

import numpy as np

import tcnumerics as tc

NV_ARCH = {"volta": "Volta", "turing": "Turing", "ampere": "Ampere", "ada": "Ada Lovelace",
           "blackwell": "Blackwell", "rtx-blackwell": "RTX Blackwell"}


def mmasim_op(name: str):
    """(operation, block_scaled) for a catalog name, or None where MMA-Sim has no model."""
    import mmasim.amd as amd
    import mmasim.nv_ptx as nv

    arch, rest = name.split(".", 1)
    try:
        if arch.startswith("cdna"):
            return amd.MFMA(arch.upper(), rest.split(".", 1)[1]), False
        if rest.startswith("tcgen05.mma."):
            kind_rest = rest[len("tcgen05.mma."):]
            k = tc.instruction(name).k
            if ".block" in kind_rest:
                return nv.TCGen05MMABlockScale("Blackwell", f"m128n8k{k}.{kind_rest}"), True
            return nv.TCGen05MMA("Blackwell", f"m128n8k{k}.{kind_rest}"), False
        if arch not in NV_ARCH:
            return None
        op, shape_type = rest.split(".", 1)
        if op == "wmma":  # a chain of the architecture's mma steps over K = 16
            d, a, b, c = shape_type.split(".")[1:]
            step = "m8n8k4" if arch == "volta" else "m16n8k8"
            shape_type = f"{step}.{d}.{a}.{b}.{c}"
        elif op != "mma":
            return None
        if ".block" in shape_type:
            return nv.MMABlockScale(NV_ARCH[arch], shape_type), True
        return nv.MMA(NV_ARCH[arch], shape_type), False
    except AssertionError:  # not in MMA-Sim's tables
        return None


def to_torch(bits: np.ndarray, fmt, packed_fp4: bool = False):
    """Our bit arrays as the tensors MMA-Sim takes (fp6/fp4 stay uint8)."""
    import torch

    dtypes = {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
              "bf16": torch.bfloat16, "e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2,
              "e4m3fnuz": torch.float8_e4m3fnuz, "e5m2fnuz": torch.float8_e5m2fnuz,
              "ue8m0": torch.float8_e8m0fnu, "ue4m3": torch.float8_e4m3fn}
    signed = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
    if packed_fp4:  # two E2M1 per byte, MMA-Sim's order: element 2i in the high nibble
        bits = ((bits[..., 0::2] & 0xF) << 4 | (bits[..., 1::2] & 0xF)).astype(np.uint8)
        return torch.from_numpy(bits.copy())
    if fmt.name not in dtypes:
        return torch.from_numpy(np.ascontiguousarray(bits).astype(np.uint8))
    t = torch.from_numpy(np.ascontiguousarray(bits).view(signed[bits.dtype.itemsize * 8]).copy())
    return t.view(dtypes[fmt.name])


def from_torch(t, fmt) -> np.ndarray:
    import torch

    ints = {8: torch.int8, 16: torch.int16, 32: torch.int32, 64: torch.int64}
    return t.contiguous().view(ints[fmt.container_bits]).numpy().view(fmt.container_dtype)


def random_operands(fmt, shape, rng, family: str) -> np.ndarray:
    """Random bit patterns: ``bits`` (uniform over the container, NaN/inf/subnormals
    included), ``values`` (N(0,1) scaled by small powers of two), ``narrow`` (exponents
    near 1, so truncation and rounding decide the result)."""
    if family == "bits" or fmt.width <= 6:
        hi = 1 << fmt.container_bits
        return rng.integers(0, hi, shape, dtype=np.uint64).astype(fmt.container_dtype)
    x = rng.standard_normal(shape)
    if family == "values":
        x = x * np.exp2(rng.integers(-8, 9, shape))
    else:
        x = (1 + rng.random(shape)) * np.exp2(rng.integers(-3, 3, shape)) * np.sign(x)
    return fmt.from_float(x)
