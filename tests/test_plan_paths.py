"""Every path that produces a result goes through the one plan interpreter (issue 30, items 1-2).

Two checks per path, with ``plan.interpret.evaluate`` patched: a *trace* records the node types the interpreter
ran (the path's arithmetic is those nodes), and a *poison* makes the interpreter raise -- a path that still returned
a result would have computed it somewhere else.  The paths: unit GEMMs (chain, promotion, split-K, block scales), the
library's calls (nvjet split-K, FP8 row-wise scales, SIMT, stream-K, CUTLASS serial split-K, K = 0), the old H200
presets, sparse units, ``tcnumerics.torch`` recipes (epilogue, FP8 tensor scaling, MX) and ``emulate`` in unit and
library mode, and the device (CuPy) namespace path with the strict numpy stand-in ``fake_cupy``.
"""

import ml_dtypes
import numpy as np
import pytest

import fake_cupy
from tcnumerics import library as lib
from tcnumerics import sparse
from tcnumerics.arrays import DeviceValues
from tcnumerics.formats import get_format
from tcnumerics.gemm import gemm
from tcnumerics.library.presets import h200_presets
from tcnumerics.library.structure import StreamK, Structure, run
from tcnumerics.plan import interpret

BF16 = "hopper.wgmma.m64n8k16.f32.bf16.bf16"
E4M3 = "hopper.wgmma.m64n8k32.f32.e4m3.e4m3"
TF32 = "hopper.wgmma.m64n8k8.f32.tf32.tf32"
MXFP8 = "blackwell.tcgen05.mma.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0"
SPARSE = "hopper.mma.sp.m16n8k16.f32.bf16.bf16.f32"


def _ops(M, K, N, dtype=ml_dtypes.bfloat16, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((M, K)).astype(dtype), rng.standard_normal((K, N)).astype(dtype)


def _unit_gemm():
    return gemm(*_ops(8, 64, 8), instruction=BF16, out_format="bf16")


def _unit_split_promote_blockscale():
    A, B = _ops(4, 256, 8, ml_dtypes.float8_e4m3fn)
    return gemm(A, B, instruction=E4M3, scale_a=np.ones((4, 2)), scale_b=np.ones((2, 1)), split_k=2)


def _library_splitk():  # H100: nvjet split-K x6 + splitKreduce
    return lib.matmul(*_ops(64, 8192, 64), gpu="h100")


def _library_fp8_rowwise():
    A, B = _ops(32, 256, 32, ml_dtypes.float8_e4m3fn)
    return lib.scaled_mm(A, B, np.full((32, 1), 0.5), np.full((1, 32), 2.0), out_dtype="bf16", gpu="h100")


def _library_simt():  # FP32 M = 1: a cuBLAS SIMT gemv kernel
    return lib.matmul(*_ops(1, 64, 64, np.float32), gpu="h100")


def _library_streamk():
    s = Structure("tf32 stream-K", stream_k=StreamK(64, 64, 256, ctas=3, tile=(64, 64, 32)))
    return run(s, *_ops(64, 256, 64, np.float32), out_format="fp32")


def _library_serial_split():  # CUTLASS in-place split-K: C in the first slice's epilogue, slices added after
    s = Structure("serial", instruction=BF16, split_k=(32, 32), split_reduce="serial", epilogue="bx")
    A, B = _ops(8, 64, 8)
    return run(s, A, B, out_format="bf16", C=np.ones((8, 8)), beta=1.0)


def _library_k0():
    return lib.addmm(np.ones((4, 8), ml_dtypes.bfloat16), *_ops(4, 0, 8), beta=0.5, gpu="h100")


def _presets():
    return h200_presets("torch.matmul", dtype="bf16")(*_ops(16, 4096, 16))


def _sparse():
    spec = sparse.get_sparse(SPARSE)
    rng = np.random.default_rng(1)
    a = spec.a_format.from_float(rng.standard_normal((4, 8)))
    b = spec.b_format.from_float(rng.standard_normal((4, 16)))
    return sparse.dot_bits(SPARSE, a, b, spec.c_format.from_float(np.zeros(4)), sparse.random_index(rng, 4, 16, spec))


def _torch_recipe(**kw):
    def path():
        from tcnumerics.torch.unit import UnitRecipe, epilogue

        r = UnitRecipe.create(**kw)
        A, B = _ops(8, 64, 8, np.float64)
        return epilogue(r.matmul(A, B), "bf16", alpha=0.5, C=np.ones((8, 8)), beta=2.0, bias=np.ones(8))
    return path


def _torch_emulate(**kw):
    def path():
        import torch

        import tcnumerics.torch as tct

        a, b = torch.randn(8, 64, dtype=torch.bfloat16), torch.randn(64, 8, dtype=torch.bfloat16)
        with tct.emulate(**kw):
            return torch.nn.functional.linear(a, b.T, torch.ones(8, dtype=torch.bfloat16))
    return path


def _device(x, cupy):
    if x.dtype.kind == "f":
        return cupy.asarray(x)
    fmt = get_format(x.dtype.name)
    return DeviceValues(cupy.asarray(fmt.bits_of(x)), fmt)


def _device_gemm(cupy):
    A, B = _ops(8, 128, 8)
    return gemm(_device(A, cupy), _device(B, cupy), cupy.asarray(np.ones((8, 8))), instruction=BF16,
                split_k=2, c_role="epilogue", engine="cuda")


def _device_structure(cupy):
    A, B = _ops(8, 64, 8, np.float32)
    s = Structure("sgemm split", split_k=(32, 32), epilogue="bias")
    return run(s, cupy.asarray(A), cupy.asarray(B), out_format="fp32", bias=cupy.asarray(np.ones(8)), engine="cuda")


def _device_unit_epilogue(cupy):
    pytest.importorskip("torch")
    from tcnumerics.torch.unit import epilogue

    return epilogue(cupy.asarray(np.ones((4, 4))), "bf16", C=cupy.asarray(np.ones((4, 4))), beta=0.5,
                    scale_a=cupy.asarray(np.ones((4, 1))), scale_b=cupy.asarray(np.ones((1, 4))))


# path -> (callable, node types the interpreter must run for it, needs torch)
PATHS = {
    "unit gemm": (_unit_gemm, {"Chain", "Convert"}, False),
    "unit split-K, promotion, block scales": (_unit_split_promote_blockscale, {"OrderedSum", "Promote", "Convert"},
                                              False),
    "library H100 split-K": (_library_splitk, {"LayOut", "OrderedSum", "Chain", "Epilogue", "Convert"}, False),
    "library FP8 row-wise scales": (_library_fp8_rowwise, {"Scale", "Promote", "Epilogue", "Convert"}, False),
    "library SIMT": (_library_simt, {"OrderedSum", "FFMAChain", "Epilogue", "Convert"}, False),
    "library stream-K": (_library_streamk, {"LayOut", "OrderedSum", "Chain", "Epilogue", "Convert"}, False),
    "library serial split-K": (_library_serial_split, {"OrderedSum", "LayOut", "Chain", "Epilogue"}, False),
    "library K = 0": (_library_k0, {"Epilogue", "Input", "Convert"}, False),
    "H200 presets": (_presets, {"OrderedSum", "Chain", "Convert"}, False),
    "sparse": (_sparse, {"PairedChain"}, False),
    "torch recipe": (_torch_recipe(instruction=BF16), {"Chain", "Epilogue", "Input", "Convert"}, True),
    "torch FP8 recipe": (_torch_recipe(instruction=E4M3, scaling="tensor", promote_every=128),
                         {"Promote", "Scale", "Epilogue", "Convert"}, True),
    "torch MX recipe": (_torch_recipe(instruction=MXFP8, scaling="mx"), {"BlockScaledChain", "Epilogue"}, True),
    "torch emulate unit": (_torch_emulate(instruction=BF16), {"Chain", "Epilogue", "Convert"}, True),
    "torch emulate library": (_torch_emulate(library="hopper"), {"Epilogue", "Convert"}, True),
}
DEVICE_PATHS = {
    "device gemm": (_device_gemm, {"OrderedSum", "Chain", "Epilogue", "Convert"}),
    "device structure": (_device_structure, {"OrderedSum", "FFMAChain", "Epilogue", "Convert"}),
    "device unit epilogue": (_device_unit_epilogue, {"Scale", "Epilogue", "Convert"}),
}


class Poisoned(BaseException):
    """Raised by the poisoned interpreter (a BaseException: no fallback's ``except Exception`` can swallow it)."""


@pytest.fixture
def trace(monkeypatch):
    seen: list[str] = []
    original = interpret.evaluate

    def traced(node, env, engine):
        seen.append(type(node).__name__)
        return original(node, env, engine)

    monkeypatch.setattr(interpret, "evaluate", traced)
    return seen


@pytest.fixture
def poison(monkeypatch):
    def poisoned(node, env, engine):
        raise Poisoned(type(node).__name__)

    monkeypatch.setattr(interpret, "evaluate", poisoned)


def _needs(torch_needed: bool):
    if torch_needed:
        pytest.importorskip("torch")


@pytest.mark.parametrize("name", list(PATHS))
def test_every_path_runs_its_arithmetic_as_plan_nodes(name, trace):
    fn, nodes, torch_needed = PATHS[name]
    _needs(torch_needed)
    fn()
    assert nodes <= set(trace), f"{name}: the interpreter ran {sorted(set(trace))}, expected {sorted(nodes)}"


@pytest.mark.parametrize("name", list(PATHS))
def test_no_path_computes_without_the_interpreter(name, poison):
    fn, _, torch_needed = PATHS[name]
    _needs(torch_needed)
    with pytest.raises(Poisoned):
        fn()


@pytest.mark.parametrize("name", list(DEVICE_PATHS))
def test_the_device_namespace_paths_run_through_the_interpreter(name, monkeypatch, trace):
    cupy = fake_cupy.install(monkeypatch)
    fn, nodes = DEVICE_PATHS[name]
    out = fn(cupy)
    assert not isinstance(out, np.ndarray), f"{name}: the device path returned a host array"
    assert nodes <= set(trace), f"{name}: the interpreter ran {sorted(set(trace))}, expected {sorted(nodes)}"

    def poisoned(node, env, engine):
        raise Poisoned(type(node).__name__)

    monkeypatch.setattr(interpret, "evaluate", poisoned)
    with pytest.raises(Poisoned):
        fn(cupy)

