"""A library kernel's numerics, executed: the K reduction (tensor-core chain or FFMA chain, split-K) and the epilogue.

``Structure`` holds what the device measurements identified for one kernel family (see
``docs/gemm.md``); ``run(structure, A, B, ...)`` computes the output values for [M, K] @ [K, N]
operands (whole K, any subset of rows and columns).

Epilogues (all arithmetic FP32, RNE, then one conversion to the output type):

* ``plain``  -- ``cvt(alpha * acc)`` (alpha = 1: ``cvt(acc)``);
* ``bias``   -- nvjet ``*_bias_*`` and splitKreduce with bias: ``cvt(alpha * acc + bias[n])``;
* ``badd``   -- nvjet ``*_badd_*`` (beta = 1): ``cvt(cvt(alpha * acc) + C)``, two roundings;
* ``bx``     -- nvjet ``*_bx_*`` (general alpha, beta): ``cvt(fma(beta, C, alpha * acc))``;
* ``bx_mul`` -- ``cvt(alpha * acc + beta * C)`` with every operation rounded.

Example:
    >>> import numpy as np, ml_dtypes
    >>> s = Structure("nvjet", instruction="hopper.wgmma.m64n8k16.f32.bf16.bf16")
    >>> A = np.ones((2, 64), ml_dtypes.bfloat16); B = np.ones((64, 3), ml_dtypes.bfloat16)
    >>> run(s, A, B, out_format="bf16").tolist()
    [[64.0, 64.0, 64.0], [64.0, 64.0, 64.0]]
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..formats import get_format
from ..gemm import _fp32_fma, gemm, split_bounds

_FP32 = get_format("fp32")
EPILOGUES = ("plain", "bias", "badd", "bx", "bx_mul")


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
        parts.append(f"epilogue {self.epilogue}")
        return ", ".join(parts)


def _tf32(x: np.ndarray, mode: str) -> np.ndarray:
    f = get_format("tf32")
    return f.to_float(f.from_float(np.asarray(x, np.float64), mode)).astype(np.float32)


def accumulate(s: Structure, A: np.ndarray, B: np.ndarray, scale_a=None, scale_b=None,
               engine: str = "auto") -> np.ndarray:
    """The FP32 accumulator (float64 holding FP32 values) after the K reduction and split-K sum."""
    if s.input_rounding:
        A, B = _tf32(A, s.input_rounding), _tf32(B, s.input_rounding)
    if s.instruction is None:
        return _ffma_chain(np.asarray(A, np.float32), np.asarray(B, np.float32), s.split_k)
    acc = gemm(A, B, instruction=s.instruction, promote_every=s.promote_every,
               split_k=list(s.split_k) if s.split_k else None, k_tile=s.k_tile, k_residue=s.k_residue,
               split_granule=s.split_granule, scale_a=scale_a, scale_b=scale_b, engine=engine)
    return np.asarray(acc, np.float64)


def _ffma_chain(A: np.ndarray, B: np.ndarray, split_k) -> np.ndarray:
    """Sequential FP32 FMA over K per output (SIMT kernels), K slices summed in order."""
    M, K = A.shape
    a, b = A.astype(np.float64), np.ascontiguousarray(B.astype(np.float64).T)
    total = None
    for k0, k1 in split_bounds(K, list(split_k) if split_k else None, 1):
        if _ffma_numba is not None:
            acc = _ffma_numba(np.ascontiguousarray(a[:, k0:k1]), np.ascontiguousarray(b[:, k0:k1]))
        else:
            acc = np.zeros((M, B.shape[1]))
            for k in range(k0, k1):
                acc = _fp32_fma(a[:, k:k + 1], b[None, :, k].reshape(1, -1), acc)
        total = acc if total is None else _FP32.round(total + acc)
    return total


def _make_ffma_numba():
    """The FFMA chain compiled with numba (same arithmetic as ``gemm._fp32_fma``), or None without numba."""
    try:
        import numba
    except ImportError:  # numpy fallback above
        return None

    @numba.njit(cache=True)
    def chain(a, bt):  # pragma: no cover - compiled
        M, K = a.shape
        N = bt.shape[0]
        out = np.zeros((M, N))
        for i in range(M):
            for j in range(N):
                acc = 0.0
                for k in range(K):
                    p = a[i, k] * bt[j, k]  # exact: 24 + 24 bits
                    s = p + acc
                    bp = s - acc
                    err = (p - bp) + (acc - (s - bp))
                    if err != 0.0 and np.isfinite(s):
                        bits = np.array([s]).view(np.uint64)[0]
                        if bits & np.uint64(1) == np.uint64(0):  # round to odd, then RNE to FP32 is exact
                            s = np.nextafter(s, np.inf if err > 0 else -np.inf)
                    acc = np.float64(np.float32(s))
                out[i, j] = acc
        return out

    return chain


_ffma_numba = _make_ffma_numba()


def epilogue(s: Structure, acc: np.ndarray, out_format: str, *, alpha: float = 1.0, beta: float = 0.0,
             C: np.ndarray | None = None, bias: np.ndarray | None = None) -> np.ndarray:
    """The kernel's epilogue on the FP32 accumulator: alpha, beta * C or bias, then the conversion."""
    out = get_format(out_format)
    f32 = _FP32.round
    a = f32(np.float64(alpha))
    if s.epilogue == "plain":
        d = acc if a == 1 else f32(acc * a)
    elif s.epilogue == "bias":
        d = f32(acc if a == 1 else acc * a)
        d = f32(d + np.asarray(bias, np.float64).reshape(1, -1))
    elif s.epilogue == "badd":
        c = np.asarray(C, np.float64)
        d = out.to_float(out.from_float(acc if a == 1 else f32(acc * a))) + c
    elif s.epilogue == "bx":
        c = np.asarray(C, np.float64)
        d = _fp32_fma(np.full(np.shape(c), f32(np.float64(beta))), c, f32(acc * a))
    elif s.epilogue == "bx_mul":
        c = np.asarray(C, np.float64)
        d = f32(f32(acc * a) + f32(c * f32(np.float64(beta))))
    else:
        raise ValueError(f"epilogue: expected one of {', '.join(EPILOGUES)}, got {s.epilogue!r}")
    return out.to_array(out.from_float(np.asarray(d, np.float64)))


def run(s: Structure, A, B, *, out_format: str, alpha: float = 1.0, beta: float = 0.0, C=None, bias=None,
        scale_a=None, scale_b=None, engine: str = "auto") -> np.ndarray:
    """Output of the kernel family ``s`` for ``A @ B`` (then alpha/beta/C/bias as its epilogue applies them)."""
    acc = accumulate(s, A, B, scale_a, scale_b, engine)
    return epilogue(s, acc, out_format, alpha=alpha, beta=beta, C=C, bias=bias)
