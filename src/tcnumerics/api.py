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
from .catalog import get_instruction, instruction_names
from .engines import _on_gpu, get_engine, grid_dot_bits, resolve_engine
from .bit_arrays import check_bits  # noqa: F401 - re-exported (sparse, probe import it from here)
from .formats import Format, IntFormat
from .interop import takes_torch
from .model import InstructionSpec

__all__ = ["Instruction", "instruction", "instructions", "check_bits"]

_WORKING_SET = 1 << 22  # elements per operand block the bit-level GEMM path builds at once
_DOT_BLOCK = 1 << 20  # operand elements per engine call in dot_bits (bounds the engines' temporaries)


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
            from . import blockscale

            return blockscale.dot_bits(spec.name, a, b, c, scale_a=scale_a, scale_b=scale_b,
                                       engine=engine if engine not in (None, "auto", "fast") else "reference")
        if resolve_engine(engine or self.engine, a, b, c) == "cuda" and _on_gpu(a):
            from .engines import cuda  # GPU-resident operands stay there; the result is of their kind

            if np.ndim(a) == 2 and np.shape(a)[0] == 0:  # as on the host below: no dot products
                return arrays.namespace(a).empty(0, spec.d_format.container_dtype)
            if np.shape(a)[-1] == 0:  # K = 0: one instruction of zero products, as on the host
                a, b = (arrays.namespace(x).zeros(np.shape(x)[:-1] + (spec.k,), x.dtype) for x in (a, b))
            return cuda.dot_bits(spec, a, b, c)
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
        if a.shape[0] == 0:  # no dot products (numpy's empty result)
            return np.empty(0, spec.d_format.container_dtype)
        if a.shape[1] == 0:  # no products: the unit adds one instruction of zeros (+0) to c
            a, b = (np.zeros((x.shape[0], spec.k), x.dtype) for x in (a, b))
        if a.shape[1] > spec.k and spec.c_format != spec.d_format:
            raise ValueError(f"a: K={a.shape[1]} chains instructions, but {spec.name} takes C as "
                             f"{spec.c_format.name} and writes D as {spec.d_format.name}")
        eng = get_engine(engine or self.engine)
        rows = max(1, _DOT_BLOCK // a.shape[1])  # bounded memory: engines build [rows, K] temporaries
        if a.shape[0] <= rows:
            out = eng.dot_bits(spec, a, b, c)
        else:
            out = np.empty(a.shape[0], dtype=spec.d_format.container_dtype)
            for r0 in range(0, a.shape[0], rows):
                out[r0:r0 + rows] = eng.dot_bits(spec, a[r0:r0 + rows], b[r0:r0 + rows], c[r0:r0 + rows])
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
        a_bits = _operand_bits("A", A, spec.a_format)
        b_bits = _operand_bits("B", B, spec.b_format)
        try:
            batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
        except ValueError:
            raise ValueError(f"A, B: batch dimensions do not broadcast: A is {A.shape}, B is {B.shape}") from None
        M, K, N = A.shape[-2], A.shape[-1], B.shape[-1]
        if K == 0:  # no products: the unit adds one instruction of zeros (+0) to C
            K = spec.k
            a_bits = xp.zeros(a_bits.shape[:-1] + (K,), a_bits.dtype)
            b_bits = xp.zeros(b_bits.shape[:-2] + (K, N), b_bits.dtype)
        a_bits = xp.broadcast_to(a_bits, batch + (M, K))
        b_bits = xp.broadcast_to(b_bits, batch + (K, N))
        if C is None:
            c_bits = xp.zeros(batch + (M, N), spec.c_format.container_dtype)
        else:
            C = arrays.asarray(C)
            c_bits = _operand_bits("C", C, spec.c_format)
            try:
                c_bits = xp.broadcast_to(c_bits, batch + (M, N))
            except ValueError:
                raise ValueError(f"C: shape {C.shape} does not match the result shape {batch + (M, N)}") from None
        if 0 in batch + (M, N):  # nothing to compute (numpy's empty result)
            return spec.d_format.to_array(xp.zeros(batch + (M, N), spec.d_format.container_dtype))
        rows_a = a_bits.reshape(-1, M, K)
        cols_b = xp.swapaxes(b_bits.reshape(-1, K, N), 1, 2)
        c_flat = c_bits.reshape(-1, M, N)
        out = xp.empty(c_flat.shape, dtype=spec.d_format.container_dtype)
        for i in range(rows_a.shape[0]):
            out[i] = _grid(self, xp.ascontiguousarray(rows_a[i]), xp.ascontiguousarray(cols_b[i]),
                           xp.ascontiguousarray(c_flat[i]), engine)
        return spec.d_format.to_array(out.reshape(batch + (M, N)))


def _operand_bits(name: str, x: np.ndarray, fmt: Format) -> np.ndarray:
    if isinstance(fmt, IntFormat):
        if x.dtype.kind not in "iu":
            raise TypeError(f"{name}: expected integer values for {fmt.name}, got dtype {x.dtype}")
        lo, hi = (int(x.min()), int(x.max())) if x.size else (0, 0)
        if lo < fmt.min_value or hi > fmt.max_value:
            raise ValueError(f"{name}: values must lie in [{fmt.min_value}, {fmt.max_value}] for {fmt.name}")
        return fmt.encode_int(x)
    if x.dtype.kind not in "fV" and x.dtype.name not in ("bfloat16",) and not x.dtype.name.startswith("float"):
        raise TypeError(f"{name}: expected floating-point values for {fmt.name}, got dtype {x.dtype}")
    return fmt.bits_of(x)


def _grid(inst: Instruction, a_rows: np.ndarray, b_cols: np.ndarray, c: np.ndarray, engine) -> np.ndarray:
    """All M x N dot products of a_rows [M, K] and b_cols [N, K] with c [M, N], in bounded blocks."""
    native = getattr(get_engine(engine or inst.engine), "gemm_bits", None)
    if native is not None:  # a native GEMM avoids the repeated operand copies below
        return native(inst.spec, a_rows, b_cols, c)
    return grid_dot_bits(lambda spec, a, b, c_flat: inst.dot_bits(a, b, c_flat, engine=engine),
                         inst.spec, a_rows, b_cols, c, _WORKING_SET)


def instruction(name: "str | InstructionSpec", engine: str = "auto") -> Instruction:
    """The catalogued instruction ``name`` (PTX order; wgmma with any legal N), or a custom spec.

    >>> instruction("hopper.mma.m16n8k16.f32.bf16.bf16.f32").k
    16
    """
    return Instruction(get_instruction(name), engine)


def instructions(arch: str | None = None) -> list[str]:
    """Names of every catalogued instruction, optionally of one architecture."""
    return instruction_names(arch)
