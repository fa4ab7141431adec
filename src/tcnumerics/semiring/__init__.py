"""SIMD2 semiring matrix operations (min-plus, max-min, or-and, plus-norm, ...) on the unit model.

``tcnumerics.semiring_matmul(A, B, C, op="min-plus")`` for whole matrices of values;
``semiring_instruction(op, in_format, out_format)`` for bit-level work.  Modules: ``ops``
(the nine operations as data), ``reference`` (numpy specification), ``fast`` (numba
kernels), ``oracle`` (exact Fractions), ``core`` (the API).  Numerics: ``docs/semiring.md``.

Example:
    >>> import numpy as np
    >>> from tcnumerics.semiring import semiring_matmul, op_names
    >>> len(op_names())
    9
    >>> R = np.array([[1, 1, 0], [0, 1, 1], [0, 0, 1]], bool)
    >>> semiring_matmul(R, R, op="or-and").astype(int).tolist()   # reachability in <= 2 steps
    [[1, 1, 1], [0, 1, 1], [0, 0, 1]]
"""

from .core import (DEFAULT_UNIT, ENGINES, SemiringUnit, format_of_dtype, semiring_closure, semiring_instruction,
                   semiring_matmul)
from .ops import OPS, SemiringOp, get_op, op_names

__all__ = ["semiring_matmul", "semiring_closure", "semiring_instruction", "SemiringUnit", "SemiringOp", "OPS",
           "get_op", "op_names", "DEFAULT_UNIT", "ENGINES", "format_of_dtype"]
