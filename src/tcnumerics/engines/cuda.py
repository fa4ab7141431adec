"""The GPU engine: the fast engine's contract and bits, evaluated by CUDA kernels on NVIDIA GPUs.

``dot_bits(spec, a, b, c)``, ``gemm_bits(spec, a_rows, b_cols, c)``, ``accumulate_bits(...)``
and ``unsupported_reason(spec)`` behave exactly as in ``tcnumerics.engines.fast`` (same
arguments, same result bits).  Inputs may be numpy arrays (copied to the GPU and back), CuPy
arrays or torch CUDA tensors (used in place through ``__cuda_array_interface__`` / DLPack; the
result is of the same kind, on the same device, computed on torch's current stream).

The kernels (``_cuda_source``) are specialised on the unit at first use: the plan the fast
engine builds (operand tables, F, zero exponent, formats, roundings, mantissa cut, NaN
pattern, group schedule, C added last) becomes compile-time constants, NVRTC compiles them
through CuPy, and CuPy's disk cache keeps the binary, so any custom ``UnitModel`` /
``InstructionSpec`` runs without a rebuild by the user.  Fused units with equal groups of at
most 32 products use a register-tiled GEMM kernel; other supported plans (integer units,
unequal groups) a per-output kernel.  Entries the plans do not cover (``unsupported_reason``)
are evaluated by the CPU fast engine after a warning.  GPU memory: the operands, the
accumulator (uint32) and the result; no M*N*K temporaries.

Needs the ``[gpu]`` extra (CuPy) and an NVIDIA GPU; ``available()`` says whether both are there.

Example (skipped without a GPU):
    >>> import numpy as np
    >>> from tcnumerics.engines import cuda, fast
    >>> if cuda.available():  # doctest: +SKIP
    ...     rng = np.random.default_rng(0)
    ...     a = rng.integers(0, 1 << 16, (64, 32), dtype=np.uint16)
    ...     b = rng.integers(0, 1 << 16, (48, 32), dtype=np.uint16)
    ...     c = np.zeros((64, 48), np.uint32)
    ...     s = "hopper.wgmma.m64n8k16.f32.bf16.bf16"
    ...     assert (cuda.gemm_bits(s, a, b, c) == fast.gemm_bits(s, a, b, c)).all()
    >>> cuda.unsupported_reason("hopper.wgmma.m64n8k16.f32.bf16.bf16") is None
    True
"""

from __future__ import annotations

import dataclasses
import warnings
from functools import lru_cache

import numpy as np

from .._extras import install_hint
from ..model import InstructionSpec
from . import _cuda_build as build
from . import _cuda_fchain_build as fchain
from ._cuda_launch import _SCALAR_THREADS, OWN_KERNELS, _device_tables, _run_gemm
from ._fast_plan import Plan, build_plan, cached_planner, check_k_range

__all__ = ["dot_bits", "gemm_bits", "accumulate_bits", "unsupported_reason", "promotion_reason", "ffma_chain",
           "available"]

_DOT_THREADS = 256


def _spec(spec) -> InstructionSpec:
    from ..catalog import get_instruction

    return get_instruction(spec)


def _build(spec: InstructionSpec) -> Plan | str:
    """The fast engine's plan; block-scaled units with power-of-two scales (MX) plan their unscaled model."""
    model = spec.model
    if model.algorithm == "subgroup_scaled":  # k64 FP4: the sub-group evaluation of the kernels (SUBGROUP)
        if "none" not in (model.a_format.specials, model.b_format.specials) or spec.chunk or spec.k_order \
                or spec.a_format != model.a_format or spec.b_format != model.b_format:
            return "sub-group scaled unit with operand specials, chunks, K order or operand conversion"
        plain = model.with_(algorithm="fused", scale_block=None, scale_format=None, subgroup_size=16)
        return build.subgroup_plan(build_plan(dataclasses.replace(spec, model=plain)), spec)
    if model.algorithm == "binary":  # one-bit operands: the integer plan with AND / XOR as the "product"
        spec = dataclasses.replace(spec, model=model.with_(algorithm="integer", bit_op=None))
        return build_plan(spec)
    if model.algorithm == "scaled_fused":
        if model.scale_format.man_bits != 0:
            return f"scale format {model.scale_format.name} is not a power of two"
        if model.group_size != model.scale_block or spec.k % model.scale_block or spec.chunk or spec.k_order:
            return "block scales that do not coincide with the groups"
        spec = dataclasses.replace(spec, model=model.with_(algorithm="fused", scale_block=None, scale_format=None))
    return build_plan(spec)


_plan = cached_planner(_build)


def unsupported_reason(spec: "str | InstructionSpec") -> str | None:
    """Why ``spec`` is evaluated by the CPU fast engine instead of the GPU (None: the GPU runs it).

    >>> unsupported_reason("hopper.mma.m16n8k32.s32.s8.s8.s32") is None
    True
    >>> unsupported_reason("cdna3.mfma.f32_16x16x16_f16")   # staged sums: the CPU engines evaluate it
    "algorithm 'staged_sum' is evaluated by the reference engine"
    """
    plan = _plan(_spec(spec))
    return plan if isinstance(plan, str) else None


@lru_cache(maxsize=1)
def available() -> bool:
    """Whether CuPy is installed and sees a CUDA device."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device: the engine is unavailable
        return False


# --- arrays in and out ------------------------------------------------------------------------

def _kind(x) -> str:
    if type(x).__module__.startswith("cupy"):
        return "cupy"
    if type(x).__module__.startswith("torch"):
        return "torch" if x.is_cuda else "torch-cpu"
    return "numpy"


def _to_device(name: str, x, dtype, device_kind: str):
    """x as a C-contiguous CuPy array of ``dtype`` (unsigned container; same-width integers reinterpreted)."""
    import cupy

    if device_kind == "torch":
        x = cupy.from_dlpack(x.detach().contiguous())
    elif device_kind == "torch-cpu":
        x = cupy.asarray(x.numpy())
    elif device_kind == "numpy":
        x = cupy.asarray(np.asarray(x))
    if x.dtype.kind not in "ui":
        raise TypeError(f"{name}: expected unsigned integer bit patterns, got dtype {x.dtype}")
    if x.dtype.itemsize == np.dtype(dtype).itemsize:
        x = x.view(dtype)
    else:
        x = x.astype(dtype)
    return cupy.ascontiguousarray(x)


def _from_device(x, kind: str):
    if kind == "cupy":
        return x
    if kind == "torch":
        import torch

        return torch.from_dlpack(x)
    out = x.get()
    if kind == "torch-cpu":
        import torch

        return torch.from_numpy(out)
    return out


class _Stream:
    """Run on torch's current stream and device when the inputs are torch CUDA tensors."""

    def __init__(self, x, kind: str):
        self._ctx = []
        if kind == "torch":
            import cupy
            import torch

            dev = x.device.index if x.device.index is not None else torch.cuda.current_device()
            self._ctx = [cupy.cuda.Device(dev),
                         cupy.cuda.ExternalStream(torch.cuda.current_stream(dev).cuda_stream)]
        elif kind == "cupy":
            import cupy

            self._ctx = [cupy.cuda.Device(x.device.id)]

    def __enter__(self):
        for c in self._ctx:
            c.__enter__()
        return self

    def __exit__(self, *exc):
        for c in reversed(self._ctx):
            c.__exit__(*exc)
        return False


def _require_gpu() -> None:
    if not available():
        raise RuntimeError(f"engine='cuda': no CUDA device visible to CuPy ({install_hint('gpu')} on a machine "
                           "with an NVIDIA GPU, or use engine='fast')")


def _fallback(spec: InstructionSpec, reason: str):
    from . import fast

    warnings.warn(f"engine='cuda': {spec.name} runs on the CPU fast engine ({reason})", RuntimeWarning,
                  stacklevel=3)
    return fast


def _host(x):
    if type(x).__module__.startswith("cupy"):
        return x.get()
    if type(x).__module__.startswith("torch"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


# --- the contract -----------------------------------------------------------------------------

def dot_bits(spec: "str | InstructionSpec", a, b, c, *, scale_a=None, scale_b=None):
    """Result bits of [N, K'] operand bits and [N] accumulator bits (K' a multiple of spec.k).

    Same contract and bits as ``reference.dot_bits``; instructions chain over K' in order.
    Block-scaled (MX) units take ``scale_a``, ``scale_b``: [N, K'/scale_block] scale bits
    (None: unit scales).
    """
    spec = _spec(spec)
    plan = _plan(spec)
    kind = _kind(a)
    if isinstance(plan, str):
        if spec.model.is_block_scaled:
            from . import reference

            _fallback(spec, plan)
            out = reference.dot_bits(spec, _host(a), _host(b), _host(c),
                                     scale_a=None if scale_a is None else _host(scale_a),
                                     scale_b=None if scale_b is None else _host(scale_b))
        else:
            out = _fallback(spec, plan).dot_bits(spec, _host(a), _host(b), _host(c))
        return _from_host(out, kind, a)
    _require_gpu()
    if np.ndim(a) != 2 or tuple(a.shape) != tuple(b.shape) or tuple(c.shape) != (a.shape[0],):
        raise ValueError(f"a, b, c: expected [N, K], [N, K], [N]; got {tuple(a.shape)}, {tuple(b.shape)}, "
                         f"{tuple(c.shape)}")
    n, k = int(a.shape[0]), int(a.shape[1])
    if k % plan.k:
        raise ValueError(f"a: K={k} is not a multiple of {spec.name}'s K={plan.k}")
    import cupy

    with _Stream(a, kind):
        da = _to_device("a", a, spec.a_format.container_dtype, kind)
        db = _to_device("b", b, spec.b_format.container_dtype, _kind(b))
        dc = _to_device("c", c, spec.c_format.container_dtype, _kind(c))
        out = cupy.empty(n, spec.d_format.container_dtype)
        if n:
            module = build.device_module(build.config_header(spec, plan, build.DEVICE_TILE), "dot_kernel")
            ta, tb = _device_tables(plan, cupy.cuda.Device().id)
            scales = _device_scales(spec, ((scale_a, n), (scale_b, n)), k)
            module.get_function("dot_kernel")(((n + _DOT_THREADS - 1) // _DOT_THREADS,), (_DOT_THREADS,),
                                              (da, db, dc, out, ta, tb, np.int64(n), np.int32(k)) + scales)
        return _from_device(out, kind)


def _scale_bits(spec: InstructionSpec, scale, rows: int, k: int, name: str) -> np.ndarray:
    """[rows, k / scale_block] uint8 scale codes of a block-scaled unit (unit scales for None)."""
    from .reference import unit_scale_bits

    model = spec.model
    shape = (rows, k // model.scale_block)
    if scale is None:
        return np.full(shape, unit_scale_bits(model), np.uint8)
    scale = np.asarray(_host(scale))
    if scale.shape != shape or scale.dtype.kind not in "ui":
        raise ValueError(f"{name}: expected {shape} integer scale bits (one per {model.scale_block} K elements), "
                         f"got {scale.dtype} {scale.shape}")
    return np.ascontiguousarray(scale.astype(np.uint8))


def _device_scales(spec: InstructionSpec, pairs, k: int) -> tuple:
    """Kernel arguments (scale codes of A, of B, the shift table) of a block-scaled unit; () otherwise."""
    table = build.scale_table(spec)
    if table is None:
        if any(scale is not None for scale, _ in pairs):
            raise ValueError(f"scale_a, scale_b: {spec.name} is not a block-scaled instruction")
        return ()
    import cupy

    (sa, ra), (sb, rb) = pairs
    return (cupy.asarray(_scale_bits(spec, sa, ra, k, "scale_a")), cupy.asarray(_scale_bits(spec, sb, rb, k, "scale_b")),
            cupy.asarray(table))


def _from_host(out: np.ndarray, kind: str, like):
    if kind == "numpy":
        return out
    if kind == "torch-cpu":
        import torch

        return torch.from_numpy(out)
    import cupy

    with _Stream(like, kind):
        return _from_device(cupy.asarray(out), kind)


def gemm_bits(spec: "str | InstructionSpec", a_rows, b_cols, c, *, scale_a=None, scale_b=None):
    """All M x N dot products ``d[m, n] = dot(a_rows[m], b_cols[n]) + c[m, n]`` as result bits.

    a_rows: [M, K] operand bits, b_cols: [N, K] (B transposed), c: [M, N] accumulator bits;
    exactly ``fast.gemm_bits``'s result.
    """
    spec = _spec(spec)
    if np.ndim(a_rows) != 2:
        raise ValueError(f"a_rows: expected a 2-D [M, K] array, got shape {tuple(a_rows.shape)}")
    if a_rows.shape[1] == 0 or a_rows.shape[1] % spec.k:
        raise ValueError(f"a_rows: K={a_rows.shape[1]} is not a positive multiple of {spec.name}'s K={spec.k}")
    return accumulate_bits(spec, a_rows, b_cols, c, 0, int(a_rows.shape[1]), scale_a=scale_a, scale_b=scale_b)


def accumulate_bits(spec: "str | InstructionSpec", a_rows, b_cols, acc, k_start: int = 0, k_stop: int | None = None,
                    *, scale_a=None, scale_b=None, kernel: str = "auto", promote_every: int | None = None,
                    promote_from_acc: bool = False):
    """Continue accumulators ``acc`` [M, N] over K columns ``k_start:k_stop`` (``fast.accumulate_bits``).

    Block-scaled (MX) units: ``scale_a`` [M, K/scale_block], ``scale_b`` [N, K/scale_block] (None: unit).
    ``kernel``: "auto" (``gemm_fchain`` where ``_cuda_fchain_build.fchain_reason`` allows -- the FP8, BF16 and
    FP16 chains --, else the tiled kernel where ``tiled_reason`` allows), or "scalar" (the per-output kernel, for
    cross-checks).  ``promote_every=P``: FP32 promotion inside the kernel -- blocks of P
    columns from ``k_start``, each chained from zero and added (IEEE FP32, RNE) into the main
    accumulator, which starts as ``acc`` if ``promote_from_acc``, else as the first block's result:
    the loop of ``tcnumerics.gemm`` in one launch (``promotion_reason`` says where it is offered)."""
    if kernel not in ("auto", "scalar"):
        raise ValueError(f"kernel: expected 'auto' or 'scalar', got {kernel!r}")
    spec = _spec(spec)
    plan = _plan(spec)
    kind = _kind(a_rows)
    if promote_every is not None:
        _check_promote(spec, plan, promote_every)
    if isinstance(plan, str) and spec.model.is_block_scaled:
        raise ValueError(f"engine='cuda': {spec.name}: {plan}; block-scaled GEMMs of this unit run through "
                         "tcnumerics.blockscale on the CPU")
    if isinstance(plan, str):
        out = _fallback(spec, plan).accumulate_bits(spec, _host(a_rows), _host(b_cols), _host(acc), k_start, k_stop)
        return _from_host(out, kind, a_rows)
    _require_gpu()
    if np.ndim(a_rows) != 2 or np.ndim(b_cols) != 2:
        raise ValueError(f"a_rows, b_cols: expected 2-D [M, K] and [N, K], got {tuple(a_rows.shape)} and "
                         f"{tuple(b_cols.shape)}")
    M, K = (int(x) for x in a_rows.shape)
    N = int(b_cols.shape[0])
    if int(b_cols.shape[1]) != K:
        raise ValueError(f"b_cols: expected K={K} columns like a_rows, got shape {tuple(b_cols.shape)}")
    if tuple(acc.shape) != (M, N):
        raise ValueError(f"c: expected shape {(M, N)}, got {tuple(acc.shape)}")
    k_stop = K if k_stop is None else k_stop
    _check_range(spec, K, k_start, k_stop)
    import cupy

    with _Stream(a_rows, kind):
        da = _to_device("a_rows", a_rows, spec.a_format.container_dtype, kind)
        db = _to_device("b_cols", b_cols, spec.b_format.container_dtype, _kind(b_cols))
        work = _to_device("c", acc, spec.c_format.container_dtype, _kind(acc)).astype(cupy.uint32)
        if k_stop > k_start and M and N:
            _run_gemm(spec, plan, da, db, work, k_start, k_stop, _device_scales(spec, ((scale_a, M), (scale_b, N)), K),
                      tiled=kernel == "auto", promote=(promote_every or 0, int(bool(promote_from_acc))))
        return _from_device(work.astype(spec.d_format.container_dtype), kind)


def promotion_reason(spec: "str | InstructionSpec") -> str | None:
    """Why ``accumulate_bits(..., promote_every=P)`` is not offered for ``spec`` (None: it is)."""
    spec = _spec(spec)
    plan = _plan(spec)
    if isinstance(plan, str):
        return plan
    return build.promotion_reason(spec, plan)


def _check_promote(spec: InstructionSpec, plan, promote_every) -> None:
    reason = promotion_reason(spec)
    if reason is not None:
        raise ValueError(f"promote_every: the GPU kernels do not promote {spec.name}: {reason}")
    if isinstance(promote_every, bool) or not isinstance(promote_every, (int, np.integer)) or promote_every < spec.k \
            or promote_every % spec.k:
        raise ValueError(f"promote_every: must be a positive multiple of {spec.name}'s K={spec.k}, "
                         f"got {promote_every!r}")


def ffma_chain(a, b_t, cols=None):
    """FP32 FFMA chains on the GPU: ``out[m, n]`` is ``acc = fma(a[m, k], b_t[n, k], acc)`` over the K columns
    ``cols`` in order (default: all), from +0, each FMA IEEE RNE with subnormals -- one split-K slice of cuBLAS's
    SIMT / xmma FP32 kernels.  ``a`` [M, K] and ``b_t`` [N, K]: float32 CuPy arrays; the result is float32 [M, N]
    on the same device (numpy inputs: through the host build, ``host_ffma_chain``)."""
    if isinstance(a, np.ndarray):
        return host_ffma_chain(a, b_t, cols)
    import cupy

    _require_gpu()
    a, b_t = cupy.ascontiguousarray(a, np.float32), cupy.ascontiguousarray(b_t, np.float32)
    (M, K), N = a.shape, b_t.shape[0]
    cols = cupy.arange(K, dtype=np.int64) if cols is None else cupy.ascontiguousarray(cols, np.int64)
    out = cupy.empty((M, N), np.float32)
    if M and N:
        build.ffma_device_kernel()(((M * N + _SCALAR_THREADS - 1) // _SCALAR_THREADS,), (_SCALAR_THREADS,),
                                   (a, np.int64(K), b_t, np.int64(K), cols, np.int32(cols.size), out, np.int32(M),
                                    np.int32(N)))
    return out


def host_ffma_chain(a: np.ndarray, b_t: np.ndarray, cols=None) -> np.ndarray:
    """``ffma_chain`` through the host build of the same kernel source (the CI check of its logic; numpy only)."""
    import ctypes

    a = np.ascontiguousarray(a, np.float32)
    b_t = np.ascontiguousarray(b_t, np.float32)
    (M, K), N = a.shape, b_t.shape[0]
    cols = np.arange(K, dtype=np.int64) if cols is None else np.ascontiguousarray(cols, np.int64)
    out = np.empty((M, N), np.float32)
    if M and N:
        build.ffma_host_library().host_ffma_chain(
            ctypes.c_void_p(_ptr(a)), ctypes.c_longlong(K), ctypes.c_void_p(_ptr(b_t)), ctypes.c_longlong(K),
            ctypes.c_void_p(_ptr(cols)), ctypes.c_int(cols.size), ctypes.c_void_p(_ptr(out)), ctypes.c_int(M),
            ctypes.c_int(N))
    return out


_check_range = check_k_range


# --- the same kernels built for the CPU (tests) ---------------------------------------------------

def _ptr(x: np.ndarray) -> int:
    return x.ctypes.data


def _host_scales(spec: InstructionSpec, sa, ra: int, sb, rb: int, k: int) -> tuple[list, list]:
    """ctypes arguments of the scale codes and shift table (null pointers for unscaled units), and the arrays."""
    import ctypes

    table = build.scale_table(spec)
    if table is None:
        return [ctypes.c_void_p(0)] * 3, []
    arrays = [_scale_bits(spec, sa, ra, k, "scale_a"), _scale_bits(spec, sb, rb, k, "scale_b"), table]
    return [ctypes.c_void_p(_ptr(x)) for x in arrays], arrays


def host_dot_bits(spec: "str | InstructionSpec", a: np.ndarray, b: np.ndarray, c: np.ndarray, *, scale_a=None,
                  scale_b=None) -> np.ndarray:
    """``dot_bits`` through the host build of the kernels (the CI check of their logic; numpy only)."""
    import ctypes

    spec = _spec(spec)
    plan = _plan(spec)
    if isinstance(plan, str):
        raise ValueError(f"{spec.name}: {plan}")
    a = np.ascontiguousarray(np.asarray(a).astype(spec.a_format.container_dtype))
    b = np.ascontiguousarray(np.asarray(b).astype(spec.b_format.container_dtype))
    c = np.ascontiguousarray(np.asarray(c).astype(spec.c_format.container_dtype))
    out = np.empty(a.shape[0], spec.d_format.container_dtype)
    lib = build.host_library(build.config_header(spec, plan, build.HOST_TILE))
    ta, tb = build.tables(plan)
    scale_args, keep = _host_scales(spec, scale_a, a.shape[0], scale_b, a.shape[0], a.shape[1])
    lib.host_dot(ctypes.c_void_p(_ptr(a)), ctypes.c_void_p(_ptr(b)), ctypes.c_void_p(_ptr(c)),
                 ctypes.c_void_p(_ptr(out)), ctypes.c_void_p(_ptr(ta)), ctypes.c_void_p(_ptr(tb)),
                 ctypes.c_longlong(a.shape[0]), ctypes.c_int(a.shape[1]), *scale_args)
    del keep  # the scale arrays live until the call returns
    return out


def host_accumulate_bits(spec: "str | InstructionSpec", a_rows: np.ndarray, b_cols: np.ndarray, acc: np.ndarray,
                         k_start: int = 0, k_stop: int | None = None, kernel: str = "auto", *, scale_a=None,
                         scale_b=None, promote_every: int | None = None, promote_from_acc: bool = False,
                         align: str = "auto", exp_pass: str = "alu", tile: "build.Tile | None" = None) -> np.ndarray:
    """``accumulate_bits`` through the host build (``kernel``: "tiled", "scalar", "fchain" (``gemm_fchain``),
    "tcalign" (``gemm_tcalign``), "native" (``gemm_native``; both with the mma emulated on its measured unit model)
    or "auto"; ``align``: the tiled
    kernel's truncating pass, "auto", "fma" or "int" as ``TCNUMERICS_CUDA_ALIGN``; ``exp_pass``: its exponent pass,
    "alu" or "mma" as ``TCNUMERICS_CUDA_EXP`` -- "mma" builds the device tile, 256 host threads per block; ``tile``:
    the tiled kernel's shape, default the small host tile -- tx = 32 builds the FMA pass's warp-row branch)."""
    import ctypes

    spec = _spec(spec)
    plan = _plan(spec)
    if isinstance(plan, str):
        raise ValueError(f"{spec.name}: {plan}")
    if promote_every is not None:
        _check_promote(spec, plan, promote_every)
    promote = promote_every is not None
    a = np.ascontiguousarray(np.asarray(a_rows).astype(spec.a_format.container_dtype))
    b = np.ascontiguousarray(np.asarray(b_cols).astype(spec.b_format.container_dtype))
    work = np.ascontiguousarray(np.asarray(acc).astype(spec.c_format.container_dtype).astype(np.uint32))
    k_stop = a.shape[1] if k_stop is None else k_stop
    _check_range(spec, a.shape[1], k_start, k_stop)
    own = OWN_KERNELS.get(kernel)
    if own is not None:
        reason = own.reason(plan, spec)
        if reason is not None or promote:
            raise ValueError(f"{spec.name}: gemm_{kernel} does not run it: {reason or 'promotion'}")
        tile = own.tile
    tile = tile or (build.MMA_TILE if exp_pass == "mma" else build.HOST_TILE)
    tiled = build.tiled_reason(plan) is None if kernel == "auto" else kernel == "tiled" or own is not None
    header = own.header(spec, plan) if own is not None else \
        build.config_header(spec, plan, tile, promote=promote and tiled, align=align, exp_pass=exp_pass)
    lib = build.host_library(header)
    ta, tb = build.tables(plan)
    M, N = work.shape
    args = [ctypes.c_void_p(_ptr(a)), ctypes.c_longlong(a.shape[1]), ctypes.c_void_p(_ptr(b)),
            ctypes.c_longlong(b.shape[1]), ctypes.c_void_p(_ptr(ta)), ctypes.c_void_p(_ptr(tb)),
            ctypes.c_void_p(_ptr(work)), ctypes.c_int(M), ctypes.c_int(N), ctypes.c_int(k_start), ctypes.c_int(k_stop),
            ctypes.c_int(promote_every or 0), ctypes.c_int(int(bool(promote_from_acc)))]
    scale_args, keep = _host_scales(spec, scale_a, M, scale_b, N, a.shape[1])
    if k_stop > k_start and M and N:
        if own is not None:
            run = getattr(lib, f"host_gemm_{kernel}")
            if run(*args[:-2], ctypes.c_longlong(own.smem_words(plan, spec))) == 2:
                raise RuntimeError(f"{spec.name}: gemm_{kernel} computed with a subnormal FP32 value")
        elif tiled:
            words = build.smem_words(plan, tile, promote=promote, header=header)
            if lib.host_gemm_tiled(*args, ctypes.c_longlong(words), *scale_args) == 2:
                raise RuntimeError(f"{spec.name}: the tiled kernel computed with a subnormal FP32 value, which the "
                                   "device (compiled with -ftz=true) would read as zero: its bits could differ there")
        else:
            lib.host_gemm_scalar(*args, *scale_args)
    del keep
    return work.astype(spec.d_format.container_dtype)
