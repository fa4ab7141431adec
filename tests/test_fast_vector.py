"""The vectorised float64-lane kernels (``engines._fast_f64``) equal the reference engine.

They evaluate the common case (finite groups whose result lands in the output's normal
range) with float64 arithmetic and hand every other lane to the scalar integer kernel, so
the tests mix both kinds of lanes inside one block of columns / vectors: normal values
next to subnormal results, overflow, inf/NaN operands and accumulators, exact
cancellation, zeros, and C at the edge of the range -- for GEMM blocks that are not a
multiple of the kernel's tile, for what-if roundings, and for units that add C last.
"""

from __future__ import annotations

import numpy as np
import pytest

from tcnumerics.catalog import get_instruction
from tcnumerics.engines import _fast_f64, fast, reference
from tcnumerics.engines._fast_plan import build_plan
from tcnumerics.formats import Rounding
from tcnumerics.model import InstructionSpec

SEED = 4_2026_11_22
VECTOR_ENTRIES = ["hopper.wgmma.m64n8k16.f32.bf16.bf16", "hopper.wgmma.m64n8k16.f32.f16.f16",
                  "hopper.wgmma.m64n8k8.f32.tf32.tf32", "hopper.wgmma.m64n8k32.f32.e4m3.e5m2",
                  "hopper.mma.m16n8k32.f32.e4m3.e4m3.f32", "hopper.wgmma.m64n8k16.f16.f16.f16",
                  "ampere.mma.m16n8k16.f32.bf16.bf16.f32", "volta.mma.m8n8k4.f32.f16.f16.f32"]


def _mixed_bits(rng: np.random.Generator, fmt, shape, scale_span: int = 6) -> np.ndarray:
    """Normal values over a span of binades, plus raw random patterns (specials, subnormals)."""
    values = rng.standard_normal(shape).astype(np.float32) * np.float32(2.0) ** rng.integers(
        -scale_span, scale_span, shape).astype(np.float32)
    normal = fmt.from_float(values).astype(np.uint64)
    raw = rng.integers(0, 1 << fmt.container_bits, shape, dtype=np.uint64)
    pick = rng.random(shape)
    out = np.where(pick < 0.08, raw, normal)
    out = np.where((pick >= 0.08) & (pick < 0.12), 0, out)  # zero operands: the zero-exponent floor
    return out.astype(fmt.container_dtype)


def _edge_c(rng: np.random.Generator, fmt, shape) -> np.ndarray:
    """Accumulators: ordinary values, the largest finite ones, tiny ones, zeros, specials."""
    c = _mixed_bits(rng, fmt, shape)
    edges = fmt.from_float(np.array([fmt.max_finite, -fmt.max_finite, fmt.min_normal, -fmt.min_normal,
                                     fmt.min_normal / 4, np.inf, -np.inf, np.nan, 0.0, -0.0]))
    pick = rng.random(shape) < 0.1
    return np.where(pick, rng.choice(edges, shape), c).astype(fmt.container_dtype)


def _grid(spec, a, b, c):
    M, N = c.shape
    return reference.dot_bits(spec, np.repeat(a, N, axis=0), np.tile(b, (M, 1)), c.ravel()).reshape(M, N)


def _check_gemm(spec, seed: int, m: int, n: int, k: int, scale_span: int = 6, c=None) -> None:
    """fast.gemm_bits == the reference grid on mixed operands [m, k] x [n, k] and edge accumulators."""
    rng = np.random.default_rng(seed)
    a = _mixed_bits(rng, spec.a_format, (m, k), scale_span)
    b = _mixed_bits(rng, spec.b_format, (n, k), scale_span)
    c = _edge_c(rng, spec.c_format, (m, n)) if c is None else c
    _same(fast.gemm_bits(spec, a, b, c), _grid(spec, a, b, c), spec.name)


def _same(got, want, what):
    bad = np.flatnonzero(np.asarray(got).ravel() != np.asarray(want).ravel())
    assert bad.size == 0, f"{what}: {bad.size} differ, first fast {hex(int(np.ravel(got)[bad[0]]))} " \
                          f"reference {hex(int(np.ravel(want)[bad[0]]))}"


@pytest.mark.parametrize("name", VECTOR_ENTRIES)
def test_entry_takes_the_vector_path(name):
    plan = build_plan(get_instruction(name))
    assert plan.f64_reason is None, plan.f64_reason


@pytest.mark.parametrize("name", VECTOR_ENTRIES)
def test_gemm_mixing_vector_and_scalar_lanes(name):
    spec = get_instruction(name)
    k = 3 * spec.k if spec.c_format == spec.d_format else spec.k
    # M not a multiple of the row tile, N spanning two column blocks and a ragged one
    _check_gemm(spec, SEED + spec.k, 11, 2 * _fast_f64.BLOCK_N + 37, k)


@pytest.mark.parametrize("name", VECTOR_ENTRIES)
def test_dot_mixing_vector_and_scalar_lanes(name):
    spec = get_instruction(name)
    rng = np.random.default_rng(SEED + 2 * spec.k)
    k = 2 * spec.k if spec.c_format == spec.d_format else spec.k
    n = 3 * 256 + 71  # blocks of lanes and a ragged one
    a = _mixed_bits(rng, spec.a_format, (n, k), scale_span=70)  # wide spans: subnormal and huge sums
    b = _mixed_bits(rng, spec.b_format, (n, k), scale_span=70)
    c = _edge_c(rng, spec.c_format, n)
    _same(fast.dot_bits(spec, a, b, c), reference.dot_bits(spec, a, b, c), name)


def test_overflow_underflow_and_cancellation_in_one_block():
    spec = get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")
    f = spec.a_format.from_float
    n = spec.k
    rng = np.random.default_rng(SEED)
    rows = [
        np.full(n, 2.0 ** 120),            # sums far beyond FP32: inf
        np.full(n, 2.0 ** -70),            # products of 2**-140: below FP32's normal range
        2.0 ** -70 * (1 + rng.random(n)),  # subnormal sums with more bits than the subnormal quantum keeps
        np.r_[np.full(n // 2, 3.0), np.full(n // 2, -3.0)],  # exact cancellation: +0
        np.r_[1.0, np.full(n - 1, 2.0 ** -30)],  # terms truncated away below 2**(E - F)
    ]
    a = np.stack([f(np.asarray(r, np.float32)) for r in rows])
    assert a.shape[0] == 5
    b = np.stack([f(np.ones(n, np.float32)), f(np.full(n, 2.0 ** -70, np.float32)),
                  f((2.0 ** -70 * (1 + rng.random(n))).astype(np.float32))])
    c = spec.c_format.from_float(np.array([[0.0, -0.0, 0.0], [2.0 ** -149, -(2.0 ** 127), 0.0],
                                           [0.0, 2.0 ** -140, -0.0], [-0.0, 0.0, 1.0], [1.0, 1e30, 2.0 ** -126]],
                                          np.float32))
    _same(fast.gemm_bits(spec, a, b, c), _grid(spec, a, b, c), "edge rows")


@pytest.mark.parametrize("rounding", [Rounding.RNE, Rounding.RNA, Rounding.RU, Rounding.RD, Rounding.RZ])
def test_what_if_output_roundings(rounding):
    base = get_instruction("hopper.wgmma.m64n8k16.f32.f16.f16")
    spec = InstructionSpec(name=f"what-if-{rounding.value}", k=base.k, model=base.model.with_(output_rounding=rounding))
    assert build_plan(spec).f64_reason is None
    _check_gemm(spec, SEED + len(rounding.value), 9, 150, 2 * spec.k, scale_span=12)


def test_no_zero_exponent_floor_and_cut_output():
    # E_zero None (no floor) and an output cut to 13 fraction bits, both through the vector path
    base = get_instruction("hopper.wgmma.m64n8k32.f32.e4m3.e4m3")
    spec = InstructionSpec(name="what-if-no-floor", k=base.k, model=base.model.with_(zero_exponent=None))
    assert build_plan(spec).f64_reason is None
    _check_gemm(spec, SEED + 7, 5, 140, spec.k)


def test_plans_outside_float64_exactness_say_why_and_still_agree():
    base = get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")
    wide = InstructionSpec(name="what-if-F50", k=base.k, model=base.model.with_(frac_bits=50))
    reason = build_plan(wide).f64_reason
    assert reason is not None and "53 bits" in reason
    _check_gemm(wide, SEED + 50, 3, 20, wide.k)


def test_c_added_last_with_overflow_and_specials():
    # FP8 mma.sync on Hopper: two FP16 HMMAs from zero, then C by an FP32 FADD (RN)
    spec = get_instruction("hopper.mma.m16n8k32.f32.e4m3.e4m3.f32")
    assert spec.c_entry == "ieee_add" and build_plan(spec).f64_reason is None
    c = _edge_c(np.random.default_rng(SEED + 33), spec.c_format, (7, 300))
    c[:, :20] = spec.c_format.from_float(np.float32(3.4e38))  # the FADD overflows where products are positive
    _check_gemm(spec, SEED + 32, 7, 300, 2 * spec.k, c=c)


def test_plan_without_the_int32_route_still_vectorised():
    # F = 28: 16 terms no longer fit int32, but the float64 lanes still apply
    base = get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")
    spec = InstructionSpec(name="what-if-F28", k=base.k, model=base.model.with_(frac_bits=28))
    plan = build_plan(spec)
    assert plan.f64_reason is None and plan.sum32_window == 0
    assert build_plan(base).sum32_window > 0
    _check_gemm(spec, SEED + 28, 9, _fast_f64.BLOCK_N + 5, 2 * spec.k, scale_span=3)


def _window_values(rng, fmt, top, window, shape, wide_at=None):
    """Values whose exponents lie in [top - window, top] (both ends hit), signs random, 10 %
    zeros; ``wide_at`` (an index) gets one value just below the window instead."""
    e = rng.integers(top - window, top + 1, shape)
    e.flat[0], e.flat[-1] = top, top - window
    if wide_at is not None:
        e[wide_at] = top - window - 1
    e = np.clip(e, fmt.emin, fmt.emax)
    values = np.ldexp(1 + rng.integers(0, 1 << fmt.man_bits, shape) / (1 << fmt.man_bits), e)
    values = np.where(rng.random(shape) < 0.5, -values, values)
    values = np.where(rng.random(shape) < 0.1, 0.0, values)
    return fmt.from_float(values.astype(np.float32))


@pytest.mark.parametrize("name", ["hopper.wgmma.m64n8k16.f32.bf16.bf16", "hopper.wgmma.m64n8k8.f32.tf32.tf32",
                                  "hopper.wgmma.m64n8k32.f32.e4m3.e5m2", "hopper.mma.m16n8k32.f32.e4m3.e4m3.f32"])
def test_int32_route_at_the_window_edges(name):
    # groups spanning exactly the plan's window take the int32 route; one wide group moves its
    # row (or its whole block of B columns) to the float64 lanes; C far above / below the
    # products puts the products' scale at both ends of its clamp
    spec = get_instruction(name)
    plan = build_plan(spec)
    window = plan.sum32_window
    assert window >= 16 and plan.f64_reason is None
    rng = np.random.default_rng(SEED + window)
    L = int(plan.group_lengths[0])
    k = 3 * spec.k if spec.c_format == spec.d_format else spec.k
    m, n, groups = 9, 2 * _fast_f64.BLOCK_N + 7, k // L
    fa, fb = spec.a_format, spec.b_format
    top_a = rng.integers(min(fa.emin + window // 2, fa.emax), fa.emax + 1, (m, groups))
    top_b = rng.integers(min(fb.emin + window // 2, fb.emax), fb.emax + 1, (n, groups))
    a = np.empty((m, k), fa.container_dtype)
    b = np.empty((n, k), fb.container_dtype)
    for g in range(groups):
        cols = slice(g * L, (g + 1) * L)
        for r in range(m):
            a[r, cols] = _window_values(rng, fa, top_a[r, g], window, L, 3 if (r, g) == (5, groups - 1) else None)
        for j in range(n):
            wide = 5 if (j == _fast_f64.BLOCK_N + 9 and g == 1) else None  # one column: its block goes wide
            b[j, cols] = _window_values(rng, fb, top_b[j, g], window, L, wide)
    a[2, 1] = fa.inf_bits if fa.has_inf else fa.nan_bits  # a special operand among int32-route lanes
    scale = top_a[:, :1] + top_b[:, 0][None, :] + rng.integers(-40, 41, (m, n))
    cf = spec.c_format
    c = cf.from_float(np.where(rng.random((m, n)) < 0.1, 0.0,
                               np.ldexp(rng.standard_normal((m, n)), np.clip(scale, cf.emin, cf.emax - 4))
                               .astype(np.float32)))
    if fa.emax - fa.emin > 2 * window:
        # lane (0, 0): its only nonzero product pairs the bottom of both windows (the products'
        # largest scale) and every other product is zero
        hi, lo = (fa.emax + fa.emin) // 2 + window, (fa.emax + fa.emin) // 2
        a[0, :L] = fa.from_float(np.float32(0.0))
        b[0, :L] = fb.from_float(np.float32(0.0))
        a[0, :2] = fa.from_float(np.ldexp(np.float32([1.5, 1.25]), [hi, hi - window]).astype(np.float32))
        b[0, 1:3] = fb.from_float(np.ldexp(np.float32([1.75, 1.5]), [hi - window, hi]).astype(np.float32))
        c[0, 0] = cf.from_float(np.ldexp(np.float32(1.0), 2 * lo - window - 20).astype(np.float32))
    # column 1: a group of zeros, every product zero; with C = 1 and row 3 at the top of A's
    # range the products' scale is beyond 2**126 and must be clamped
    b[1, :L] = fb.from_float(np.float32(0.0))
    a[3, :L] = _window_values(rng, fa, fa.emax, window, L)
    c[:, 1] = cf.from_float(np.where(np.arange(m) % 2, 0.0, 1.0).astype(np.float32))
    _same(fast.gemm_bits(spec, a, b, c), _grid(spec, a, b, c), name)
