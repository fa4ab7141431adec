"""Aten matrix ops, normalised to one GEMM description (``GemmCall``) that a backend computes.

Each supported op becomes ``out = epilogue(alpha * (A @ B), beta * C)`` on [batch, M, K] x
[batch, K, N] operands (``batch`` None for 2-D calls), plus how the result is shaped back.
Convolutions are handled in ``conv.py``.

Example:
    >>> import torch
    >>> call = normalise(torch.ops.aten.addmm.default, (torch.zeros(3), torch.ones(2, 4), torch.ones(4, 3)), {})
    >>> call.op, call.shape, call.beta, call.alpha
    ('addmm', (2, 3, 4), 1, 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

__all__ = ["GemmCall", "normalise", "GEMM_OPS"]

aten = torch.ops.aten
GEMM_OPS = ("mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "_scaled_mm")


@dataclass
class GemmCall:
    """One GEMM as an aten op asked for it.

    Attributes:
        op: the aten op's name ("mm", "addmm", ...).
        a, b: the operands as torch passed them (strides kept): [M, K] / [K, N], or batched
            [batch, M, K] / [batch, K, N]; ``mv``/``dot`` vectors are made [M, K] x [K, 1] views.
        c: the addend (``self`` of addmm/baddbmm/addbmm/addmv), broadcastable to the output, or None.
        alpha, beta: torch's scalars.
        out_dtype: the dtype of the result.
        scale_a, scale_b, use_fast_accum, bias: ``_scaled_mm``'s arguments.
        reshape: how to turn the [batch?, M, N] result into the op's result ("vector", "scalar")
            or None; "addbmm": batched operands, a 2-D C, one GEMM per batch entry onto the last result.
        out: the ``out=`` tensor to write into, if any.
    """

    op: str
    a: torch.Tensor
    b: torch.Tensor
    c: torch.Tensor | None = None
    alpha: float = 1
    beta: float = 1
    out_dtype: torch.dtype | None = None
    scale_a: torch.Tensor | None = None
    scale_b: torch.Tensor | None = None
    bias: torch.Tensor | None = None
    use_fast_accum: bool = False
    reshape: str | None = None
    out: torch.Tensor | None = None
    extra: dict = field(default_factory=dict)

    @property
    def batched(self) -> bool:
        return self.a.dim() == 3

    def entry(self, i: int, c: "torch.Tensor | None", beta: float) -> "GemmCall":
        """addbmm's i-th addmm: ``beta * c + alpha * a[i] @ b[i]``."""
        return GemmCall("addbmm", self.a[i], self.b[i], c, self.alpha, beta, out_dtype=self.out_dtype)

    @property
    def shape(self) -> tuple:
        """(M, N, K), or (batch, M, N, K) for batched calls."""
        M, K = self.a.shape[-2:]
        N = self.b.shape[-1]
        return (self.a.shape[0], M, N, K) if self.batched else (M, N, K)

    @property
    def layout(self) -> str:
        """"NN", "TN", "NT" or "TT" from the operands' strides (T: stored transposed, i.e. K-major for A)."""
        return "".join("T" if _transposed(t) else "N" for t in (self.a, self.b))


def _transposed(t: torch.Tensor) -> bool:
    rows, cols = t.stride()[-2:]
    return rows == 1 and cols != 1 and t.shape[-1] > 1


def _bind(func, args, kwargs) -> dict:
    """Arguments by schema name, defaults filled in."""
    schema = func._schema
    bound = {}
    for arg, value in zip(schema.arguments, args):
        bound[arg.name] = value
    bound.update(kwargs)
    for arg in schema.arguments:
        if arg.name not in bound and arg.has_default_value():
            bound[arg.name] = arg.default_value
    return bound


def normalise(func, args, kwargs) -> GemmCall:
    """The GemmCall of an aten call whose packet name is in ``GEMM_OPS``."""
    op = func.overloadpacket.__name__
    p = _bind(func, args, kwargs)
    out = p.get("out")
    out_dtype = p.get("out_dtype")
    if op in ("mm", "bmm"):
        a, b = p["self"], p["mat2"]
        return GemmCall(op, a, b, out_dtype=out_dtype or a.dtype, out=out)
    if op == "addmm":
        return GemmCall(op, p["mat1"], p["mat2"], p["self"], p["alpha"], p["beta"],
                        out_dtype=out_dtype or p["mat1"].dtype, out=out)
    if op == "baddbmm":
        return GemmCall(op, p["batch1"], p["batch2"], p["self"], p["alpha"], p["beta"],
                        out_dtype=out_dtype or p["batch1"].dtype, out=out)
    if op == "addbmm":
        # ATen's CUDA addbmm runs one addmm per batch entry, each onto the previous result (measured:
        # one nvjet *_badd_* kernel per entry); backends loop over the batch the same way
        return GemmCall(op, p["batch1"], p["batch2"], p["self"], p["alpha"], p["beta"],
                        out_dtype=p["batch1"].dtype, reshape="addbmm", out=out)
    if op == "mv":
        return GemmCall(op, p["self"], p["vec"].unsqueeze(1), out_dtype=p["self"].dtype, reshape="vector", out=out)
    if op == "addmv":
        return GemmCall(op, p["mat"], p["vec"].unsqueeze(1), p["self"].unsqueeze(-1) if p["self"].dim() else
                        p["self"], p["alpha"], p["beta"], out_dtype=p["mat"].dtype, reshape="vector", out=out)
    if op == "dot":
        return GemmCall(op, p["self"].unsqueeze(0), p["tensor"].unsqueeze(1), out_dtype=p["self"].dtype,
                        reshape="scalar", out=out)
    if op == "_scaled_mm":
        return GemmCall(op, p["self"], p["mat2"], out_dtype=out_dtype or p["self"].dtype,
                        scale_a=p["scale_a"], scale_b=p["scale_b"], bias=p.get("bias"),
                        use_fast_accum=bool(p.get("use_fast_accum", False)), out=out,
                        extra={"scale_result": p.get("scale_result")})
    raise ValueError(f"op: {op} is not a GEMM op this module normalises")


def finish(call: GemmCall, result: torch.Tensor) -> torch.Tensor:
    """The [batch?, M, N] result shaped as the op returns it (and written into ``out=``)."""
    if call.reshape == "vector":
        result = result[:, 0]
    elif call.reshape == "scalar":
        result = result.reshape(())
    if call.out is not None:
        call.out.resize_(result.shape)
        call.out.copy_(result)
        return call.out
    return result
