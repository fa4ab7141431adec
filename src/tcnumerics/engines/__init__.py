"""Engines that evaluate the unit model: ``reference`` (readable numpy, the specification),
``fast`` (compiled, bit-identical to the reference) and ``exact`` (the mpmath/fractions oracle)."""

from __future__ import annotations

ENGINES = ("auto", "reference", "fast", "exact")


def get_engine(name: str):
    """The module implementing ``dot_bits(spec, a, b, c)`` for an engine name."""
    if name not in ENGINES:
        raise ValueError(f"engine: expected one of {', '.join(ENGINES)}, got {name!r}")
    if name == "exact":
        from . import oracle

        return oracle
    if name in ("fast", "auto"):
        try:
            from . import fast
        except ImportError:
            if name == "fast":
                raise
        else:
            return fast
    from . import reference

    return reference
