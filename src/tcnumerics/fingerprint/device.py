"""The device adapter: a GPU's unit (``tcnumerics.probe.gpu_dot``) as the black box ``fingerprint`` probes."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .._extras import install_hint
from ..catalog import get_instruction
from ..model import InstructionSpec
from .result import Dot

def _gpu_dot(name: str) -> Dot:
    try:
        from ..probe import gpu_dot
    except ImportError as exc:
        raise ValueError(f"--gpu: the GPU probe is not available ({exc}); {install_hint('gpu')}") from None
    try:
        dot = gpu_dot(name)
    except ImportError as exc:
        raise ValueError(f"--gpu: CuPy / CUDA is not available here ({exc})") from None
    except Exception as exc:  # any device-side failure becomes one line
        raise ValueError(f"--gpu: cannot run {name} on this machine ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
    return _selected_products(dot, get_instruction(name))


def _selected_products(dot: Callable[..., np.ndarray], spec: InstructionSpec) -> Dot:
    """A structured-sparse unit seen through its datapath: ``(a, b_sel, c) -> d`` on the K/2 products.

    ``dot(a_compressed, b, c, sparse_index)`` is the sparse unit (the GPU's ``GpuDot``).  Every
    chunk keeps the first legal positions of the entry's own scheme (``tcnumerics.sparse``:
    positions 0, 1 of 4 for 2:4, 0 of 2 for TF32 1:2, the pairs 0..3 of 8 for s4/u4 pairwise
    4:8); ``b_sel`` is scattered there and the rest of B is zero.  Dense entries: ``dot`` itself.

    >>> from tcnumerics import sparse
    >>> spec = get_instruction("hopper.mma.sp.m16n8k8.f32.tf32.tf32.f32")
    >>> box = _selected_products(lambda a, b, c, idx: sparse.dot_bits(spec, a, b, c, idx), spec)
    >>> one = np.full((1, spec.k), 0x3F800000, np.uint32)         # four TF32 ones
    >>> hex(int(box(one, one, np.zeros(1, np.uint32))[0]))
    '0x40800000'
    """
    from .. import sparse

    if not sparse.is_sparse(spec):
        return dot
    scheme = sparse.sparsity(spec)
    first = scheme.combinations()[0]   # e.g. 2:4: positions (0, 1) of every chunk

    def box(a, b_sel, c):
        n, half = a.shape
        if half % scheme.kept:
            raise ValueError(f"a: K/2={half} is not whole {scheme.name} chunks of {scheme.kept} kept values")
        idx = np.tile(first, (n, half // scheme.kept))
        b = np.zeros((n, 2 * half), b_sel.dtype)
        np.put_along_axis(b, sparse.positions(idx, scheme), b_sel, axis=1)
        return dot(a, b, c, idx)

    return box
