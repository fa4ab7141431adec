"""The one vocabulary of input families: the hard cases that test a matrix unit's arithmetic, by one name each.

Two generators draw them -- ``tcnumerics.strategies`` (hypothesis strategies and seeded bulk samplers, for property
tests) and ``tcnumerics.vectors.families`` (golden vectors, the GPU probe's inputs) -- each for its purpose, both
under these names.  Each generator supports the families that make sense for it (``strategies.families``,
``vectors.families_for``).  The names are the ones stored in the vector files and printed by the CLI:

``int``        small integers: every result exact, a layout and sign check.
``normal``     N(0, 1) values rounded to each format (typical ML data).
``bits``       uniformly random bit patterns, all binades (the vectors' also NaN and inf).
``cancel``     catastrophic cancellation: what remains is what alignment and truncation lost.
``align``      wide exponent spans: small terms straddling the alignment's truncation point.
``cdom``       accumulator-dominant: a large C, products near half an output ulp -- rounding ties.
``subnormal``  subnormal operands and accumulators (the zero exponent).
``special``    zeros of both signs, infinities, NaNs with payloads, the largest finite values.
``tf32``       TF32 operands with garbage in the low 13 container bits.
``overflow``   results beyond the output range: inf, saturation, integer wraparound.

The strategies' earlier names stay accepted, with a ``DeprecationWarning``: ``uniform`` (``bits``),
``cancellation`` (``cancel``), ``wide_alignment`` (``align``), ``accumulator_dominant`` (``cdom``).

    >>> canonical_family("cdom")
    'cdom'
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     name = canonical_family("accumulator_dominant")
    >>> name, seen[0].category.__name__
    ('cdom', 'DeprecationWarning')
"""

from __future__ import annotations

import warnings

FAMILY_NAMES: tuple[str, ...] = ("int", "normal", "bits", "cancel", "align", "cdom", "subnormal", "special", "tf32",
                                 "overflow")
DEPRECATED_NAMES: dict[str, str] = {"uniform": "bits", "cancellation": "cancel", "wide_alignment": "align",
                                    "accumulator_dominant": "cdom"}


def canonical_family(name):
    """The family's name in the one vocabulary: a deprecated name mapped (with a ``DeprecationWarning``), anything
    else returned as it is (the caller says which families it supports)."""
    if isinstance(name, str) and name in DEPRECATED_NAMES:
        new = DEPRECATED_NAMES[name]
        warnings.warn(f"input family {name!r} is now called {new!r} (tcnumerics.family_names)", DeprecationWarning,
                      stacklevel=3)
        return new
    return name
