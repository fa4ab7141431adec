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
F16 = np.float16
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
    # semiring K = 0: the empty reduction is the identity of ⊕ (numpy's ``initial``), so D = C ⊕ identity
    ("semiring min-plus K=0", lambda d: tc.semiring_matmul(z(3, 0, dtype=F16), z(0, 2, dtype=F16), op="min-plus"),
     full(np.inf, 3, 2, dtype=np.float32)),
    ("semiring max-mul K=0", lambda d: tc.semiring_matmul(z(3, 0, dtype=F16), z(0, 2, dtype=F16), op="max-mul"),
     full(-np.inf, 3, 2, dtype=np.float32)),
    ("semiring max-min K=0 with C", lambda d: tc.semiring_matmul(z(3, 0, dtype=F16), z(0, 2, dtype=F16),
                                                                 full(-0.0, 3, 2, dtype=np.float32), op="max-min"),
     z(3, 2, dtype=np.float32)),  # C alone; a zero result is +0, as the units write it
    ("semiring or-and K=0", lambda d: tc.semiring_matmul(z(3, 0, dtype=bool), z(0, 2, dtype=bool), op="or-and"),
     z(3, 2, dtype=bool)),
    ("semiring mul-plus K=0 with C", lambda d: tc.semiring_matmul(z(3, 0, dtype=F16), z(0, 2, dtype=F16),
                                                                  full(1.5, 3, 2, dtype=np.float32), op="mul-plus"),
     full(1.5, 3, 2, dtype=np.float32)),
    ("semiring plus-norm K=0", lambda d: tc.semiring_matmul(z(3, 0, dtype=F16), z(0, 2, dtype=F16), op="plus-norm"),
     z(3, 2, dtype=np.float32)),
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
    if where == "fake device" and name.startswith(("dot_bits", "semiring")):
        pytest.skip("dot_bits and the semiring ops take host arrays (dot_bits' device path is the GPU engine's)")
    d = (lambda x: x) if where == "host" else _fake_device(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an empty call is answered exactly: no NotModelledWarning
        got = call(d)
    if where == "fake device":
        assert not isinstance(got, np.ndarray), "the device path returned a host array"
    got = arrays.to_host(got)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert np.array_equal(got.view(np.uint8), expected.view(np.uint8))


@pytest.mark.parametrize("engine", ["reference", "fast", "exact"])
def test_semiring_k0_is_c_with_the_identity_of_the_reduction_on_every_engine(engine):
    """Selecting ops: ``C ⊕ min/max over nothing`` = numpy's reduction with ``initial`` ±inf, then C
    (NaN propagates, -0 written +0); plus-type ops: exactly K = one group of zero terms (the unit's epilogue
    of C, as ``tc.gemm`` gives at K = 0); or-and: ``C or False``."""
    from tcnumerics.semiring.ops import OPS

    C = np.array([[1.5, -0.0, np.nan], [-np.inf, 2.0 ** -140, 3e38]], np.float32)
    for name, op in OPS.items():
        dtype = bool if op.kind == "boolean" else F16
        c = np.nan_to_num(C) != 0 if op.kind == "boolean" else C
        for cc in (None, c):
            got = tc.semiring_matmul(z(2, 0, dtype=dtype), z(0, 3, dtype=dtype), cc, op=name, engine=engine)
            if op.kind == "select":
                empty = np.zeros((2, 3, 0))
                reduce = np.min if op.reduce == "min" else np.max
                want = reduce(empty, axis=-1, initial=np.inf if op.reduce == "min" else -np.inf)
                if cc is not None:
                    want = (np.minimum if op.reduce == "min" else np.maximum)(want, cc)
                want = want.astype(np.float32) + np.float32(0)  # -0 -> +0
            elif op.kind == "boolean":
                want = np.zeros((2, 3), bool) if cc is None else cc
            else:
                L = 16  # the default unit's K and group size
                want = tc.semiring_matmul(z(2, L, dtype=dtype), z(L, 3, dtype=dtype), cc, op=name, engine=engine)
            assert got.shape == want.shape and got.dtype == want.dtype, name
            if op.kind == "boolean":
                assert np.array_equal(got, want), name
            else:
                nan = np.isnan(want)
                assert np.array_equal(np.isnan(got), nan), name
                assert np.array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan]), name


def test_empty_plans_say_no_kernel_runs_and_scaled_mm_at_k0_is_flagged():
    p = lib.linear.plan(z(0, 64), z(8, 64))
    assert p.modelled and p.family == "none" and "no GEMM kernel" in p.reason
    q = lib.scaled_mm.plan(z(4, 0, dtype=E4M3), z(0, 16, dtype=E4M3), np.float32(1), np.float32(1))
    assert not q.modelled
    with pytest.warns(lib.NotModelledWarning):
        lib.scaled_mm(z(4, 0, dtype=E4M3), z(0, 16, dtype=E4M3), np.float32(1), np.float32(1))


@pytest.mark.parametrize("name, prepare, lines", [
    ("addmm K=0", lambda: lib.addmm.prepare(full(1.5, 4, 8), z(4, 0), z(0, 8), beta=0.3),
     ["epilogue in fp32: * beta=0.3 as bf16, to fp32", "C (FP32 values)"]),
    ("baddbmm K=0", lambda: lib.baddbmm.prepare(full(1.5, 2, 4, 8), z(2, 4, 0), z(2, 0, 8), beta=0.3),
     ["epilogue in fp32: * beta=0.3, to fp32", "C (FP32 values)"]),
    ("linear K=0", lambda: lib.linear.prepare(z(3, 0), z(5, 0), full(2.5, 5)),
     ["epilogue in fp32: to fp32", "bias (FP32 values)"]),
    ("matmul K=0", lambda: lib.matmul.prepare(z(3, 0), z(0, 5)), ["zeros (FP32 values)"]),
    ("bmm M=0", lambda: lib.bmm.prepare(z(2, 0, 4), z(2, 4, 5)), ["zeros (FP32 values)"]),
])
def test_an_empty_calls_plan_is_the_one_that_runs(name, prepare, lines, monkeypatch):
    """issue 30: ``.plan()`` of a call with nothing to multiply explains what runs -- beta * C, the bias or zeros
    through their conversion -- not a kernel's FFMA chain; the interpreter runs exactly that tree."""
    from tcnumerics.plan import interpret

    plan, compute = prepare()
    text = plan.explain()
    assert "FFMA" not in text and "chain" not in text, text
    body = [line.strip() for line in text.splitlines() if not line.startswith("note:")][1:]
    assert body == ["convert to bf16 (RNE)"] + lines, text
    ran, original = [], interpret.run
    monkeypatch.setattr(interpret, "run", lambda p, ops, engine="auto": ran.append(p) or original(p, ops, engine))
    compute()
    assert ran == [plan.root], name


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
