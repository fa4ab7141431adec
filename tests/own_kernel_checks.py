"""Shared by the host-build tests of the kernels with their own build (gemm_fchain, gemm_tcalign, gemm_native):
operands, and the one check -- every output equal to the CPU fast engine, counting slow-path blocks."""

import numpy as np

from tcnumerics.engines import _cuda_build as build
from tcnumerics.engines import _cuda_launch, cuda, fast
from tcnumerics.model import InstructionSpec


def finite_codes(spec: InstructionSpec, shape, rng, side: str) -> np.ndarray:
    """Uniform one-byte codes (every exponent, subnormals and zeros) with the format's NaN / infinity codes replaced
    (``side``: "a" or "b")."""
    codes = rng.integers(0, 256, shape, dtype=np.uint8)
    plan = cuda._plan(spec)
    table = plan.a_exp if side == "a" else plan.b_exp
    codes[np.isin(codes, np.flatnonzero(np.asarray(table) < -16384))] = 0x38
    return codes


def slow_blocks(spec: InstructionSpec, kind: str) -> int:
    """Blocks of ``gemm_<kind>``'s host build that took the slow path since the last call."""
    lib = build.host_library(_cuda_launch.OWN_KERNELS[kind].header(spec, cuda._plan(spec)))
    return int(getattr(lib, f"host_{kind}_slow_blocks")())


def check(spec, kind: str, a, b, c, k0=0, k1=None) -> int:
    """``gemm_<kind>``'s bits == the fast engine's on every output; returns how many blocks took the slow path."""
    k1 = a.shape[1] if k1 is None else k1
    slow_blocks(spec, kind)  # reset the host build's counter
    got = cuda.host_accumulate_bits(spec, a, b, c.copy(), k0, k1, kernel=kind)
    slow = slow_blocks(spec, kind)
    want = fast.accumulate_bits(spec, a, b, c.copy(), k0, k1)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    return slow
