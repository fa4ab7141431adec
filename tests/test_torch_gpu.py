"""tcnumerics.torch on CUDA tensors: the whole composition on the GPU (no host copies), the same bits as on the CPU."""

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
pytest.importorskip("cupy")

import torch.nn.functional as F  # noqa: E402

import tcnumerics.torch as tct  # noqa: E402
from tcnumerics.library import structure  # noqa: E402
from tcnumerics.torch import _tensors  # noqa: E402


def _calls(dev):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 2048, generator=g).to(torch.bfloat16).to(dev)
    w = torch.randn(1536, 2048, generator=g).to(torch.bfloat16).to(dev)
    b = torch.randn(1536, generator=g).to(torch.bfloat16).to(dev)
    q = torch.randn(8, 256, 64, generator=g).to(torch.bfloat16).to(dev)
    return [lambda: F.linear(x, w, b), lambda: x @ w.T, lambda: torch.addmm(b, x, w.T, beta=0.5, alpha=2.0),
            lambda: q @ q.transpose(1, 2), lambda: (x.float() @ w.T.float())]


def _no_host(*_):
    raise AssertionError("a CUDA operand was copied to the host")


def test_cuda_tensors_stay_on_the_gpu_and_match_the_cpu(monkeypatch):
    with tct.emulate("hopper"):
        want = [f().view(torch.int16 if f().dtype == torch.bfloat16 else torch.int32) for f in _calls("cpu")]
    monkeypatch.setattr(_tensors, "to_numpy", _no_host)
    monkeypatch.setattr(structure, "to_host", _no_host)
    got = []
    with tct.emulate("hopper") as run:
        for f in _calls("cuda")[:4]:  # BF16: every step on the GPU (FP32 SIMT kernels still run on the host)
            y = f()
            assert y.is_cuda
            got.append(y.cpu().view(torch.int16))
    assert run.report().calls == 4
    for g, w in zip(got, want):
        assert torch.equal(g, w)
