"""Optional extras: one message for a missing one, naming the ``pip install`` that brings it.

>>> install_hint("torch")
'pip install "tcnumerics[torch]"'
>>> require("math", "plot", "drawing").pi > 3
True
>>> require("no_such_module_xyz", "plot", "drawing")
Traceback (most recent call last):
...
ModuleNotFoundError: drawing needs no_such_module_xyz, which is not installed: pip install "tcnumerics[plot]"
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["EXTRAS", "install_hint", "missing_extra", "require"]

# the extras of pyproject.toml and the modules each brings
EXTRAS = {"torch": ("torch",), "plot": ("matplotlib",), "gpu": ("cupy",),
          "cluster": ("dask", "distributed", "pandas", "pyarrow")}


def install_hint(extra: str) -> str:
    """The command that installs ``extra``."""
    if extra not in EXTRAS:
        raise ValueError(f"no extra {extra!r} (extras: {', '.join(EXTRAS)})")
    return f'pip install "tcnumerics[{extra}]"'


def missing_extra(module: str, extra: str, what: str) -> ModuleNotFoundError:
    """The error to raise when ``what`` finds ``module`` (part of ``extra``) missing."""
    return ModuleNotFoundError(f"{what} needs {module}, which is not installed: {install_hint(extra)}",
                               name=module)


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module`` or raise ``missing_extra``'s error (an ImportError naming the install command)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name != module and not module.startswith(exc.name + "."):
            raise  # a module the extra itself lacks: its own message says more
        raise missing_extra(module, extra, what) from None
