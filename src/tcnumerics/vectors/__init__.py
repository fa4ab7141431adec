"""Golden vectors: input families, the ``.npz`` / hex file formats, replay and the CLI.

Example:
    >>> import numpy as np
    >>> from tcnumerics.vectors import generate, expected_d
    >>> a, b, c = generate("hopper.mma.m16n8k32.s32.s8.s8.s32", "int", 3, np.random.default_rng(1))
    >>> expected_d("hopper.mma.m16n8k32.s32.s8.s8.s32", a, b, c).dtype
    dtype('uint32')
"""

from .families import FAMILIES, expected_d, families_for, generate, generate_scaled, is_block_scaled, scale_extremes

__all__ = ["FAMILIES", "families_for", "generate", "generate_scaled", "expected_d", "is_block_scaled",
           "scale_extremes"]
