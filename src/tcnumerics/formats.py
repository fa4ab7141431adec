"""Number formats: one parametric floating-point description, integer formats, and
correctly rounded conversions between exact values and bit patterns.

A floating-point value is always handled as ``(-1)**sign * significand * 2**exponent``
with an integer significand, so every conversion is exact up to the one rounding the
caller asks for.  Arrays are numpy arrays throughout; bit patterns are unsigned integers
of the format's container width (``uint8``/``uint16``/``uint32``).

Example:
    >>> import numpy as np
    >>> from tcnumerics.formats import get_format
    >>> bf16 = get_format("bf16")
    >>> bits = bf16.from_float(np.array([1 + 2**-8 + 2**-40]))
    >>> float(bf16.to_float(bits)[0])        # correctly rounded, unlike a float32 detour
    1.0078125
    >>> hex(int(get_format("e4m3").from_float(np.array([448.0]))[0]))
    '0x7e'
"""

from __future__ import annotations

import difflib
import enum
from dataclasses import dataclass, field
from typing import Literal, Union

import numpy as np

from . import _casts
from .arrays import DeviceValues, float64, namespace
from .int_format import IntFormat, _CONTAINER_DTYPES

__all__ = ["Rounding", "FloatFormat", "IntFormat", "Format", "Decoded", "get_format", "format_names", "bit_length"]


class Rounding(str, enum.Enum):
    """Rounding modes.  ``SR`` is stochastic rounding driven by caller-supplied random bits."""

    RNE = "rne"  # to nearest, ties to even
    RNA = "rna"  # to nearest, ties away from zero
    RZ = "rz"  # toward zero (truncation)
    RU = "ru"  # toward +inf
    RD = "rd"  # toward -inf
    RTO = "rto"  # round to odd: truncate, then set the last bit if anything was dropped
    SR = "sr"  # stochastic: round up with probability (dropped part) / ulp

    @classmethod
    def parse(cls, value: "Rounding | str") -> "Rounding":
        if isinstance(value, Rounding):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            names = ", ".join(m.value for m in cls)
            raise ValueError(f"rounding: unknown mode {value!r}; expected one of {names}") from None


Overflow = Literal["ieee", "inf", "saturate", "nan"]
SubnormalPolicy = Literal["keep", "flush"]


class Decoded:
    """Bit patterns taken apart: ``value = (-1)**sign * significand * 2**ulp_exponent``.

    ``exponent`` is the exponent a matrix unit aligns on: the unbiased exponent of the
    leading bit for normal numbers, the minimum normal exponent for subnormals and zeros.
    ``kind`` is 0 for finite (zeros included), 1 for infinity, 2 for NaN.
    """

    __slots__ = ("sign", "significand", "ulp_exponent", "exponent", "kind")

    def __init__(self, sign, significand, ulp_exponent, exponent, kind):
        self.sign = sign
        self.significand = significand
        self.ulp_exponent = ulp_exponent
        self.exponent = exponent
        self.kind = kind

    @property
    def is_nan(self) -> np.ndarray:
        return self.kind == 2

    @property
    def is_inf(self) -> np.ndarray:
        return self.kind == 1

    @property
    def is_zero(self) -> np.ndarray:
        return (self.kind == 0) & (self.significand == 0)


def bit_length(x: np.ndarray) -> np.ndarray:
    """Vectorised ``int.bit_length`` for non-negative integers below 2**64 (numpy or CuPy)."""
    xp = namespace(x)
    m = xp.asarray(x).astype(np.uint64, copy=True)
    n = xp.zeros(m.shape, dtype=np.int64)
    for step in (32, 16, 8, 4, 2, 1):
        t = m >> np.uint64(step)
        big = t != 0
        n += xp.where(big, step, 0)
        m = xp.where(big, t, m)
    return n + (m != 0)


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format.

    Attributes:
        name: canonical short name (``"bf16"``, ``"e4m3"``, ...).
        exp_bits: exponent field width.
        man_bits: stored fraction (mantissa) bits.
        bias: exponent bias.
        signed: False for unsigned scale formats (ue8m0, ue4m3).
        specials: how inf/NaN are encoded --
            ``"ieee"``: all-ones exponent is inf (fraction 0) or NaN;
            ``"fn"``: no inf, all-ones exponent and fraction is NaN (one pattern per sign);
            ``"fnuz"``: no inf, no -0, the pattern ``1000...0`` is the only NaN;
            ``"none"``: every pattern is a finite number;
            ``"nan_only"``: no zero, no inf, the all-ones pattern is NaN (ue8m0).
        subnormals: whether exponent field 0 holds subnormals (False: an ordinary binade).
        container_bits: width of the unsigned integer the bits are stored in.
        pad_bits: low container bits below the value (TF32 lives in the top 19 of 32 bits).
    """

    name: str
    exp_bits: int
    man_bits: int
    bias: int
    signed: bool = True
    specials: Literal["ieee", "fn", "fnuz", "none", "nan_only"] = "ieee"
    subnormals: bool = True
    container_bits: int = 0
    pad_bits: int = 0
    aliases: tuple[str, ...] = field(default=(), compare=False)
    ml_dtype_name: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.container_bits == 0:
            width = self.width
            object.__setattr__(self, "container_bits", 8 if width <= 8 else 16 if width <= 16 else 32)

    # -- static properties -------------------------------------------------------
    @property
    def width(self) -> int:
        """Bits that carry the value (sign + exponent + fraction)."""
        return int(self.signed) + self.exp_bits + self.man_bits

    @property
    def container_dtype(self) -> type:
        return _CONTAINER_DTYPES[self.container_bits]

    @property
    def is_integer(self) -> bool:
        return False

    @property
    def has_inf(self) -> bool:
        return self.specials == "ieee"

    @property
    def has_nan(self) -> bool:
        return self.specials != "none"

    @property
    def has_negative_zero(self) -> bool:
        return self.signed and self.specials not in ("fnuz", "nan_only")

    @property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal binade."""
        return 1 - self.bias if self.subnormals else -self.bias

    @property
    def max_code(self) -> int:
        """Magnitude code (exponent and fraction fields) of the largest finite number."""
        all_ones = (1 << (self.exp_bits + self.man_bits)) - 1
        if self.specials == "ieee":
            return all_ones - (1 << self.man_bits)  # exponent all ones is reserved
        if self.specials in ("fn", "nan_only"):
            return all_ones - 1  # only the all-ones pattern is NaN
        return all_ones  # fnuz, none

    @property
    def emax(self) -> int:
        return (self.max_code >> self.man_bits) - self.bias

    @property
    def max_finite(self) -> float:
        return float(self.to_float(np.array([self.max_code << self.pad_bits]))[0])

    @property
    def min_normal(self) -> float:
        return float(2.0 ** self.emin)

    @property
    def min_subnormal(self) -> float:
        return float(2.0 ** (self.emin - self.man_bits)) if self.subnormals else self.min_normal

    @property
    def nan_bits(self) -> int:
        """A canonical quiet NaN (positive where the format has a sign)."""
        if self.specials == "ieee":
            code = ((1 << self.exp_bits) - 1) << self.man_bits | (1 << (self.man_bits - 1)) if self.man_bits else 0
            return code << self.pad_bits
        if self.specials in ("fn", "nan_only"):
            return ((1 << (self.exp_bits + self.man_bits)) - 1) << self.pad_bits
        if self.specials == "fnuz":
            return (1 << (self.width - 1)) << self.pad_bits
        raise ValueError(f"format {self.name} has no NaN")

    @property
    def inf_bits(self) -> int:
        if not self.has_inf:
            raise ValueError(f"format {self.name} has no infinity")
        return (((1 << self.exp_bits) - 1) << self.man_bits) << self.pad_bits

    @property
    def dtype(self) -> np.dtype | None:
        """The matching numpy / ml_dtypes dtype, or None where none exists (tf32, ue4m3, ...)."""
        if self.ml_dtype_name is None:
            return None
        if self.ml_dtype_name in ("float16", "float32", "float64"):
            return np.dtype(self.ml_dtype_name)
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, self.ml_dtype_name))

    # -- bits -> values ----------------------------------------------------------
    def _value_bits(self, bits: np.ndarray) -> np.ndarray:
        xp = namespace(bits)
        raw = xp.asarray(bits)
        if raw.dtype.kind not in "ui":
            raise TypeError(f"bits: expected an unsigned integer array of {self.name} patterns, got dtype {raw.dtype}")
        raw = raw.astype(np.uint64)
        return (raw >> np.uint64(self.pad_bits)) & np.uint64((1 << self.width) - 1)

    def decode(self, bits: np.ndarray) -> Decoded:
        """Take bit patterns apart into sign, integer significand and exponents (numpy or CuPy)."""
        xp = namespace(bits)
        v = self._value_bits(bits)
        mag_mask = np.uint64((1 << (self.exp_bits + self.man_bits)) - 1)
        code = (v & mag_mask).astype(np.int64)
        sign = ((v >> np.uint64(self.width - 1)) & np.uint64(1)).astype(bool) if self.signed else xp.zeros(v.shape, bool)
        field_e = code >> self.man_bits
        frac = code & ((1 << self.man_bits) - 1)
        if self.subnormals:
            normal = field_e > 0
            significand = xp.where(normal, frac | (1 << self.man_bits), frac)
            exponent = xp.maximum(field_e, 1) - self.bias
        else:
            significand = frac | (1 << self.man_bits)
            exponent = field_e - self.bias
        ulp_exponent = exponent - self.man_bits
        kind = xp.zeros(v.shape, dtype=np.int8)
        all_ones_e = (1 << self.exp_bits) - 1
        if self.specials == "ieee":
            special = field_e == all_ones_e
            kind = xp.where(special, xp.where(frac == 0, 1, 2), 0).astype(np.int8)
        elif self.specials in ("fn", "nan_only"):
            kind = xp.where(code == int(mag_mask), 2, 0).astype(np.int8)
        elif self.specials == "fnuz":
            kind = xp.where(sign & (code == 0), 2, 0).astype(np.int8)
            sign = sign & (code != 0)
        significand = xp.where(kind == 0, significand, 0)
        return Decoded(sign, significand.astype(np.int64), ulp_exponent.astype(np.int64),
                       exponent.astype(np.int64), kind)

    def to_float(self, bits: np.ndarray) -> np.ndarray:
        """Exact float64 values of bit patterns (NaN and inf included; NaNs are the canonical float64 NaN)."""
        fast = _casts.to_float(self, bits)
        if fast is not None:
            return fast
        xp = namespace(bits)
        d = self.decode(bits)
        mag = xp.ldexp(d.significand.astype(np.float64), d.ulp_exponent.astype(np.int32))
        out = xp.where(d.sign, -mag, mag)
        out = xp.where(d.kind == 1, xp.where(d.sign, -np.inf, np.inf), out)
        return xp.where(d.kind == 2, np.nan, out)

    # -- exact values -> bits ----------------------------------------------------
    def encode(
        self,
        sign: np.ndarray,
        magnitude: np.ndarray,
        exponent: np.ndarray,
        rounding: Rounding | str = Rounding.RNE,
        *,
        overflow: Overflow = "ieee",
        subnormals: SubnormalPolicy = "keep",
        random_bits: np.ndarray | None = None,
        random_bit_count: int = 32,
    ) -> np.ndarray:
        """Round exact values ``(-1)**sign * magnitude * 2**exponent`` into bit patterns.

        ``magnitude`` holds non-negative integers below 2**63.  Exactly one rounding
        happens here.  ``overflow`` chooses what a result beyond the largest finite number
        becomes: ``"ieee"`` follows IEEE 754 for the rounding direction (nearest modes give
        inf, RZ the largest finite, RU/RD by sign), ``"inf"`` always gives inf, ``"saturate"``
        the largest finite and ``"nan"`` NaN; formats without inf give NaN where inf is due
        (or saturate if they have no NaN either).  ``subnormals="flush"`` turns results that
        are subnormal after rounding into zero.  Stochastic rounding (``Rounding.SR``) rounds
        up iff ``top r dropped bits + random_bits >= 2**r`` with ``r = random_bit_count``.
        """
        rounding = Rounding.parse(rounding)
        xp = namespace(sign, magnitude, exponent)
        sign = xp.asarray(sign).astype(bool)
        mag = xp.asarray(magnitude)
        exponent = xp.asarray(exponent)
        if mag.dtype.kind not in "iu" or exponent.dtype.kind not in "iu":
            raise TypeError(f"magnitude, exponent: expected integer arrays, got dtypes {mag.dtype} and "
                            f"{exponent.dtype}")
        if mag.dtype.kind == "i" and mag.size and int(mag.min()) < 0:
            raise ValueError("magnitude: must be non-negative")
        mag = mag.astype(np.uint64)
        exp2 = exponent.astype(np.int64)
        sign, mag, exp2 = xp.broadcast_arrays(sign, mag, exp2)
        p = self.man_bits

        lead = exp2 + bit_length(mag) - 1
        if self.subnormals:
            quantum = xp.maximum(lead - p, self.emin - p)
        else:
            quantum = lead - p
        shift = quantum - exp2  # > 0: bits are dropped; <= 0: exact
        right = xp.clip(shift, 0, 64).astype(np.uint64)
        left = xp.clip(-shift, 0, 63).astype(np.uint64)
        trunc = xp.where(right >= 64, np.uint64(0), mag >> xp.minimum(right, np.uint64(63)))
        rem = xp.where(right >= 64, mag, mag - (trunc << xp.minimum(right, np.uint64(63))))
        half = xp.where(right > 0, np.uint64(1) << (xp.maximum(right, np.uint64(1)) - np.uint64(1)), np.uint64(0))
        inexact = rem != 0
        odd = (trunc & np.uint64(1)) == 1
        if rounding is Rounding.RNE:
            up = (rem > half) | ((rem == half) & inexact & odd)
        elif rounding is Rounding.RNA:
            up = inexact & (rem >= half)
        elif rounding is Rounding.RZ or rounding is Rounding.RTO:
            up = xp.zeros(mag.shape, bool)
        elif rounding is Rounding.RU:
            up = inexact & ~sign
        elif rounding is Rounding.RD:
            up = inexact & sign
        else:  # stochastic
            if random_bits is None:
                raise ValueError("random_bits: stochastic rounding needs caller-supplied random bits")
            if not 1 <= random_bit_count <= 32:
                raise ValueError("random_bit_count: must be between 1 and 32")
            rnd = xp.broadcast_to(xp.asarray(random_bits).astype(np.uint64), mag.shape)
            rnd = rnd & np.uint64((1 << random_bit_count) - 1)
            r = random_bit_count
            true_shift = xp.clip(shift, 0, 200)
            down = xp.clip(true_shift - r, 0, 64).astype(np.uint64)
            upsh = xp.clip(r - true_shift, 0, 63).astype(np.uint64)
            top = xp.where(down >= 64, np.uint64(0), rem >> xp.minimum(down, np.uint64(63))) << upsh
            up = inexact & ((top + rnd) >= np.uint64(1 << r))
        sig = xp.where(shift > 0, trunc + up.astype(np.uint64), mag << left)
        if rounding is Rounding.RTO:
            sig = sig | inexact.astype(np.uint64)
        carry = sig >> np.uint64(p + 1) != 0
        sig = xp.where(carry, sig >> np.uint64(1), sig)
        quantum = quantum + carry

        normal = sig >= np.uint64(1 << p)
        field_e = xp.where(normal, quantum + p + self.bias, 0)
        frac = xp.where(normal, sig - np.uint64(1 << p) * normal, sig).astype(np.int64)
        code = (field_e << p) | frac
        zero = sig == 0
        if subnormals == "flush":
            zero = zero | (~normal)
        elif subnormals != "keep":
            raise ValueError(f"subnormals: expected 'keep' or 'flush', got {subnormals!r}")
        if not self.subnormals:
            # no subnormals and no zero (ue8m0): underflow saturates to the smallest value
            zero = zero & (mag == 0)
            code = xp.where(field_e < 0, 0, code)
        code = xp.where(zero, 0, code)
        over = (code > self.max_code) | (field_e > (self.max_code >> p))
        out = self._finish(sign, code, over, rounding, overflow)
        if self.specials == "nan_only":
            out = xp.where(mag == 0, self.nan_bits, out)  # no zero to round to
        return out

    def _finish(self, sign, code, over, rounding, overflow) -> np.ndarray:
        """Pack sign and magnitude code, resolving overflow and unsigned negatives."""
        xp = namespace(code)
        if overflow not in ("ieee", "inf", "saturate", "nan"):
            raise ValueError(f"overflow: expected 'ieee', 'inf', 'saturate' or 'nan', got {overflow!r}")
        if overflow == "ieee":  # nearest (and stochastic) modes overflow to inf; directed ones by their direction
            to_inf = {Rounding.RU: ~sign, Rounding.RD: sign, Rounding.RZ: False, Rounding.RTO: False}.get(rounding, True)
            to_inf = xp.broadcast_to(xp.asarray(to_inf), code.shape)
        else:
            to_inf = xp.full(code.shape, overflow in ("inf", "nan"))
        big_code = self._inf_or_nan_code(overflow == "nan")
        code = xp.where(over, xp.where(to_inf, big_code, self.max_code), code)
        is_nan_code = over & to_inf & (big_code != self._inf_code())
        if not self.has_negative_zero:
            sign = sign & (code != 0)
        if self.specials == "fnuz":
            # the only NaN is the "negative zero" pattern
            sign = xp.where(is_nan_code, True, sign)
            code = xp.where(is_nan_code, 0, code)
        if not self.signed:
            neg = sign & (code != 0)
            nan_code = (1 << (self.exp_bits + self.man_bits)) - 1 if self.has_nan else self.max_code
            code = xp.where(neg, nan_code if self.has_nan else 0, code)
            sign = xp.zeros_like(sign)
        bits = (sign.astype(np.uint64) << np.uint64(self.width - 1)) * self.signed | code.astype(np.uint64)
        return (bits << np.uint64(self.pad_bits)).astype(self.container_dtype)

    def _inf_code(self) -> int:
        return (((1 << self.exp_bits) - 1) << self.man_bits) if self.has_inf else -1

    def _inf_or_nan_code(self, want_nan: bool) -> int:
        if self.has_inf and not want_nan:
            return self._inf_code()
        if self.specials in ("fn", "nan_only"):
            return (1 << (self.exp_bits + self.man_bits)) - 1
        if self.specials == "ieee":
            return (((1 << self.exp_bits) - 1) << self.man_bits) | (1 << max(self.man_bits - 1, 0))
        if self.specials == "fnuz":
            return 0  # packed with the sign bit in _finish
        return self.max_code  # no NaN, no inf: saturate

    def from_float(
        self,
        values: np.ndarray,
        rounding: Rounding | str = Rounding.RNE,
        *,
        overflow: Overflow = "ieee",
        subnormals: SubnormalPolicy = "keep",
        random_bits: np.ndarray | None = None,
        random_bit_count: int = 32,
    ) -> np.ndarray:
        """Correctly round float64 (or float32, float16, ml_dtypes) values into bit patterns.

        >>> import numpy as np
        >>> fp16 = get_format("fp16")
        >>> [hex(int(b)) for b in fp16.from_float(np.array([1.0, 65520.0, -0.0]))]
        ['0x3c00', '0x7c00', '0x8000']
        >>> [hex(int(b)) for b in fp16.from_float(np.array([65520.0]), "rz")]
        ['0x7bff']
        """
        if isinstance(values, DeviceValues):
            values = values.format.to_float(values.bits)
        xp = namespace(values, random_bits)
        x = xp.asarray(values)
        if x.dtype.kind not in "fiu" and x.dtype.kind != "V":
            raise TypeError(f"values: expected a numeric array, got dtype {x.dtype}")
        rounding = Rounding.parse(rounding)
        if rounding is Rounding.RNE and subnormals == "keep":
            fast = _casts.from_float(self, x, overflow)
            if fast is not None:
                return fast
        x = float64(x)  # exact on a GPU too (CuPy's float32 cast flushes subnormals)
        finite = xp.isfinite(x)
        safe = xp.where(finite, x, 0.0)
        m, e = xp.frexp(xp.abs(safe))
        mag = xp.ldexp(m, 53).astype(np.uint64)
        sign = xp.signbit(x)
        bits = self.encode(sign, mag, e.astype(np.int64) - 53, rounding, overflow=overflow,
                           subnormals=subnormals, random_bits=random_bits, random_bit_count=random_bit_count)
        if bool(xp.all(finite)):
            return bits
        inf_policy = overflow if overflow != "ieee" else "inf"
        if self.has_inf and inf_policy == "inf":
            inf_code = self._inf_code()
        elif inf_policy == "saturate" or not self.has_nan:
            inf_code = self.max_code
        else:
            inf_code = None
        inf_pos = self._pack_special(False, inf_code)
        inf_neg = self._pack_special(True, inf_code)
        nan = self.nan_bits if self.has_nan else self._pack_special(False, 0)
        infinite = xp.isinf(x)
        bits = xp.where(infinite & (x > 0), inf_pos, bits)
        bits = xp.where(infinite & (x < 0), inf_neg, bits)
        bits = xp.where(xp.isnan(x), nan, bits)
        return bits.astype(self.container_dtype)

    def _pack_special(self, negative: bool, code: int | None) -> int:
        if code is None:
            if self.specials == "fn" and negative and self.signed:
                return ((1 << (self.width - 1)) << self.pad_bits) | self.nan_bits
            return self.nan_bits
        if not self.signed and negative:
            return self.nan_bits if self.has_nan else 0
        s = (1 << (self.width - 1)) if (negative and self.signed) else 0
        return (s | code) << self.pad_bits

    def round(self, values: np.ndarray, rounding: Rounding | str = Rounding.RNE, **kwargs) -> np.ndarray:
        """Round values to this format and return them as float64 (same keywords as from_float)."""
        if not kwargs and Rounding.parse(rounding) is Rounding.RNE and not isinstance(values, DeviceValues):
            fast = _casts.fp32_round(self, namespace(values).asarray(values))
            if fast is not None:
                return fast
        return self.to_float(self.from_float(values, rounding, **kwargs))

    def to_array(self, bits: np.ndarray) -> np.ndarray:
        """Bit patterns as an array of the matching ml_dtypes/numpy type (float32 containers for tf32).

        Device bit patterns (CuPy) stay on the GPU: a CuPy array of FP16/FP32/FP64 (float32 for TF32-like
        formats), else ``DeviceValues`` of this format (CuPy has no BF16/FP8 dtypes)."""
        dt = self.dtype
        if namespace(bits) is not np:
            bits = bits.astype(self.container_dtype, copy=False)
            if dt is not None and dt.kind == "f":
                return bits.view(dt)
            return bits.view(np.float32) if dt is None and self.container_bits == 32 else DeviceValues(bits, self)
        b = np.asarray(bits).astype(self.container_dtype)
        if dt is None:
            if self.container_bits == 32:
                return b.view(np.float32)
            raise TypeError(f"format {self.name} has no numpy dtype; use to_float()")
        return b.view(dt)

    def bits_of(self, values: np.ndarray, rounding: Rounding | str = Rounding.RNE) -> np.ndarray:
        """Bit patterns of an array: a bit view when its dtype is this format's, else a conversion."""
        if isinstance(values, DeviceValues):
            return values.bits.copy() if values.format == self else self.from_float(values, rounding)
        xp = namespace(values)
        x = xp.asarray(values)
        dt = self.dtype
        if dt is not None and x.dtype == dt:
            return x.view(self.container_dtype).copy()
        if self.container_bits == 32 and self.pad_bits and x.dtype == np.float32:
            # TF32 operands travel in float32 containers; the unit reads only the upper bits
            return x.view(np.uint32).copy()
        if x.dtype.kind in "ui" and dt is None:
            raise TypeError(f"values: got integers for float format {self.name}; pass values or use bit APIs")
        return self.from_float(x, rounding)

    def all_bits(self) -> np.ndarray:
        """Every bit pattern of the format (formats of at most 16 value bits)."""
        if self.width > 16:
            raise ValueError(f"format {self.name} has 2**{self.width} patterns; too many to list")
        return (np.arange(1 << self.width, dtype=np.uint64) << np.uint64(self.pad_bits)).astype(self.container_dtype)

    def __repr__(self) -> str:
        return (f"FloatFormat({self.name}: e{self.exp_bits}m{self.man_bits}, bias {self.bias}, "
                f"{self.specials}{'' if self.signed else ', unsigned'})")


Format = Union[FloatFormat, IntFormat]

_FORMATS: list[Format] = [
    FloatFormat("fp64", 11, 52, 1023, container_bits=64, aliases=("f64", "float64", "double"), ml_dtype_name="float64"),
    FloatFormat("fp32", 8, 23, 127, aliases=("f32", "float32", "float"), ml_dtype_name="float32"),
    FloatFormat("tf32", 8, 10, 127, container_bits=32, pad_bits=13, aliases=("f19",)),
    FloatFormat("e8m13", 8, 13, 127, container_bits=32, pad_bits=10, aliases=("fp32-e8m13",)),
    FloatFormat("fp16", 5, 10, 15, aliases=("f16", "float16", "half", "e5m10"), ml_dtype_name="float16"),
    FloatFormat("bf16", 8, 7, 127, aliases=("bfloat16", "e8m7"), ml_dtype_name="bfloat16"),
    FloatFormat("e4m3", 4, 3, 7, specials="fn", aliases=("e4m3fn", "fp8e4m3", "float8_e4m3fn"), ml_dtype_name="float8_e4m3fn"),
    FloatFormat("e5m2", 5, 2, 15, aliases=("fp8e5m2", "float8_e5m2"), ml_dtype_name="float8_e5m2"),
    FloatFormat("e4m3fnuz", 4, 3, 8, specials="fnuz", aliases=("float8_e4m3fnuz",), ml_dtype_name="float8_e4m3fnuz"),
    FloatFormat("e5m2fnuz", 5, 2, 16, specials="fnuz", aliases=("float8_e5m2fnuz",), ml_dtype_name="float8_e5m2fnuz"),
    FloatFormat("e2m3", 2, 3, 1, specials="none", aliases=("e2m3fn", "fp6e2m3", "float6_e2m3fn"), ml_dtype_name="float6_e2m3fn"),
    FloatFormat("e3m2", 3, 2, 3, specials="none", aliases=("e3m2fn", "fp6e3m2", "float6_e3m2fn"), ml_dtype_name="float6_e3m2fn"),
    FloatFormat("e2m1", 2, 1, 1, specials="none", aliases=("e2m1fn", "fp4", "fp4e2m1", "float4_e2m1fn"), ml_dtype_name="float4_e2m1fn"),
    FloatFormat("ue8m0", 8, 0, 127, signed=False, specials="nan_only", subnormals=False, aliases=("e8m0", "e8m0fnu", "float8_e8m0fnu"), ml_dtype_name="float8_e8m0fnu"),
    FloatFormat("ue4m3", 4, 3, 7, signed=False, specials="fn", container_bits=8),
    IntFormat("s32", 32, True, aliases=("int32", "i32")),
    IntFormat("s8", 8, True, aliases=("int8", "i8")),
    IntFormat("u8", 8, False, aliases=("uint8",)),
    IntFormat("s4", 4, True, aliases=("int4", "i4")),
    IntFormat("u4", 4, False, aliases=("uint4",)),
    IntFormat("b1", 1, False, aliases=("binary", "bit")),
]
_BY_NAME: dict[str, Format] = {}
for _f in _FORMATS:
    for _n in (_f.name, *_f.aliases):
        _BY_NAME[_n] = _f


def format_names() -> list[str]:
    """Canonical names of every known format."""
    return [f.name for f in _FORMATS]


def get_format(name: "str | Format") -> Format:
    """Look a format up by name or alias (``"bf16"``, ``"float8_e4m3fn"``, ``"s8"``, ...).

    >>> get_format("f16").name
    'fp16'
    """
    if isinstance(name, (FloatFormat, IntFormat)):
        return name
    if not isinstance(name, str):
        raise TypeError(f"format: expected a format name, got {type(name).__name__}")
    key = name.strip().lower()
    if key in _BY_NAME:
        return _BY_NAME[key]
    close = difflib.get_close_matches(key, list(_BY_NAME), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ValueError(f"format: unknown format {name!r}{hint} (known: {', '.join(format_names())})")
