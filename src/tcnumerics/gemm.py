"""GEMM-level composition: whole matrices through the instruction chains real kernels run.

A library GEMM is more than one chain of instructions over K.  This module composes the
catalogued instructions into the structures measured on real kernels (NUMERICS.md section 3
and ``docs/gemm.md``):

* **chain** -- the accumulator starts at C (or +0) and each instruction's D is the next one's C;
* **promotion** (``promote_every=P``) -- every P K-elements are chained from a zero
  accumulator and the partial result is added into an FP32 main accumulator with one
  round-to-nearest-even addition (cuBLASLt's FP8 "slow accumulation", DeepSeek-V3's N_C);
* **split-K** (``split_k``) -- K slices are computed independently (each with its own chain
  or promotion) and their FP32 results are summed in slice order, each addition RNE, as
  cuBLASLt's ``splitKreduce_kernel`` does;
* **scales** -- per-tensor and row-wise scales multiply the FP32 result in the epilogue;
  block-wise scales (DeepSeek-V3 1x128 for A, 128x128 for B) multiply each promoted partial
  before it is added;
* **epilogue** -- an optional C added to the FP32 result (``c_role="epilogue"``, as
  ``torch.addmm``), then one conversion to ``out_format`` with ``out_rounding``.

K need not be a multiple of the instruction's K: the tail is padded with zeros, as the
kernels' out-of-bounds tile loads do.

Example:
    >>> import numpy as np, ml_dtypes
    >>> from tcnumerics.gemm import gemm
    >>> A = np.ones((2, 16), ml_dtypes.bfloat16); B = np.ones((16, 3), ml_dtypes.bfloat16)
    >>> gemm(A, B, instruction="hopper.wgmma.m64n8k16.f32.bf16.bf16", out_format="bf16").dtype
    dtype(bfloat16)
"""

from __future__ import annotations

from typing import Literal, Sequence

import numpy as np

from .api import Instruction, _operand_bits
from .arrays import DeviceValues, float64, namespace, to_host
from .catalog import get_instruction
from .engines import resolve_engine
from .formats import Format, IntFormat, Rounding, get_format
from .interop import takes_torch
from .model import InstructionSpec
from .plan import interpret
from .plan.nodes import AddC, AddExact, Chain, Convert, Epilogue, Input, OrderedSum, Plan, Promote, RoundTo, Scale

__all__ = ["gemm", "plan_gemm", "convert_output", "split_bounds", "promotion_blocks"]

_FP32 = get_format("fp32")


@takes_torch  # torch tensors in, torch out (CUDA tensors stay on the GPU: DLPack)
def gemm(A, B, C=None, *, instruction: "str | InstructionSpec | Instruction", out_format: str | None = None,
         out_rounding: Rounding | str = Rounding.RNE, promote_every: int | None = None,
         split_k: "int | Sequence[int] | None" = None, scale_a=None, scale_b=None, scale_block: int = 128,
         c_role: Literal["accumulator", "epilogue", "output"] = "accumulator", k_tile: int | None = None,
         k_residue: Literal["last", "first"] = "last", split_granule: int | None = None,
         engine: str = "auto") -> np.ndarray:
    """``A @ B (+ C)`` as a library kernel built from ``instruction`` computes it, bit for bit.

    Args:
        A: [M, K] array of the instruction's A format (an ml_dtypes/numpy dtype; float32
            containers for TF32; other floats are rounded to the format first, RNE).
        B: [K, N] array of the B format.
        C: optional [M, N] values; see ``c_role``.
        instruction: catalog name, InstructionSpec or Instruction.
        out_format: format of the result (default: the instruction's output format, i.e.
            the FP32 accumulator itself); ``out_rounding`` is the epilogue conversion's rounding.
        promote_every: K elements per promotion block (a multiple of the instruction's K):
            each block is chained from +0 and added into an FP32 accumulator, RNE.
            None: one chain over the whole slice.
        split_k: number of K slices (equal, ``ceil(K / split_k)`` rounded up to a multiple of
            ``split_granule`` (default: the instruction's K), the last one shorter), or the list
            of slice lengths.  Slices start from +0; their FP32 results are summed in slice
            order, each addition RNE, starting from the first.
        k_tile, k_residue: where the zero padding of a K that is not a multiple of the
            instruction's K goes.  ``"last"`` (default): at the end of each slice, as TMA-fed
            kernels load out-of-bounds columns as zeros.  ``"first"``: the partial tile of
            ``K mod k_tile`` elements comes first, padded on its own, and full tiles follow
            (CUTLASS 2.x mainloops handle the residue tile first).
        scale_a, scale_b: per-tensor scalars -- the FP32 result becomes
            ``acc * fp32(scale_a * scale_b)`` -- row-wise (``scale_a`` [M] or [M, 1], ``scale_b``
            [N] or [1, N]) -- ``(acc * scale_b) * scale_a``, each product rounded -- or block-wise: ``scale_a`` [M, ceil(K/bk)] (1 x bk
            blocks), ``scale_b`` [ceil(K/bk), ceil(N/bn)] (bk x bn blocks) with
            ``bk = bn = scale_block``, multiplying each promoted partial (then
            ``promote_every`` defaults to ``scale_block``).  FP32 values.
        c_role: ``"accumulator"`` -- C (in the instruction's accumulator format) is where
            the first chain starts (the main accumulator's start under promotion);
            ``"epilogue"`` -- C is added to the FP32 result by one RNE addition before the
            output conversion; ``"output"`` -- the result is first converted to
            ``out_format`` and C is then added with one more rounding to ``out_format``
            (measured: torch.addmm BF16 on Hopper, nvjet ``*_badd_*`` kernels).
        engine: ``"auto"``, ``"fast"``, ``"reference"``, ``"exact"`` or ``"cuda"``.

    A batch -- ``A`` [batch, M, K], ``B`` [batch, K, N], C [batch, M, N] -- is the same GEMM per item (the same
    plan, one pass of the epilogue over the whole batch): item ``i`` is bit for bit ``gemm(A[i], B[i], ...)``.
    Its scales: a scalar (every item), [batch] (one per item) or row-wise [batch, M] / [batch, N]; block-wise
    scales are for single GEMMs.

    Returns:
        [M, N] (or [batch, M, N]) array of ``out_format``'s numpy/ml_dtypes type.

    >>> import numpy as np, ml_dtypes
    >>> A = np.full((4, 32), 0.5, ml_dtypes.float8_e4m3fn); B = np.full((32, 2), 2, ml_dtypes.float8_e4m3fn)
    >>> gemm(A, B, instruction="hopper.wgmma.m64n8k32.f32.e4m3.e4m3")[0].tolist()
    [32.0, 32.0]
    >>> gemm(A, B, instruction="hopper.wgmma.m64n8k32.f32.e4m3.e4m3", promote_every=128, split_k=2,
    ...      out_format="bf16")[0].tolist()
    [32.0, 32.0]
    """
    spec = _resolve(instruction)
    engine = resolve_engine(engine, A, B, C)  # validates the name; "auto" -> "cuda" for GPU-resident operands
    options = dict(instruction=spec, out_format=out_format, out_rounding=out_rounding, promote_every=promote_every,
                   split_k=split_k, scale_block=scale_block, c_role=c_role, k_tile=k_tile, k_residue=k_residue,
                   split_granule=split_granule, engine=engine)
    xp = namespace(A, B, C, scale_a, scale_b)
    if xp is not np and engine != "cuda":  # a CPU engine asked for on device data: compute on host copies
        result = gemm(*(to_host(x) for x in (A, B, C)), scale_a=to_host(scale_a), scale_b=to_host(scale_b), **options)
        return _to_device(result, xp)
    A, B = _as_array(A, xp), _as_array(B, xp)
    lead = _batch_shape(A, B)  # () for one GEMM, (batch,) for a batch
    M, K = A.shape[-2:]
    N = B.shape[-1]
    if c_role not in ("accumulator", "epilogue", "output"):
        raise ValueError(f"c_role: expected 'accumulator', 'epilogue' or 'output', got {c_role!r}")
    out_rounding = Rounding.parse(out_rounding)
    a_bits = _operand_bits("A", A, spec.a_format)
    b_bits = _operand_bits("B", B, spec.b_format)
    k = spec.k
    if M == 0 or N == 0 or 0 in lead:  # nothing to compute (numpy and torch return an empty result)
        _check_c_shape(C, lead + (M, N))
        d_bits = xp.zeros(lead + (M, N), spec.d_format.container_dtype)
        return convert_output(spec.d_format.to_array(d_bits), spec.d_format, out_format, out_rounding)
    if K == 0:  # no products: the unit sums one instruction of zeros (+0), so C passes through its epilogue
        a_bits, b_bits = xp.zeros(lead + (M, k), a_bits.dtype), xp.zeros(lead + (k, N), b_bits.dtype)
        K, split_k, promote_every, scale_a, scale_b = k, None, None, None, None
    tile, granule = _layout_options(spec, k_tile, k_residue, split_granule)
    a_rows, b_cols, segments, origins = _lay_out(a_bits, xp.swapaxes(b_bits, -1, -2), K, split_k, granule, k,
                                                 tile, k_residue)

    if lead:
        block_a = block_b = None
        tensor_scale, scale_kind = _batch_scales(scale_a, scale_b, lead[0], M, N, xp)
    else:
        block_a, block_b, tensor_scale, scale_kind = _parse_scales(scale_a, scale_b, M, N, K, scale_block, xp)
    blockwise = block_a is not None
    if blockwise and promote_every is None:
        promote_every = scale_block
    if promote_every is not None:
        _check_promotion(spec, promote_every)
        if blockwise and scale_block % promote_every:
            raise ValueError(f"promote_every: {promote_every} must divide scale_block={scale_block}")
    multi = promote_every is not None or len(segments) > 1
    if blockwise and k_residue == "first" and K % tile:
        raise ValueError("k_residue: block-wise scales need the padding last (block boundaries in K order)")
    if multi and isinstance(spec.d_format, IntFormat):
        raise ValueError("promote_every, split_k: FP32 promotion and reduction need a floating-point instruction")
    if a_rows.shape[-1] > k and spec.c_format != spec.d_format:
        raise ValueError(f"instruction: K={K} chains instructions, but {spec.name} takes C as "
                         f"{spec.c_format.name} and writes D as {spec.d_format.name}")

    c_acc, c_values = _c_operands(C, spec, c_role, multi, lead + (M, N), xp)
    plan = _build_plan(spec, segments, origins, promote_every=promote_every, blockwise=blockwise,
                       scale_block=scale_block, scale_kind=scale_kind, c_start=c_acc is not None,
                       c_role=c_role if c_values is not None else None, out_format=out_format,
                       out_rounding=out_rounding)
    operands = {"A": a_rows, "B": b_cols, "C_acc": c_acc, "C": c_values, "block_a": block_a, "block_b": block_b}
    if tensor_scale is not None:
        operands["scale_a"], operands["scale_b"] = tensor_scale
    return interpret.run(plan, operands, engine)


def plan_gemm(M: int, N: int, K: int, *, instruction: "str | InstructionSpec | Instruction",
              out_format: str | None = None, out_rounding: Rounding | str = Rounding.RNE,
              promote_every: int | None = None, split_k: "int | Sequence[int] | None" = None,
              scales: Literal["tensor", "row", "block"] | None = None, scale_block: int = 128,
              c_role: Literal["accumulator", "epilogue", "output"] | None = None, k_tile: int | None = None,
              k_residue: Literal["last", "first"] = "last", split_granule: int | None = None) -> Plan:
    """The plan ``gemm`` runs for an [M, K] @ [K, N] call with these options (``scales``: the kind of
    ``scale_a``/``scale_b`` passed, ``c_role``: how a C passed is used; None: no scales, no C).

    >>> print(plan_gemm(64, 64, 256, instruction="hopper.wgmma.m64n8k32.f32.e4m3.e4m3", promote_every=128,
    ...                 split_k=2, scales="tensor", out_format="bf16").explain())
    gemm 64x64x256 on hopper.wgmma.m64n8k32.f32.e4m3.e4m3
      convert to bf16 (RNE)
        scale: acc * fp32(scale_a * scale_b)
          ordered sum (contiguous) of 2 terms, FP32 RNE additions in order
            promote every 128 over K[0:128): chains of hopper.wgmma.m64n8k32.f32.e4m3.e4m3 from +0, main += partial, RNE; main from +0
            promote every 128 over K[128:256): chains of hopper.wgmma.m64n8k32.f32.e4m3.e4m3 from +0, main += partial, RNE; main from +0
    """
    spec = _resolve(instruction)
    tile, granule = _layout_options(spec, k_tile, k_residue, split_granule)
    segments, origins = _k_segments(K, split_k, granule, spec.k, tile, k_residue)
    blockwise = scales == "block"
    if blockwise and promote_every is None:
        promote_every = scale_block
    multi = promote_every is not None or len(segments) > 1
    plan = _build_plan(spec, segments, origins, promote_every=promote_every, blockwise=blockwise,
                       scale_block=scale_block, scale_kind=None if scales in (None, "block") else scales,
                       c_start=c_role == "accumulator" and not multi,
                       c_role=None if c_role is None or (c_role == "accumulator" and not multi) else c_role,
                       out_format=out_format, out_rounding=Rounding.parse(out_rounding))
    return Plan(plan.root, title=f"gemm {M}x{N}x{K} on {spec.name}")


def _k_segments(K: int, split_k, granule: int, k: int, tile: int, residue: str
                ) -> tuple[list[tuple[int, int]], list[int]]:
    """(segments, origins): each split-K slice's range on the laid-out K axis (the slices one after the other, each
    padded by ``_layout``) and where it starts in the caller's K -- what ``plan_gemm`` plans and ``_lay_out`` lays
    out, computed once.

    >>> _k_segments(100, 2, 16, 32, 32, "last")   # slices K[0:64) and K[64:100), the second padded to 64
    ([(0, 64), (64, 128)], [0, 64])
    """
    segments, origins, pos = [], [], 0
    for k0, k1 in split_bounds(K, split_k, granule):
        n = _padded_length(k1 - k0, k, tile, residue)
        segments.append((pos, pos + n))
        origins.append(k0)
        pos += n
    return segments, origins


def _padded_length(n: int, k: int, tile: int, residue: str) -> int:
    """Length of a slice of ``n`` K-elements after ``_layout``'s zero padding."""
    r = n % tile
    if residue == "first" and r:
        return -(-r // k) * k + _padded_length(n - r, k, tile, "last")
    return -(-n // k) * k


def _build_plan(spec: InstructionSpec, segments, origins, *, promote_every, blockwise: bool, scale_block: int,
                scale_kind: str | None, c_start: bool, c_role: str | None, out_format, out_rounding) -> Plan:
    """The plan of the composition: chains (or promotion) per slice, their ordered sum, scales, C, conversion."""
    multi = promote_every is not None or len(segments) > 1
    if not multi:
        root = Chain(spec, segments[0][0], segments[0][1], start="C" if c_start else None)
        if scale_kind is None and c_role is None:
            return Plan(Convert(root, out_format, out_rounding))
    else:
        terms = []
        for s, (k0, k1) in enumerate(segments):
            start = "C" if s == 0 and c_role == "accumulator" else None
            if promote_every is None:
                terms += ([Input("C")] if start else []) + [Chain(spec, k0, k1)]
            else:
                terms.append(Promote(spec, k0, k1, promote_every, start=start,
                                     block_scale=scale_block if blockwise else None, origin=origins[s]))
        root = terms[0] if len(terms) == 1 else OrderedSum(tuple(terms))
    if scale_kind is not None:  # "tensor": one scale per GEMM (per item of a batch), else "row"
        root = Scale(root, scale_kind)
    if c_role == "epilogue":
        root = Epilogue(root, (AddC("C"),))
    out = "fp32" if out_format is None else out_format
    if c_role == "output":
        root = Epilogue(root, (RoundTo(get_format(out).name, out_rounding), AddExact("C")))
    return Plan(Convert(root, out_format, out_rounding))


def split_bounds(k_total: int, split_k: "int | Sequence[int] | None", granule: int) -> list[tuple[int, int]]:
    """K ranges of the split-K slices: ``split_k`` equal slices on ``granule`` boundaries, or given lengths.

    >>> split_bounds(8192, 4, 16)
    [(0, 2048), (2048, 4096), (4096, 6144), (6144, 8192)]
    >>> split_bounds(333, 2, 8)
    [(0, 168), (168, 333)]
    >>> split_bounds(64, [32, 32], 16)
    [(0, 32), (32, 64)]
    """
    if split_k is None:
        return [(0, k_total)]
    if isinstance(split_k, (int, np.integer)) and not isinstance(split_k, bool):
        if split_k < 1:
            raise ValueError(f"split_k: must be >= 1, got {split_k}")
        granules = -(-k_total // granule)
        per = -(-granules // int(split_k)) * granule
        bounds = [(k0, min(k_total, k0 + per)) for k0 in range(0, k_total, per)]
        return bounds
    try:
        if isinstance(split_k, (str, bytes)):
            raise TypeError
        lengths = [int(x) for x in split_k]
    except (TypeError, ValueError):
        raise TypeError(f"split_k: expected an int or a sequence of slice lengths, got {type(split_k).__name__}") \
            from None
    if not lengths or any(n <= 0 for n in lengths):
        raise ValueError(f"split_k: slice lengths must be positive, got {lengths}")
    if sum(lengths) < k_total:
        raise ValueError(f"split_k: slice lengths sum to {sum(lengths)}, less than K={k_total}")
    bounds, k0 = [], 0
    for n in lengths:
        if k0 >= k_total:
            break
        bounds.append((k0, min(k_total, k0 + n)))
        k0 += n
    return bounds


def promotion_blocks(k0: int, k1: int, promote_every: int) -> list[tuple[int, int]]:
    """Promotion blocks of a slice: ``promote_every`` elements each, counted from the slice start.

    >>> promotion_blocks(0, 352, 128)
    [(0, 128), (128, 256), (256, 352)]
    """
    return [(b0, min(k1, b0 + promote_every)) for b0 in range(k0, k1, promote_every)]


def convert_output(d: np.ndarray, d_format: Format, out_format: str | None, rounding: Rounding | str) -> np.ndarray:
    """Epilogue conversion of accumulator values to ``out_format`` (None keeps them).

    >>> import numpy as np
    >>> convert_output(np.array([1 + 2**-9], np.float32), get_format("fp32"), "bf16", "rne").tolist()
    [1.0]
    """
    return interpret.convert(interpret.Bits(d_format, d_format.bits_of(d)), out_format, rounding)


# --- helpers -----------------------------------------------------------------------------------

def _check_c_shape(C, shape: tuple) -> None:
    if C is not None and tuple(np.shape(C)) != shape:
        raise ValueError(f"C: expected shape {shape}, got {tuple(np.shape(C))}")


def _layout_options(spec: InstructionSpec, k_tile, k_residue: str, split_granule) -> tuple[int, int]:
    """(K tile, split granule) of a call, each checked (a clear error naming the argument)."""
    k = spec.k
    if k_residue not in ("last", "first"):
        raise ValueError(f"k_residue: expected 'last' or 'first', got {k_residue!r}")
    tile = k if k_tile is None else k_tile
    if isinstance(tile, bool) or not isinstance(tile, (int, np.integer)) or tile < k or tile % k:
        raise ValueError(f"k_tile: must be a positive multiple of {spec.name}'s K={k}, got {k_tile!r}")
    granule = k if split_granule is None else split_granule
    if isinstance(granule, bool) or not isinstance(granule, (int, np.integer)) or granule < 1:
        raise ValueError(f"split_granule: expected a positive int, got {split_granule!r}")
    return tile, granule


def _c_operands(C, spec: InstructionSpec, c_role: str, multi: bool, shape: tuple, xp):
    """(C as the first chain's accumulator bits, C as FP32 values -- the main accumulator's start or the
    epilogue's addend): one of them, or neither without C."""
    if C is None:
        return None, None
    C = _as_array(C, xp)
    _check_c_shape(C, shape)
    if c_role == "accumulator" and not multi:
        return _operand_bits("C", C, spec.c_format), None
    if isinstance(spec.c_format, IntFormat) and c_role == "accumulator":
        raise ValueError("C: an integer accumulator cannot start an FP32 promotion chain")
    return None, _FP32.round(_float_values("C", C))


def _batch_shape(A, B) -> tuple:
    """() for A [M, K] @ B [K, N]; (batch,) for A [batch, M, K] @ B [batch, K, N]; else a clear error."""
    if A.ndim != B.ndim or A.ndim not in (2, 3):
        raise ValueError(f"A, B: expected 2-D matrices (or 3-D batches of them), got shapes {A.shape} and {B.shape}")
    if A.ndim == 3 and A.shape[0] != B.shape[0]:
        raise ValueError(f"A, B: batch sizes differ: A is {A.shape}, B is {B.shape}")
    if A.shape[-1] != B.shape[-2]:
        raise ValueError(f"A, B: inner dimensions differ: A is {A.shape}, B is {B.shape}")
    return tuple(A.shape[:-2])


def _lay_out(a_bits, b_t, K: int, split_k, granule: int, k: int, tile: int, residue: str):
    """(A rows, B columns as rows, K segments, their origins): each split-K slice laid out on instruction
    boundaries (zero padding where the kernel puts it), the slices one after the other along the last axis."""
    xp = namespace(a_bits)
    segments, origins = _k_segments(K, split_k, granule, k, tile, residue)
    pieces_a, pieces_b = [], []
    for (s0, s1), k0, k1 in zip(segments, origins, origins[1:] + [K]):
        pieces_a.append(_layout(a_bits[..., k0:k1], k, tile, residue))
        pieces_b.append(_layout(b_t[..., k0:k1], k, tile, residue))
        assert pieces_a[-1].shape[-1] == s1 - s0  # _padded_length is _layout's length
    if len(pieces_a) == 1:
        return pieces_a[0], pieces_b[0], segments, origins
    return (xp.ascontiguousarray(xp.concatenate(pieces_a, axis=-1)),
            xp.ascontiguousarray(xp.concatenate(pieces_b, axis=-1)), segments, origins)


def _resolve(instruction) -> InstructionSpec:
    if isinstance(instruction, Instruction):
        return instruction.spec
    return get_instruction(instruction)


def _as_array(x, xp):
    """An operand as an array of namespace ``xp`` (``DeviceValues`` pass through: their dtype is their format)."""
    return x if isinstance(x, DeviceValues) else xp.asarray(x)


def _to_device(result, xp):
    """A host result moved to the device: a CuPy array, or ``DeviceValues`` for formats CuPy has no dtype for."""
    if result.dtype.kind == "f":
        return xp.asarray(result)
    fmt = get_format(result.dtype.name)
    return fmt.to_array(xp.asarray(fmt.bits_of(result)))


def _layout(bits: np.ndarray, k: int, tile: int, residue: str) -> np.ndarray:
    """One slice's K axis (the last) on instruction boundaries: +0 padding at the end, or after a first partial tile.

    >>> _layout(np.arange(1, 6)[None], 2, 4, "first").tolist()   # 5 = 1 + one tile of 4
    [[1, 0, 2, 3, 4, 5]]
    """
    xp = namespace(bits)
    n = bits.shape[-1]
    r = n % tile
    if residue == "first" and r:
        head = xp.zeros(bits.shape[:-1] + (-(-r // k) * k,), bits.dtype)
        head[..., :r] = bits[..., :r]
        return xp.concatenate([head, _layout(bits[..., r:], k, tile, "last")], axis=-1)
    n_pad = -(-n // k) * k
    if n_pad == n and bits.flags.c_contiguous:
        return bits
    out = xp.zeros(bits.shape[:-1] + (n_pad,), bits.dtype)
    out[..., :n] = bits
    return out


def _check_promotion(spec: InstructionSpec, promote_every) -> None:
    if isinstance(promote_every, bool) or not isinstance(promote_every, (int, np.integer)):
        raise TypeError(f"promote_every: expected an int, got {type(promote_every).__name__}")
    if promote_every < spec.k or promote_every % spec.k:
        raise ValueError(f"promote_every: must be a positive multiple of {spec.name}'s K={spec.k}, "
                         f"got {promote_every}")


def _float_values(name: str, x) -> np.ndarray:
    if isinstance(x, DeviceValues):
        return x.format.to_float(x.bits)
    x = namespace(x).asarray(x)
    if x.dtype.kind not in "fiuV" and not x.dtype.name.startswith(("float", "bfloat")):
        raise TypeError(f"{name}: expected numeric values, got dtype {x.dtype}")
    try:
        return float64(x)  # exact on a GPU too (no flush-to-zero cast)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: cannot read dtype {x.dtype} as numbers") from None


def _parse_scales(scale_a, scale_b, M: int, N: int, K: int, block: int, xp=np):
    """(block_a [M, KB] or None, block_b [KB, N] or None, epilogue factors (scale_a, scale_b) or None, their
    kind: "tensor" for two scalars, "row" otherwise, None without them)."""
    if scale_a is None and scale_b is None:
        return None, None, None, None
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
        raise ValueError(f"scale_block: expected a positive int, got {block!r}")
    sa, sb = _fp32_scales("scale_a", scale_a, xp), _fp32_scales("scale_b", scale_b, xp)
    kb, nb = -(-K // block), -(-N // block)
    # per-tensor / row-wise shapes win where K fits one block and the shapes coincide
    rowwise = sa.shape in ((), (M,), (M, 1)) and sb.shape in ((), (N,), (1, N))
    a_block = not rowwise and sa.ndim == 2 and sa.shape == (M, kb)
    b_block = not rowwise and sb.ndim == 2 and sb.shape in ((kb, nb), (kb, N))
    if a_block or b_block:
        if not (a_block and b_block):
            raise ValueError(f"scale_a, scale_b: block-wise scaling needs scale_a of shape {(M, kb)} and "
                             f"scale_b of shape {(kb, nb)}, got {sa.shape} and {sb.shape}")
        b_full = sb if sb.shape == (kb, N) else xp.repeat(sb, block, axis=1)[:, :N]  # [KB, N]
        return sa, b_full, None, None
    if sa.ndim == 2 and sa.shape == (M, 1):
        sa = sa[:, 0]
    if sb.ndim == 2 and sb.shape == (1, N):
        sb = sb[0]
    if sa.ndim not in (0, 1) or (sa.ndim == 1 and sa.shape != (M,)):
        raise ValueError(f"scale_a: expected a scalar, shape ({M},) or ({M}, 1), or block-wise ({M}, {kb}); "
                         f"got {sa.shape}")
    if sb.ndim not in (0, 1) or (sb.ndim == 1 and sb.shape != (N,)):
        raise ValueError(f"scale_b: expected a scalar, shape ({N},) or (1, {N}), or block-wise ({kb}, {nb}); "
                         f"got {sb.shape}")
    kind = "tensor" if sa.ndim == sb.ndim == 0 else "row"
    return None, None, (sa[:, None] if sa.ndim else sa, sb[None, :] if sb.ndim else sb), kind




def _fp32_scales(name: str, scale, xp):
    """A ``scale_a``/``scale_b`` argument as FP32 values of namespace ``xp`` (None: 1), each finite and nonzero."""
    if scale is None:
        return xp.ones(())
    s = xp.asarray(_FP32.round(_float_values(name, scale)))
    bad = ~xp.isfinite(s) | (s == 0)  # a NaN, infinite or zero scale is a bug upstream
    if s.size and bool(bad.any()):
        raise ValueError(f"{name}: scales must be finite and nonzero, found {float(s[bad].ravel()[0])}")
    return s


def _batch_scales(scale_a, scale_b, batch: int, M: int, N: int, xp):
    """A batch's scales as ((scale_a [batch, M or 1, 1], scale_b [batch, 1, N or 1]), kind) or (None, None):
    each a scalar, one per item ([batch]) or row-wise ([batch, M] / [batch, N]); "tensor" when both are one
    number per item (``acc * fp32(sa * sb)``), else "row" (``(acc * sb) * sa``), as for a single GEMM."""
    if scale_a is None and scale_b is None:
        return None, None
    shaped = []
    for name, s, rows, where in (("scale_a", scale_a, M, -1), ("scale_b", scale_b, N, -2)):
        if np.shape(s) not in ((), (batch,), (batch, rows)):
            raise ValueError(f"{name}: a batch of {batch} takes a scalar, shape ({batch},) or ({batch}, {rows}); "
                             f"got {np.shape(s)}")
        s = _fp32_scales(name, s, xp)
        full = s if s.ndim == 2 else xp.broadcast_to(s.reshape(-1, 1) if s.ndim else s.reshape(1, 1), (batch, 1))
        shaped.append(xp.expand_dims(full, where))
    kind = "tensor" if np.ndim(scale_a) <= 1 and np.ndim(scale_b) <= 1 else "row"
    return tuple(shaped), kind
