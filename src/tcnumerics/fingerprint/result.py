"""What a fingerprint found (``Fingerprint``) and the black boxes it probes (``catalog_dot``, the batching ``_Box``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..catalog import get_instruction
from ..model import InstructionSpec

Dot = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]

_ROUNDINGS = ("rz", "rne", "rna", "ru", "rd")
_OVERFLOWS = ("inf", "ieee", "saturate")
_SPAN = 60  # binades between the big and the small probe terms we try to reach


# --------------------------------------------------------------------------------------------
# the result

@dataclass
class Fingerprint:
    """What the probes found.  Lists hold every candidate the observations leave standing."""

    instruction: str
    k: int
    formats: dict
    kind: str = "unknown"  # fused | integer | binary | other
    groups: list | None = None  # K positions of each group, in processing order
    c_entry: str | None = None  # fused (C joins the first group) | ieee_add (C added last)
    group_size: int | None = None
    frac_bits: int | None = None
    frac_bits_at_least: int | None = None  # set when truncation was never observed up to this span
    zero_exponent: tuple | None = None  # (lo or None for unbounded below, hi) of consistent values
    output_rounding: list = field(default_factory=list)
    output_mantissa_bits: list = field(default_factory=list)
    output_overflow: list = field(default_factory=list)
    c_add_rounding: list = field(default_factory=list)
    operand_formats: list = field(default_factory=list)  # (a, b) formats the datapath reads
    specials: dict = field(default_factory=dict)
    integer: dict = field(default_factory=dict)
    spec: InstructionSpec | None = None
    reproduces: bool = False
    validation_vectors: int = 0
    matches: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    box_vectors: int = 0

    def to_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "spec"}
        d["spec"] = self.spec.describe() if self.spec is not None else None
        return json.loads(json.dumps(d, default=str))

    def report(self) -> str:
        """A human-readable multi-line report."""
        out = [f"fingerprint of {self.instruction} (K={self.k}, "
               f"{self.formats['a']} x {self.formats['b']} + {self.formats['c']} -> {self.formats['d']})"]
        if self.kind == "integer" or self.kind == "binary":
            out.append(f"  unit: {self.kind}, " + ", ".join(f"{k}={v}" for k, v in self.integer.items()))
        elif self.groups is not None:
            sizes = sorted({len(g) for g in self.groups})
            natural = [p for g in self.groups for p in g] == list(range(self.k))
            out.append(f"  groups: {len(self.groups)} of {'/'.join(map(str, sizes))} products "
                       f"({'natural K order' if natural else 'K order ' + str(self.groups)})")
            out.append(f"  C: {'fused into the first group' if self.c_entry == 'fused' else 'added last by a separate addition' if self.c_entry == 'ieee_add' else 'undetermined'}")
        if self.kind == "fused" or self.frac_bits is not None or self.frac_bits_at_least is not None:
            if self.frac_bits_at_least is not None:
                chosen = "exact (no truncation)" if self.frac_bits is None else f"F={self.frac_bits}"
                out.append(f"  fraction bits kept (F): no truncation seen up to {self.frac_bits_at_least} bits "
                           f"by the alignment probe; {chosen} fits every screening vector")
            elif self.frac_bits is not None:
                out.append(f"  fraction bits kept (F): {self.frac_bits}")
            if self.zero_exponent is not None:
                lo, hi = self.zero_exponent
                out.append(f"  zero exponent: {hi}" if lo == hi else
                           f"  zero exponent: any value <= {hi} (indistinguishable below)" if lo is None else
                           f"  zero exponent: {lo}..{hi}")
            if self.output_rounding:
                out.append(f"  output rounding: {' or '.join(r.upper() for r in self.output_rounding)}")
            if self.output_mantissa_bits:
                cut = [("full " + self.formats["d"]) if m is None else f"{m} bits" for m in self.output_mantissa_bits]
                out.append(f"  output mantissa: {' or '.join(cut)}")
            if self.output_overflow:
                out.append(f"  overflow: {' or '.join(self.output_overflow)}")
            if self.c_add_rounding:
                out.append(f"  C addition rounding: {' or '.join(r.upper() for r in self.c_add_rounding)}")
            if self.operand_formats and len(self.operand_formats) >= 1:
                f0 = self.operand_formats[0]
                if (f0[0], f0[1]) != (self.formats["a"], self.formats["b"]):
                    out.append(f"  datapath reads operands as {f0[0]} x {f0[1]} (converted exactly)")
        for k, v in self.specials.items():
            out.append(f"  {k}: {v}")
        for n in self.notes:
            out.append(f"  note: {n}")
        out.append(f"  inferred model reproduces the box on {self.validation_vectors} vectors: "
                   f"{'yes' if self.reproduces else 'NO'}")
        if self.spec is not None and self.reproduces:
            out.append("  model: " + self.spec.model.describe())
        if self.matches:
            out.append(f"  catalog entries that match on every vector ({len(self.matches)}): " +
                       ", ".join(self.matches[:12]) + (" ..." if len(self.matches) > 12 else ""))
        else:
            out.append("  catalog entries that match: none")
        out.append(f"  black-box vectors used: {self.box_vectors}")
        return "\n".join(out)


# --------------------------------------------------------------------------------------------
# black boxes

def catalog_dot(name: "str | InstructionSpec", engine: str = "auto") -> Dot:
    """A catalog entry as a black box (structured-sparse entries: their datapath's K)."""
    from ..api import Instruction

    inst = Instruction(get_instruction(name), engine)

    def dot(a, b, c):
        with np.errstate(all="ignore"):
            return inst.dot_bits(a, b, c)

    return dot


class _Box:
    """Calls the black box in bounded batches and counts the vectors it was shown."""

    def __init__(self, dot: Dot, spec: InstructionSpec, batch: int = 1 << 14):
        self.dot, self.spec, self.batch, self.vectors = dot, spec, batch, 0

    def __call__(self, a, b, c) -> np.ndarray:
        spec = self.spec
        a = np.ascontiguousarray(a, spec.a_format.container_dtype)
        b = np.ascontiguousarray(b, spec.b_format.container_dtype)
        c = np.ascontiguousarray(c, spec.c_format.container_dtype)
        out = np.empty(len(c), spec.d_format.container_dtype)
        for s in range(0, len(c), self.batch):
            e = min(len(c), s + self.batch)
            d = np.asarray(self.dot(a[s:e], b[s:e], c[s:e]))
            if d.shape != (e - s,):
                raise ValueError(f"dot: the black box returned shape {d.shape}, expected ({e - s},)")
            out[s:e] = d
        self.vectors += len(c)
        return out


def _model_dot(spec: InstructionSpec) -> Dot:
    from ..api import Instruction

    inst = Instruction(spec, "reference")

    def dot(a, b, c):
        with np.errstate(all="ignore"):
            return inst.dot_bits(a, b, c)

    return dot
