"""Torch tensors in and out of the library without copies (CPU tensors here; CUDA in test_torch_gpu.py)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tcnumerics as tc  # noqa: E402
from tcnumerics import interop  # noqa: E402

BF16 = "hopper.wgmma.m64n8k16.f32.bf16.bf16"


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_cpu_tensors_round_trip_bit_for_bit_with_their_strides(dtype):
    dtype = getattr(torch, dtype)
    t = torch.from_numpy(np.random.default_rng(1).standard_normal((5, 7)).astype(np.float32)).to(dtype)
    view = interop.from_torch(t.t())  # a transposed view stays transposed: the layout rules read strides
    assert view.shape == (7, 5) and view.strides[0] < view.strides[1]
    assert np.array_equal(view.astype(np.float64), t.t().float().numpy())
    back = interop.to_torch(np.ascontiguousarray(view))
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()]
    assert back.dtype == dtype and torch.equal(back.view(width), t.t().contiguous().view(width))


def test_gemm_takes_and_returns_torch_tensors():
    a = torch.randn(16, 64).to(torch.bfloat16)
    b = torch.randn(64, 8).to(torch.bfloat16)
    out = tc.gemm(a, b, instruction=BF16, out_format="bf16")
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
    want = tc.gemm(interop.from_torch(a), interop.from_torch(b), instruction=BF16, out_format="bf16")
    assert torch.equal(out.view(torch.int16), interop.to_torch(want).view(torch.int16))
    assert not interop.is_torch(np.ones(2)) and interop.is_torch(a)
