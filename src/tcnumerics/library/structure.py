"""A library kernel's numerics, executed: the K reduction (tensor-core chain or FFMA chain, split-K) and the epilogue.

``Structure`` holds what the device measurements identified for one kernel family (see
``docs/gemm.md``); ``run(structure, A, B, ...)`` computes the output values for [M, K] @ [K, N]
operands (whole K, any subset of rows and columns).

Epilogues (all arithmetic FP32, RNE, then one conversion to the output type):

* ``plain``  -- ``cvt(alpha * acc)`` (alpha = 1: ``cvt(acc)``);
* ``bias``   -- nvjet ``*_bias_*`` and splitKreduce with bias: ``cvt(alpha * acc + bias[n])``;
* ``badd``   -- nvjet ``*_badd_*`` (beta = 1): ``cvt(cvt(alpha * acc) + C)``, two roundings;
* ``bx``     -- nvjet ``*_bx_*`` (general alpha, beta): ``cvt(fma(beta, C, alpha * acc))``;
* ``bx_mul`` -- ``cvt(alpha * acc + beta * C)`` with every operation rounded;
* ``bias_out`` -- ``cvt(cvt(alpha * acc) + bias[n])``, two roundings (splitKreduce reading BF16/FP16 partials
  with a bias: survey 363, ``library/cutlass_half.py``; the bias, or a row C, joins after the conversion).

Split-K (FFMA chains; H100 survey, docs/gemm.md):

* contiguous slices (``split_k`` lengths; CUTLASS SIMT ``sgemm`` + ``splitKreduce_kernel``): each
  slice an FFMA chain from +0, the FP32 slice results summed in order, then the epilogue;
* interleaved slices (``split_interleave=S``, ``k_tile``; ``sm80_xmma_gemm_f32f32`` + its
  ``execute_split_k_kernel``, or in place after a Memset): K-tiles t, t + S, t + 2S, ... form
  slice t; the same in-order sum;
* ``split_reduce="serial"`` (CUTLASS in-place split-K: a Memset of the semaphores, no reduce
  kernel; FFMA chains and the CUTLASS 2.x tensor-op kernels): slice 0's epilogue applies C or
  the bias and writes the output type; slice k adds ``fma(alpha, acc_k, D)`` to what slice k-1
  wrote, rounding to the output type again (BF16/FP16 outputs round between slices).

Example:
    >>> import numpy as np, ml_dtypes
    >>> s = Structure("nvjet", instruction="hopper.wgmma.m64n8k16.f32.bf16.bf16")
    >>> A = np.ones((2, 64), ml_dtypes.bfloat16); B = np.ones((64, 3), ml_dtypes.bfloat16)
    >>> run(s, A, B, out_format="bf16").tolist()
    [[64.0, 64.0, 64.0], [64.0, 64.0, 64.0]]
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from ..arrays import DeviceValues, concatenate, namespace, to_host
from ..formats import get_format
from ..gemm import laid_out, plan_gemm, split_bounds
from ..plan import interpret
from ..plan.nodes import (AddC, AddExact, Alpha, Convert, Epilogue, FFMAChain, Input, LayOut, Node, OrderedSum, Plan,
                          RoundEach, RoundTo)
from . import simt, streamk

_FP32 = get_format("fp32")
EPILOGUES = ("plain", "bias", "badd", "bx", "bx_mul", "bias_out")


@dataclass(frozen=True)
class StreamK:
    """A TF32 stream-K launch (``library.streamk``): the whole call's shape, its CTA count, the kernel's tile
    (TM, TN, TK), the schedule's band width and whether a separate split-K kernel sums the segments."""

    M: int
    N: int
    K: int
    ctas: int
    tile: tuple[int, int, int]
    swizzle: int = 1
    reduce_kernel: bool = False


@dataclass(frozen=True)
class Structure:
    """One kernel family's reduction and epilogue.

    Attributes:
        family: the kernel family's name (as in docs/gemm.md).
        instruction: catalog instruction of the tensor-core chain, or None for an FFMA chain
            (FP32 SIMT / sm80_xmma f32f32 kernels: one fused multiply-add per element, in K order).
        input_rounding: FP32 operands rounded to TF32 first ("rne" or "rna"), or None.
        promote_every, k_tile, k_residue, split_k, split_granule: as in ``tcnumerics.gemm``.
        epilogue: one of EPILOGUES.
        split_interleave: FFMA chains only: S slices made of ``k_tile``-element K-tiles dealt round-robin
            (tile t to slice t mod S), each chained from +0, summed in slice order (xmma split-K).
        split_reduce: "parallel" (slices summed, then the epilogue) or "serial" (C / bias joins the
            first slice's epilogue and each later slice is added to the output, CUTLASS in-place split-K).
        split_partial_format: the workspace type of parallel split-K partials when it is not FP32
            (``splitKreduce_kernel<32, 16, int, __nv_bfloat16, ...>`` after CUTLASS 2.x kernels: each
            slice's result is rounded to BF16/FP16 before the FP32 in-order sum).
        simt_kernel: a cuBLAS SIMT small-M / M = 1 kernel's activity name (gemmSN, gemvx, gemvNSP, gemv2T,
            sgemm_largek) whose FFMA summation order ``library.simt`` reproduces, with its launch's threads per
            output (``simt_lanes``, gemvx) and K slices (``simt_slices``, split gemvx and largek); the K
            reduction is that kernel's, the epilogue as above.
        stream_k: a TF32 stream-K launch (``StreamK``): an output's reduction depends on its tile (data-parallel
            or shared by several CTAs, ``library.streamk``), so ``run`` needs the outputs' rows and columns.
    """

    family: str
    instruction: str | None = None
    input_rounding: str | None = None
    promote_every: int | None = None
    k_tile: int | None = None
    k_residue: str = "last"
    split_k: tuple[int, ...] | None = None
    split_granule: int | None = None
    epilogue: str = "plain"
    split_interleave: int | None = None
    split_reduce: str = "parallel"
    split_partial_format: str | None = None
    simt_kernel: str | None = None
    simt_lanes: int | None = None
    simt_slices: int = 1
    stream_k: StreamK | None = None

    def with_(self, **kw) -> "Structure":
        return replace(self, **kw)

    def describe(self) -> str:
        parts = [self.family, self.instruction or "FFMA chain"]
        if self.input_rounding:
            parts.append(f"TF32 inputs {self.input_rounding.upper()}")
        if self.promote_every:
            parts.append(f"promotion every {self.promote_every}")
        if self.split_k:
            parts.append(f"split-K {len(self.split_k)} x {self.split_k[0]}")
        if self.split_interleave:
            parts.append(f"split-K {self.split_interleave} interleaved {self.k_tile}-element K-tiles")
        if self.split_reduce != "parallel":
            parts.append(f"{self.split_reduce} slice reduction")
        if self.split_partial_format:
            parts.append(f"slice partials stored as {self.split_partial_format}")
        parts.append(f"epilogue {self.epilogue}")
        return ", ".join(parts)


def accumulate(s: Structure, A: np.ndarray, B: np.ndarray, scale_a=None, scale_b=None,
               engine: str = "auto", rows=None, cols=None) -> np.ndarray:
    """The FP32 accumulator (FP32 values) after the K reduction and split-K sum.

    ``rows``/``cols``: the positions of A's rows and B's columns in the whole call (default: the first ones);
    only stream-K kernels depend on them."""
    node = reduction_node(s, A, B, scale_a, scale_b, engine, rows, cols)
    return interpret.run(node, _operands(A, B, scale_a, scale_b, rows, cols), engine)


def _operands(A, B, scale_a=None, scale_b=None, rows=None, cols=None, **more) -> dict:
    """What a structure's plan reads: the operand values, scales as ``gemm`` takes them, the outputs' places."""
    return {"A": A, "B": B, "scale_a": scale_a, "scale_b": scale_b,
            "rows": _host_positions(rows), "cols": _host_positions(cols), **more}


def _host_positions(index):
    """Output positions as a host array (they index the plan's schedule); host ones pass untouched, so an operand
    on the device is never what crosses here."""
    if index is None or isinstance(index, np.ndarray):
        return index
    return np.asarray(to_host(index))


def reduction_node(s: Structure, A, B, scale_a=None, scale_b=None, engine: str = "auto", rows=None,
                   cols=None) -> Node:
    """The plan node of the kernel's K reduction for these operands' shapes and scales (the outputs' places,
    ``rows``/``cols``, are bound when it runs: a stream-K plan covers the whole call)."""
    K = A.shape[-1]
    if s.stream_k is not None:
        sk = s.stream_k
        return streamk.reduction(sk.M, sk.N, sk.K, sk.ctas, sk.tile, sk.swizzle, sk.reduce_kernel)
    if s.simt_kernel:
        return simt.reduction(s.simt_kernel, K, s.simt_lanes, s.simt_slices)
    if s.instruction is None:
        chains = [FFMAChain(tuple(int(k) for k in c)) for c in slice_columns(s, K)]
        return chains[0] if len(chains) == 1 else OrderedSum(tuple(chains), "interleaved" if s.split_interleave
                                                             else "contiguous")
    if s.split_interleave:
        raise ValueError(f"{s.family}: interleaved split-K is modelled for FFMA chains only")
    if s.split_partial_format and s.split_k:
        one = s.with_(split_k=None, split_partial_format=None)
        return OrderedSum(tuple(RoundEach(_gemm_leaf(one, A.shape[-2], B.shape[-1], k0, k1), s.split_partial_format)
                                for k0, k1 in split_bounds(K, list(s.split_k), 1)))
    return _gemm_leaf(s, A.shape[-2], B.shape[-1], 0, K, scale_kind(scale_a, scale_b, A.shape[-2]))


def _gemm_leaf(s: Structure, M: int, N: int, k0: int, k1: int, scales: str | None = None) -> LayOut:
    """The tensor-core reduction over the call's K range k0:k1 (a split-K slice, or all of K): ``gemm``'s plan
    for the structure's options under the node that lays the operand values out (TF32-rounded first where the
    kernel rounds them) -- the tree that is printed is the tree that runs."""
    K = k1 - k0
    inner = _plan_gemm(M, N, K, s.instruction, s.promote_every, s.split_k, s.k_tile, s.k_residue, s.split_granule,
                       scales)
    return laid_out(inner, K, instruction=s.instruction, split_k=list(s.split_k) if s.split_k else None,
                    k_tile=s.k_tile, k_residue=s.k_residue, split_granule=s.split_granule,
                    input_rounding=s.input_rounding, k_origin=k0)


@lru_cache(maxsize=1024)
def _plan_gemm(M: int, N: int, K: int, instruction: str, promote_every, split_k: tuple | None, k_tile, k_residue: str,
               split_granule, scales: str | None) -> Plan:
    """``plan_gemm`` for a structure's tensor-core leaf, once per shape (a model repeats its shapes)."""
    return plan_gemm(M, N, K, instruction=instruction, promote_every=promote_every,
                     split_k=list(split_k) if split_k else None, k_tile=k_tile, k_residue=k_residue,
                     split_granule=split_granule, scales=scales)


def scale_kind(scale_a, scale_b, M: int) -> str | None:
    """The kind of ``gemm`` scales these are: None, "tensor" (two scalars), "block" (A's [M, K / block]) or
    "row" (``gemm`` checks the shapes themselves).

    >>> scale_kind(np.float64(2), np.ones(1), 4), scale_kind(np.ones(4), np.ones(8), 4)
    ('tensor', 'row')
    """
    if scale_a is None and scale_b is None:
        return None
    sa, sb = (np.ones(()) if x is None else x for x in (scale_a, scale_b))
    if np.size(sa) == 1 and np.size(sb) == 1:
        return "tensor"
    return "block" if np.ndim(sa) == 2 and np.shape(sa) != (M, 1) else "row"


def slice_columns(s: Structure, K: int) -> list[np.ndarray]:
    """The K indices each split-K slice of an FFMA-chain structure reduces, in chain order.

    >>> [c.tolist() for c in slice_columns(Structure("x", split_interleave=2, k_tile=2), 7)]
    [[0, 1, 4, 5], [2, 3, 6]]
    >>> [c.tolist() for c in slice_columns(Structure("x", split_k=(3, 3, 3)), 7)]
    [[0, 1, 2], [3, 4, 5], [6]]
    """
    if s.split_interleave:
        tile = s.k_tile or 8
        tiles = np.arange(-(-K // tile))
        return [np.concatenate([np.arange(t * tile, min(K, t * tile + tile)) for t in tiles[r::s.split_interleave]])
                if len(tiles[r::s.split_interleave]) else np.zeros(0, np.int64) for r in range(s.split_interleave)]
    return [np.arange(k0, k1) for k0, k1 in split_bounds(K, list(s.split_k) if s.split_k else None, 1)]


def ffma_partials(s: Structure, A, B) -> list[np.ndarray]:
    """Each split-K slice's sequential FP32 FMA chain from +0 (SIMT / xmma FFMA kernels), as float64 arrays
    (``plan.ffma``; device operands run the GPU engine's FFMA kernel, the results staying on the device)."""
    return [interpret.run(FFMAChain(tuple(int(k) for k in c)), {"A": A, "B": B})
            for c in slice_columns(s, A.shape[1])]


def epilogue_steps(s: Structure, out_format: str, *, alpha: float = 1.0, beta: float = 0.0,
                   bias_given: bool = False) -> tuple:
    """The kernel family's epilogue as plan steps (``plan.interpret.epilogue`` runs them)."""
    out = get_format(out_format).name
    kind = s.epilogue
    if kind == "plain":
        return (Alpha(alpha),)
    if kind == "bias":
        return (Alpha(alpha), AddC("bias"))
    if kind in ("badd", "bias_out"):
        return (Alpha(alpha), RoundTo(out), AddExact("bias" if kind == "bias_out" and bias_given else "C"))
    if kind == "bx":
        return (Alpha(alpha), AddC("C", beta, fused=True))
    if kind == "bx_mul":  # every operation rounded: R(R(alpha * acc) + R(beta * C)); R(1 * C) = R(C)
        return (Alpha(alpha), AddC("C", beta, round_operand=float(_FP32.round(np.float64(beta))) == 1))
    raise ValueError(f"epilogue: expected one of {', '.join(EPILOGUES)}, got {kind!r}")


def epilogue(s: Structure, acc: np.ndarray, out_format: str, *, alpha: float = 1.0, beta: float = 0.0,
             C: np.ndarray | None = None, bias: np.ndarray | None = None) -> np.ndarray:
    """The kernel's epilogue on the FP32 accumulator: alpha, beta * C or bias, then the conversion.

    ``acc`` holds FP32 values (float32 or float64), on the host (numpy) or a GPU (CuPy); the result is where it
    was."""
    steps = epilogue_steps(s, out_format, alpha=alpha, beta=beta, bias_given=bias is not None)
    return interpret.run(Convert(Epilogue(Input("acc"), steps), get_format(out_format).name),
                         {"acc": acc, "C": C, "bias": bias})


def plan(s: Structure, A, B, *, out_format: str, alpha: float = 1.0, beta: float = 0.0, C=None, bias=None,
         scale_a=None, scale_b=None, engine: str = "auto", rows=None, cols=None) -> Plan:
    """The whole plan ``run`` follows for these operands."""
    steps = epilogue_steps(s, out_format, alpha=alpha, beta=beta, bias_given=bias is not None)
    out = get_format(out_format).name
    if s.split_reduce == "serial":
        slices = _slice_nodes(s, A, B, engine)
        first = Convert(Epilogue(slices[0], steps), out)
        return Plan(OrderedSum((first, *slices[1:]), "serial", alpha, out), title=s.describe())
    acc = reduction_node(s, A, B, scale_a, scale_b, engine, rows, cols)
    notes = (f"SIMT order: {simt.order(s.simt_kernel, s.simt_lanes, s.simt_slices)}",) if s.simt_kernel else ()
    return Plan(Convert(Epilogue(acc, steps), out), title=s.describe(), notes=notes)


def run(s: Structure, A, B, *, out_format: str, alpha: float = 1.0, beta: float = 0.0, C=None, bias=None,
        scale_a=None, scale_b=None, engine: str = "auto", rows=None, cols=None) -> np.ndarray:
    """Output of the kernel family ``s`` for ``A @ B`` (then alpha/beta/C/bias as its epilogue applies them);
    ``rows``/``cols``: where A's rows and B's columns sit in the whole call (stream-K kernels only)."""
    p = plan(s, A, B, out_format=out_format, alpha=alpha, beta=beta, C=C, bias=bias, scale_a=scale_a,
             scale_b=scale_b, engine=engine, rows=rows, cols=cols)
    if s.split_reduce == "serial":
        return interpret.run(p, _operands(A, B, C=C, bias=bias), engine)
    acc = interpret.run(p.root.term.term, _operands(A, B, scale_a, scale_b, rows, cols), engine)  # the reduction;
    # the epilogue by row blocks
    return _epilogue_in_chunks(s, acc, out_format, alpha=alpha, beta=beta, C=C, bias=bias)


_EPILOGUE_CHUNK = 1 << 25  # outputs per epilogue pass: bounds its float64 temporaries (~2 GB) on big outputs


def batchable(s: Structure) -> bool:
    """Whether ``run`` takes a whole batch ([batch, M, K] @ [batch, K, N], C [batch, M, N]) for family ``s``: a
    tensor-core reduction through ``tcnumerics.gemm``, which runs a batch's items under one plan -- not a stream-K,
    SIMT, FFMA or serial split-K kernel, whose reductions take one matrix.

    >>> batchable(Structure("nvjet", "hopper.wgmma.m64n256k16.f32.bf16.bf16")), batchable(Structure("ffma"))
    (True, False)
    """
    return (s.instruction is not None and s.stream_k is None and not s.simt_kernel and s.split_reduce != "serial"
            and not s.split_interleave and not (s.split_partial_format and s.split_k))


def _epilogue_in_chunks(s: Structure, acc, out_format: str, *, C=None, **kw):
    """``epilogue`` a block of rows at a time (elementwise, so the same bits): an LM head's weight gradient has
    ~1e9 outputs, whose float64 temporaries would not fit next to the model.  A batch's rows are one block."""
    if acc.ndim == 3:
        flat = None if C is None else C.reshape(-1, C.shape[-1])
        out = _epilogue_in_chunks(s, acc.reshape(-1, acc.shape[-1]), out_format, C=flat, **kw)
        return out.reshape(acc.shape)
    M, N = acc.shape
    rows = max(1, _EPILOGUE_CHUNK // max(1, N))
    if M <= rows:
        return epilogue(s, acc, out_format, C=C, **kw)
    c = None if C is None or isinstance(C, DeviceValues) else namespace(C).asarray(C)
    if c is not None and c.ndim == 2 and c.shape[0] != M:
        c = namespace(c).broadcast_to(c, (M, N))
    parts = [epilogue(s, acc[r0:r0 + rows], out_format, C=None if C is None else (C if c is None else c)[r0:r0 + rows],
                      **kw) for r0 in range(0, M, rows)]
    return concatenate(parts)


def _slice_nodes(s: Structure, A, B, engine: str) -> list[Node]:
    """Each split-K slice's FP32 accumulator (FFMA chains, or the instruction chain on contiguous slices)."""
    if s.instruction is None:
        return [FFMAChain(tuple(int(k) for k in c)) for c in slice_columns(s, A.shape[1])]
    one = s.with_(split_k=None, split_reduce="parallel")
    return [_gemm_leaf(one, A.shape[-2], B.shape[-1], k0, k1)
            for k0, k1 in split_bounds(A.shape[1], list(s.split_k) if s.split_k else None, 1)]


def simt_gemm(kernel_name: str, A, B, *, out_format: str, alpha: float = 1.0, beta: float = 0.0, C=None,
              bias=None, lanes: int | None = None, slices: int = 1) -> np.ndarray:
    """A SIMT small-M kernel's output (``library.simt``): ``simt_reduce`` then ``cvt(fma(beta, C, alpha * acc))``
    (a bias is C with beta = 1, as torch passes it to cuBLAS; gemvx and gemv2T add it after the reduction, largek
    in its separate epilogue kernel: the same rounding) in the output format.  (largek with beta != 0 scales C
    in place before the slices add into it: not captured, not modelled here.)

    >>> import numpy as np
    >>> name = "gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4, true, x>"
    >>> simt_gemm(name, np.ones((1, 4), np.float32), np.ones((4, 2), np.float32), out_format="fp32",
    ...           bias=np.array([0.5, 1.0])).tolist()
    [[4.5, 5.0]]
    """
    acc = simt.simt_reduce(kernel_name, A, B, lanes=lanes, slices=slices)  # its plan, run by the interpreter
    if bias is not None:
        C, beta = np.broadcast_to(np.asarray(bias, np.float64).reshape(1, -1), acc.shape), 1.0
    if C is None or beta == 0:
        return epilogue(Structure("gemmSN"), acc, out_format, alpha=alpha)
    return epilogue(Structure("gemmSN", epilogue="bx"), acc, out_format, alpha=alpha, beta=beta,
                    C=np.broadcast_to(np.asarray(C, np.float64), acc.shape))
