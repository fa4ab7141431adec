"""A torch GEMM call as cuBLAS sees it, on one GPU model: the value type every table and rule is keyed by.

``Call`` holds the whole call (shape, formats, layout, epilogue arguments, FP32 precision, FP8 scaling) and the
GPU model (``gpus.model_key``) whose cuBLAS runs it.  ``Call.key()`` is the measured bit table's key and
``Call.kind()`` (the key without the shape) the launch table's call kind; neither holds the GPU: each model has
tables of its own.  ``call_record`` / ``call_from_record`` convert to and from the call dicts of the device
surveys (``lab/device_library/survey_calls.py``), which the capture files share.

    >>> c = Call("linear", "bf16", "bf16", 8, 1024, 4096, b_t=True, bias=True, gpu="NVIDIA H200")
    >>> c.gpu, c.kind()
    ('h200', 'linear|bf16||bf16|0|1|bias|1|||0')
    >>> call_from_record(call_record(c)) == c
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from .gpus import default_gpu, model_key

OPS = ("matmul", "mm_out", "linear", "addmm", "bmm", "baddbmm", "scaled_mm")


@dataclass(frozen=True)
class Call:
    """One torch GEMM call as cuBLAS sees it (the full shape, not a sample), on GPU model ``gpu``."""

    op: str  # matmul, mm_out, linear, addmm, bmm, baddbmm, scaled_mm
    fmt: str  # A's format: bf16, fp16, fp32, e4m3, e5m2
    out: str  # the result's format
    M: int
    N: int
    K: int
    b: int = 1
    b_fmt: str | None = None
    a_t: bool = False
    b_t: bool = False
    bias: bool = False
    c_kind: str = "none"  # none, row (broadcast [N]), full
    alpha: float = 1.0
    beta: float = 0.0
    prec: str = "highest"
    scales: str = "tensor"
    fast_accum: bool = False
    positions_known: bool = True  # the sampled rows / columns' places in the whole call (not part of the key)
    gpu: str = field(default_factory=default_gpu)  # the GPU model (gpus.model_key); its tables are its own

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpu", model_key(self.gpu))  # "NVIDIA H200" and "h200" are one call

    def key(self) -> str:
        """The measured table's key: everything that steers cuBLAS's choice (on one GPU model)."""
        epi = epilogue_of(self)
        return "|".join(str(x) for x in (self.op, self.fmt, self.b_fmt or "", self.out, self.b, self.M, self.N, self.K,
                                         int(self.a_t), int(self.b_t), epi, int(self.alpha == 1), self.prec if self.fmt == "fp32" else "",
                                         self.scales if self.op == "scaled_mm" else "", int(self.fast_accum)))

    def kind(self) -> str:
        """The key without the shape (M, N, K, batch): the launch table's call kind."""
        f = self.key().split("|")
        return "|".join(f[:4] + f[8:])


class TableKey(NamedTuple):
    """The fields of a measured table's key (``Call.key``), parsed back.

    >>> k = TableKey.parse(Call("linear", "bf16", "bf16", 8, 1024, 4096, b_t=True, bias=True).key())
    >>> (k.op, k.M, k.N, k.K, k.b, k.b_t, k.epilogue)
    ('linear', 8, 1024, 4096, 1, True, 'bias')
    """

    op: str
    fmt: str
    b_fmt: str
    out: str
    b: int
    M: int
    N: int
    K: int
    a_t: bool
    b_t: bool
    epilogue: str
    alpha_one: bool
    prec: str
    scales: str
    fast_accum: bool

    @classmethod
    def parse(cls, key: str) -> "TableKey":
        f = key.split("|")
        if len(f) != len(cls._fields):
            raise ValueError(f"measured table key {key!r}: expected {len(cls._fields)} fields separated by '|'")
        op, fmt, b_fmt, out, b, M, N, K, a_t, b_t, epi, alpha_one, prec, scales, fast = f
        return cls(op, fmt, b_fmt, out, int(b), int(M), int(N), int(K), a_t == "1", b_t == "1", epi,
                   alpha_one == "1", prec, scales, fast == "1")


def epilogue_of(c: Call) -> str:
    """The epilogue family torch's call reaches (nvjet *_bias_*, *_badd_*, *_bx_* or plain)."""
    if c.op == "linear":
        return "bias" if c.bias else "plain"
    if c.op in ("addmm", "baddbmm"):
        if c.beta == 0 or c.c_kind == "none":
            return "plain"
        if c.c_kind == "row" and c.beta == 1 and c.op == "addmm":
            return "bias"
        if c.beta == 1:
            return "badd"
        return "bx"
    return "plain"


def call_from_record(c: dict, gpu: str | None = None) -> Call:
    """The ``Call`` of a survey or capture record (``survey_calls`` dicts: ``op`` matmul, matmul_bcast, mm_out,
    linear, addmm, bmm, baddbmm, scaled_mm; ``out`` or ``out_dtype``; ``c_1d`` or ``c_kind``; ...) on ``gpu``
    (default: the record's ``gpu``, else the default model).

    >>> call_from_record(dict(op="matmul_bcast", fmt="bf16", M=16, N=64, K=32, b=4, prec="highest")).M
    64
    """
    op = c["op"]
    if op not in OPS + ("matmul_bcast",):
        raise ValueError(f"record: unknown op {op!r} (expected one of {', '.join(OPS)}, matmul_bcast)")
    b = int(c.get("b", 1))
    M = int(c["M"]) * b if op == "matmul_bcast" else int(c["M"])
    out = c.get("out") or c.get("out_dtype") or c["fmt"]
    kind = c.get("c_kind") or ("row" if op == "addmm" and c.get("c_1d") else
                               "full" if op in ("addmm", "baddbmm") else "none")
    where = dict(gpu=gpu or c.get("gpu") or default_gpu())
    if op == "linear":  # F.linear: cuBLAS sees the weight transposed, unless the record says otherwise
        return Call("linear", c["fmt"], out, M, int(c["N"]), int(c["K"]), bias=bool(c.get("bias")),
                    a_t=bool(c.get("a_t")), b_t=bool(c.get("b_t", True)), prec=c.get("prec", "highest"), **where)
    return Call({"matmul_bcast": "matmul"}.get(op, op), c["fmt"], out, M, int(c["N"]), int(c["K"]),
                b=b if op in ("bmm", "baddbmm") else 1, b_fmt=c.get("b_fmt") if op == "scaled_mm" else None,
                a_t=bool(c.get("a_t")), b_t=bool(c.get("b_t")), c_kind=kind, alpha=float(c.get("alpha", 1)),
                beta=float(c.get("beta", 0)), prec=c.get("prec", "highest"), scales=c.get("scales", "tensor"),
                fast_accum=bool(c.get("fast_accum", False)), **where)


def call_record(c: Call) -> dict:
    """A survey-style record of ``c`` (JSON-ready; ``call_from_record`` gives ``c`` back)."""
    rec = dict(op=c.op, fmt=c.fmt, out=c.out, M=c.M, N=c.N, K=c.K, prec=c.prec, a_t=c.a_t, b_t=c.b_t, gpu=c.gpu)
    if c.op in ("bmm", "baddbmm"):
        rec["b"] = c.b
    if c.op == "linear":
        rec["bias"] = c.bias
    if c.op in ("addmm", "baddbmm"):
        rec.update(c_kind=c.c_kind, c_1d=c.c_kind == "row", alpha=c.alpha, beta=c.beta)
    if c.op == "scaled_mm":
        rec.update(b_fmt=c.b_fmt, scales=c.scales, fast_accum=c.fast_accum, out_dtype=c.out)
    elif c.out != c.fmt:
        rec["out_dtype"] = c.out
    return rec


_EPILOGUE_BETA = {"plain": 0.0, "bias": 1.0, "badd": 1.0, "bx": 0.5}


def call_from_kind(kind: str, M: int, N: int, K: int, b: int = 1, gpu: str | None = None) -> Call:
    """A ``Call`` of launch-table kind ``kind`` (``Call.kind()``) at a shape: the epilogue arguments stand for their
    class (alpha 0.5 where the kind says alpha != 1, beta 0.5 for ``bx``), which is all a kind holds.

    >>> c = call_from_kind("addmm|bf16||bf16|0|0|bx|0|||0", 8, 64, 32)
    >>> c.kind(), (c.alpha, c.beta, c.c_kind)
    ('addmm|bf16||bf16|0|0|bx|0|||0', (0.5, 0.5, 'full'))
    """
    f = kind.split("|")
    if len(f) != 11:
        raise ValueError(f"kind {kind!r}: expected 11 fields separated by '|' (Call.kind())")
    op, fmt, b_fmt, out, a_t, b_t, epi, alpha_one, prec, scales, fast = f
    if epi not in _EPILOGUE_BETA:
        raise ValueError(f"kind {kind!r}: unknown epilogue {epi!r}")
    c_kind = ("row" if op == "addmm" and epi == "bias" else
              "full" if op in ("addmm", "baddbmm") and epi != "plain" else "none")
    return Call(op, fmt, out, int(M), int(N), int(K), b=int(b), b_fmt=b_fmt or None, a_t=a_t == "1", b_t=b_t == "1",
                bias=op == "linear" and epi == "bias", c_kind=c_kind, alpha=1.0 if alpha_one == "1" else 0.5,
                beta=_EPILOGUE_BETA[epi], prec=prec or "highest", scales=scales or "tensor", fast_accum=fast == "1",
                gpu=gpu or default_gpu())

