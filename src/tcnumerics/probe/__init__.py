"""The GPU probe: real matrix instructions on an NVIDIA GPU, one instruction per tile.

``gpu_dot(name)`` returns a callable that evaluates dot products on the GPU exactly as
the catalog's ``dot_bits`` does on the CPU, so hardware and model can be compared bit
for bit.  Needs CuPy and the CUDA toolkit (nvcc, cuobjdump), imported only when used;
fragment layouts are checked on exact integer inputs before the first result is
returned.

Example (needs a Hopper GPU, so not run here):
    >>> import numpy as np, tcnumerics as tc                               # doctest: +SKIP
    >>> dot = tc.probe.gpu_dot("hopper.wgmma.m64n8k16.f32.bf16.bf16")     # doctest: +SKIP
    >>> a = np.full((1, 16), 0x3F80, np.uint16)                            # doctest: +SKIP
    >>> hex(int(dot(a, a, np.zeros(1, np.uint32))[0]))                     # doctest: +SKIP
    '0x41800000'
"""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["gpu_dot", "GpuDot"]


class GpuDot:
    """A catalogued instruction evaluated on the GPU: ``(a, b, c[, sparse_index]) -> d`` bits.

    ``a``, ``b``: [N, K'] (sparse: ``a`` [N, K'/2]) with K' a multiple of the
    instruction's K; longer K chains instructions in K order, each d the next c, as the
    catalog does.  Structured-sparse entries also take ``sparse_index`` [N, K'/2]: the
    positions of the compressed values within each chunk, in the entry's own scheme
    (``tcnumerics.sparse.sparsity``: 0..3 for 2:4, 0..1 for TF32 1:2, aligned pairs 0..7
    for s4/u4 pairwise 4:8), validated as ``tcnumerics.sparse.check_index`` does.

    Example (needs a Hopper GPU, so not run as a doctest)::

        dot = GpuDot("hopper.mma.sp.m16n8k8.f32.tf32.tf32.f32")       # TF32 1:2: K/2 = 4
        one = np.full((1, 4), 0x3F800000, np.uint32)                    # four TF32 ones
        b = np.full((1, 8), 0x3F800000, np.uint32)
        idx = np.array([[0, 1, 1, 0]], np.uint8)                        # one position 0..1 per pair
        dot(one, b, np.zeros(1, np.uint32), idx)                        # -> [0x40800000] (4.0)
    """

    def __init__(self, name: str, check: bool = True):
        from ..catalog import get_instruction
        from .runtime import Probe, ProbeError

        self.spec = get_instruction(name)
        self.probe = Probe(self.spec.name)
        if check:
            result = self.probe.self_check()
            if not result.ok:
                raise ProbeError(f"{self.spec.name}: fragment self-check failed on this GPU ({result.detail})")

    def __call__(self, a, b, c, sparse_index=None) -> np.ndarray:
        from ..api import check_bits

        spec, t = self.spec, self.probe.target
        a = check_bits("a", a, spec.a_format, ndim=2)
        b = check_bits("b", b, spec.b_format, ndim=2)
        c = check_bits("c", c, spec.c_format, ndim=1)
        if b.shape[1] % t.k or b.shape[1] == 0 or a.shape != (len(c), b.shape[1] * t.a_k // t.k):
            raise ValueError(f"a, b: expected [N, K'] operands (sparse A: [N, K'/2]) with K' a positive multiple "
                             f"of {t.k} and N = len(c), got {a.shape}, {b.shape}, c {c.shape}")
        if b.shape[1] > t.k and spec.c_format != spec.d_format:
            raise ValueError(f"a: K={b.shape[1]} chains instructions, but {spec.name} takes C as "
                             f"{spec.c_format.name} and writes D as {spec.d_format.name}")
        if t.kind == "mma.sp":
            from ..sparse import check_index, sparsity

            if sparse_index is None:
                raise ValueError(f"sparse_index: {spec.name} is structured-sparse and needs the positions "
                                 "of the compressed A values")
            # the entry's own scheme: 2:4, TF32 1:2 or s4/u4 pairwise 4:8
            sparse_index = check_index(sparse_index, len(c), a.shape[1], sparsity(spec))
        elif sparse_index is not None:
            raise ValueError(f"sparse_index: {spec.name} is not a structured-sparse entry")
        acc = c
        for s in range(0, b.shape[1], t.k):
            sa = slice(s * t.a_k // t.k, (s + t.k) * t.a_k // t.k)
            idx = None if sparse_index is None else sparse_index[:, sa]
            acc = self.probe.dot(a[:, sa], b[:, s:s + t.k], acc, idx).astype(spec.d_format.container_dtype)
        return acc


def gpu_dot(name: str) -> Callable[..., np.ndarray]:
    """The GPU's own ``dot_bits`` for catalog entry ``name`` (compiled and self-checked once)."""
    return GpuDot(name)
