"""Experiments: Sun et al.'s numeric study of tensor cores reproduced on the unit model, and more.

Each experiment is a module with ``add_arguments(parser)``, ``run(args) -> list[dict]``
and ``render(rows, args)``, run from the command line as ``tcnumerics reproduce NAME``
(see ``tcnumerics.experiments.cli``) or from Python through its own functions:

- ``elementwise``: error of multiplication, inner-product addition and accumulation
  (tables XII-XV of Sun et al., TPDS 2023), with the unit model's explanation per cell;
- ``chain``: relative L2 error along a chain of m16n8k8 MMAs (their Fig. 17);
- ``fused_vs_ieee``: how often and how far a per-operation IEEE FP16 model misses the
  fused units of Volta, Ampere and Hopper.

Example:
    >>> from tcnumerics.experiments.cli import EXPERIMENTS
    >>> "elementwise" in EXPERIMENTS
    True
"""
