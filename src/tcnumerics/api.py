"""Public API: instructions as objects, bit-level and value-level evaluation, GEMM.

Example:
    >>> import numpy as np, ml_dtypes
    >>> import tcnumerics as tc
    >>> inst = tc.instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")
    >>> A = np.ones((2, 16), ml_dtypes.bfloat16); B = np.ones((16, 3), ml_dtypes.bfloat16)
    >>> inst.mma(A, B).tolist()
    [[16.0, 16.0, 16.0], [16.0, 16.0, 16.0]]
"""

from __future__ import annotations

import numpy as np

from . import arrays
from .bit_arrays import check_bits, operand_bits  # check_bits re-exported (sparse, probe import it from here)
from .catalog import get_instruction, instruction_names
from .engines import _on_gpu, get_engine, resolve_engine
from .interop import takes_torch
from .model import InstructionSpec
from .plan import interpret
from .plan.nodes import Chain, PairedChain

__all__ = ["Instruction", "instruction", "instructions", "check_bits"]


class Instruction:
    """A catalogued matrix instruction, evaluated by a chosen engine.

    Attributes: ``name``, ``k`` (the instruction's K), ``model`` (its UnitModel), ``spec``.
    """

    def __init__(self, spec: InstructionSpec, engine: str = "auto"):
        self.spec = spec
        self.engine = engine
        get_engine(engine)  # validates the name

    name = property(lambda self: self.spec.name)
    k = property(lambda self: self.spec.k)
    model = property(lambda self: self.spec.model)
    provenance = property(lambda self: self.spec.provenance)
    a_format = property(lambda self: self.spec.a_format)
    b_format = property(lambda self: self.spec.b_format)
    c_format = property(lambda self: self.spec.c_format)
    d_format = property(lambda self: self.spec.d_format)

    def __repr__(self) -> str:
        return f"Instruction({self.name!r}, k={self.k}, engine={self.engine!r})"

    def describe(self) -> str:
        return self.spec.describe()

    @takes_torch
    def dot_bits(self, a, b, c, *, engine: str | None = None, scale_a=None, scale_b=None) -> np.ndarray:
        """Evaluate dot products on bit patterns.

        ``a``, ``b``: [N, K'] unsigned bit arrays of the operand formats (TF32 in 32-bit
        containers), K' a multiple of ``k`` (instructions chain in K order, each d the next c);
        ``c``: [N] accumulator bits.  1-D ``a``/``b`` with a scalar ``c`` is one vector.
        Block-scaled entries take ``scale_a``, ``scale_b`` ([N, K'/block] scale bits; omitted:
        unit scales).  Returns [N] result bits of the output format.
        """
        spec = self.spec
        if scale_a is not None or scale_b is not None:
            if getattr(spec.model, "scale_format", None) is None:
                raise ValueError(f"scale_a, scale_b: {spec.name} is not a block-scaled instruction")
            if scale_a is None or scale_b is None:
                raise ValueError("scale_a, scale_b: give both scale arrays or neither")
            return _paired(spec, {"A": a, "B": b, "C_acc": c, "scale_bits_a": scale_a, "scale_bits_b": scale_b},
                           engine if engine not in (None, "auto", "fast") else "reference", block_scaled=True)
        if resolve_engine(engine or self.engine, a, b, c) == "cuda" and _on_gpu(a):
            # GPU-resident operands stay there; the result is of their kind
            return _paired(spec, {"A": a, "B": b, "C_acc": c}, "cuda")
        single = np.ndim(a) == 1
        a = check_bits("a", a, spec.a_format)
        b = check_bits("b", b, spec.b_format)
        c = check_bits("c", c, spec.c_format)
        if single:
            a, b, c = a[None, :], b[None, :] if b.ndim == 1 else b, c.reshape(1)
        if a.ndim != 2 or b.ndim != 2:
            raise ValueError(f"a, b: expected 2-D [N, K] arrays, got shapes {a.shape} and {b.shape}")
        if a.shape != b.shape:
            raise ValueError(f"a, b: shapes differ: {a.shape} vs {b.shape}")
        if c.shape != (a.shape[0],):
            raise ValueError(f"c: expected shape ({a.shape[0]},) to match a's N, got {c.shape}")
        if a.shape[1] % spec.k:
            raise ValueError(f"a: K={a.shape[1]} is not a multiple of {spec.name}'s K={spec.k}")
        if a.shape[1] > spec.k and spec.c_format != spec.d_format:
            raise ValueError(f"a: K={a.shape[1]} chains instructions, but {spec.name} takes C as "
                             f"{spec.c_format.name} and writes D as {spec.d_format.name}")
        out = _paired(spec, {"A": a, "B": b, "C_acc": c}, engine or self.engine)
        return out[0:1].reshape(()) if single else out

    @takes_torch
    def mma(self, A, B, C=None, *, engine: str | None = None) -> np.ndarray:
        """Value-level ``A @ B + C`` through this instruction, batched over leading axes.

        ``A``: [..., M, K], ``B``: [..., K, N], ``C``: [..., M, N] or None (zero).  Arrays of
        the operand format's dtype are used bit for bit (float32 containers for TF32); other
        float arrays are first rounded to the operand format (RNE).  K must be a multiple of
        ``k``.  Returns d values as the output format's numpy/ml_dtypes type.
        """
        spec = self.spec
        A, B = arrays.asarray(A), arrays.asarray(B)
        xp = arrays.namespace(A, B, C)  # GPU-resident operands stay there (the engine resolves to "cuda")
        engine = resolve_engine(engine or self.engine, A, B, C)
        if A.ndim < 2 or B.ndim < 2:
            raise ValueError(f"A, B: need at least 2-D arrays, got shapes {A.shape} and {B.shape}")
        if A.shape[-1] != B.shape[-2]:
            raise ValueError(f"A, B: inner dimensions differ: A is {A.shape}, B is {B.shape}")
        if A.shape[-1] % spec.k:
            raise ValueError(f"A: K={A.shape[-1]} is not a multiple of {spec.name}'s K={spec.k}")
        a_bits = operand_bits("A", A, spec.a_format)
        b_bits = operand_bits("B", B, spec.b_format)
        try:
            batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
        except ValueError:
            raise ValueError(f"A, B: batch dimensions do not broadcast: A is {A.shape}, B is {B.shape}") from None
        M, K, N = A.shape[-2], A.shape[-1], B.shape[-1]
        if K == 0:  # no products: the unit adds one instruction of zeros (+0) to C
            K = spec.k
            a_bits = xp.zeros(a_bits.shape[:-1] + (K,), a_bits.dtype)
            b_bits = xp.zeros(b_bits.shape[:-2] + (K, N), b_bits.dtype)
        items = int(np.prod(batch, dtype=np.int64))
        operands = {"A": xp.broadcast_to(a_bits, batch + (M, K)).reshape((items, M, K)),
                    "B": xp.swapaxes(xp.broadcast_to(b_bits, batch + (K, N)).reshape((items, K, N)), 1, 2)}
        if C is not None:
            C = arrays.asarray(C)
            c_bits = operand_bits("C", C, spec.c_format)
            try:
                c_bits = xp.broadcast_to(c_bits, batch + (M, N))
            except ValueError:
                raise ValueError(f"C: shape {C.shape} does not match the result shape {batch + (M, N)}") from None
            operands["C_acc"] = c_bits.reshape((items, M, N))
        # the plan: one chain over K from C (or +0), per item of the batch (the interpreter's engine protocol)
        chain = Chain(spec, 0, K, start=None if C is None else "C")
        if items == 1:  # one matrix: no batch axis for the engine
            operands = {name: xp.ascontiguousarray(x[0]) for name, x in operands.items()}
        d = interpret.evaluate(chain, operands, engine).bits
        return spec.d_format.to_array(d.reshape(batch + (M, N)))


def _paired(spec: InstructionSpec, operands: dict, engine: str, block_scaled: bool = False):
    """The result bits of row i of A with row i of B chained from C_acc[i]: the plan's paired-row chain."""
    return interpret.evaluate(PairedChain(spec, block_scaled), operands, engine).bits


def instruction(name: "str | InstructionSpec", engine: str = "auto") -> Instruction:
    """The catalogued instruction ``name`` (PTX order; wgmma with any legal N), or a custom spec.

    >>> instruction("hopper.mma.m16n8k16.f32.bf16.bf16.f32").k
    16
    """
    return Instruction(get_instruction(name), engine)


def instructions(arch: str | None = None) -> list[str]:
    """Names of every catalogued instruction, optionally of one architecture."""
    return instruction_names(arch)
