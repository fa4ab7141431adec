"""The GPU engine's launches (private): which compiled kernel runs a plan on this GPU (``gemm_native`` and
``gemm_tcalign`` where their self-test passed on this GPU, ``gemm_fchain``, the tiled GEMM in the first shape whose
shared memory fits, or the per-output kernel), cached per unit and device, and one launch over a K range.
``engines.cuda`` holds the public entry points.
"""

from __future__ import annotations

import warnings
from typing import Callable, NamedTuple

import numpy as np

from ..model import InstructionSpec
from . import _cuda_build as build
from . import _cuda_env as env
from . import _cuda_fchain_build as fchain
from . import _cuda_native_build as native
from . import _cuda_tcalign_build as tcalign
from . import fast
from ._fast_plan import Plan

__all__ = ["OWN_KERNELS"]


class OwnKernel(NamedTuple):
    """A kernel with its own build: why it cannot run a plan, its launch tile, its header, its shared memory words
    and, for the kernels that lean on the GPU's mma, the operands of the self-test that proves it on a GPU."""

    reason: Callable
    tile: object
    header: Callable
    smem_words: Callable
    self_test_operands: "Callable | None" = None


OWN_KERNELS = {  # (module functions looked up at each call: tests replace a header to check it matters)
    "native": OwnKernel(lambda plan, spec: native.native_reason(plan, spec), native.NATIVE_TILE,
                        lambda spec, plan: native.native_header(spec, plan),
                        lambda plan, spec: native.native_smem_words(),
                        lambda plan, spec: native.self_test_operands(plan, spec)),
    "tcalign": OwnKernel(lambda plan, spec: tcalign.tcalign_reason(plan, spec), tcalign.TCALIGN_TILE,
                         lambda spec, plan: tcalign.tcalign_header(spec, plan),
                         lambda plan, spec: tcalign.tcalign_smem_words(plan, spec),
                         lambda plan, spec: tcalign.self_test_operands(plan, spec)),
    "fchain": OwnKernel(lambda plan, spec: fchain.fchain_reason(plan, spec), fchain.FCHAIN_TILE,
                        lambda spec, plan: fchain.fchain_header(spec, plan),
                        lambda plan, spec: fchain.fchain_smem_words(plan, spec)),
}

_SCALAR_THREADS = 128
_STATIC_SMEM = 48 * 1024


_TABLES: dict = {}


def _device_tables(plan: Plan, device: int):
    """The plan's operand tables on ``device`` (uploaded once; the plan is kept alive with them)."""
    import cupy

    key = (id(plan), device)
    if key not in _TABLES:
        ta, tb = build.tables(plan)
        _TABLES[key] = (plan, cupy.asarray(ta), cupy.asarray(tb))
    return _TABLES[key][1:]


def _stage_k(spec: InstructionSpec, plan: Plan, tile, promote: bool, align: str, exp_pass: str) -> int:
    """K per shared stage that fits this GPU's shared memory (32, else one group; 0: none fits)."""
    import cupy

    limit = _smem_limit(cupy.cuda.Device().id)
    for stage_k in (32, 1):
        header = build.config_header(spec, plan, tile, stage_k, promote, align, exp_pass)
        if 4 * build.smem_words(plan, tile, stage_k, promote, header) <= limit:
            return stage_k
    return 0


def _run_gemm(spec: InstructionSpec, plan: Plan, da, db, work, k0: int, k1: int, scales: tuple = (),
              tiled: bool = True, promote: tuple = (0, 0)) -> None:
    """One kernel launch over K columns k0:k1; ``promote``: (columns per promotion block or 0, start from work)."""
    import cupy

    M, N = work.shape
    device = cupy.cuda.Device().id
    ta, tb = _device_tables(plan, device)
    args = (da, np.int64(da.shape[1]), db, np.int64(db.shape[1]), ta, tb, work, np.int32(M), np.int32(N),
            np.int32(k0), np.int32(k1), np.int32(promote[0]), np.int32(promote[1])) + scales
    # gemm_fchain addresses its operands with int offsets: operands of 2**31 elements or more take another kernel
    int_offsets = max(M * int(da.shape[1]), N * int(db.shape[1])) < 1 << 31
    kernel, smem, tile = _kernel(spec, plan, device, tiled, promote[0] > 0, int_offsets)
    if smem:
        kernel(((N + tile.bn - 1) // tile.bn, (M + tile.bm - 1) // tile.bm), (tile.threads,), args, shared_mem=smem)
    else:
        kernel(((M * N + _SCALAR_THREADS - 1) // _SCALAR_THREADS,), (_SCALAR_THREADS,), args)


_KERNELS: dict = {}


def _kernel(spec: InstructionSpec, plan: Plan, device: int, tiled: bool, promote: bool = False,
            int_offsets: bool = True):
    """(compiled kernel, dynamic shared memory bytes -- 0 for the per-output kernel --, tile), once per unit and GPU:
    a model's thousands of chain launches skip the header generation and module lookup.  ``promote``: the tiled
    kernel's build with promotion inside (its own shared memory for the main accumulator; the per-output kernel
    promotes in every build); ``int_offsets``: False keeps ``gemm_fchain`` out (it addresses its
    operands with int offsets: operands of 2**31 elements or more)."""
    align, chosen, exp_pass = env.env_align(), env.env_tile_override(), env.env_exp_pass()
    key = (id(plan), device, tiled, promote, align, chosen, exp_pass, int_offsets, env.env_fchain(),
           env.env_tcalign(), env.env_native())
    if key not in _KERNELS:
        import cupy

        cc = int(cupy.cuda.Device(device).compute_capability)
        exp_pass = exp_pass if cc >= 80 else "alu"  # mma.sync with BF16 operands needs sm_80
        tiles = tiled and build.tiled_reason(plan) is None
        if tiles and not promote and chosen is None and exp_pass == "alu":
            hopper = cc // 10 == 9  # the GPUs whose mma numerics are measured (NUMERICS.md)
            wanted = [("native", hopper and env.env_native()), ("tcalign", hopper and env.env_tcalign()),
                      ("fchain", env.env_fchain() and int_offsets)]
            found = next((f for f in (_own_kernel(k, spec, plan, device) for k, on in wanted if on) if f), None)
            if found is not None:
                _KERNELS[key] = (plan,) + found
                return found
        stage_k, tile = 0, chosen or build.DEVICE_TILE
        for tile in [chosen] if chosen else build.device_tiles(plan, spec, align, exp_pass):
            stage_k = _stage_k(spec, plan, tile, promote, align, exp_pass) if tiles else 0
            if stage_k:  # the first shape whose shared memory fits this GPU
                break
        if stage_k:
            header = build.config_header(spec, plan, tile, stage_k, promote, align, exp_pass)
            kernel = build.device_module(header, "gemm_tiled").get_function("gemm_tiled")
            smem = 4 * build.smem_words(plan, tile, stage_k, promote, header)
            if smem > _STATIC_SMEM:
                kernel.max_dynamic_shared_size_bytes = smem
        else:
            header = build.config_header(spec, plan, tile)
            kernel, smem = build.device_module(header, "gemm_scalar").get_function("gemm_scalar"), 0
        _KERNELS[key] = (plan, kernel, smem, tile)  # the plan kept alive: its id is the key
    return _KERNELS[key][1:]


def _smem_limit(device: int) -> int:
    import cupy

    try:  # cudaDevAttrMaxSharedMemoryPerBlockOptin (97): 227 KB on Hopper, 163 KB on A100, 99 KB on Ada
        return int(cupy.cuda.runtime.deviceGetAttribute(97, device))
    except Exception:  # unknown: assume the Hopper limit the default configuration was sized for
        return 227 * 1024


def _own_kernel(kind: str, spec: InstructionSpec, plan: Plan, device: int):
    """(``gemm_<kind>`` compiled for ``spec``, its shared memory bytes, its tile), or None where it does not apply
    (its reason, this GPU's shared memory) or where this GPU failed its self-test."""
    own = OWN_KERNELS[kind]
    if own.reason(plan, spec) is not None:
        return None
    smem = 4 * own.smem_words(plan, spec)
    if smem > _smem_limit(device):
        return None
    name = f"gemm_{kind}"
    kernel = build.device_module(own.header(spec, plan), name).get_function(name)
    kernel.max_dynamic_shared_size_bytes = smem
    found = kernel, smem, own.tile
    return found if own.self_test_operands is None or _self_test(kind, spec, plan, device, found) else None


def _self_test(kind: str, spec: InstructionSpec, plan: Plan, device: int, found) -> bool:
    """Whether ``gemm_<kind>`` on this GPU gives the CPU fast engine's bits on its self-test operands (the kernel
    leans on the GPU's mma having the measured numerics: this proves them here, for this unit)."""
    import cupy

    a, b, c = OWN_KERNELS[kind].self_test_operands(plan, spec)
    want = fast.accumulate_bits(spec, a, b, c.copy(), 0, a.shape[1]).view(np.uint32)
    kernel, smem, tile = found
    da, db, work = cupy.asarray(a), cupy.asarray(b), cupy.asarray(c)
    ta, tb = _device_tables(plan, device)
    M, N = c.shape
    kernel(((N + tile.bn - 1) // tile.bn, (M + tile.bm - 1) // tile.bm), (tile.threads,),
           (da, np.int64(a.shape[1]), db, np.int64(b.shape[1]), ta, tb, work, np.int32(M), np.int32(N), np.int32(0),
            np.int32(a.shape[1]), np.int32(0), np.int32(0)), shared_mem=smem)
    differ = int(np.count_nonzero(cupy.asnumpy(work).view(np.uint32) != want))
    if differ:
        warnings.warn(f"gemm_{kind}: this GPU's mma.sync did not reproduce {spec.name} in the self-test ({differ} of "
                      f"{want.size} outputs differ): the GPU engine runs another kernel for it here",
                      RuntimeWarning, stacklevel=4)
    return differ == 0
