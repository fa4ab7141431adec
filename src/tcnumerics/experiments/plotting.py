"""Helpers the experiment commands share: checking a figure's target before any work runs.

Example:
    >>> check_plot_target("figure.txt", force=False)
    Traceback (most recent call last):
    ...
    ValueError: --plot: expected a .png file name, got 'figure.txt'
"""

from __future__ import annotations

import os

from .._extras import install_hint
from .._files import atomic_write, output_problem


def check_plot_target(path: str, force: bool) -> None:
    """Refuse a --plot target that is not a new .png in an existing folder, or lacks matplotlib."""
    if not path.lower().endswith(".png"):
        raise ValueError(f"--plot: expected a .png file name, got {path!r}")
    if os.path.exists(path) and not force:
        raise ValueError(f"--plot: {path} exists; name another file, or pass --force to replace it")
    problem = output_problem(path)
    if problem:
        raise ValueError(f"--plot: {path}: {problem}")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ValueError(f"--plot: needs matplotlib, which is not installed: {install_hint('plot')}") from None


def save_figure(fig, path: str, dpi: int) -> None:
    """Write a matplotlib figure to ``path`` atomically, with the umask's permissions (replacing a file
    ``check_plot_target`` allowed)."""
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, dpi=dpi, format=os.path.splitext(path)[1].lstrip(".").lower() or "png")
