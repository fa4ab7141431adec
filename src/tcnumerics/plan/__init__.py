"""Plans: how an output is computed, as a frozen printable tree (``nodes``), the arithmetic rules
(``rules``) and the one interpreter that runs any plan (``interpret``).  See docs/plans.md."""

from .interpret import run
from .nodes import (AddC, AddExact, Alpha, BlockScaledChain, Chain, Convert, Epilogue, FFMAChain, Input, LayOut, Node,
                    OrderedSum, PairedChain, Plan, Promote, RoundEach, RoundTo, Scale, TileGroups)

__all__ = ["run", "Plan", "Node", "Chain", "PairedChain", "BlockScaledChain", "Promote", "FFMAChain", "OrderedSum",
           "RoundEach", "Input", "LayOut", "TileGroups", "Scale", "Epilogue", "Alpha", "AddC", "RoundTo", "AddExact",
           "Convert"]
