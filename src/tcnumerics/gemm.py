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

from .api import Instruction
from .arrays import namespace, to_host
from .bit_arrays import operand_bits
from .catalog import get_instruction
from .engines import resolve_engine
from .formats import Format, IntFormat, Rounding, get_format
from .interop import takes_torch
from .model import InstructionSpec
from .plan import interpret
from .plan.nodes import (AddC, AddExact, Chain, Convert, Epilogue, Input, LayOut, OrderedSum, Plan, Promote, RoundTo,
                         Scale)
from .plan.operands import (as_array, batch_scales, float_values, k_segments, lay_out, parse_scales,
                            split_bounds)

__all__ = ["gemm", "plan_gemm", "laid_out", "convert_output", "split_bounds", "promotion_blocks"]

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
    A, B = as_array(A, xp), as_array(B, xp)
    lead = _batch_shape(A, B)  # () for one GEMM, (batch,) for a batch
    M, K = A.shape[-2:]
    N = B.shape[-1]
    if c_role not in ("accumulator", "epilogue", "output"):
        raise ValueError(f"c_role: expected 'accumulator', 'epilogue' or 'output', got {c_role!r}")
    out_rounding = Rounding.parse(out_rounding)
    a_bits = operand_bits("A", A, spec.a_format)
    b_bits = operand_bits("B", B, spec.b_format)
    k = spec.k
    if M == 0 or N == 0 or 0 in lead:  # nothing to compute (numpy and torch return an empty result): the plan of
        _check_c_shape(C, lead + (M, N))  # one instruction over no outputs, converted
        return interpret.run(Plan(Convert(Chain(spec, 0, k), out_format, out_rounding)),
                             {"A": xp.zeros(lead + (M, k), a_bits.dtype), "B": xp.zeros(lead + (N, k), b_bits.dtype)},
                             engine)
    if K == 0:  # no products: the unit sums one instruction of zeros (+0), so C passes through its epilogue
        a_bits, b_bits = xp.zeros(lead + (M, k), a_bits.dtype), xp.zeros(lead + (k, N), b_bits.dtype)
        K, split_k, promote_every, scale_a, scale_b = k, None, None, None, None
    tile, granule = _layout_options(spec, k_tile, k_residue, split_granule)
    slices = split_bounds(K, split_k, granule)
    segments, origins = k_segments(slices, k, tile, k_residue)
    a_rows, b_cols = lay_out(a_bits, xp.swapaxes(b_bits, -1, -2), slices, k, tile, k_residue)

    if lead:
        block_a = block_b = None
        tensor_scale, scale_kind = batch_scales(scale_a, scale_b, lead[0], M, N, xp)
    else:
        block_a, block_b, tensor_scale, scale_kind = parse_scales(scale_a, scale_b, M, N, K, scale_block, xp)
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
    title = f"gemm {M}x{N}x{K} on {spec.name}"
    if K == 0:  # as gemm: one instruction of zeros, no split, promotion or scales (C passes through its role)
        K, split_k, promote_every, scales = spec.k, None, None, None
    segments, origins = k_segments(split_bounds(K, split_k, granule), spec.k, tile, k_residue)
    blockwise = scales == "block"
    if blockwise and promote_every is None:
        promote_every = scale_block
    multi = promote_every is not None or len(segments) > 1
    plan = _build_plan(spec, segments, origins, promote_every=promote_every, blockwise=blockwise,
                       scale_block=scale_block, scale_kind=None if scales in (None, "block") else scales,
                       c_start=c_role == "accumulator" and not multi,
                       c_role=None if c_role is None or (c_role == "accumulator" and not multi) else c_role,
                       out_format=out_format, out_rounding=Rounding.parse(out_rounding))
    return Plan(plan.root, title=title)


def laid_out(plan: Plan, K: int, *, instruction: "str | InstructionSpec | Instruction", split_k=None,
             k_tile: int | None = None, k_residue: str = "last", split_granule: int | None = None,
             input_rounding: str | None = None, scale_block: int = 128, k_origin: int = 0) -> LayOut:
    """``plan`` (``plan_gemm``'s, same options; an accumulator-format conversion at its root left out) under the
    ``LayOut`` node that binds a call's operand values as ``gemm`` binds them -- the whole computation of ``gemm``
    on those values, as one tree (``input_rounding``: FP32 operands rounded to TF32 first; ``k_origin``: the
    call's K range starts there in the operands, a split-K slice of a larger call).

    >>> p = plan_gemm(8, 8, 40, instruction="hopper.wgmma.m64n8k16.f32.bf16.bf16")
    >>> print(Plan(laid_out(p, 40, instruction="hopper.wgmma.m64n8k16.f32.bf16.bf16")).explain())
    operands as bf16 x bf16 bits: K[0:40), each padded with +0 to 16-element instructions at the end
      chain hopper.wgmma.m64n8k16.f32.bf16.bf16 over K[0:48) (3 instructions) from +0
    """
    spec = _resolve(instruction)
    tile, granule = _layout_options(spec, k_tile, k_residue, split_granule)
    slices = tuple((k_origin + a, k_origin + b) for a, b in split_bounds(K, split_k, granule))
    root = plan.root
    term = root.term if isinstance(root, Convert) and root.format is None else root
    return LayOut(term, spec, slices, tile, k_residue, input_rounding, scale_block)


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
    C = as_array(C, xp)
    _check_c_shape(C, shape)
    if c_role == "accumulator" and not multi:
        return operand_bits("C", C, spec.c_format), None
    if isinstance(spec.c_format, IntFormat) and c_role == "accumulator":
        raise ValueError("C: an integer accumulator cannot start an FP32 promotion chain")
    return None, _FP32.round(float_values("C", C))


def _batch_shape(A, B) -> tuple:
    """() for A [M, K] @ B [K, N]; (batch,) for A [batch, M, K] @ B [batch, K, N]; else a clear error."""
    if A.ndim != B.ndim or A.ndim not in (2, 3):
        raise ValueError(f"A, B: expected 2-D matrices (or 3-D batches of them), got shapes {A.shape} and {B.shape}")
    if A.ndim == 3 and A.shape[0] != B.shape[0]:
        raise ValueError(f"A, B: batch sizes differ: A is {A.shape}, B is {B.shape}")
    if A.shape[-1] != B.shape[-2]:
        raise ValueError(f"A, B: inner dimensions differ: A is {A.shape}, B is {B.shape}")
    return tuple(A.shape[:-2])


def _resolve(instruction) -> InstructionSpec:
    if isinstance(instruction, Instruction):
        return instruction.spec
    return get_instruction(instruction)


def _to_device(result, xp):
    """A host result moved to the device: a CuPy array, or ``DeviceValues`` for formats CuPy has no dtype for."""
    if result.dtype.kind == "f":
        return xp.asarray(result)
    fmt = get_format(result.dtype.name)
    return fmt.to_array(xp.asarray(fmt.bits_of(result)))


def _check_promotion(spec: InstructionSpec, promote_every) -> None:
    if isinstance(promote_every, bool) or not isinstance(promote_every, (int, np.integer)):
        raise TypeError(f"promote_every: expected an int, got {type(promote_every).__name__}")
    if promote_every < spec.k or promote_every % spec.k:
        raise ValueError(f"promote_every: must be a positive multiple of {spec.name}'s K={spec.k}, "
                         f"got {promote_every}")
