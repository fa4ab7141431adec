"""Torch tensors at every entry point: library ops (and their plans), ``tc.gemm``, ``Instruction.mma``/``dot_bits``.

A tensor goes in where it lives (CPU: a numpy view; CUDA: CuPy through DLPack, no host copy) and the result comes
back as a tensor of torch's dtype on the same device, with the bits of the numpy path.  The CUDA cases run where
torch sees a GPU (skipped elsewhere).
"""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tcnumerics as tc  # noqa: E402
from tcnumerics import library as lib  # noqa: E402
from tcnumerics.interop import from_torch, to_torch  # noqa: E402

BF16 = "hopper.wgmma.m64n8k16.f32.bf16.bf16"
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU"))]


def _host(t):
    """The numpy/ml_dtypes view of a tensor's values (the reference path's input)."""
    return from_torch(t.cpu())


def _same(got, want_host, device):
    """``got`` is a tensor on ``device`` of torch's dtype for ``want_host`` (the numpy path's result), same bits."""
    assert isinstance(got, torch.Tensor) and got.device.type == device
    want = np.asarray(want_host)
    assert got.dtype == to_torch(want).dtype and tuple(got.shape) == want.shape
    assert np.array_equal(np.asarray(_host(got)).view(np.uint8), want.view(np.uint8))


def _operands(device, dtype=torch.bfloat16, M=24, K=64, N=16):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(M, K, generator=g) * 4).to(dtype).to(device)
    w = (torch.randn(N, K, generator=g) * 4).to(dtype).to(device)
    return x, w


OPS = [
    ("matmul", lambda x, w: (x, w.t()), {}),
    ("matmul out fp32", lambda x, w: (x, w.t()), {"out_dtype": torch.float32}),
    ("linear", lambda x, w: (x, w), {}),
    ("linear bias", lambda x, w: (x, w, w[:, 0].contiguous()), {}),
    ("addmm", lambda x, w: (torch.ones(x.shape[0], w.shape[0], dtype=x.dtype, device=x.device), x, w.t()),
     {"beta": 0.5}),
    ("bmm", lambda x, w: (x[None], w.t()[None]), {}),
    ("baddbmm", lambda x, w: (torch.ones(1, x.shape[0], w.shape[0], dtype=x.dtype, device=x.device), x[None],
                              w.t()[None]), {}),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("name, args, kwargs", OPS, ids=[o[0] for o in OPS])
def test_library_ops_take_torch_tensors(name, args, kwargs, dtype, device):
    op = getattr(lib, name.split()[0])
    tensors = args(*_operands(device, dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lib.NotModelledWarning)
        got = op(*tensors, **kwargs)
        want = op(*(_host(t) for t in tensors), **{k: (v if not isinstance(v, torch.dtype) else str(v))
                                                    for k, v in kwargs.items()})
    _same(got, want, device)
    assert op.plan(*tensors, **kwargs) == op.plan(*(_host(t) for t in tensors), **{
        k: (v if not isinstance(v, torch.dtype) else str(v)) for k, v in kwargs.items()})


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e5m2])
@pytest.mark.parametrize("scales", ["tensor", "rowwise"])
def test_scaled_mm_takes_fp8_tensors(fp8, scales, device):
    x, w = _operands(device, torch.float32, M=32, K=64, N=32)
    a, b = x.to(torch.float8_e4m3fn), w.to(fp8).t()
    if scales == "tensor":
        sa, sb = torch.tensor(0.5, device=device), torch.tensor(2.0, device=device)
    else:
        sa, sb = torch.full((32, 1), 0.5, device=device), torch.full((1, 32), 2.0, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lib.NotModelledWarning)
        got = lib.scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
        want = lib.scaled_mm(_host(a), _host(b), _host(sa), _host(sb), out_dtype="bf16")
    _same(got, want, device)


@pytest.mark.parametrize("device", DEVICES)
def test_gemm_and_the_instruction_take_torch_tensors(device):
    x, w = _operands(device)
    inst = tc.instruction(BF16)
    _same(tc.gemm(x, w.t(), instruction=BF16, out_format="bf16", split_k=2),
          tc.gemm(_host(x), _host(w).T, instruction=BF16, out_format="bf16", split_k=2), device)
    _same(inst.mma(x, w.t()), inst.mma(_host(x), _host(w).T), device)
    a = x[:, :16].contiguous().view(torch.int16)
    b = w[:, :16].contiguous().view(torch.int16)[: a.shape[0] if a.shape[0] <= w.shape[0] else None]
    a = a[: b.shape[0]]
    c = torch.zeros(b.shape[0], dtype=torch.int32, device=device)
    got = inst.dot_bits(a.view(torch.uint16) if hasattr(torch, "uint16") else a, b.view(torch.uint16), c.view(torch.uint32))
    want = inst.dot_bits(_host(a).view(np.uint16), _host(b).view(np.uint16), np.zeros(b.shape[0], np.uint32))
    assert isinstance(got, torch.Tensor) and got.device.type == device
    assert np.array_equal(got.cpu().numpy().view(np.uint32), want)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU: torch's K = 0 rule on CUDA is checked there")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_k0_addmm_and_baddbmm_equal_torch_on_cuda(dtype):
    """K = 0: torch answers ``beta * C`` itself (FP32 product, then the output type); the library's rule, on the GPU."""
    g = torch.Generator().manual_seed(1)
    C = (torch.randn(8, 16, generator=g) * 3).to(dtype).cuda()
    A, B = torch.ones(8, 0, dtype=dtype, device="cuda"), torch.ones(0, 16, dtype=dtype, device="cuda")
    for beta in (0.3, 1 / 3, -2.7, 0.0):
        assert torch.equal(lib.addmm(C, A, B, beta=beta), torch.addmm(C, A, B, beta=beta))
        assert torch.equal(lib.baddbmm(C[None], A[None], B[None], beta=beta),
                           torch.baddbmm(C[None], A[None], B[None], beta=beta))
