"""Integer formats: two's-complement (signed) or unsigned integers, and binary (1 bit) -- their bit patterns,
values and conversions (``tcnumerics.formats`` registers them by name beside the float formats); and the numpy
container of a bit width, which every format stores its patterns in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

_CONTAINER_DTYPES = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


@dataclass(frozen=True)
class IntFormat:
    """A two's-complement (signed) or unsigned integer format, or binary (1 bit)."""

    name: str
    bits: int
    signed: bool
    aliases: tuple[str, ...] = field(default=(), compare=False)

    @property
    def width(self) -> int:
        return self.bits

    @property
    def container_bits(self) -> int:
        return 8 if self.bits <= 8 else 16 if self.bits <= 16 else 32

    @property
    def container_dtype(self) -> type:
        return _CONTAINER_DTYPES[self.container_bits]

    @property
    def is_integer(self) -> bool:
        return True

    @property
    def min_value(self) -> int:
        return -(1 << (self.bits - 1)) if self.signed else 0

    @property
    def max_value(self) -> int:
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1

    @property
    def dtype(self) -> np.dtype:
        return np.dtype({(32, True): np.int32, (8, True): np.int8, (8, False): np.uint8}.get(
            (self.bits, self.signed), np.int8 if self.signed else np.uint8))

    def decode_int(self, bits: np.ndarray) -> np.ndarray:
        """Bit patterns (low ``bits`` bits of each container) to int64 values."""
        raw = np.asarray(bits)
        if raw.dtype.kind not in "ui":
            raise TypeError(f"bits: expected an unsigned integer array of {self.name} patterns, got dtype {raw.dtype}")
        v = raw.astype(np.int64) & ((1 << self.bits) - 1)
        if self.signed:
            v = np.where(v >= (1 << (self.bits - 1)), v - (1 << self.bits), v)
        return v

    def encode_int(self, values: np.ndarray, overflow: Literal["wrap", "saturate", "error"] = "wrap") -> np.ndarray:
        """int values to bit patterns: wrap (two's complement), saturate, or raise on overflow."""
        v = np.asarray(values)
        if v.dtype.kind not in "iu":
            raise TypeError(f"values: expected integers for {self.name}, got dtype {v.dtype}")
        v = v.astype(np.int64)
        if overflow == "saturate":
            v = np.clip(v, self.min_value, self.max_value)
        elif overflow == "error":
            bad = (v < self.min_value) | (v > self.max_value)
            if np.any(bad):
                raise ValueError(f"values: {int(v[bad].flat[0])} is out of range for {self.name}")
        elif overflow != "wrap":
            raise ValueError(f"overflow: expected 'wrap', 'saturate' or 'error', got {overflow!r}")
        return (v & ((1 << self.bits) - 1)).astype(self.container_dtype)

    def to_float(self, bits: np.ndarray) -> np.ndarray:
        return self.decode_int(bits).astype(np.float64)

    def bits_of(self, values: np.ndarray, rounding=None) -> np.ndarray:
        x = np.asarray(values)
        if x.dtype.kind not in "iu":
            raise TypeError(f"values: expected integers for {self.name}, got dtype {x.dtype}")
        return self.encode_int(x, "error")

    def to_array(self, bits: np.ndarray) -> np.ndarray:
        return self.decode_int(bits).astype(self.dtype)

    def all_bits(self) -> np.ndarray:
        return np.arange(1 << self.bits, dtype=np.uint64).astype(self.container_dtype)

    def __repr__(self) -> str:
        return f"IntFormat({self.name}: {'s' if self.signed else 'u'}{self.bits})"
