"""The sweep's one error: a malformed spec, named by the dotted path of its field (every sweep module raises it)."""


class SpecError(ValueError):
    """A malformed sweep spec; the message names the field (``units.grid.frac_bits: ...``)."""
