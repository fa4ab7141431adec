"""The guard of the kernels that lean on the GPU's own mma (``gemm_native``, ``gemm_tcalign``): the engine uses one
on a GPU only after its self-test there gave the CPU fast engine's bits; a GPU whose mma computes anything else gets
a warning and the next kernel.  Run on the CPU: the fake CuPy, and a "device" kernel that is the kernel's host build
(the measured unit model) or that host build with one bit of the result wrong."""

import warnings

import numpy as np
import pytest

from tcnumerics.catalog import get_instruction
from tcnumerics.engines import _cuda_build as build
from tcnumerics.engines import _cuda_launch, cuda

pytestmark = pytest.mark.skipif(build.host_compiler() is None, reason="no host C++ compiler for the kernels' host build")


class _HostKernel:
    """A compiled kernel's stand-in: runs ``kind``'s host build on the launch's arguments (``flip``: then changes the
    lowest bit of one output, as a GPU whose mma truncated one product differently would)."""

    def __init__(self, spec, kind: str, flip: bool):
        self.spec, self.kind, self.flip, self.name = spec, kind, flip, f"gemm_{kind}"

    def __call__(self, grid, block, args, shared_mem=0):
        a, lda, b, ldb, ta, tb, work, M, N, k0, k1 = args[:11]
        out = cuda.host_accumulate_bits(self.spec, a.get(), b.get(), work.get(), int(k0), int(k1), kernel=self.kind)
        out = out.view(np.uint32).copy()
        if self.flip:
            out[3, 5] ^= 1
        work._a[...] = out


@pytest.mark.parametrize("kind, name", [("tcalign", "hopper.wgmma.m64n128k32.f32.e4m3.e4m3"),
                                        ("native", "hopper.wgmma.m64n8k16.f32.bf16.bf16")])
@pytest.mark.parametrize("flip", [False, True])
def test_self_test_guards_the_mma_kernels(monkeypatch, kind, name, flip):
    import fake_cupy

    fake_cupy.install(monkeypatch)
    spec = get_instruction(name)

    class Module:
        def get_function(self, fn):
            assert fn == f"gemm_{kind}"
            return _HostKernel(spec, kind, flip)

    monkeypatch.setattr(build, "device_module", lambda header, kernel: Module())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = _cuda_launch._own_kernel(kind, spec, cuda._plan(spec), 0)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    if flip:
        assert found is None
        assert len(messages) == 1 and "1 of 32768 outputs differ" in messages[0] and spec.name in messages[0]
    else:
        assert found is not None and found[0].name == f"gemm_{kind}" and not messages
