"""Plans: how an output is computed, as a frozen printable tree (``nodes``), the arithmetic rules
(``rules``) and the one interpreter that runs any plan (``interpret``).  See docs/plans.md."""

from .interpret import run
from .nodes import (AddC, AddExact, Alpha, BlockScaledChain, Chain, Convert, Epilogue, FFMAChain, Input, Node,
                    OrderedSum, PairedChain, Plan, Promote, Reduction, RoundEach, RoundTo, Scale)

__all__ = ["run", "Plan", "Node", "Chain", "PairedChain", "BlockScaledChain", "Promote", "FFMAChain", "Reduction", "OrderedSum",
           "RoundEach", "Input", "Scale", "Epilogue", "Alpha", "AddC", "RoundTo", "AddExact", "Convert"]
