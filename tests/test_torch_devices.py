"""Engine selection for tensors on a device: the GPU engine for CUDA tensors when usable, else a host copy."""

import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tcnumerics.torch as tct  # noqa: E402
from tcnumerics.torch import devices  # noqa: E402

BF16 = "hopper.wgmma.m64n8k16.f32.bf16.bf16"


@pytest.fixture
def no_cache():
    devices.gpu_engine_usable.cache_clear()
    yield
    devices.gpu_engine_usable.cache_clear()


def test_without_cupy_cuda_tensors_keep_the_cpu_engine(monkeypatch, no_cache):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    assert devices.gpu_engine_usable() is False
    assert devices.engine_for("cuda", "auto") == "auto"


def test_with_a_usable_gpu_cuda_tensors_take_the_gpu_engine(monkeypatch):
    monkeypatch.setattr(devices, "gpu_engine_usable", lambda: True)
    assert devices.engine_for("cuda", "auto") == "cuda"
    assert devices.engine_for("cpu", "auto") == "auto"
    assert devices.engine_for("cuda", "exact") == "exact"  # an explicit request is honoured


def test_cpu_tensors_get_no_engine_override():
    mode = tct.emulate("hopper")
    seen = []
    execute = mode.backend.execute
    mode.backend.execute = lambda call, **options: (seen.append(options.get("engine")), execute(call, **options))[1]
    a, b = torch.randn(8, 16, dtype=torch.float16), torch.randn(16, 4, dtype=torch.float16)
    with mode:
        a @ b
    assert seen == [None]


def test_unit_mode_forwards_the_engine_to_the_gemm(monkeypatch):
    from tcnumerics.torch import unit
    recipe = unit.UnitRecipe.create(instruction=BF16)
    seen = []
    real = unit.gemm
    monkeypatch.setattr(unit, "gemm", lambda *a, **k: (seen.append(k["engine"]), real(*a, **dict(k, engine="auto")))[1])
    x = np.ones((4, 16), np.float32)
    base = recipe.matmul(x, x.T)
    gpu = recipe.matmul(x, x.T, engine="cuda")
    assert seen == ["auto", "cuda"] and np.array_equal(base, gpu)


def test_library_mode_forwards_the_engine(monkeypatch):
    backend = tct.emulate("hopper").backend
    seen = []
    real = backend.lib.matmul

    class Spy:
        plan = staticmethod(real.plan)

        def prepare(self, *a, **k):
            seen.append(k.get("engine"))
            return real.prepare(*a, **dict(k, engine="auto"))

    monkeypatch.setattr(backend.lib, "matmul", Spy())
    call = tct.calls.normalise(torch.ops.aten.mm.default,
                               (torch.ones(4, 16, dtype=torch.float16), torch.ones(16, 4, dtype=torch.float16)), {})
    backend.execute(call, engine="cuda")
    assert seen == ["cuda"]


