"""Helpers the experiment commands share: checking a figure's target before any work runs.

Example:
    >>> check_plot_target("figure.txt", force=False)
    Traceback (most recent call last):
    ...
    ValueError: --plot: expected a .png file name, got 'figure.txt'
"""

from __future__ import annotations

import os


def check_plot_target(path: str, force: bool) -> None:
    """Refuse a --plot target that is not a new .png in an existing folder, or lacks matplotlib."""
    if not path.lower().endswith(".png"):
        raise ValueError(f"--plot: expected a .png file name, got {path!r}")
    if os.path.exists(path) and not force:
        raise ValueError(f"--plot: {path} exists; name another file, or pass --force to replace it")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ValueError(f"--plot: directory {parent} does not exist")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ValueError("--plot: needs matplotlib (pip install -e \".[plot]\")") from None
