"""The GEMM composition on device arrays gives the host's bits: every structure, epilogue, scale and rounding.

The device path is the same code over CuPy instead of numpy; here CuPy is ``fake_cupy`` (numpy with
CuPy's refusal to mix host and device arrays), so a host round trip or a host/device mix fails in CI.
On a GPU, ``benchmarks/gpu_composition.py`` runs the same comparisons on real CuPy.
"""

import ml_dtypes
import numpy as np
import pytest

import fake_cupy
from tcnumerics import arrays
from tcnumerics import library as lib
from tcnumerics.formats import get_format
from tcnumerics.gemm import gemm
from tcnumerics.library.structure import StreamK, Structure, run

BF16 = "hopper.wgmma.m64n8k16.f32.bf16.bf16"
E4M3 = "hopper.wgmma.m64n8k32.f32.e4m3.e4m3"


def _real_cupy():
    try:
        import cupy

        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:  # no CuPy or no GPU
        return None


@pytest.fixture(params=["fake", "gpu"])
def cupy(request, monkeypatch):
    """The device namespace: the strict fake (everywhere), and real CuPy on a GPU (skipped elsewhere)."""
    if request.param == "fake":
        return fake_cupy.install(monkeypatch)
    real = _real_cupy()
    if real is None:
        pytest.skip("no CuPy with a GPU here")
    return real


def _device(x, cupy):
    """A host array as the device array the library would receive (DeviceValues for BF16/FP8)."""
    fmt = get_format(x.dtype.name)
    if x.dtype.kind == "f":
        return cupy.asarray(x)
    return arrays.DeviceValues(cupy.asarray(fmt.bits_of(x)), fmt)


def _host(y):
    return arrays.to_host(y)


def _same(device_result, host_result):
    d, h = _host(device_result), np.asarray(host_result)
    assert not isinstance(device_result, np.ndarray), "the device path returned a host array"
    assert d.dtype == h.dtype and d.shape == h.shape
    assert np.array_equal(d.view(np.uint8), h.view(np.uint8))


def _operands(rng, M, K, N, dtype=ml_dtypes.bfloat16, spread=4.0):
    a = (rng.standard_normal((M, K)) * np.exp2(rng.integers(-spread, spread, (M, K)))).astype(dtype)
    b = (rng.standard_normal((K, N)) * np.exp2(rng.integers(-spread, spread, (K, N)))).astype(dtype)
    return a, b


STRUCTURES = [
    Structure("nvjet", instruction=BF16),
    Structure("nvjet split", instruction=BF16, split_k=(128, 128, 64)),
    Structure("nvjet bias", instruction=BF16, epilogue="bias"),
    Structure("nvjet badd", instruction=BF16, epilogue="badd"),
    Structure("nvjet bx", instruction=BF16, epilogue="bx"),
    Structure("bx_mul", instruction=BF16, epilogue="bx_mul"),
    Structure("bias_out", instruction=BF16, epilogue="bias_out", split_k=(160, 160), split_partial_format="bf16"),
    Structure("cutlass in place", instruction=BF16, split_k=(96, 96, 128), split_reduce="serial", epilogue="bx"),
    Structure("cutlass residue first", instruction=BF16, k_tile=32, k_residue="first"),
    Structure("promoted", instruction=BF16, promote_every=64),
    Structure("ffma", instruction=None),
    Structure("ffma interleaved", instruction=None, split_interleave=3, k_tile=16),
    Structure("ffma serial", instruction=None, split_k=(100, 100, 120), split_reduce="serial"),
]
# SIMT orders (lane FFMA chains, halving and in-order sums) and stream-K (its launch's K = 320: tile groups, TF32
# chains, the fix-up's pair tree)
KERNEL_ORDERS = [
    Structure("simt gemvx_N", simt_kernel="internal::gemvx::kernel<int, int, float, float, float, float, false, true, "
              "false, false, 9, false, x>", simt_lanes=4, simt_slices=2, epilogue="bx"),
    Structure("simt gemmSN_TN", simt_kernel="void gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4, true, x>"),
    Structure("stream-K", stream_k=StreamK(33, 24, 320, ctas=4, tile=(8, 16, 32)), epilogue="bx"),
]


@pytest.mark.parametrize("s", STRUCTURES + KERNEL_ORDERS, ids=lambda s: s.family)
@pytest.mark.parametrize("out", ["bf16", "fp32"])
def test_structures_on_device_equal_the_host(cupy, s, out):
    rng = np.random.default_rng(hash(s.family) % 2 ** 32)
    dtype = np.float32 if s.instruction is None else ml_dtypes.bfloat16
    a, b = _operands(rng, 33, 320, 24, dtype)
    c = rng.standard_normal((33, 24)).astype(ml_dtypes.bfloat16)
    bias = rng.standard_normal(24).astype(ml_dtypes.bfloat16)
    kw = dict(out_format=out, alpha=0.75, beta=1.25)
    if s.epilogue in ("bias",) or (s.epilogue == "bias_out"):
        kw["bias"] = bias.astype(np.float64)
        dev_kw = dict(kw, bias=_device(bias, cupy))
    else:
        kw["C"] = c.astype(np.float64)
        dev_kw = dict(kw, C=_device(c, cupy))
    host = run(s, a, b, **kw)
    _same(run(s, _device(a, cupy), _device(b, cupy), engine="cuda", **dev_kw), host)


@pytest.mark.parametrize("case", [
    dict(),
    dict(promote_every=64),
    dict(split_k=3),
    dict(split_k=[100, 200, 60], split_granule=4),
    dict(out_format="bf16"),
    dict(out_format="fp16", out_rounding="rz"),
    dict(out_format="bf16", out_rounding="ru"),
    dict(out_format="e4m3"),
    dict(c_role="epilogue", with_c=True),
    dict(c_role="output", with_c=True, out_format="bf16"),
    dict(c_role="accumulator", with_c=True, promote_every=128),
    dict(k_tile=64, k_residue="first"),
], ids=str)
def test_gemm_on_device_equals_the_host(cupy, case):
    case = dict(case)
    with_c = case.pop("with_c", False)
    rng = np.random.default_rng(len(str(case)))
    a, b = _operands(rng, 17, 360, 40)
    c = rng.standard_normal((17, 40)).astype(np.float32)
    host = gemm(a, b, c if with_c else None, instruction=BF16, **case)
    dev = gemm(_device(a, cupy), _device(b, cupy), cupy.asarray(c) if with_c else None, instruction=BF16, **case)
    _same(dev, host)


@pytest.mark.parametrize("scales", ["tensor", "row"])
def test_batched_gemm_on_device_equals_the_host(cupy, scales):
    rng = np.random.default_rng(11)
    batch, M, K, N = 3, 10, 200, 12
    a = rng.standard_normal((batch, M, K)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((batch, K, N)).astype(ml_dtypes.float8_e4m3fn)
    sa, sb = (rng.random(batch) + 0.5, rng.random(batch) + 0.5) if scales == "tensor" else \
        (rng.random((batch, M)) + 0.5, rng.random((batch, N)) + 0.5)
    options = dict(instruction=E4M3, promote_every=64, out_format="bf16")
    host = gemm(a, b, scale_a=sa, scale_b=sb, **options)
    dev = gemm(_device(a, cupy), _device(b, cupy), scale_a=cupy.asarray(sa), scale_b=cupy.asarray(sb), **options)
    _same(dev, host)


@pytest.mark.parametrize("scales", ["tensor", "row", "block", "tensor promoted", "row promoted split"])
def test_scaled_gemm_on_device_equals_the_host(cupy, scales):
    rng = np.random.default_rng(5)
    M, K, N = 24, 384, 136
    a, b = _operands(rng, M, K, N, ml_dtypes.float8_e4m3fn, spread=2)
    options = {}
    if "promoted" in scales:  # promotion inside the kernels (tests/test_promotion.py), after them the scales
        options = dict(promote_every=64, split_k=2 if "split" in scales else None)
        scales = scales.split()[0]
    if scales == "tensor":
        sa, sb = np.float32(0.5), np.float32(3.0)
    elif scales == "row":
        sa, sb = rng.random(M).astype(np.float32) + 0.5, rng.random(N).astype(np.float32) + 0.5
    else:
        sa = rng.random((M, 3)).astype(np.float32) + 0.5
        sb = rng.random((3, 2)).astype(np.float32) + 0.5
    host = gemm(a, b, instruction=E4M3, scale_a=sa, scale_b=sb, out_format="bf16", **options)
    dev = gemm(_device(a, cupy), _device(b, cupy), instruction=E4M3, scale_a=cupy.asarray(sa),
               scale_b=cupy.asarray(sb), out_format="bf16", **options)
    _same(dev, host)


@pytest.mark.filterwarnings("ignore::tcnumerics.library.NotModelledWarning")
def test_library_ops_on_device_equal_the_host(cupy):
    rng = np.random.default_rng(11)
    a, b = _operands(rng, 48, 4096, 64)
    da, db = _device(a, cupy), _device(b, cupy)
    _same(lib.matmul(da, db, engine="cuda"), lib.matmul(a, b))
    _same(lib.matmul(db.T, da.T, engine="cuda"), lib.matmul(b.T, a.T))  # transposed views keep their layout
    bias = rng.standard_normal(48).astype(ml_dtypes.bfloat16)
    w = np.ascontiguousarray(a)
    x = rng.standard_normal((8, 4096)).astype(ml_dtypes.bfloat16)
    _same(lib.linear(_device(x, cupy), _device(w, cupy), _device(bias, cupy), engine="cuda"), lib.linear(x, w, bias))
    c = rng.standard_normal((48, 64)).astype(ml_dtypes.bfloat16)
    for beta, alpha in ((1, 1), (0.5, 2.0)):
        _same(lib.addmm(_device(c, cupy), da, db, beta=beta, alpha=alpha, engine="cuda"),
              lib.addmm(c, a, b, beta=beta, alpha=alpha))
    a3, b3 = _operands(rng, 4 * 16, 64, 4 * 32)
    a3, b3 = a3.reshape(4, 16, 64), np.ascontiguousarray(b3.reshape(64, 4, 32).transpose(1, 0, 2))
    _same(lib.bmm(_device(a3, cupy), _device(b3, cupy), engine="cuda"), lib.bmm(a3, b3))
    f32a, f32b = _operands(rng, 3, 100, 5, np.float32)
    _same(lib.matmul(cupy.asarray(f32a), cupy.asarray(f32b), engine="cuda"), lib.matmul(f32a, f32b))


@pytest.mark.parametrize("recipe", [
    dict(instruction=BF16),
    dict(instruction=BF16, promote_every=64, split_k=2),
    dict(instruction=E4M3, scaling="tensor", promote_every=128),
    dict(instruction=E4M3, scaling="row"),
    dict(instruction=BF16, rounding="stochastic", seed=3),
], ids=str)
def test_unit_recipes_on_device_equal_the_host(cupy, recipe):
    pytest.importorskip("torch")
    from tcnumerics.torch.unit import UnitRecipe, epilogue

    r = UnitRecipe.create(**recipe)
    rng = np.random.default_rng(2)
    a, b = _operands(rng, 20, 256, 12, np.float32)
    c = rng.standard_normal((20, 12)).astype(np.float32)
    host = epilogue(r.matmul(a, b, call_index=7), "bf16", alpha=0.5, C=c, beta=2.0)
    acc = r.matmul(cupy.asarray(a), cupy.asarray(b), call_index=7, engine="cuda")
    _same(epilogue(acc, "bf16", alpha=0.5, C=cupy.asarray(c), beta=2.0), host)
    # a batch (an attention bmm's heads): quantised at once on the device, the host loop's bits
    a3 = np.stack([a, a * 2.0 ** 9, a[::-1]])
    b3 = np.stack([b, b[::-1], b * 2.0 ** -7])
    host3 = np.stack([r.matmul(a3[i], b3[i], call_index=7 + i) for i in range(3)])
    _same(r.matmul_batch(cupy.asarray(a3), cupy.asarray(b3), call_index=7, engine="cuda"), host3)


@pytest.mark.parametrize("s", [s for s in STRUCTURES if s.split_reduce == "parallel"], ids=lambda s: s.family)
def test_the_epilogue_in_row_blocks_gives_the_same_bits(cupy, s, monkeypatch):
    from tcnumerics.library import structure

    rng = np.random.default_rng(4)
    dtype = np.float32 if s.instruction is None else ml_dtypes.bfloat16
    a, b = _operands(rng, 37, 160, 24, dtype)
    c = rng.standard_normal((37, 24)).astype(np.float32)
    bias = rng.standard_normal(24).astype(np.float32)
    kw = dict(out_format="bf16", alpha=1.5, beta=0.5, bias=bias if s.epilogue in ("bias", "bias_out") else None,
              C=None if s.epilogue in ("bias", "bias_out") else c)
    whole = run(s, a, b, **kw)
    monkeypatch.setattr(structure, "_EPILOGUE_CHUNK", 24 * 5)  # blocks of 5 rows, the last one of 2
    _same(run(s, _device(a, cupy), _device(b, cupy), engine="cuda",
              **dict(kw, C=None if kw["C"] is None else cupy.asarray(c),
                     bias=None if kw["bias"] is None else cupy.asarray(bias))), whole)
    assert np.array_equal(run(s, a, b, **kw).view(np.uint16), whole.view(np.uint16))


@pytest.mark.parametrize("s", [STRUCTURES[0], STRUCTURES[2], STRUCTURES[3], STRUCTURES[1], STRUCTURES[-3],
                               STRUCTURES[-1]], ids=lambda s: s.family)
def test_subnormal_fp32_values_survive_the_device_path(cupy, s):
    """CuPy compiles with -ftz=true: a float32 cast or operation flushes subnormals, so the device path never
    casts FP32 values -- tiny operands give subnormal FP32 accumulators, and C / bias are FP32 subnormals."""
    rng = np.random.default_rng(9)
    dtype = np.float32 if s.instruction is None else ml_dtypes.bfloat16
    a, b = _operands(rng, 9, 64, 8, dtype)
    a = (a.astype(np.float64) * 2.0 ** -66).astype(dtype)  # products near 2**-132: FP32 subnormal
    b = (b.astype(np.float64) * 2.0 ** -66).astype(dtype)
    c = (rng.standard_normal((9, 8)) * 2.0 ** -130).astype(np.float32)
    bias = (rng.standard_normal(8) * 2.0 ** -128).astype(np.float32)
    assert (np.abs(c) < 2.0 ** -126).all() and (c != 0).any()
    for out in ("fp32", "bf16"):
        kw = dict(out_format=out, bias=bias.astype(np.float64)) if s.epilogue == "bias" else \
            dict(out_format=out, C=c.astype(np.float64), beta=1.0)
        host = run(s, a, b, **kw)
        assert (np.abs(np.asarray(host, np.float64)) < 2.0 ** -126).any()  # the case is a subnormal one
        dev_kw = dict(kw, bias=cupy.asarray(bias)) if "bias" in kw else dict(kw, C=cupy.asarray(c))
        _same(run(s, _device(a, cupy), _device(b, cupy), engine="cuda", **dev_kw), host)
    host = gemm(a, b, c, instruction=BF16, c_role="epilogue")
    _same(gemm(_device(a, cupy), _device(b, cupy), cupy.asarray(c), instruction=BF16, c_role="epilogue"), host)
