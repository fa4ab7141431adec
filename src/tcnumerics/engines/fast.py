"""The fast engine: compiled, integer-only evaluation, bit-identical to the reference engine.

``dot_bits(spec, a, b, c)`` has the reference engine's contract (independent vectors);
``gemm_bits(spec, a_rows, b_cols, c)`` evaluates all M x N dot products of a GEMM without
forming M*N*K temporaries: operands are decoded once per K panel through per-format lookup
tables (the working set is bounded by ``PANEL_BYTES``), and numba kernels, parallel over
output rows, align, truncate, sum and round.  Fused units whose sums fit float64 exactly run
vectorised (``_fast_f64``: float64 lanes, in GEMMs float32 / int32 lanes for groups within
a window of exponents, the scalar integer kernel only for lanes with inf/NaN or results
outside the output's normal range); the others use the integer kernels
of ``_fast_numba``.  ``accumulate_bits`` continues an accumulator over a K
range, for split-K and promotion schemes built on top.

Fork and thread safety: calls may come from many threads at once, and from processes forked
after the parent used the engine (DataLoader workers, process pools): such a child runs serial
twins of the parallel kernels when numba's GNU OpenMP pool cannot follow it across the fork
(``kernel_threads()`` is then 1).  Nothing needs to be called for this.

Instructions whose model or structure the kernels do not cover (``unsupported_reason``
says why) are handed to the reference engine automatically.  Without numba the same
plans run on a blocked pure-numpy backend (``_fast_numpy``) with the same bits.

Example:
    >>> import numpy as np
    >>> from tcnumerics.engines import fast, reference
    >>> spec = "hopper.wgmma.m64n8k16.f32.bf16.bf16"
    >>> rng = np.random.default_rng(0)
    >>> a = rng.integers(0, 1 << 16, (3, 32), dtype=np.uint16)
    >>> b = rng.integers(0, 1 << 16, (5, 32), dtype=np.uint16)
    >>> c = rng.integers(0, 1 << 32, (3, 5), dtype=np.uint32)
    >>> d = fast.gemm_bits(spec, a, b, c)
    >>> d.shape, d.dtype
    ((3, 5), dtype('uint32'))
    >>> pairs = fast.dot_bits(spec, np.repeat(a, 5, axis=0), np.tile(b, (3, 1)), c.ravel())
    >>> bool(np.array_equal(d.ravel(), pairs))
    True
    >>> fast.unsupported_reason(spec) is None
    True
"""

from __future__ import annotations

import os

import numpy as np

from ..model import InstructionSpec
from . import reference
from ._fast_plan import Plan, build_plan, cached_planner, check_k_range

__all__ = ["dot_bits", "gemm_bits", "accumulate_bits", "unsupported_reason", "backend", "kernel_threads",
           "PANEL_BYTES"]

PANEL_BYTES = 64 << 20  # decoded operand bytes per K panel of a GEMM (the bounded working set)

try:  # numba is a declared dependency, but the engine must work (slower) without it
    if os.environ.get("TCNUMERICS_FAST_BACKEND", "").lower() == "numpy":
        raise ImportError("numpy backend requested")
    from . import _fast_numba as _kernels
    from ._fast_dot import dot_fused_f64
    from ._fast_f64 import BLOCK_N, gemm_fused_f64
    from ._fast_panels import gemm_panels
except ImportError:  # pragma: no cover - exercised by the numpy-backend tests through _select
    from . import _fast_numpy as _kernels

    dot_fused_f64 = gemm_fused_f64 = gemm_panels = None
    BLOCK_N = 128


def backend() -> str:
    """``"numba"`` or ``"numpy"``: which kernels this engine runs."""
    return "numba" if _kernels.__name__.endswith("_fast_numba") else "numpy"


def kernel_threads() -> int:
    """Threads one call of this engine's kernels uses in this process: numba's thread count, or 1
    for the numpy backend and in a child forked after its parent started numba's OpenMP threads.

    >>> kernel_threads() >= 1
    True
    """
    return _kernels.threads() if backend() == "numba" else 1


def _spec(spec) -> InstructionSpec:
    from ..catalog import get_instruction

    return get_instruction(spec)


_plan = cached_planner(build_plan)


def unsupported_reason(spec: "str | InstructionSpec") -> str | None:
    """Why ``spec`` is evaluated by the reference engine instead (None: the fast kernels run it).

    >>> unsupported_reason("hopper.mma.m16n8k32.s32.s8.s8.s32") is None
    True
    """
    plan = _plan(_spec(spec))
    return plan if isinstance(plan, str) else None


def _bits(name: str, x, fmt) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "ui":
        raise TypeError(f"{name}: expected unsigned integer bit patterns of {fmt.name}, got dtype {arr.dtype}")
    return np.ascontiguousarray(arr.astype(fmt.container_dtype, copy=False))


def _byte_view(x: np.ndarray) -> np.ndarray:
    """[N, K] containers as [N, K * itemsize] little-endian bytes: one compiled kernel for all widths."""
    x = np.ascontiguousarray(x.astype(x.dtype.newbyteorder("<"), copy=False))
    return x.view(np.uint8).reshape(x.shape[0], -1)


def _check_k(name: str, k_total: int, k: int, spec: InstructionSpec) -> None:
    if k_total % k:
        raise ValueError(f"{name}: K={k_total} is not a multiple of {spec.name}'s K={k}")


def dot_bits(spec: "str | InstructionSpec", a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Result bits of [N, K'] operand bits and [N] accumulator bits (K' a multiple of spec.k).

    Same contract and bits as ``reference.dot_bits``; instructions chain over K' in order.
    """
    spec = _spec(spec)
    plan = _plan(spec)
    if isinstance(plan, str):
        return reference.dot_bits(spec, a, b, c)
    a = _bits("a", a, spec.a_format)
    b = _bits("b", b, spec.b_format)
    c = _bits("c", c, spec.c_format)
    if a.ndim != 2 or a.shape != b.shape or c.shape != (a.shape[0],):
        raise ValueError(f"a, b, c: expected [N, K], [N, K], [N]; got {a.shape}, {b.shape}, {c.shape}")
    _check_k("a", a.shape[1], plan.k, spec)
    out = np.empty(a.shape[0], np.int64)
    a_raw, b_raw = _byte_view(a), _byte_view(b)
    a_bytes, b_bytes = a.dtype.itemsize, b.dtype.itemsize
    c64 = c.astype(np.int64)
    if plan.kind == "integer":
        _kernels.dot_integer(a_raw, a_bytes, b_raw, b_bytes, c64, plan.perm, plan.group_lengths, plan.a_sig,
                             plan.a_shift, plan.b_sig, plan.b_shift, plan.c_params, plan.d_params, plan.saturate, out)
    elif gemm_fused_f64 is not None and plan.f64_reason is None:
        dot_fused_f64(a_raw, a_bytes, b_raw, b_bytes, c64, plan.perm, plan.group_lengths, plan.a_val,
                           plan.a_expf, plan.a_shift, plan.b_val, plan.b_expf, plan.b_shift, plan.d_params,
                           plan.out_params, plan.frac_bits, plan.e_zero, plan.lshift_ab, plan.rshift_ab,
                           plan.lshift_d, plan.rshift_d, plan.rounding, plan.overflow, plan.nan_bits, plan.a_man,
                           plan.b_man, spec.d_format.name == "fp32", plan.ieee_add, plan.add_rounding, out)
    else:
        _kernels.dot_fused(a_raw, a_bytes, b_raw, b_bytes, c64, plan.perm, plan.group_lengths, plan.a_sig,
                           plan.a_exp, plan.a_shift, plan.b_sig, plan.b_exp, plan.b_shift, plan.c_params,
                           plan.d_params, plan.out_params, plan.frac_bits, plan.e_zero, plan.lshift_ab,
                           plan.rshift_ab, plan.lshift_c, plan.rshift_c, plan.lshift_d, plan.rshift_d, plan.rounding,
                           plan.overflow, plan.nan_bits, plan.ieee_add, plan.add_rounding, out)
    return out.astype(plan.d_dtype)


def gemm_bits(spec: "str | InstructionSpec", a_rows: np.ndarray, b_cols: np.ndarray, c: np.ndarray) -> np.ndarray:
    """All M x N dot products ``d[m, n] = dot(a_rows[m], b_cols[n]) + c[m, n]`` as result bits.

    Args:
        spec: a catalog name or InstructionSpec.
        a_rows: [M, K] operand bits of A (rows of A), K a multiple of spec.k.
        b_cols: [N, K] operand bits of B (columns of B, i.e. B transposed).
        c: [M, N] accumulator bits in spec.c_format.
    Returns:
        [M, N] bits in the output format's container dtype: for each (m, n) exactly what
        ``reference.dot_bits(spec, a_rows[[m]], b_cols[[n]], c[[m], n])`` returns.

    Memory: the operands, c, the output (and a uint32 working copy when the output is
    narrower) plus at most about PANEL_BYTES of decoded operands.
    """
    spec = _spec(spec)
    a_rows = np.asarray(a_rows)
    if a_rows.ndim != 2:
        raise ValueError(f"a_rows: expected a 2-D [M, K] array, got shape {a_rows.shape}")
    if a_rows.shape[1] == 0 or a_rows.shape[1] % spec.k:
        raise ValueError(f"a_rows: K={a_rows.shape[1]} is not a positive multiple of {spec.name}'s K={spec.k}")
    return accumulate_bits(spec, a_rows, b_cols, c, 0, a_rows.shape[1])


def accumulate_bits(spec: "str | InstructionSpec", a_rows: np.ndarray, b_cols: np.ndarray, acc: np.ndarray,
                    k_start: int = 0, k_stop: int | None = None) -> np.ndarray:
    """Continue accumulators ``acc`` [M, N] over K columns ``k_start:k_stop`` of a_rows / b_cols.

    The chain of instructions over that range starts from ``acc`` (bits in spec.c_format)
    exactly as ``gemm_bits`` starts from c; ``k_start`` and ``k_stop`` must be multiples of
    spec.k.  ``gemm_bits(s, a, b, c)`` equals ``accumulate_bits(s, a, b, accumulate_bits(s, a,
    b, c, 0, k1), k1, K)`` for any instruction boundary k1 when C and D share a format.

    >>> import numpy as np
    >>> a = np.full((2, 32), 0x3C00, np.uint16); c = np.zeros((2, 2), np.uint32)   # fp16 ones
    >>> s = "hopper.wgmma.m64n8k16.f32.f16.f16"
    >>> half = accumulate_bits(s, a, a, c, 0, 16)
    >>> bool((accumulate_bits(s, a, a, half, 16, 32) == gemm_bits(s, a, a, c)).all())
    True
    """
    spec = _spec(spec)
    a_rows = _bits("a_rows", a_rows, spec.a_format)
    b_cols = _bits("b_cols", b_cols, spec.b_format)
    acc = np.asarray(acc)
    if a_rows.ndim != 2 or b_cols.ndim != 2:
        raise ValueError(f"a_rows, b_cols: expected 2-D [M, K] and [N, K], got {a_rows.shape} and {b_cols.shape}")
    M, K = a_rows.shape
    N = b_cols.shape[0]
    if b_cols.shape[1] != K:
        raise ValueError(f"b_cols: expected K={K} columns like a_rows, got shape {b_cols.shape}")
    if acc.shape != (M, N):
        raise ValueError(f"c: expected shape {(M, N)}, got {acc.shape}")
    acc = _bits("c", acc, spec.c_format)
    k_stop = K if k_stop is None else k_stop
    check_k_range(spec, K, k_start, k_stop)
    d_dtype = spec.d_format.container_dtype
    if k_stop == k_start:
        return acc.astype(d_dtype)
    plan = _plan(spec)
    if isinstance(plan, str):
        return _reference_grid(spec, a_rows[:, k_start:k_stop], b_cols[:, k_start:k_stop], acc)
    work = acc.astype(np.uint32)  # accumulator bits of any catalogued width, updated in place
    k = plan.k
    panel = max(k, (PANEL_BYTES // (5 * (M + N) * k)) * k)
    G = len(plan.group_lengths)
    starts = np.concatenate([[0], np.cumsum(plan.group_lengths)[:-1]]).astype(np.int64)
    vector = gemm_fused_f64 is not None and plan.kind == "fused" and plan.f64_reason is None
    if vector:  # decoded panels: float64 value + float32 exponent per element, B padded to blocks
        # at most 512 K columns: one block of B (512 x BLOCK_N x 14 bytes; 6 on the int32 route) stays in
        # L2 across a row tile; 22 bytes per decoded element in all
        panel = max(k, (min(PANEL_BYTES // (22 * (M + N + BLOCK_N)), 512) // k) * k)
        a_raw, b_raw = _byte_view(a_rows), _byte_view(b_cols)
    for p0 in range(k_start, k_stop, panel):
        n_inst = (min(k_stop, p0 + panel) - p0) // k
        cols = (p0 + np.arange(n_inst)[:, None] * k + plan.perm[None, :]).ravel()
        g_starts = (np.arange(n_inst)[:, None] * k + starts[None, :]).ravel()
        g_lengths = np.tile(plan.group_lengths, n_inst)
        if vector:
            _f64_panel(plan, a_raw, a_rows.dtype.itemsize, b_raw, b_cols.dtype.itemsize, cols, work, n_inst,
                       g_starts, g_lengths, spec)
            continue
        a_idx = a_rows[:, cols] >> plan.a_shift if plan.a_shift else a_rows[:, cols]
        b_idx = b_cols[:, cols] >> plan.b_shift if plan.b_shift else b_cols[:, cols]
        if plan.kind == "integer":
            _kernels.gemm_integer_panel(plan.a_sig[a_idx], np.ascontiguousarray(plan.b_sig[b_idx].T), work,
                                        plan.group_lengths, n_inst, plan.c_params, plan.d_params, plan.saturate)
            continue
        a_exp = plan.a_exp[a_idx]
        b_exp = plan.b_exp[b_idx]
        a_flag = np.empty((M, n_inst * G), np.int64)
        b_flag = np.empty((N, n_inst * G), np.int64)
        _kernels.group_flags(a_exp, g_starts, g_lengths, a_flag)
        _kernels.group_flags(b_exp, g_starts, g_lengths, b_flag)
        _kernels.gemm_fused_panel(plan.a_sig[a_idx], a_exp, a_flag, np.ascontiguousarray(plan.b_sig[b_idx].T),
                                  np.ascontiguousarray(b_exp.T), np.ascontiguousarray(b_flag.T), work,
                                  plan.group_lengths, n_inst, plan.c_params, plan.d_params, plan.out_params,
                                  plan.frac_bits, plan.e_zero, plan.lshift_ab, plan.rshift_ab, plan.lshift_c,
                                  plan.rshift_c, plan.lshift_d, plan.rshift_d, plan.rounding, plan.overflow,
                                  plan.nan_bits, plan.ieee_add, plan.add_rounding)
    return work.astype(d_dtype)


def _f64_panel(plan: Plan, a_raw: np.ndarray, a_bytes: int, b_raw: np.ndarray, b_bytes: int, cols: np.ndarray,
               work: np.ndarray, n_inst: int, g_starts: np.ndarray, g_lengths: np.ndarray,
               spec: InstructionSpec) -> None:
    """One K panel through the vectorised kernel (``_fast_f64``): operands decoded in parallel
    into float64 values and float32 exponents, B in column blocks of BLOCK_N, and (where the
    plan has an int32 sum route) float32 operands relative to their group's largest exponent."""
    M, N = work.shape
    kp, G, width = len(cols), len(g_starts), BLOCK_N
    blocks = -(-N // width)
    a_val, a_exp, a_flag = np.empty((M, kp)), np.empty((M, kp), np.float32), np.empty((M, G), np.int64)
    b_val, b_exp = np.empty((blocks, kp, width)), np.empty((blocks, kp, width), np.float32)
    b_flag = np.empty((blocks, G, width), np.int8)
    window = plan.sum32_window
    kp32, g32 = (kp, G) if window else (0, 0)  # the int32 route's panels (empty where the plan has none)
    a32, a_off = np.empty((M, kp32), np.float32), np.empty((M, g32), np.float32)
    b32, b_off = np.empty((blocks, kp32, width), np.float32), np.empty((blocks, g32, width), np.float32)
    b_any = np.zeros((blocks, G), np.int64)
    a_e16, b_e16 = np.empty((M, kp), np.int16), np.empty((blocks, kp, width), np.int16)
    gemm_panels(a_raw, a_bytes, b_raw, b_bytes, cols, plan.a_val, plan.a_expf, plan.a_shift, plan.b_val,
                     plan.b_expf, plan.b_shift, g_starts, g_lengths, a_val, a_exp, a_flag, b_val, b_exp, b_flag,
                     window, a32, a_off, b32, b_off, b_any, a_e16, b_e16)
    gemm_fused_f64(a_val, a_exp, a_flag, b_val, b_exp, b_flag, work, plan.group_lengths, n_inst,
                        plan.d_params, plan.out_params, plan.frac_bits, plan.e_zero, plan.lshift_ab, plan.rshift_ab,
                        plan.lshift_d, plan.rshift_d, plan.rounding, plan.overflow, plan.nan_bits, plan.a_man,
                        plan.b_man, spec.d_format.name == "fp32", plan.ieee_add, plan.add_rounding,
                        a32, a_off, b32, b_off, b_any, window, a_e16, b_e16)


def _reference_grid(spec: InstructionSpec, a_rows: np.ndarray, b_cols: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The reference engine over the grid, a bounded block of rows at a time."""
    from .grid import grid_dot_bits

    return grid_dot_bits(reference.dot_bits, spec, a_rows, b_cols, c)
