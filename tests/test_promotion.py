"""FP32 promotion inside the GPU kernels equals ``tcnumerics.gemm``'s promotion loop, bit for bit.

``gemm(promote_every=P)`` chains every P K-elements from zero and adds each block's FP32 result into an FP32
main accumulator (``promotion_blocks`` + ``_fp32_add``: the specification).  The GPU engine does the same
inside one kernel launch (``engines.cuda.accumulate_bits(..., promote_every=P)``); here its host build (the
same kernel source compiled for the CPU) is compared with that loop on the fast engine, special values,
signed zeros, a given start and short last blocks included.
"""

import numpy as np
import pytest

from tcnumerics.catalog import get_instruction
from tcnumerics.engines import _cuda_build, cuda, fast
from tcnumerics.formats import get_format
from tcnumerics.gemm import promotion_blocks
from tcnumerics.plan.rules import fp32_add as _fp32_add, fp32_partial as _fp32_partial

needs_host_build = pytest.mark.skipif(_cuda_build.host_compiler() is None, reason="no host C++ compiler")

FP32 = get_format("fp32")
UNITS = ["hopper.wgmma.m64n8k32.f32.e4m3.e4m3", "hopper.wgmma.m64n8k32.f32.e5m2.e4m3",
         "hopper.wgmma.m64n8k16.f32.bf16.bf16", "hopper.wgmma.m64n8k8.f32.tf32.tf32",
         "ampere.mma.m16n8k16.f32.f16.f16.f32"]


def _loop(spec, a, b, acc, k0, k1, P, from_acc):
    """The specification: gemm's promotion loop over the fast engine's chains."""
    zero = np.zeros(acc.shape, spec.c_format.container_dtype)
    main = FP32.to_float(acc) if from_acc else None
    for b0, b1 in promotion_blocks(k0, k1, P):
        part = _fp32_partial(spec.d_format, fast.accumulate_bits(spec, a, b, zero, b0, b1))
        main = part if main is None else _fp32_add(main, part)
    return FP32.from_float(np.asarray(main, np.float64))


def _operands(spec, rng, M, N, K, specials: bool):
    """Bit patterns with a wide exponent spread; some rows all -0 (signed-zero blocks), some with inf/NaN."""
    fa, fb = spec.a_format, spec.b_format

    def draw(fmt, rows):
        v = rng.standard_normal((rows, K)) * np.exp2(rng.integers(-6, 7, (rows, K)))
        v[rng.random((rows, K)) < 0.1] = 0.0
        return fmt.from_float(v, overflow="saturate")

    a, b = draw(fa, M), draw(fb, N)
    a[1] = fa.from_float(np.full(K, -0.0))
    if specials:
        nan = fa.nan_bits
        a[2, 5] = nan
        if fa.has_inf:
            a[3, K - 1] = fa.from_float(np.array([np.inf]))[0]
        big = fb.from_float(np.array([fb.max_finite]))[0]
        b[0, :] = big  # FP32 overflow in the additions where operands are large too
        a[4, :] = fa.from_float(np.array([fa.max_finite]))[0]
    return a, b


def _same(got, want, what):
    g, w = FP32.to_float(got), FP32.to_float(want)
    same = (np.asarray(got).view(np.uint32) == np.asarray(want).view(np.uint32)) | (np.isnan(g) & np.isnan(w))
    assert same.all(), f"{what}: {int((~same).sum())} of {same.size} differ, first at {np.argwhere(~same)[0]}"


def _on_gpu(spec, a, b, acc, k0, k1, kernel, **kw):
    """The same launch on a real GPU (numpy in, numpy out)."""
    return cuda.accumulate_bits(spec, a, b, acc, k0, k1, kernel="auto" if kernel == "tiled" else "scalar", **kw)


@pytest.mark.parametrize("name", UNITS)
@pytest.mark.parametrize("kernel", ["tiled", "scalar"])
@pytest.mark.parametrize("where", ["host build", "gpu"])
def test_kernel_promotion_equals_the_loop(name, kernel, where):
    spec = get_instruction(name)
    plan = cuda._plan(spec)
    if kernel == "tiled" and _cuda_build.tiled_reason(plan) is not None:
        pytest.skip(f"{name}: no tiled kernel ({_cuda_build.tiled_reason(plan)})")
    if where == "gpu" and not cuda.available():
        pytest.skip("no GPU here")
    if where == "host build" and _cuda_build.host_compiler() is None:
        pytest.skip("no host C++ compiler")
    launch = cuda.host_accumulate_bits if where == "host build" else _on_gpu
    rng = np.random.default_rng(abs(hash((name, kernel))) % 2 ** 32)
    k = spec.k
    M, N, K = 13, 11, 11 * k  # blocks of 4k leave a short last block
    a, b = _operands(spec, rng, M, N, K, specials=True)
    start = FP32.from_float(rng.standard_normal((M, N)) * 100)
    start[0, 0], start[1, 1], start[2, 2] = FP32.from_float(np.array([-0.0, 0.0, np.nan]))
    for P, k0, k1, from_acc in [(k, 0, K, False), (4 * k, 0, K, False), (4 * k, k, K - k, True),
                                (2 * k, 3 * k, 3 * k + 2 * k, True), (K, 0, K, True)]:
        acc = start if from_acc else np.zeros((M, N), np.uint32)
        got = launch(spec, a, b, acc, k0, k1, kernel=kernel, promote_every=P, promote_from_acc=from_acc)
        _same(got, _loop(spec, a, b, acc, k0, k1, P, from_acc), f"{name} {kernel} P={P} {k0}:{k1} from_acc={from_acc}")


@needs_host_build
def test_signed_zero_blocks_follow_the_loop():
    """A block of -0 products: the first block's -0 is the main accumulator as is; +0 + -0 = +0 after a start."""
    spec = get_instruction(UNITS[0])
    K = 4 * spec.k
    a = np.full((2, K), spec.a_format.from_float(np.array([-0.0]))[0], spec.a_format.container_dtype)
    b = np.full((3, K), spec.b_format.from_float(np.array([1.0]))[0], spec.b_format.container_dtype)
    for from_acc in (False, True):
        acc = np.zeros((2, 3), np.uint32)
        for kernel in ("tiled", "scalar"):
            got = cuda.host_accumulate_bits(spec, a, b, acc, kernel=kernel, promote_every=spec.k,
                                            promote_from_acc=from_acc)
            _same(got, _loop(spec, a, b, acc, 0, K, spec.k, from_acc), f"{kernel} from_acc={from_acc}")


@needs_host_build
def test_promotion_is_offered_only_where_the_chain_is_fp32():
    assert cuda.promotion_reason(UNITS[0]) is None
    assert "fp16" in cuda.promotion_reason("ampere.mma.m16n8k16.f16.f16.f16.f16")
    with pytest.raises(ValueError, match="promote_every: the GPU kernels do not promote"):
        cuda.host_accumulate_bits("ampere.mma.m16n8k16.f16.f16.f16.f16", np.zeros((1, 16), np.uint16),
                                  np.zeros((1, 16), np.uint16), np.zeros((1, 1), np.uint16), promote_every=16)
    with pytest.raises(ValueError, match="positive multiple"):
        cuda.host_accumulate_bits(UNITS[0], np.zeros((1, 64), np.uint8), np.zeros((1, 64), np.uint8),
                                  np.zeros((1, 1), np.uint32), promote_every=48)
