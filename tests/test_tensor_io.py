"""Torch tensors in every entry point -- the library ops and their plans, ``tcnumerics.gemm``, ``Instruction.mma`` and
``dot_bits`` -- come back as torch tensors of torch's dtype on their device, with the bits of the same call on
arrays: on the CPU (BF16 and FP8 included), on the fake device (what a CUDA tensor becomes through DLPack: CuPy
arrays and ``DeviceValues``, which refuse to turn into host arrays) and on a GPU (CUDA tensors, no host copy).
"""

import contextlib
import importlib
import warnings

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import fake_cupy  # noqa: E402
import tcnumerics as tc  # noqa: E402
from tcnumerics import arrays, interop  # noqa: E402
from tcnumerics import library as lib  # noqa: E402

BF16 = "hopper.wgmma.m64n8k16.f32.bf16.bf16"
E4M3 = "hopper.wgmma.m64n8k32.f32.e4m3.e4m3"


def _t(shape, seed, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * 2.0 ** torch.randint(-3, 4, shape, generator=g)).to(dtype)


X, W, BIAS = _t((24, 96), 1), _t((40, 96), 2), _t((40,), 3)
C = _t((24, 24), 4)
X3, Y3, C3 = _t((3, 16, 64), 5), _t((3, 64, 8), 6), _t((3, 16, 8), 7)
F8A = _t((16, 64), 8, torch.float32).to(torch.float8_e4m3fn)
F8B = _t((32, 64), 9, torch.float32).to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm wants
SA, SB = torch.tensor(0.5), torch.tensor(2.0)
ROW_A, ROW_B = _t((16, 1), 10, torch.float32).abs() + 0.5, _t((1, 32), 11, torch.float32).abs() + 0.5
BITS = (torch.randint(0, 0x7F00, (20, 32), generator=torch.Generator().manual_seed(12)).to(torch.uint16))
ACC = torch.zeros(20, dtype=torch.uint32)

# each call takes ``t``: how a torch CPU tensor reaches the entry point (itself, on the GPU, or as an array)
CALLS = {
    "matmul bf16 x @ x.T": lambda t: lib.matmul(t(X), t(X.t())),
    "matmul fp16": lambda t: lib.matmul(t(X.half()), t(W.half().t())),
    "matmul fp32": lambda t: lib.matmul(t(X.float()), t(W.float().t())),
    "matmul 3-D @ 2-D": lambda t: lib.matmul(t(X3), t(W[:8, :64].t())),
    "linear bias": lambda t: lib.linear(t(X), t(W), t(BIAS)),
    "addmm": lambda t: lib.addmm(t(C), t(X), t(X.t()), beta=0.5, alpha=2.0),
    "bmm": lambda t: lib.bmm(t(X3), t(Y3)),
    "baddbmm": lambda t: lib.baddbmm(t(C3), t(X3), t(Y3), beta=0.25),
    "scaled_mm tensor": lambda t: lib.scaled_mm(t(F8A), t(F8B), t(SA), t(SB), out_dtype="bf16"),
    "scaled_mm rowwise": lambda t: lib.scaled_mm(t(F8A), t(F8B), t(ROW_A), t(ROW_B), out_dtype="bf16"),
    "scaled_mm e4m3 x e5m2": lambda t: lib.scaled_mm(t(F8A), t(F8B.float().to(torch.float8_e5m2)), t(SA), t(SB),
                                                     out_dtype="fp32"),
    "gemm bf16": lambda t: tc.gemm(t(X), t(W.t()), instruction=BF16, out_format="bf16", split_k=2),
    "gemm e4m3 scales": lambda t: tc.gemm(t(F8A), t(F8B), instruction=E4M3, scale_a=t(ROW_A), scale_b=t(ROW_B),
                                          out_format="bf16"),
    "mma": lambda t: tc.instruction(BF16).mma(t(X3), t(Y3), t(C3.float())),
    "dot_bits": lambda t: tc.instruction(BF16).dot_bits(t(BITS), t(BITS.flip(0)), t(ACC)),
    # empty calls take the same way in and out
    "matmul M=0": lambda t: lib.matmul(t(X[:0]), t(X.t())),
    "addmm K=0": lambda t: lib.addmm(t(C), t(X[:, :0]), t(X.t()[:0]), beta=0.5),
    "baddbmm batch=0": lambda t: lib.baddbmm(t(C3[:0]), t(X3[:0]), t(Y3[:0])),
    "gemm N=0": lambda t: tc.gemm(t(X), t(W.t()[:, :0]), instruction=BF16, out_format="bf16"),
    "gemm K=0 scaled": lambda t: tc.gemm(t(F8A[:, :0]), t(F8B[:0]), instruction=E4M3, scale_a=t(ROW_A),
                                         scale_b=t(ROW_B), out_format="bf16"),
    "mma K=0": lambda t: tc.instruction(BF16).mma(t(X3[..., :0]), t(Y3[:, :0]), t(C3.float())),
    "dot_bits K=0": lambda t: tc.instruction(BF16).dot_bits(t(BITS[:, :0]), t(BITS[:, :0]), t(ACC)),
    "dot_bits N=0": lambda t: tc.instruction(BF16).dot_bits(t(BITS[:0]), t(BITS[:0]), t(ACC[:0])),
}
PLANS = {"matmul": lambda t: lib.matmul.plan(t(X), t(X.t())), "linear": lambda t: lib.linear.plan(t(X), t(W)),
         "scaled_mm": lambda t: lib.scaled_mm.plan(t(F8A), t(F8B), t(SA), t(SB))}


def _array(x):
    return interop.from_torch(x) if isinstance(x, torch.Tensor) else x


def _bits(x) -> bytes:
    if isinstance(x, torch.Tensor):
        if not x.numel():  # (an empty tensor's strides may be 0: no byte view)
            return b""
        return x.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    return np.ascontiguousarray(arrays.to_host(x)).reshape(-1).view(np.uint8).tobytes()


def _quiet(call, t):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lib.NotModelledWarning)
        return call(t)


@pytest.mark.parametrize("name", CALLS)
def test_cpu_tensors_in_torch_tensors_out(name):
    got = _quiet(CALLS[name], lambda x: x)
    want = _quiet(CALLS[name], _array)  # the same call on numpy / ml_dtypes views
    assert isinstance(got, torch.Tensor) and got.device.type == "cpu"
    assert got.dtype == interop.to_torch(np.ascontiguousarray(want)).dtype and tuple(got.shape) == want.shape
    assert _bits(got) == _bits(want)


@pytest.mark.parametrize("name", PLANS)
def test_plans_take_torch_tensors(name):
    assert PLANS[name](lambda x: x) == PLANS[name](_array)


def test_a_format_without_a_torch_dtype_says_so():
    A = torch.ones(2, 32, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="no torch counterpart"):
        tc.gemm(A, A.t().contiguous(), instruction=BF16, out_format="e2m3")


@pytest.mark.parametrize("name", CALLS)
def test_device_arrays_in_device_arrays_out_on_the_fake_device(name, monkeypatch):
    """What a CUDA tensor becomes through DLPack -- CuPy arrays, ``DeviceValues`` for BF16/FP8 -- stays on the
    device through every entry point (the fake refuses any implicit host copy)."""
    want = _quiet(CALLS[name], _array)
    cupy = fake_cupy.install(monkeypatch)

    def device(x):
        a = _array(x)
        if a.dtype.kind in "fiu":
            return cupy.asarray(a)
        fmt = tc.formats.get_format(a.dtype.name)
        return arrays.DeviceValues(cupy.asarray(fmt.bits_of(a)), fmt)
    with _no_host_copies():  # device() makes device arrays from host arrays: no copy back
        got = _quiet(CALLS[name], device)
    assert arrays.on_device(got) and tuple(got.shape) == want.shape and got.dtype == want.dtype
    assert _bits(got) == _bits(want)


def _cuda():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    pytest.importorskip("cupy")


@pytest.mark.parametrize("name", CALLS)
def test_cuda_tensors_stay_on_the_gpu(name, monkeypatch):
    _cuda()
    want = _quiet(CALLS[name], lambda x: x)

    with _no_host_copies():
        got = _quiet(CALLS[name], lambda x: x.cuda())
    assert isinstance(got, torch.Tensor) and got.is_cuda and got.dtype == want.dtype and got.shape == want.shape
    assert _bits(got) == _bits(want)


@contextlib.contextmanager
def _no_host_copies():
    """The library's ways to the host -- ``to_host`` where the entry points import it, ``DeviceValues.get`` -- fail."""
    def no_host_copy(*_):
        raise AssertionError("a CUDA tensor's values were copied to the host")
    with pytest.MonkeyPatch.context() as mp:
        for name in ("tcnumerics.arrays", "tcnumerics.api", "tcnumerics.gemm", "tcnumerics.library.structure"):
            module = importlib.import_module(name)  # (tc.gemm is the function; the module is tcnumerics.gemm)
            if hasattr(module, "to_host"):  # where the module has its own name for it
                mp.setattr(module, "to_host", no_host_copy)
        mp.setattr(arrays.DeviceValues, "get", no_host_copy)
        yield


def test_the_host_copy_guard_trips(monkeypatch):
    """The GPU test's guard is live: a host copy of device values fails under it (here on the fake device)."""
    cupy = fake_cupy.install(monkeypatch)
    fmt = tc.formats.get_format("bf16")
    with _no_host_copies(), pytest.raises(AssertionError, match="copied to the host"):
        tc.gemm(arrays.DeviceValues(cupy.asarray(np.zeros((2, 16), np.uint16)), fmt),
                arrays.DeviceValues(cupy.asarray(np.zeros((16, 2), np.uint16)), fmt), instruction=BF16, engine="fast")


@pytest.mark.parametrize("case", ["M=0", "N=0", "K=0"])
def test_empty_cuda_calls_are_what_torch_computes_on_the_gpu(case):
    """torch's own CUDA results for empty calls (no cuBLAS launch: empty, or for K = 0 ``beta * C``) are what the
    library ops and both emulation modes return, on the GPU."""
    _cuda()
    import tcnumerics.torch as tct

    M, N, K = (0 if case == f"{d}=0" else n for d, n in (("M", 5), ("N", 16), ("K", 32)))
    A, B, Cm, bias = (_t(s, i).cuda() for i, s in enumerate([(M, K), (K, N), (M, N), (N,)]))
    A3, B3, C3m = (_t(s, 9 + i).cuda() for i, s in enumerate([(2, M, K), (2, K, N), (2, M, N)]))
    ops = {"matmul": (lambda: A @ B, lambda: lib.matmul(A, B)),
           "addmm": (lambda: torch.addmm(Cm, A, B, beta=0.5, alpha=2.0),
                     lambda: lib.addmm(Cm, A, B, beta=0.5, alpha=2.0)),
           "linear": (lambda: torch.nn.functional.linear(A, B.t(), bias), lambda: lib.linear(A, B.t(), bias)),
           "baddbmm": (lambda: torch.baddbmm(C3m, A3, B3, beta=0.75), lambda: lib.baddbmm(C3m, A3, B3, beta=0.75))}
    for name, (native, library) in ops.items():
        want = native()
        for got in (library(), _emulated(tct.emulate("hopper"), native),
                    _emulated(tct.emulate(instruction=BF16), native)):
            assert got.is_cuda and got.dtype == want.dtype and got.shape == want.shape, name
            assert _bits(got) == _bits(want), name


def _emulated(emulation, op):
    with emulation:
        return op()
