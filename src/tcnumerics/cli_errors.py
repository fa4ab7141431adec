"""The command line's one-line errors, at the bottom of the house so every command's module can raise them.

``tcnumerics.cli`` (the top room) loads each command's module by name; those modules sit in lower rooms
(``experiments``, ``probe``, ...) and must not import the top one back.  So the error and the parser that turns
argparse's usage dump into that error live here.

    >>> try:
    ...     OneLineParser(prog="tcnumerics demo").parse_args(["--nope"])
    ... except CLIError as e:
    ...     print(e.code, e)
    2 tcnumerics demo: unrecognized arguments: --nope
"""

from __future__ import annotations

import argparse

__all__ = ["CLIError", "OneLineParser"]


class CLIError(Exception):
    """An error to print as one line; ``code`` is the exit status (2: bad input, 1: a check that failed)."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors raise ``CLIError`` (one line, exit 2) instead of printing usage."""

    def error(self, message: str) -> None:
        raise CLIError(f"{self.prog}: {message}", 2)
