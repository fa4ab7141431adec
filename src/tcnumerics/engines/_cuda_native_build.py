"""Which plans ``gemm_native`` runs and the constants it is compiled with (private; the kernel is in
``_cuda_native_source``).

A unit runs natively where its plan is, field for field, the plan of a measured host instruction -- Hopper's BF16 or
FP16 ``mma.sync`` m16n8k16 or m16n8k8, or TF32 m16n8k8, with FP32 C and D (NUMERICS.md) -- so that the chain over K is that
instruction run over K in order.  ``_cuda_launch`` uses the kernel only on a GPU of the measured family (sm_90)
whose instruction passed the self-test.

Example:
    >>> from tcnumerics.catalog import get_instruction
    >>> from tcnumerics.engines import cuda
    >>> spec = get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")
    >>> native_instruction(cuda._plan(spec), spec)
    'hopper.mma.m16n8k16.f32.bf16.bf16.f32'
    >>> native_instruction(*(lambda s: (cuda._plan(s), s))(get_instruction("hopper.wgmma.m64n128k32.f32.e4m3.e4m3")))
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..catalog import get_instruction
from ..model import InstructionSpec
from ._cuda_build import SubgroupPlan, Tile, config_header
from ._fast_plan import Plan, build_plan

__all__ = ["NATIVE_TILE", "HOST_INSTRUCTIONS", "native_instruction", "native_reason", "native_header",
           "native_smem_words", "self_test_operands"]

NATIVE_TILE = Tile(tx=32, ty=8, tm=16, tn=4)  # the launch's shape: 256 threads, 128 x 128 outputs a block
# the host instructions whose numerics are measured (NUMERICS.md, Hopper): name -> (K, operand type)
HOST_INSTRUCTIONS = {**{f"hopper.mma.m16n8k{k}.f32.{t}.{t}.f32": (k, t) for t in ("bf16", "f16") for k in (16, 8)},
                     "hopper.mma.m16n8k8.f32.tf32.tf32.f32": (8, "tf32")}
_KINDS = {"bf16": 0, "f16": 1, "tf32": 2}  # the kernel's NV_KIND

# the plan fields that decide a chain's bits (the float tables and the vectorised engine's routes follow from them)
_FIELDS = ("kind", "group_lengths", "a_sig", "a_exp", "b_sig", "b_exp", "a_shift", "b_shift", "c_params", "d_params",
           "out_params", "frac_bits", "e_zero", "lshift_ab", "rshift_ab", "lshift_c", "rshift_c", "lshift_d",
           "rshift_d", "rounding", "overflow", "nan_bits", "ieee_add", "add_rounding", "saturate")


@lru_cache(maxsize=None)
def _host_plan(name: str) -> tuple[Plan, InstructionSpec]:
    spec = get_instruction(name)
    return build_plan(spec), spec


def _same(plan: Plan, host: Plan) -> bool:
    return all(np.array_equal(np.asarray(getattr(plan, f)), np.asarray(getattr(host, f))) for f in _FIELDS)


def native_instruction(plan: Plan, spec: InstructionSpec) -> str | None:
    """The host instruction whose chain ``plan`` is (None: none is)."""
    if isinstance(plan, (str, SubgroupPlan)) or spec.model.algorithm != "fused" or not plan.natural_order:
        return None
    for name in HOST_INSTRUCTIONS:
        host, host_spec = _host_plan(name)
        same_containers = all(np.dtype(getattr(spec, f).container_dtype) == np.dtype(getattr(host_spec, f).container_dtype)
                              for f in ("a_format", "b_format", "c_format", "d_format"))
        if same_containers and _same(plan, host):
            return name
    return None


def native_reason(plan: Plan, spec: InstructionSpec) -> str | None:
    """Why ``gemm_native`` cannot run ``plan`` (None: it can, on a GPU whose mma passed the self-test)."""
    return None if native_instruction(plan, spec) else "no measured host instruction has its numerics"


def native_header(spec: InstructionSpec, plan: Plan) -> str:
    """The compile-time constants of ``gemm_native`` for ``spec``: the unit's and the host instruction's shape and
    operand type."""
    name = native_instruction(plan, spec)
    if name is None:
        raise ValueError(f"{spec.name}: gemm_native does not run it: no measured host instruction has its numerics")
    k, kind = HOST_INSTRUCTIONS[name]
    lines = ["#define NATIVE 1", f"#define NV_K {k}", f"#define NV_KSTR \"{k}\"", f"#define NV_KIND {_KINDS[kind]}",
             f"#define NV_TYPE \"{kind}\""]
    return config_header(spec, plan, NATIVE_TILE) + "\n".join(lines) + "\n"


def native_smem_words() -> int:
    """32-bit words of dynamic shared memory: a stage of A's 128 rows and B's 128 columns, 32 K as 16 words of K pairs
    (32 of TF32) at stride 136 (sized for TF32, the larger)."""
    return 2 * 32 * 136


def self_test_operands(plan: Plan, spec: InstructionSpec, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Operands on which ``gemm_native`` must give the unit's bits on a GPU before the engine uses it there: A [128,
    144] and B [256, 144] codes (K: four stages and a half one), C [128, 256] FP32 bits.  Rows 0-63 of A and
    columns 0-127 of B are uniform container patterns (every exponent, subnormals, zeros of both signs, infinities, NaNs), the
    rest N(0, 1) values scaled over 40 binades with pairs that cancel; C is uniform bit patterns for rows 0-31
    (subnormals, infinities, NaNs) and N(0, 1) over 60 binades elsewhere.

    >>> from tcnumerics.catalog import get_instruction
    >>> from tcnumerics.engines import cuda
    >>> spec = get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")
    >>> [x.shape for x in self_test_operands(cuda._plan(spec), spec)]
    [(128, 144), (256, 144), (128, 256)]
    """
    rng = np.random.default_rng(seed)
    k = 144
    dtype = np.dtype(spec.a_format.container_dtype)

    def values(rows: int) -> np.ndarray:
        x = rng.standard_normal((rows, k)) * np.exp2(rng.integers(-20, 20, (rows, 1)))
        x[:, 1::2] = -x[:, 0::2] * (1 + rng.integers(0, 2, (rows, k // 2)) * 2.0 ** -6)  # near-cancelling pairs
        return np.asarray(spec.a_format.from_float(x), dtype=dtype)

    a, b = values(128), values(256)
    bits = 8 * dtype.itemsize  # TF32: the container's low 13 bits too, which the unit ignores
    a[:64] = rng.integers(0, 1 << bits, (64, k), dtype=np.uint64).astype(dtype)
    b[:128] = rng.integers(0, 1 << bits, (128, k), dtype=np.uint64).astype(dtype)
    c = (rng.standard_normal((128, 256)) * np.exp2(rng.integers(-30, 30, (128, 256)))).astype(np.float32).view(np.uint32)
    c[:32] = rng.integers(0, 1 << 32, (32, 256), dtype=np.uint64).astype(np.uint32)
    return a, b, c
