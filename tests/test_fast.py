"""The fast engine equals the reference engine bit for bit (NaN payloads included).

CI sample with a fixed seed: every catalogued entry the fast kernels run, over every input
family (specials, subnormals, overflow to inf, cancellation, wide spans, chained K), the
GEMM entry points against the reference grid, split-K accumulation, the pure-numpy backend,
what-if model variants, automatic fallback and argument errors.  The full run (>= 100,000
vectors per entry) is ``python benchmarks/fast_equivalence.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

import tcnumerics as tc
from tcnumerics.catalog import all_instructions, get_instruction
from tcnumerics.engines import _fast_numpy, fast, oracle, reference
from tcnumerics.model import InstructionSpec
from tcnumerics.vectors.families import families_for, generate

SEED = 20261122
SUPPORTED = [s for s in all_instructions() if fast.unsupported_reason(s) is None]


def _chain_k(spec: InstructionSpec) -> int:
    return 2 * spec.k if spec.c_format == spec.d_format else spec.k


def _random_bits(rng, fmt, shape):
    return rng.integers(0, 1 << fmt.container_bits, shape, dtype=np.uint64).astype(fmt.container_dtype)


def _assert_same(got, want, what):
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"{what}: {bad.size} of {want.size} differ; first {bad[:3]}: " \
                          f"fast {[hex(int(x)) for x in got.ravel()[bad[:3]]]} ref {[hex(int(x)) for x in want.ravel()[bad[:3]]]}"


def _reference_grid(spec, a_rows, b_cols, c):
    M, N = c.shape
    return reference.dot_bits(spec, np.repeat(a_rows, N, axis=0), np.tile(b_cols, (M, 1)), c.ravel()).reshape(M, N)


def test_catalog_is_mostly_fast():
    # the Hopper and Ampere tensor-core entries must not silently fall back
    for name in ("hopper.wgmma.m64n8k16.f32.bf16.bf16", "hopper.wgmma.m64n8k32.f32.e4m3.e5m2",
                 "hopper.mma.m16n8k32.f32.e4m3.e4m3.f32", "hopper.wgmma.m64n8k8.f32.tf32.tf32",
                 "hopper.mma.m16n8k16.f16.f16.f16.f16", "ampere.mma.m16n8k16.f32.bf16.bf16.f32",
                 "hopper.mma.m16n8k32.satfinite.s32.s8.u8.s32"):
        assert fast.unsupported_reason(name) is None, name
    assert len(SUPPORTED) >= 100


def test_every_fast_entry_equals_reference_on_every_family():
    rng = np.random.default_rng(SEED)
    checked = 0
    for spec in SUPPORTED:
        k = _chain_k(spec)
        parts = [generate(spec, family, 12, rng, k=k) for family in families_for(spec)]
        parts.append((_random_bits(rng, spec.a_format, (24, k)), _random_bits(rng, spec.b_format, (24, k)),
                      _random_bits(rng, spec.c_format, 24)))
        a, b, c = (np.concatenate(x) for x in zip(*parts))
        _assert_same(fast.dot_bits(spec, a, b, c), reference.dot_bits(spec, a, b, c), f"{spec.name} (families)")
        checked += len(c)
    assert checked > 50 * len(SUPPORTED)


def _one_per_datapath():
    seen, picked = set(), []
    for spec in SUPPORTED:
        key = (spec.a_format, spec.b_format, spec.c_format, spec.model, spec.k, spec.k_order, spec.chunk, spec.c_entry)
        if key not in seen:
            seen.add(key)
            picked.append(spec)
    return picked


@pytest.mark.parametrize("spec", _one_per_datapath()[::3], ids=lambda s: s.name)
def test_gemm_bits_equals_reference_grid(spec):
    rng = np.random.default_rng(SEED + spec.k)
    k = _chain_k(spec)
    M, N = 6, 11
    fam = "special" if "special" in families_for(spec) else families_for(spec)[0]
    a, b, c = generate(spec, fam, M + N, rng, k=k)
    a_rows, b_cols = a[:M], b[M:]
    c_grid = np.resize(c, (M, N)).astype(c.dtype)
    _assert_same(fast.gemm_bits(spec, a_rows, b_cols, c_grid), _reference_grid(spec, a_rows, b_cols, c_grid),
                 f"{spec.name} gemm")
    a_rows, b_cols = _random_bits(rng, spec.a_format, (M, k)), _random_bits(rng, spec.b_format, (N, k))
    c_grid = _random_bits(rng, spec.c_format, (M, N))
    _assert_same(fast.gemm_bits(spec, a_rows, b_cols, c_grid), _reference_grid(spec, a_rows, b_cols, c_grid),
                 f"{spec.name} gemm random")


@pytest.mark.parametrize("name", ["hopper.wgmma.m64n8k16.f32.bf16.bf16", "hopper.mma.m16n8k32.f32.e4m3.e5m2.f32",
                                  "hopper.mma.m16n8k16.f16.f16.f16.f16", "hopper.mma.m16n8k32.satfinite.s32.s8.s8.s32"])
def test_gemm_across_k_panels_and_split_k(name, monkeypatch):
    spec = get_instruction(name)
    rng = np.random.default_rng(SEED)
    M, N, K = 9, 13, 12 * spec.k
    a_rows, b_cols = _random_bits(rng, spec.a_format, (M, K)), _random_bits(rng, spec.b_format, (N, K))
    if spec.model.algorithm == "fused":  # keep most values finite so long chains stay informative
        a_rows = generate(spec, "normal", M, rng, k=K)[0]
        b_cols = generate(spec, "normal", N, rng, k=K)[1]
    c = _random_bits(rng, spec.c_format, (M, N))
    want = _reference_grid(spec, a_rows, b_cols, c)
    monkeypatch.setattr(fast, "PANEL_BYTES", 1)  # one instruction per K panel
    _assert_same(fast.gemm_bits(spec, a_rows, b_cols, c), want, "one-instruction panels")
    monkeypatch.undo()
    half = fast.accumulate_bits(spec, a_rows, b_cols, c, 0, 5 * spec.k)
    _assert_same(fast.accumulate_bits(spec, a_rows, b_cols, half, 5 * spec.k, K), want, "split K")


def test_mma_and_gemm_through_the_api_pick_fast_and_agree():
    rng = np.random.default_rng(SEED)
    A = rng.standard_normal((3, 2, 64)).astype(np.float32)
    B = rng.standard_normal((64, 5)).astype(np.float32)
    for name in ("hopper.wgmma.m64n8k8.f32.tf32.tf32", "hopper.wgmma.m64n8k32.f16.e5m2.e4m3"):
        inst = tc.instruction(name)
        a = inst.a_format.to_float(inst.a_format.bits_of(A))
        b = inst.b_format.to_float(inst.b_format.bits_of(B))
        got = inst.mma(a, b).view(inst.d_format.container_dtype)
        want = inst.mma(a, b, engine="reference").view(inst.d_format.container_dtype)
        _assert_same(got, want, name)
    assert tc.instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16").engine == "auto"
    from tcnumerics.engines import get_engine

    assert get_engine("auto") is fast


def test_numpy_backend_gives_the_same_bits(monkeypatch):
    rng = np.random.default_rng(SEED + 1)
    monkeypatch.setattr(fast, "_kernels", _fast_numpy)
    assert fast.backend() == "numpy"
    for spec in _one_per_datapath()[::4]:
        k = _chain_k(spec)
        for family in families_for(spec)[::2]:
            a, b, c = generate(spec, family, 16, rng, k=k)
            _assert_same(fast.dot_bits(spec, a, b, c), reference.dot_bits(spec, a, b, c), f"numpy {spec.name}")
        a_rows, b_cols = generate(spec, "special" if "special" in families_for(spec) else "int", 9, rng, k=k)[:2]
        c = _random_bits(rng, spec.c_format, (9, 9))
        _assert_same(fast.gemm_bits(spec, a_rows, b_cols, c), _reference_grid(spec, a_rows, b_cols, c),
                     f"numpy gemm {spec.name}")


_BASE = get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")


@pytest.mark.parametrize("changes", [
    dict(output_rounding="rne"), dict(output_rounding="ru"), dict(output_rounding="rd"),
    dict(output_rounding="rna"), dict(output_rounding="rto"), dict(output_overflow="saturate"),
    dict(output_overflow="ieee", output_rounding="rne"), dict(frac_bits=0), dict(frac_bits=3),
    dict(frac_bits=40), dict(zero_exponent=None), dict(zero_exponent=0), dict(group_size=3),
    dict(output_mantissa_bits=5), dict(d_format="fp16", c_format="fp16", nan_bits=None),
], ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()))
def test_what_if_model_variants(changes):
    model = _BASE.model.with_(**changes)
    spec = InstructionSpec("custom.variant", 16, model, chunk=8, k_order=tuple(range(15, -1, -1)))
    assert fast.unsupported_reason(spec) is None
    rng = np.random.default_rng(SEED + 7)
    for family in ("bits", "align", "cancel", "cdom", "special", "overflow"):
        a, b, c = generate(spec, family, 48, rng, k=32)
        _assert_same(fast.dot_bits(spec, a, b, c), reference.dot_bits(spec, a, b, c), f"{changes} / {family}")
    a, b = generate(spec, "align", 10, rng, k=32)[:2]
    c = _random_bits(rng, spec.c_format, (5, 5))
    _assert_same(fast.gemm_bits(spec, a[:5], b[5:], c), _reference_grid(spec, a[:5], b[5:], c), f"gemm {changes}")


def test_ieee_c_addition_rounding_variants():
    base = get_instruction("hopper.mma.m16n8k32.f32.e4m3.e4m3.f32")
    rng = np.random.default_rng(SEED + 3)
    for rounding in ("rz", "ru", "rd", "rna"):
        spec = InstructionSpec("custom.ieee_add", 32, base.model, a_format="e4m3", b_format="e4m3",
                               k_order=base.k_order, chunk=16, c_entry="ieee_add", c_add_rounding=rounding)
        for family in ("bits", "cdom", "special", "cancel"):
            a, b, c = generate(spec, family, 64, rng, k=64)
            _assert_same(fast.dot_bits(spec, a, b, c), reference.dot_bits(spec, a, b, c), f"{rounding}/{family}")


def test_overflow_to_inf_and_subnormal_results():
    spec = get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")
    bf16 = tc.get_format("bf16")
    big = np.full((2, 16), int(bf16.from_float(np.array([2.0 ** 127]))[0]), np.uint16)
    two = np.full((2, 16), int(bf16.from_float(np.array([2.0]))[0]), np.uint16)
    two[1] |= 0x8000
    d = fast.dot_bits(spec, big, two, np.zeros(2, np.uint32))
    assert [hex(int(x)) for x in d] == ["0x7f800000", "0xff800000"]  # >= 2**128 is inf even under RZ
    tiny = np.zeros((1, 16), np.uint16)
    tiny[0, 0] = 0x0001  # smallest bf16 subnormal, 2**-133
    one = np.full((1, 16), 0x3F80, np.uint16)
    d = fast.dot_bits(spec, tiny, one, np.zeros(1, np.uint32))
    assert int(d[0]) == int(reference.dot_bits(spec, tiny, one, np.zeros(1, np.uint32))[0])
    nan_c = np.array([0x7FC00001], np.uint32)
    assert int(fast.dot_bits(spec, one, one, nan_c)[0]) == 0x7FFFFFFF  # canonical NaN, payload dropped


def test_fast_equals_exact_oracle_on_a_sample():
    rng = np.random.default_rng(SEED + 5)
    for name in ("hopper.wgmma.m64n8k16.f32.bf16.bf16", "hopper.mma.m16n8k32.f32.e5m2.e4m3.f32",
                 "hopper.wgmma.m64n8k32.f32.e4m3.e4m3", "ampere.mma.m16n8k8.f32.tf32.tf32.f32"):
        spec = get_instruction(name)
        for family in ("special", "align", "cdom"):
            a, b, c = generate(spec, family, 12, rng, k=_chain_k(spec))
            _assert_same(fast.dot_bits(spec, a, b, c), oracle.dot_bits(spec, a, b, c), f"oracle {name}/{family}")


def test_unsupported_models_fall_back_to_the_reference():
    spec = InstructionSpec("custom.exact", 16, _BASE.model.with_(frac_bits=None))
    assert "frac_bits=None" in fast.unsupported_reason(spec)
    rng = np.random.default_rng(SEED)
    a, b, c = generate(spec, "align", 20, rng)
    _assert_same(fast.dot_bits(spec, a, b, c), reference.dot_bits(spec, a, b, c), "fallback dot")
    c2 = _random_bits(rng, spec.c_format, (4, 5))
    _assert_same(fast.gemm_bits(spec, a[:4], b[:5], c2), _reference_grid(spec, a[:4], b[:5], c2), "fallback gemm")
    others = [s for s in all_instructions() if fast.unsupported_reason(s) is not None]
    for spec in others[:: max(1, len(others) // 6)]:
        k = _chain_k(spec)
        fam = families_for(spec)[0]
        a, b, c = generate(spec, fam, 6, rng, k=k)
        _assert_same(fast.dot_bits(spec, a, b, c), reference.dot_bits(spec, a, b, c), f"fallback {spec.name}")


def test_bad_arguments_name_themselves():
    spec = "hopper.wgmma.m64n8k16.f32.bf16.bf16"
    a = np.zeros((2, 32), np.uint16)
    c = np.zeros((2, 3), np.uint32)
    with pytest.raises(ValueError, match="b_cols"):
        fast.gemm_bits(spec, a, np.zeros((3, 16), np.uint16), c)
    with pytest.raises(ValueError, match="c: expected shape"):
        fast.gemm_bits(spec, a, np.zeros((3, 32), np.uint16), np.zeros((3, 2), np.uint32))
    with pytest.raises(ValueError, match="a_rows: K=24"):
        fast.gemm_bits(spec, np.zeros((2, 24), np.uint16), np.zeros((3, 24), np.uint16), c)
    with pytest.raises(TypeError, match="a_rows"):
        fast.gemm_bits(spec, a.astype(np.float32), np.zeros((3, 32), np.uint16), c)
    with pytest.raises(ValueError, match="k_start"):
        fast.accumulate_bits(spec, a, np.zeros((3, 32), np.uint16), c, 8, 32)
    with pytest.raises(ValueError, match="chains instructions"):
        mixed = InstructionSpec("custom.mixed", 16, _BASE.model.with_(d_format="fp16", nan_bits=None))
        fast.gemm_bits(mixed, a, np.zeros((3, 32), np.uint16), c)
    with pytest.raises(ValueError, match="a: K=24"):
        fast.dot_bits(spec, np.zeros((2, 24), np.uint16), np.zeros((2, 24), np.uint16), np.zeros(2, np.uint32))
