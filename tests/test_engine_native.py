"""gemm_native (a unit that is the GPU's own mma.sync, run as that mma) through its host build, whose mma is the
measured unit model: which units it takes, and every output equal to the CPU fast engine -- every 16-bit code,
partial stages, K sub-ranges, partial blocks."""

import numpy as np
import pytest

from tcnumerics.catalog import get_instruction
from tcnumerics.engines import _cuda_build as build
from tcnumerics.engines import _cuda_native_build as native_build
from tcnumerics.engines import cuda, fast
from tcnumerics.model import InstructionSpec

pytestmark = pytest.mark.skipif(build.host_compiler() is None, reason="no host C++ compiler for the kernels' host build")

BF16 = "hopper.wgmma.m64n8k16.f32.bf16.bf16"
FP16 = "hopper.wgmma.m64n8k16.f32.f16.f16"
BF16_K8 = "hopper.mma.m16n8k8.f32.bf16.bf16.f32"
TF32 = "hopper.wgmma.m64n8k8.f32.tf32.tf32"


def test_which_units_run_natively():
    host = lambda name: native_build.native_instruction(cuda._plan(get_instruction(name)), get_instruction(name))  # noqa: E731
    assert host(BF16) == "hopper.mma.m16n8k16.f32.bf16.bf16.f32"
    assert host(FP16) == "hopper.mma.m16n8k16.f32.f16.f16.f32"
    assert host(BF16_K8) == "hopper.mma.m16n8k8.f32.bf16.bf16.f32"
    assert host(TF32) == "hopper.mma.m16n8k8.f32.tf32.tf32.f32"
    # other numerics: Ampere's BF16 (groups of 8 in a k16), FP8, Volta
    for name in ("ampere.mma.m16n8k16.f32.bf16.bf16.f32", "hopper.wgmma.m64n128k32.f32.e4m3.e4m3",
                 "volta.mma.m8n8k4.f32.f16.f16.f32"):
        assert host(name) is None, name
    # one field off (F = 24) is another unit
    spec = get_instruction(BF16)
    other = InstructionSpec(name="custom.bf16.F24", k=16, model=spec.model.with_(frac_bits=24))
    assert native_build.native_instruction(cuda._plan(other), other) is None


def _check(spec, a, b, c, k0=0, k1=None):
    k1 = a.shape[1] if k1 is None else k1
    got = cuda.host_accumulate_bits(spec, a, b, c.copy(), k0, k1, kernel="native")
    want = fast.accumulate_bits(spec, a, b, c.copy(), k0, k1)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("name", [BF16, FP16, BF16_K8, TF32])
def test_native_equals_fast_engine_on_every_code(name):
    """Uniform container patterns (subnormals, infinities, NaNs of both operands; TF32's unread low bits) and uniform
    C bits, 130 x 140 outputs (partial blocks), K = 144 (four stages of 32 and half of one) and the sub-range 16:80."""
    spec = get_instruction(name)
    rng = np.random.default_rng(1)
    dtype = np.dtype(spec.a_format.container_dtype)
    a = rng.integers(0, 1 << (8 * dtype.itemsize), (130, 144), dtype=np.uint64).astype(dtype)
    b = rng.integers(0, 1 << (8 * dtype.itemsize), (140, 144), dtype=np.uint64).astype(dtype)
    c = rng.integers(0, 1 << 32, (130, 140), dtype=np.uint64).astype(np.uint32)
    _check(spec, a, b, c)
    _check(spec, a, b, c, 16, 80)


@pytest.mark.parametrize("name", [BF16, FP16, TF32])
def test_native_self_test_operands_pass_on_the_host_model(name):
    """The device self-test's operands, through the host build (whose mma is the unit model): all equal -- so a
    GPU that fails them runs an instruction other than the measured unit."""
    spec = get_instruction(name)
    a, b, c = native_build.self_test_operands(cuda._plan(spec), spec)
    _check(spec, a, b, c)


def test_a_wrong_host_instruction_is_caught(monkeypatch):
    """Run the BF16 chain on the k8 instruction (groups of 8, not 16): the outputs differ (the equality can fail)."""
    spec = get_instruction(BF16)
    header = native_build.native_header(spec, cuda._plan(spec))
    monkeypatch.setattr(native_build, "native_header", lambda s, p: header.replace("#define NV_K 16", "#define NV_K 8"))
    rng = np.random.default_rng(2)
    a, b, c = native_build.self_test_operands(cuda._plan(spec), spec, seed=2)
    got = cuda.host_accumulate_bits(spec, a, b, c.copy(), kernel="native")
    want = fast.accumulate_bits(spec, a, b, c.copy(), 0, a.shape[1])
    assert np.count_nonzero(got.view(np.uint32) != want.view(np.uint32)) > 100
