"""b, M, N or K = 0 at every entry point: what numpy and torch give.

An empty batch, M or N gives an empty result of the right shape and dtype.  K = 0 gives the epilogue of no
products: zeros, C through the unit's epilogue (``tc.gemm``), torch's ``beta * C`` (addmm, baddbmm) or the bias
(F.linear).  One table of cases, run on the host and on the strict fake device (``fake_cupy``); under
``tcnumerics.torch.emulate`` (library and unit mode) each case is compared with native torch.
"""

import warnings

import ml_dtypes
import numpy as np
import pytest

import fake_cupy
import tcnumerics as tc
from tcnumerics import arrays
from tcnumerics import library as lib
from tcnumerics.formats import get_format

BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
INST = "hopper.wgmma.m64n8k16.f32.bf16.bf16"


def z(*shape, dtype=BF16):
    return np.zeros(shape, dtype)


def full(value, *shape, dtype=BF16):
    return np.full(shape, value, dtype)


def _bf16_of(values):
    return get_format("bf16").to_array(get_format("bf16").from_float(np.asarray(values, np.float64)))


# (name, call taking an array converter `d` (host: identity; device: to fake CuPy), expected host result)
CASES = [
    ("mma M=0", lambda d: tc.instruction(INST).mma(d(z(0, 16)), d(z(16, 8))), np.zeros((0, 8), np.float32)),
    ("mma N=0", lambda d: tc.instruction(INST).mma(d(z(4, 16)), d(z(16, 0))), np.zeros((4, 0), np.float32)),
    ("mma K=0", lambda d: tc.instruction(INST).mma(d(z(4, 0)), d(z(0, 8))), np.zeros((4, 8), np.float32)),
    ("mma K=0 with C", lambda d: tc.instruction(INST).mma(d(z(4, 0)), d(z(0, 8)), d(np.full((4, 8), 1.5, np.float32))),
     np.full((4, 8), 1.5, np.float32)),
    ("mma batch=0", lambda d: tc.instruction(INST).mma(d(z(0, 4, 16)), d(z(0, 16, 8))), np.zeros((0, 4, 8), np.float32)),
    ("dot_bits N=0", lambda d: tc.instruction(INST).dot_bits(np.zeros((0, 16), np.uint16), np.zeros((0, 16), np.uint16),
                                                             np.zeros(0, np.uint32)), np.zeros(0, np.uint32)),
    ("dot_bits K=0", lambda d: tc.instruction(INST).dot_bits(np.zeros((3, 0), np.uint16), np.zeros((3, 0), np.uint16),
                                                             np.full(3, 0x3FC00000, np.uint32)),
     np.full(3, 0x3FC00000, np.uint32)),
    ("gemm M=0", lambda d: tc.gemm(d(z(0, 32)), d(z(32, 8)), instruction=INST), np.zeros((0, 8), np.float32)),
    ("gemm N=0", lambda d: tc.gemm(d(z(4, 32)), d(z(32, 0)), instruction=INST, out_format="bf16"), z(4, 0)),
    ("gemm K=0", lambda d: tc.gemm(d(z(4, 0)), d(z(0, 8)), instruction=INST), np.zeros((4, 8), np.float32)),
    ("gemm K=0 epilogue C", lambda d: tc.gemm(d(z(4, 0)), d(z(0, 8)), d(np.full((4, 8), 1 + 2 ** -10, np.float32)),
                                              instruction=INST, c_role="epilogue", out_format="bf16"), full(1, 4, 8)),
    ("gemm K=0 split, promoted", lambda d: tc.gemm(d(z(4, 0)), d(z(0, 8)), instruction=INST, split_k=2,
                                                   promote_every=64), np.zeros((4, 8), np.float32)),
    ("matmul M=0", lambda d: lib.matmul(d(z(0, 64)), d(z(64, 8))), z(0, 8)),
    ("matmul K=0", lambda d: lib.matmul(d(full(1, 4, 0)), d(z(0, 8))), z(4, 8)),
    ("matmul 3-D K=0", lambda d: lib.matmul(d(z(2, 4, 0)), d(z(0, 8))), z(2, 4, 8)),
    ("linear M=0", lambda d: lib.linear(d(z(0, 64)), d(z(8, 64))), z(0, 8)),
    ("linear 3-D M=0, bias", lambda d: lib.linear(d(z(2, 0, 64)), d(z(8, 64)), d(z(8))), z(2, 0, 8)),
    ("linear K=0, bias", lambda d: lib.linear(d(z(4, 0)), d(z(8, 0)), d(full(0.75, 8))), full(0.75, 4, 8)),
    ("addmm M=0", lambda d: lib.addmm(d(z(0, 8)), d(z(0, 64)), d(z(64, 8))), z(0, 8)),
    ("addmm N=0", lambda d: lib.addmm(d(z(4, 0)), d(z(4, 64)), d(z(64, 0))), z(4, 0)),
    ("addmm K=0: beta * C", lambda d: lib.addmm(d(full(1.5, 4, 8)), d(z(4, 0)), d(z(0, 8)), beta=1 / 3),
     _bf16_of(np.full((4, 8), 1.5 * np.float64(_bf16_of(1 / 3))))),  # beta in BF16 first, as torch does
    ("addmm K=0, beta = 0", lambda d: lib.addmm(d(full(np.nan, 4, 8)), d(z(4, 0)), d(z(0, 8)), beta=0), z(4, 8)),
    ("bmm batch=0", lambda d: lib.bmm(d(z(0, 4, 64)), d(z(0, 64, 8))), z(0, 4, 8)),
    ("bmm M=0", lambda d: lib.bmm(d(z(2, 0, 64)), d(z(2, 64, 8))), z(2, 0, 8)),
    ("bmm K=0", lambda d: lib.bmm(d(z(2, 4, 0)), d(z(2, 0, 8))), z(2, 4, 8)),
    ("baddbmm K=0", lambda d: lib.baddbmm(d(full(3, 2, 4, 8)), d(z(2, 4, 0)), d(z(2, 0, 8)), beta=2), full(6, 2, 4, 8)),
    ("scaled_mm M=0", lambda d: lib.scaled_mm(d(z(0, 32, dtype=E4M3)), d(z(32, 16, dtype=E4M3)), np.float32(1),
                                              np.float32(1)), z(0, 16)),
]


def _fake_device(monkeypatch):
    cupy = fake_cupy.install(monkeypatch)

    def d(x):
        fmt = get_format(x.dtype.name)
        return cupy.asarray(x) if x.dtype.kind == "f" else arrays.DeviceValues(cupy.asarray(fmt.bits_of(x)), fmt)
    return d


@pytest.mark.parametrize("where", ["host", "fake device"])
@pytest.mark.parametrize("name, call, expected", CASES, ids=[c[0] for c in CASES])
def test_empty_shapes_give_what_numpy_and_torch_give(name, call, expected, where, monkeypatch):
    if where == "fake device" and name.startswith("dot_bits"):
        pytest.skip("dot_bits takes host bit arrays here (its device path is the GPU engine's)")
    d = (lambda x: x) if where == "host" else _fake_device(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an empty call is answered exactly: no NotModelledWarning
        got = call(d)
    if where == "fake device":
        assert not isinstance(got, np.ndarray), "the device path returned a host array"
    got = arrays.to_host(got)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert np.array_equal(got.view(np.uint8), expected.view(np.uint8))


def test_empty_plans_say_no_kernel_runs_and_scaled_mm_at_k0_is_flagged():
    p = lib.linear.plan(z(0, 64), z(8, 64))
    assert p.modelled and p.family == "none" and "no GEMM kernel" in p.reason
    q = lib.scaled_mm.plan(z(4, 0, dtype=E4M3), z(0, 16, dtype=E4M3), np.float32(1), np.float32(1))
    assert not q.modelled
    with pytest.warns(lib.NotModelledWarning):
        lib.scaled_mm(z(4, 0, dtype=E4M3), z(0, 16, dtype=E4M3), np.float32(1), np.float32(1))


# --- under tcnumerics.torch: each call equals native torch -----------------------------------------

TORCH_CASES = [
    ("linear rows=0", lambda t, m: m(t.zeros(0, 64, dtype=t.bfloat16))),
    ("linear batch of 0 sequences", lambda t, m: m(t.zeros(2, 0, 64, dtype=t.bfloat16))),
    ("mm K=0", lambda t, m: t.ones(4, 0, dtype=t.bfloat16) @ t.ones(0, 8, dtype=t.bfloat16)),
    ("bmm K=0", lambda t, m: t.bmm(t.ones(2, 4, 0, dtype=t.bfloat16), t.ones(2, 0, 8, dtype=t.bfloat16))),
    ("bmm batch=0", lambda t, m: t.bmm(t.ones(0, 4, 8, dtype=t.bfloat16), t.ones(0, 8, 8, dtype=t.bfloat16))),
    ("addmm K=0", lambda t, m: t.addmm(t.full((4, 8), 1.5, dtype=t.bfloat16), t.ones(4, 0, dtype=t.bfloat16),
                                       t.ones(0, 8, dtype=t.bfloat16), beta=0.5)),
    ("addbmm batch=0", lambda t, m: t.addbmm(t.full((4, 8), 1.5, dtype=t.bfloat16), t.ones(0, 4, 8, dtype=t.bfloat16),
                                             t.ones(0, 8, 8, dtype=t.bfloat16), beta=0.5)),
    # torch rounds beta to BF16 first; library mode does too, unit mode applies its recipe's FP32 epilogue
    ("addmm K=0, inexact beta", lambda t, m: t.addmm(t.full((4, 8), 1.5, dtype=t.bfloat16), t.ones(4, 0, dtype=t.bfloat16),
                                                     t.ones(0, 8, dtype=t.bfloat16), beta=0.3)),
]


@pytest.mark.parametrize("mode", ["library", "unit", "unit tensor scaling", "unit row scaling"])
@pytest.mark.parametrize("name, call", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_empty_shapes_under_emulate_equal_native_torch(name, call, mode):
    torch = pytest.importorskip("torch")
    import tcnumerics.torch as tct

    if mode.startswith("unit") and "inexact beta" in name:
        pytest.skip("unit mode's epilogue is the recipe's (beta in FP32: torch/unit.py), not torch's")

    torch.manual_seed(0)
    m = torch.nn.Linear(64, 32).bfloat16()
    native = call(torch, m)
    scaling = {"unit tensor scaling": "tensor", "unit row scaling": "row"}.get(mode)  # no amax of an empty operand
    ctx = tct.emulate("hopper") if mode == "library" else tct.emulate(
        instruction="hopper.wgmma.m64n8k32.f32.e4m3.e4m3", scaling=scaling) if scaling else tct.emulate(instruction=INST)
    with ctx:
        got = call(torch, m)
    assert got.shape == native.shape and got.dtype == native.dtype
    assert torch.equal(got, native)
