"""Writing output files: the path checked before the work, then an atomic write that follows the umask.

Every writer of the package (vector files, their hex form, shard receipts, sweep tables, experiment
plots and JSON) goes through here, so that all of them

* refuse an output whose directory is missing or not writable *before* any work starts, naming the
  user's path (never a temporary file's);
* write to a hidden temporary file beside the output and move it into place, so a file appears
  complete or not at all, and never clobber an existing file unless asked;
* leave the file with the permissions an ordinary ``open(path, "w")`` would give (``0o666`` less the
  umask) -- ``tempfile.mkstemp`` creates its files ``0o600``, which would otherwise survive the rename.

>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> with atomic_write(os.path.join(d, "x.txt"), "w") as fh:
...     _ = fh.write("hello")
>>> open(os.path.join(d, "x.txt")).read()
'hello'
>>> output_problem(os.path.join(d, "missing", "x.txt"))
'its directory does not exist'
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Iterator

__all__ = ["OutputExistsError", "OutputPathError", "atomic_write", "check_output", "output_problem"]


class OutputPathError(OSError):
    """An output path that cannot be written; the message names the user's path."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason

    def __str__(self) -> str:
        return self.args[0]


class OutputExistsError(OutputPathError):
    """The output exists and the caller did not ask to replace it."""


def output_problem(path: "str | os.PathLike") -> "str | None":
    """Why ``path`` cannot be written as a new or replaced file, or None if it can (no file is created)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return "is a directory"
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.exists(directory):
        return "its directory does not exist"
    if not os.path.isdir(directory):
        return "its parent is not a directory"
    if not os.access(directory, os.W_OK | os.X_OK):
        return "its directory is not writable"
    return None


def check_output(path: "str | os.PathLike", overwrite: bool = False, hint: str = "pass overwrite=True") -> None:
    """Raise ``OutputPathError`` unless ``path`` can be written; ``OutputExistsError`` if it exists and not
    ``overwrite`` (``hint`` tells the caller how to replace it: a CLI passes ``"pass --overwrite"``)."""
    path = os.fspath(path)
    problem = output_problem(path)
    if problem:
        raise OutputPathError(path, problem)
    if os.path.lexists(path) and not overwrite:
        raise OutputExistsError(path, f"already exists ({hint} to replace it)")


def _umask() -> int:
    """The process umask, read without changing it where Linux allows (os.umask sets it, racing threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_write(path: "str | os.PathLike", mode: str = "wb", *, overwrite: bool = True,
                 hint: str = "pass overwrite=True", **open_kwargs) -> Iterator:
    """Open a temporary file beside ``path``; on a clean exit give it the umask's permissions and move it to
    ``path`` (never over an existing file unless ``overwrite``).  Errors name ``path``, not the temporary.
    ``mode`` is ``"wb"`` or ``"w"`` (text: ``open_kwargs`` go to ``open``)."""
    path = os.fspath(path)
    check_output(path, overwrite, hint)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".part", dir=directory)
    except OSError as exc:
        raise OutputPathError(path, exc.strerror or str(exc)) from None
    try:
        with os.fdopen(fd, mode, **open_kwargs) as fh:
            yield fh
        os.chmod(tmp, 0o666 & ~_umask())
        _commit(tmp, path, overwrite, hint)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _commit(tmp: str, path: str, overwrite: bool, hint: str) -> None:
    if overwrite:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)  # atomic, and fails where path exists
    except FileExistsError:
        raise OutputExistsError(path, f"already exists ({hint} to replace it)") from None
    except OSError:  # a file system without hard links
        if os.path.lexists(path):
            raise OutputExistsError(path, f"already exists ({hint} to replace it)") from None
        os.replace(tmp, path)
