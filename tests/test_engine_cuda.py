"""The GPU engine's kernels equal the reference engine bit for bit -- checked on a CPU.

CI has no GPU: the kernels' CUDA C++ source is compiled by the host C++ compiler behind the
small shim of ``_cuda_source.HOST_PRELUDE`` (CUDA threads as threads, ``__syncthreads`` as a
barrier) and run on small cases of every input family, through each kernel the GPU runs
(``dot_kernel``, the tiled fused GEMM with partial tiles, the per-output GEMM), including
chained K, split accumulation, an IEEE C addition, a mantissa cut, integer saturation and
custom units.  The same kernels' bits on an H100 (>= 1e6 vectors per datapath) are recorded
in ``benchmarks/RESULTS.md`` (``benchmarks/gpu_equivalence.py``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tcnumerics.catalog import get_instruction
from tcnumerics.engines import _cuda_build, cuda, get_engine, grid_dot_bits, reference, resolve_engine
from tcnumerics.model import InstructionSpec, UnitModel
from tcnumerics.vectors.families import families_for, generate

SEED = 20261124
needs_cxx = pytest.mark.skipif(_cuda_build.host_compiler() is None, reason="no host C++ compiler")

CUSTOM = InstructionSpec(  # a unit no catalog entry has: 5 products per group, F=20, RNE, no zero exponent
    name="custom.odd.k10", k=10, k_order=(9, 0, 8, 1, 7, 2, 6, 3, 5, 4),
    model=UnitModel(a_format="bf16", b_format="fp16", c_format="fp32", d_format="fp32", group_size=5,
                    frac_bits=20, zero_exponent=None, output_rounding="rne"))
ENTRIES = ["hopper.wgmma.m64n8k16.f32.bf16.bf16",     # BF16 wgmma, RZ
           "hopper.mma.m16n8k16.f16.f16.f16.f16",     # FP16 accumulator, RNE
           "hopper.wgmma.m64n8k8.f32.tf32.tf32",      # TF32 in 32-bit containers
           "hopper.wgmma.m64n8k32.f32.e4m3.e5m2",     # FP8, E8M13 output cut
           "hopper.mma.m16n8k32.f32.e4m3.e4m3.f32",   # FP8 -> FP16 lowering, chunks, C added last
           "ampere.mma.m16n8k16.f16.f16.f16.f32",     # C in FP32, D in FP16 (no chaining)
           "blackwell.tcgen05.mma.kind::f8f6f4.f32.e2m1.e2m1",  # 32 terms < 2**27: two int32 half sums
           "hopper.mma.m16n8k32.satfinite.s32.s8.s8.s32",       # integer, saturating
           CUSTOM]


def _spec(entry):
    return entry if isinstance(entry, InstructionSpec) else get_instruction(entry)


def _chain_k(spec) -> int:
    return 2 * spec.k if spec.c_format == spec.d_format else spec.k


def _family_vectors(spec, per_family: int, rng):
    k = _chain_k(spec)
    parts = [generate(spec, fam, per_family, rng, k=k) for fam in families_for(spec)]
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]))


def _assert_same(got, want, what):
    bad = np.flatnonzero(np.asarray(got).ravel() != np.asarray(want).ravel())
    assert bad.size == 0, f"{what}: {bad.size} of {np.size(want)} differ; first {bad[:3]}: " \
                          f"{[hex(int(x)) for x in np.ravel(got)[bad[:3]]]} vs " \
                          f"{[hex(int(x)) for x in np.ravel(want)[bad[:3]]]}"


@needs_cxx
@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name if isinstance(e, InstructionSpec) else e)
def test_kernels_equal_reference_on_every_family(entry):
    spec = _spec(entry)
    assert cuda.unsupported_reason(spec) is None
    rng = np.random.default_rng(SEED)
    a, b, c = _family_vectors(spec, 6, rng)
    _assert_same(cuda.host_dot_bits(spec, a, b, c), reference.dot_bits(spec, a, b, c), f"{spec.name} dot")
    # GEMM over family rows: M, N not multiples of the host tile (4 x 16): partial tiles on both edges
    M, N = 7, 19
    rows = rng.permutation(len(a))
    A, B = a[rows[:M]], b[rows[-N:]]
    C = c[rng.integers(0, len(c), (M, N))]
    want = grid_dot_bits(reference.dot_bits, spec, A, B, C)
    kernels = ["scalar"] + (["tiled"] if _cuda_build.tiled_reason(cuda._plan(spec)) is None else [])
    for kernel in kernels:
        _assert_same(cuda.host_accumulate_bits(spec, A, B, C, kernel=kernel), want, f"{spec.name} gemm {kernel}")


@needs_cxx
def test_tiled_kernel_covers_the_fused_units():
    for name in ENTRIES[:7]:
        assert _cuda_build.tiled_reason(cuda._plan(get_instruction(name))) is None, name
    assert "#define SPLIT_SUM 1" in _cuda_build.config_header(get_instruction(ENTRIES[6]), cuda._plan(
        get_instruction(ENTRIES[6])), _cuda_build.DEVICE_TILE)
    assert _cuda_build.tiled_reason(cuda._plan(get_instruction(ENTRIES[7]))) is not None  # integer: per output


@needs_cxx
@pytest.mark.parametrize("name", ["hopper.wgmma.m64n8k16.f32.bf16.bf16", "hopper.mma.m16n8k32.f32.e4m3.e4m3.f32"])
def test_long_chains_and_split_accumulation(name):
    spec = get_instruction(name)
    rng = np.random.default_rng(SEED + 1)
    M, N, K = 5, 18, 6 * spec.k
    A = generate(spec, "normal", M, rng, k=K)[0]
    B = generate(spec, "cancel", N, rng, k=K)[1]
    C = generate(spec, "normal", M * N, rng, k=spec.k)[2].reshape(M, N)
    want = grid_dot_bits(reference.dot_bits, spec, A, B, C)
    _assert_same(cuda.host_accumulate_bits(spec, A, B, C), want, "whole chain")
    half = cuda.host_accumulate_bits(spec, A, B, C, 0, 2 * spec.k)
    _assert_same(cuda.host_accumulate_bits(spec, A, B, half, 2 * spec.k, K), want, "split at 2 instructions")


@needs_cxx
def test_what_if_variants_compile_and_match():
    base = get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")
    rng = np.random.default_rng(SEED + 2)
    for changes in (dict(frac_bits=14, output_mantissa_bits=10), dict(output_rounding="ru", group_size=4)):
        spec = InstructionSpec(name=f"whatif.{'.'.join(changes)}", k=16, model=base.model.with_(**changes))
        a, b, c = _family_vectors(spec, 4, rng)
        _assert_same(cuda.host_dot_bits(spec, a, b, c), reference.dot_bits(spec, a, b, c), f"dot {changes}")
        A, B = a[:6], b[-9:]
        C = c[rng.integers(0, len(c), (6, 9))]
        _assert_same(cuda.host_accumulate_bits(spec, A, B, C),
                     grid_dot_bits(reference.dot_bits, spec, A, B, C), f"gemm {changes}")


def test_config_is_specialised_per_unit():
    base = get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")
    h1 = _cuda_build.config_header(base, cuda._plan(base), _cuda_build.DEVICE_TILE)
    other = InstructionSpec(name="x", k=16, model=base.model.with_(frac_bits=23))
    h2 = _cuda_build.config_header(other, cuda._plan(other), _cuda_build.DEVICE_TILE)
    assert "#define F_BITS 25" in h1 and "#define F_BITS 23" in h2 and h1 != h2


def test_engine_names_and_auto():
    assert get_engine("cuda") is cuda
    assert resolve_engine("auto", np.zeros(2)) == "auto"
    assert resolve_engine("fast", np.zeros(2)) == "fast"
    with pytest.raises(ValueError, match="engine"):
        resolve_engine("gpu")


def test_unsupported_entries_fall_back_with_a_warning():
    name = "cdna3.mfma.f32_16x16x16_f16"
    reason = cuda.unsupported_reason(name)
    assert reason and "staged_sum" in reason
    spec = get_instruction(name)
    rng = np.random.default_rng(SEED + 3)
    a, b, c = generate(spec, "normal", 8, rng, k=spec.k)
    with pytest.warns(RuntimeWarning, match="CPU fast engine"):
        got = cuda.dot_bits(spec, a, b, c)
    _assert_same(got, reference.dot_bits(spec, a, b, c), "fallback")


@pytest.mark.skipif(cuda.available(), reason="a GPU is present")
def test_without_a_gpu_the_engine_says_so():
    a = np.zeros((2, 16), np.uint16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeError, match="engine='cuda'"):
            cuda.dot_bits("hopper.wgmma.m64n8k16.f32.bf16.bf16", a, a, np.zeros(2, np.uint32))


@needs_cxx
@pytest.mark.parametrize("name", ["blackwell.tcgen05.mma.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0",
                                  "blackwell.tcgen05.mma.kind::mxf8f6f4.block32.f32.e2m1.e5m2.ue8m0"])
def test_mx_block_scaled_units_equal_reference(name):
    from tcnumerics.vectors.families import generate_scaled

    spec = get_instruction(name)
    assert cuda.unsupported_reason(spec) is None
    rng = np.random.default_rng(SEED + 5)
    parts = [generate_scaled(spec, fam, 5, rng, k=2 * spec.k) for fam in families_for(spec)]
    a, b, c, sa, sb = (np.concatenate(x) for x in zip(*parts))
    sa[:2, 0] = 0xFF  # NaN scales
    sb[3, 1] = 0xFF
    _assert_same(cuda.host_dot_bits(spec, a, b, c, scale_a=sa, scale_b=sb),
                 reference.dot_bits(spec, a, b, c, scale_a=sa, scale_b=sb), f"{name} dot")
    M, N = 6, 17
    A, B, SA, SB = a[:M], b[-N:], sa[:M], sb[-N:]
    C = c[rng.integers(0, len(c), (M, N))]
    want = reference.dot_bits(spec, np.repeat(A, N, 0), np.tile(B, (M, 1)), C.ravel(), scale_a=np.repeat(SA, N, 0),
                              scale_b=np.tile(SB, (M, 1))).reshape(M, N)
    assert _cuda_build.tiled_reason(cuda._plan(spec)) is None  # 32 products in two int32 halves
    for kernel in ("tiled", "scalar"):
        _assert_same(cuda.host_accumulate_bits(spec, A, B, C, kernel=kernel, scale_a=SA, scale_b=SB), want,
                     f"{name} gemm {kernel}")


@needs_cxx
def test_nvfp4_subgroup_scaled_units_equal_reference():
    """k64 FP4 with UE4M3 scales per 16 (NVFP4): exact sub-group sums, scaled, fused with C (auto: tiled kernel)."""
    from tcnumerics.vectors.families import generate_scaled

    spec = get_instruction("blackwell.tcgen05.mma.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3")
    assert cuda.unsupported_reason(spec) is None
    rng = np.random.default_rng(SEED + 7)
    parts = [generate_scaled(spec, fam, 6, rng, k=2 * spec.k) for fam in families_for(spec)]
    a, b, c, sa, sb = (np.concatenate(x) for x in zip(*parts))
    sa[:2, 0] = 0x7F  # a NaN scale
    sb[4:] = rng.integers(0, 256, sb[4:].shape)  # every scale code
    _assert_same(cuda.host_dot_bits(spec, a, b, c, scale_a=sa, scale_b=sb),
                 reference.dot_bits(spec, a, b, c, scale_a=sa, scale_b=sb), "nvfp4 dot")
    M, N = 4, 7
    C = c[rng.integers(0, len(c), (M, N))]
    want = reference.dot_bits(spec, np.repeat(a[:M], N, 0), np.tile(b[-N:], (M, 1)), C.ravel(),
                              scale_a=np.repeat(sa[:M], N, 0), scale_b=np.tile(sb[-N:], (M, 1))).reshape(M, N)
    _assert_same(cuda.host_accumulate_bits(spec, a[:M], b[-N:], C, scale_a=sa[:M], scale_b=sb[-N:]), want,
                 "nvfp4 gemm")


SUBGROUP_ENTRIES = ["blackwell.tcgen05.mma.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3",
                   "blackwell.tcgen05.mma.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0"]


@needs_cxx
@pytest.mark.parametrize("name", SUBGROUP_ENTRIES)
def test_subgroup_scaled_tiled_gemm_equals_reference(name):
    """The tiled sub-group kernel (SUBGROUP plans) on ragged GEMMs: partial tiles in M and N, 3 chained
    instructions, NaN and zero scales, every scale code, C infinities / NaN / subnormals / -0, E2M1
    subnormals and zeros -- bits equal the reference engine and the per-output kernel."""
    from tcnumerics.vectors.families import generate_scaled

    spec = get_instruction(name)
    plan = cuda._plan(spec)
    assert isinstance(plan, _cuda_build.SubgroupPlan) and _cuda_build.tiled_reason(plan) is None
    rng = np.random.default_rng(SEED + 8)
    parts = [generate_scaled(spec, fam, 5, rng, k=3 * spec.k) for fam in families_for(spec)]
    a, b, c, sa, sb = (np.concatenate(x) for x in zip(*parts))
    tile = _cuda_build.HOST_TILE
    M, N = 2 * tile.bm + 3, tile.bn + 5  # partial tiles on both edges
    A, B = a[:M].copy(), b[-N:].copy()
    SA, SB = sa[:M].copy(), sb[-N:].copy()
    nan_scale = 0x7F if spec.model.scale_format.name == "ue4m3" else 0xFF
    SA[1, 0] = nan_scale                      # NaN scale of A in the first sub-group of instruction 0
    SB[2, -1] = nan_scale                     # ... of B in the last instruction
    SA[3, :] = 0 if spec.model.scale_format.name == "ue4m3" else SA[3, :]  # zero scales (UE4M3 has 0)
    SB[4:8] = rng.integers(0, 256, SB[4:8].shape)  # every scale code
    A[5, :] = rng.choice([0x0, 0x1, 0x8, 0x9], A.shape[1])  # E2M1 zeros, -0 and subnormals +-0.5
    B[6, ::2] = 0                             # half the products of a column zero
    C = c[rng.integers(0, len(c), (M, N))].copy()
    C[0, :5] = [0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001, 0x80000000]  # +inf, -inf, NaN, subnormal, -0
    C[7, 3] = 0x807FFFFF                      # the largest negative subnormal
    want = reference.dot_bits(spec, np.repeat(A, N, 0), np.tile(B, (M, 1)), C.ravel(), scale_a=np.repeat(SA, N, 0),
                              scale_b=np.tile(SB, (M, 1))).reshape(M, N)
    for kernel in ("tiled", "scalar"):
        _assert_same(cuda.host_accumulate_bits(spec, A, B, C, kernel=kernel, scale_a=SA, scale_b=SB), want,
                     f"{name} gemm {kernel}")
    k1 = 2 * spec.k  # a K range that starts inside the operands: split accumulation
    part = cuda.host_accumulate_bits(spec, A, B, C, 0, spec.k, kernel="tiled", scale_a=SA, scale_b=SB)
    rest = cuda.host_accumulate_bits(spec, A, B, part, spec.k, k1, kernel="tiled", scale_a=SA, scale_b=SB)
    want2 = reference.dot_bits(spec, np.repeat(A[:, :k1], N, 0), np.tile(B[:, :k1], (M, 1)), C.ravel(),
                               scale_a=np.repeat(SA[:, :k1 // spec.model.scale_block], N, 0),
                               scale_b=np.tile(SB[:, :k1 // spec.model.scale_block], (M, 1))).reshape(M, N)
    _assert_same(rest, want2, f"{name} split K")


def test_accumulate_bits_names_a_bad_kernel():
    """``kernel`` chooses between the auto routing and the per-output kernel; anything else is refused."""
    spec = get_instruction(SUBGROUP_ENTRIES[0])
    a = np.zeros((2, spec.k), np.uint8)
    with pytest.raises(ValueError, match="kernel"):
        cuda.accumulate_bits(spec, a, a, np.zeros((2, 2), np.uint32), kernel="tiles")


def test_subgroup_tiled_reason_refuses_wide_sums():
    """A sub-group plan whose scaled sums would not fit int32 is left to the per-output kernel."""
    import dataclasses

    plan = cuda._plan(get_instruction(SUBGROUP_ENTRIES[0]))
    assert _cuda_build.tiled_reason(plan) is None
    wide = dataclasses.replace(plan, scale_sig_max=1 << 12)
    assert "exceed int32" in _cuda_build.tiled_reason(wide)
    assert "sub-groups" in _cuda_build.tiled_reason(dataclasses.replace(plan, subgroup_size=24))


@pytest.mark.skipif(__import__("shutil").which("nvcc") is None, reason="no CUDA compiler")
@pytest.mark.parametrize("name", ["hopper.wgmma.m64n8k16.f32.bf16.bf16", "hopper.mma.m16n8k32.f32.e4m3.e4m3.f32",
                                  "blackwell.tcgen05.mma.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0",
                                  "blackwell.tcgen05.mma.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3",
                                  "blackwell.tcgen05.mma.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0",
                                  "hopper.mma.m16n8k32.satfinite.s32.s8.s8.s32"])
def test_device_source_compiles_for_hopper(name, tmp_path):
    """The GPU build (sm_90) of every kernel a unit uses compiles without spilling registers."""
    import subprocess

    from tcnumerics.engines._cuda_source import KERNEL_SOURCE

    spec = get_instruction(name)
    plan = cuda._plan(spec)
    kernels = ["dot_kernel"] + (["gemm_tiled"] if _cuda_build.tiled_reason(plan) is None else ["gemm_scalar"])
    for kernel in kernels:
        flags = "".join(f"#define {flag} {int(k == kernel)}\n" for k, flag in _cuda_build._KERNEL_FLAGS.items())
        src = tmp_path / f"{kernel}.cu"
        src.write_text("#define USE_DPX 1\n" + flags + _cuda_build.config_header(spec, plan, _cuda_build.DEVICE_TILE)
                       + KERNEL_SOURCE)
        proc = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-std=c++17", "-Xptxas", "-v", str(src), "-o",
                               str(tmp_path / f"{kernel}.cubin")], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "bytes spill stores" not in proc.stderr or " 0 bytes spill stores" in proc.stderr, proc.stderr[-2000:]


@needs_cxx
def test_binary_units_replay_the_hopper_captures():
    """b1 AND/XOR + popc run as integer units whose product is the bit operation; the H100/H200 captures match."""
    import glob
    import os

    from tcnumerics.vectors.io import VectorReader

    files = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "vectors", "hopper", "*b1_b1*popc.npz")))
    if not files:
        pytest.skip("vectors/hopper not present")
    checked = 0
    for path in files[:2]:  # one AND, one XOR
        with VectorReader(path) as reader:
            spec = reader.spec
            assert cuda.unsupported_reason(spec) is None
            for chunk in reader.chunks(1 << 14):
                _assert_same(cuda.host_dot_bits(spec, chunk["a"], chunk["b"], chunk["c"]), chunk["d"], path)
                checked += len(chunk["d"])
        rng = np.random.default_rng(SEED + 6)
        a, b, c = generate(spec, families_for(spec)[0], 9, rng, k=2 * spec.k)
        C = c[rng.integers(0, len(c), (4, 5))]
        _assert_same(cuda.host_accumulate_bits(spec, a[:4], b[-5:], C),
                     grid_dot_bits(reference.dot_bits, spec, a[:4], b[-5:], C), f"{spec.name} gemm")
    assert checked >= 3000


# --- the directed-rounding FMA pass of the tiled kernel ---------------------------------------------------------

def test_fma_pass_is_chosen_per_unit():
    """FP8 units truncate with the FP32 FMA, BF16 / FP16 / TF32 with the FP64 one; sub-group units keep integers."""
    width = {name: getattr(_cuda_build.fma_align(cuda._plan(get_instruction(name)), get_instruction(name)),
                           "width", None)
             for name in ("hopper.wgmma.m64n128k32.f32.e4m3.e4m3", "hopper.wgmma.m64n128k32.f32.e5m2.e5m2",
                          "hopper.wgmma.m64n8k16.f32.bf16.bf16", "hopper.wgmma.m64n8k8.f32.tf32.tf32",
                          "blackwell.tcgen05.mma.kind::f8f6f4.f32.e2m1.e2m1")}
    assert list(width.values()) == [1, 1, 2, 2, None], width
    spec = get_instruction("hopper.wgmma.m64n128k32.f32.e4m3.e4m3")
    # the default ("auto"): the FP32 FMA pass with its FP32 end for the FP8 chains (equal bits on an H200, faster)
    assert "#define FMA_ALIGN 1\n#define FMA_LO" in _cuda_build.config_header(spec, cuda._plan(spec),
                                                                             _cuda_build.DEVICE_TILE)
    assert "#define FAST_END 1" in _cuda_build.config_header(spec, cuda._plan(spec), _cuda_build.DEVICE_TILE)
    assert _cuda_build.device_tiles(cuda._plan(spec), spec, "auto", "alu") == [_cuda_build.ROW_TILE,
                                                                               _cuda_build.DEVICE_TILE]
    assert _cuda_build.device_tiles(cuda._plan(spec), spec, "int", "alu") == [_cuda_build.DEVICE_TILE]
    assert "#define FMA_ALIGN 1" in _cuda_build.config_header(spec, cuda._plan(spec), _cuda_build.DEVICE_TILE,
                                                              align="fma")
    assert "FMA_ALIGN" not in _cuda_build.config_header(spec, cuda._plan(spec), _cuda_build.DEVICE_TILE,
                                                        align="int")
    bf16 = get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")  # FP64 FMA only on request ("fma")
    assert "FMA_ALIGN" not in _cuda_build.config_header(bf16, cuda._plan(bf16), _cuda_build.DEVICE_TILE)
    assert "#define FMA_ALIGN 2" in _cuda_build.config_header(bf16, cuda._plan(bf16), _cuda_build.DEVICE_TILE,
                                                              align="fma")


_FMT = {"fp8": ("e4m3", "e5m2"), "wide": ("bf16", "fp16", "tf32")}


@needs_cxx
@pytest.mark.parametrize("kind", sorted(_FMT))
@given(data=st.data())
@settings(max_examples=3, deadline=None)
def test_fma_pass_equals_reference_on_random_custom_units(kind, data):
    """Random fused units (operand formats, group length L, F, output rounding): the tiled kernel's FMA pass (FP32
    for FP8 operands, FP64 for the wider ones) and its integer pass both give the reference's bits on every input
    family."""
    fa = data.draw(st.sampled_from(_FMT[kind] if kind == "fp8" else ("bf16", "tf32")))  # wide: the FP64 form
    fb = data.draw(st.sampled_from(_FMT[kind]))
    if "tf32" in (fa, fb):
        fa = fb = "tf32"
    L = data.draw(st.sampled_from([2, 4, 8, 16, 32] if kind == "fp8" else [2, 4, 8, 16]))
    F = data.draw(st.integers(8, 16 if kind == "fp8" else 25))
    rounding = data.draw(st.sampled_from(["rz", "rne", "ru", "rd"]))
    spec = InstructionSpec(name=f"custom.fma.{fa}.{fb}.L{L}.F{F}.{rounding}", k=2 * L,
                           model=UnitModel(a_format=fa, b_format=fb, c_format="fp32", d_format="fp32", group_size=L,
                                           frac_bits=F, output_rounding=rounding))
    plan = cuda._plan(spec)
    form = _cuda_build.fma_align(plan, spec)
    assert getattr(form, "width", None) == (1 if kind == "fp8" else 2), spec.name
    rng = np.random.default_rng(L * 100 + F)
    a, b, c = _family_vectors(spec, 3, rng)
    M, N = 6, 9
    A, B = a[rng.integers(0, len(a), M)], b[rng.integers(0, len(b), N)]
    C = c[rng.integers(0, len(c), (M, N))]
    want = grid_dot_bits(reference.dot_bits, spec, A, B, C)
    for align in ("fma", "int"):
        _assert_same(cuda.host_accumulate_bits(spec, A, B, C, kernel="tiled", align=align), want,
                     f"{spec.name} tiled {align}")


# --- the tensor-core exponent pass of the tiled kernel (host build: the mma emulated on the measured unit model) ---

def test_exp_mma_is_chosen_per_unit():
    """The power sum fits E4M3 (L=32, m=6) and L=16 FP8 (m=5) and FP4; E5M2, BF16 and FP16 products span too many
    binades for 2**(m * s) in FP32 and keep the CUDA-core max; the default build keeps it everywhere."""
    fits = {name: _cuda_build.exp_mma(cuda._plan(get_instruction(name)), get_instruction(name)) is not None
            for name in ("hopper.wgmma.m64n128k32.f32.e4m3.e4m3", "ada.mma.m16n8k32.f32.e4m3.e4m3.f32",
                         "blackwell.tcgen05.mma.kind::f8f6f4.f32.e2m1.e2m1", "hopper.wgmma.m64n128k32.f32.e5m2.e5m2",
                         "hopper.wgmma.m64n8k16.f32.bf16.bf16", "hopper.wgmma.m64n8k16.f32.f16.f16")}
    assert list(fits.values()) == [True, True, True, False, False, False], fits
    spec = get_instruction("hopper.wgmma.m64n128k32.f32.e4m3.e4m3")
    plan = cuda._plan(spec)
    assert "EXP_MMA" not in _cuda_build.config_header(spec, plan, _cuda_build.MMA_TILE)
    assert "#define EXP_MMA 1" in _cuda_build.config_header(spec, plan, _cuda_build.MMA_TILE, exp_pass="mma")
    assert "EXP_MMA" not in _cuda_build.config_header(spec, plan, _cuda_build.HOST_TILE, exp_pass="mma")
    em = _cuda_build.exp_mma(plan, spec)
    assert em.m == 6 and (em.bias_a, em.bias_b) == (-6, 2)
    with pytest.raises(ValueError, match="exp_pass"):
        _cuda_build.config_header(spec, plan, _cuda_build.MMA_TILE, exp_pass="tensor")


def _ragged_gemm(spec, rng, M=70, N=67, chains=2, per_family=4):
    a, b, c = _family_vectors(spec, per_family, rng)
    k = chains * spec.k
    if a.shape[1] < k:
        a, b = np.concatenate([a] * (k // a.shape[1]), 1), np.concatenate([b] * (k // b.shape[1]), 1)
    A, B = a[rng.integers(0, len(a), M), :k], b[rng.integers(0, len(b), N), :k]
    return A, B, c[rng.integers(0, len(c), (M, N))]


@needs_cxx
@pytest.mark.parametrize("entry", ["hopper.wgmma.m64n128k32.f32.e4m3.e4m3",  # L=32, m=6, E8M13 cut, FP32 FMA pass
                                   "ada.mma.m16n8k32.f32.e4m3.e4m3.f32",     # L=16 (two groups a stage), m=5
                                   "blackwell.tcgen05.mma.kind::f8f6f4.f32.e2m1.e2m1"])  # integer pass, split sums
def test_exp_mma_equals_reference(entry):
    """The tiled kernel with its exponent pass on the (emulated) tensor core: the reference's bits on every input
    family over a ragged 70 x 67 GEMM (partial 64 x 64 tiles), a K chain, and a split accumulation."""
    spec = get_instruction(entry)
    rng = np.random.default_rng(SEED + 29)
    A, B, C = _ragged_gemm(spec, rng)
    want = grid_dot_bits(reference.dot_bits, spec, A, B, C)
    assert "#define EXP_MMA 1" in _cuda_build.config_header(spec, cuda._plan(spec), _cuda_build.MMA_TILE,
                                                            exp_pass="mma")
    _assert_same(cuda.host_accumulate_bits(spec, A, B, C, kernel="tiled", exp_pass="mma"), want, f"{entry} mma")
    part = cuda.host_accumulate_bits(spec, A, B, C, 0, spec.k, kernel="tiled", exp_pass="mma")
    _assert_same(cuda.host_accumulate_bits(spec, A, B, part, spec.k, A.shape[1], kernel="tiled", exp_pass="mma"),
                 want, f"{entry} mma, split")


@needs_cxx
def test_exp_mma_needs_l_below_2_to_the_m():
    """The argument's bound GL < 2**m is needed (the test can fail): 32 products of one exponent sum to exactly
    2**(m s + 5), so with m = 5 the pass would read E one too high and truncate C = 1 + 2**-13 to 1; the build's
    m = 6 gives the reference's bits, the same source with MMA_M forced to 5 does not."""
    import ctypes

    spec = get_instruction("hopper.wgmma.m64n128k32.f32.e4m3.e4m3")
    plan = cuda._plan(spec)
    M = N = 64
    A = np.full((M, 32), 0x3F, np.uint8)  # +1.875 x 16, -1.875 x 16: products of exponent 0 summing to 0
    A[:, 16:] = 0xBF
    B = np.full((N, 32), 0x38, np.uint8)  # 1.0
    C = np.full((M, N), 0x3F800400, np.uint32)  # 1 + 2**-13: kept on E = 0's grid, lost on E = 1's
    want = grid_dot_bits(reference.dot_bits, spec, A, B, C)
    _assert_same(cuda.host_accumulate_bits(spec, A, B, C, kernel="tiled", exp_pass="mma"), want, "m = 6")
    header = _cuda_build.config_header(spec, plan, _cuda_build.MMA_TILE, exp_pass="mma")
    assert "#define MMA_M 6" in header
    from tcnumerics.engines import _cuda_source as src
    header = header.replace("#define MMA_M 6", "#define MMA_M 5")
    lib = _cuda_build._host_build(src.HOST_PRELUDE + header + src.KERNEL_SOURCE + src.HOST_LAUNCHER)
    ta, tb = _cuda_build.tables(plan)
    work = C.copy()
    ptr = lambda x: ctypes.c_void_p(x.ctypes.data)  # noqa: E731
    lib.host_gemm_tiled(ptr(A), ctypes.c_longlong(32), ptr(B), ctypes.c_longlong(32), ptr(ta), ptr(tb), ptr(work),
                        ctypes.c_int(M), ctypes.c_int(N), ctypes.c_int(0), ctypes.c_int(32), ctypes.c_int(0),
                        ctypes.c_int(0), ctypes.c_longlong(_cuda_build.smem_words(plan, _cuda_build.MMA_TILE,
                                                                                   header=header)),
                        ctypes.c_void_p(0), ctypes.c_void_p(0), ctypes.c_void_p(0))
    assert (work != want).all()


@needs_cxx
@given(data=st.data())
@settings(max_examples=3, deadline=None)
def test_exp_mma_equals_reference_on_random_custom_units(data):
    """Random FP8/FP6/FP4 fused units with groups of 16 or 32 (F, output rounding, operand formats drawn): where the
    power sum fits, the tensor-core exponent pass gives the reference's bits."""
    fa = data.draw(st.sampled_from(["e4m3", "e2m3", "e3m2", "e2m1"]))
    fb = data.draw(st.sampled_from(["e4m3", "e2m3", "e2m1"]))
    L = data.draw(st.sampled_from([16, 32]))
    F = data.draw(st.integers(8, 16))
    rounding = data.draw(st.sampled_from(["rz", "rne", "ru", "rd"]))
    spec = InstructionSpec(name=f"custom.mma.{fa}.{fb}.L{L}.F{F}.{rounding}", k=L,
                           model=UnitModel(a_format=fa, b_format=fb, c_format="fp32", d_format="fp32", group_size=L,
                                           frac_bits=F, output_rounding=rounding))
    assert _cuda_build.exp_mma(cuda._plan(spec), spec) is not None, spec.name
    rng = np.random.default_rng(L * 100 + F)
    A, B, C = _ragged_gemm(spec, rng, M=66, N=65, per_family=2)
    want = grid_dot_bits(reference.dot_bits, spec, A, B, C)
    _assert_same(cuda.host_accumulate_bits(spec, A, B, C, kernel="tiled", exp_pass="mma"), want, spec.name)


@pytest.mark.parametrize("exp_pass", ["alu", "mma"])
def test_device_source_compiles_for_hopper(exp_pass, tmp_path):
    """The device-only code (inline PTX mma, 64-bit shared loads, DPX) compiles for sm_90a with no register spill --
    the host build cannot see it.  Needs nvcc (skipped without)."""
    import shutil
    import subprocess

    from tcnumerics.engines import _cuda_source as src

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc")
    spec = get_instruction("hopper.wgmma.m64n128k32.f32.e4m3.e4m3")
    header = _cuda_build.config_header(spec, cuda._plan(spec), _cuda_build.DEVICE_TILE, exp_pass=exp_pass)
    assert ("#define EXP_MMA 1" in header) == (exp_pass == "mma")
    flags = "".join(f"#define {f} {int(n == 'gemm_tiled')}\n" for n, f in _cuda_build._KERNEL_FLAGS.items())
    path = tmp_path / "k.cu"
    path.write_text("#define USE_DPX 1\n" + flags + header + src.KERNEL_SOURCE)
    proc = subprocess.run([nvcc, "-std=c++17", "-arch=sm_90a", "-cubin", "-Xptxas", "-v", "-o",
                           str(tmp_path / "k.cubin"), str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "0 bytes spill stores" in proc.stdout + proc.stderr, proc.stderr[-2000:]


# --- the FP32 group end of the tiled kernel's FP32 FMA pass (FAST_END; host build) ---

FP8_FAST = ["hopper.wgmma.m64n8k32.f32.e4m3.e4m3", "hopper.wgmma.m64n8k32.f32.e5m2.e4m3",
            "hopper.wgmma.m64n8k32.f32.e4m3.e5m2", "hopper.wgmma.m64n8k32.f32.e5m2.e5m2"]
_EDGE_C = np.array([0x7F7FFFFF, 0xFF7FFFFF, 0x7F000000, 0x00000001, 0x80000001, 0x00800000, 0x807FFFFF,
                    0x00000000, 0x80000000, 0x3F800000, 0x4B800000, 0xCB7FFFFF], np.uint32)  # max, subnormal, +-0, ...


def test_fast_end_is_built_for_the_fp8_chains_only():
    for name in FP8_FAST:
        spec = get_instruction(name)
        header = _cuda_build.config_header(spec, cuda._plan(spec), _cuda_build.DEVICE_TILE, align="fma")
        assert "#define FAST_END 1" in header, name
        assert "FAST_END" not in _cuda_build.config_header(spec, cuda._plan(spec), _cuda_build.DEVICE_TILE,
                                                           align="int"), name
    for name in ("hopper.wgmma.m64n8k16.f32.bf16.bf16", "hopper.mma.m16n8k32.f32.e4m3.e4m3.f32"):  # FP64 / C added last
        spec = get_instruction(name)
        assert "FAST_END" not in _cuda_build.config_header(spec, cuda._plan(spec), _cuda_build.DEVICE_TILE,
                                                           align="fma"), name


@needs_cxx
@pytest.mark.parametrize("name", FP8_FAST)
def test_fast_end_equals_reference(name):
    """Every family, a chain of four instructions, C at the edges of FP32 (largest finite, subnormal, signed zeros,
    2**24 and beyond the FMA window): the FP32 end, or the general one where it steps aside, gives the reference's
    bits."""
    spec = get_instruction(name)
    rng = np.random.default_rng(SEED + 7)
    k = 4 * spec.k
    parts = [generate(spec, fam, 6, rng, k=k) for fam in families_for(spec)]
    a, b = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    c = np.concatenate([np.concatenate([p[2] for p in parts]), _EDGE_C.astype(spec.c_format.container_dtype)])
    M, N = 13, 21
    A, B = a[rng.integers(0, len(a), M)], b[rng.integers(0, len(b), N)]
    C = c[rng.integers(0, len(c), (M, N))]
    C[0, :len(_EDGE_C)] = _EDGE_C  # every edge value at least once
    want = grid_dot_bits(reference.dot_bits, spec, A, B, C)
    _assert_same(cuda.host_accumulate_bits(spec, A, B, C, kernel="tiled", align="fma"), want, f"{name} FP32 end")


@needs_cxx
@pytest.mark.parametrize("name", FP8_FAST[:2] + ["hopper.wgmma.m64n8k16.f32.bf16.bf16"])
def test_fma_pass_row_branch_equals_reference(name):
    """A warp as one thread row (tx = 32): the FMA pass routes each product by a's sign with a branch and two FMAs
    (FP32 for FP8, FP64 for BF16); same bits as the reference on every family, zeros and specials included."""
    spec = get_instruction(name)
    tile = _cuda_build.Tile(tx=32, ty=2, tm=2, tn=2)
    assert "#define TX 32" in _cuda_build.config_header(spec, cuda._plan(spec), tile, align="fma")
    rng = np.random.default_rng(SEED + 9)
    k = 3 * spec.k
    parts = [generate(spec, fam, 8, rng, k=k) for fam in families_for(spec)]
    a, b, c = (np.concatenate([p[i] for p in parts]) for i in range(3))
    M, N = 9, 70  # partial blocks in both directions (the block is 4 x 128)
    A, B = a[rng.integers(0, len(a), M)], b[rng.integers(0, len(b), N)]
    C = c[rng.integers(0, len(c), (M, N))]
    want = grid_dot_bits(reference.dot_bits, spec, A, B, C)
    _assert_same(cuda.host_accumulate_bits(spec, A, B, C, kernel="tiled", align="fma", tile=tile), want,
                 f"{name} row branch")
