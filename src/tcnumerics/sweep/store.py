"""The resumable result store: a journal of finished rows, then one table (Parquet or CSV).

While a sweep runs, every finished task is appended to ``OUTPUT.journal`` (one JSON line,
flushed at once; JSON keeps floats exact).  The journal's first line records the spec's
digest and task count; a rerun with the same spec skips the tasks already journaled, a
different spec is refused.  When the last task is in, the rows are written to ``OUTPUT``
in task order (through a temporary file, then renamed) and the journal is removed.  A
line cut short by an interruption is ignored (that task runs again).

Example:
    >>> import os, tempfile
    >>> out = os.path.join(tempfile.mkdtemp(), "r.csv")
    >>> store = ResultStore(out, digest="abc", total=2)
    >>> store.done
    {}
    >>> store.add({"task": 1, "task_id": "t1", "x": 0.5}); store.add({"task": 0, "task_id": "t0", "x": 0.25})
    >>> ResultStore(out, digest="abc", total=2).done.keys() == {"t0", "t1"}
    True
    >>> store.finish(); read_table(out)["x"].tolist()
    [0.25, 0.5]
"""

from __future__ import annotations

import json
import os

from .._extras import install_hint
from .._files import OutputPathError, atomic_write, check_output

__all__ = ["ResultStore", "read_table", "write_table", "StoreError"]

_SUFFIXES = (".parquet", ".csv")


OVERWRITE_HINT = "pass overwrite=True, or --overwrite on the command line,"


class StoreError(ValueError):
    """An output that cannot be used (wrong suffix, exists, journal of another spec)."""


class ResultStore:
    """Rows of finished tasks, journaled as they arrive and written as one table at the end."""

    def __init__(self, output: "str | os.PathLike", *, digest: str, total: int, overwrite: bool = False) -> None:
        self.output = os.fspath(output)
        if not self.output.endswith(_SUFFIXES):
            raise StoreError(f"{self.output}: the output must end in .parquet or .csv")
        self.journal = self.output + ".journal"
        self.digest, self.total = digest, total
        try:  # before any work, naming the user's path (not the journal's)
            check_output(self.output, overwrite, OVERWRITE_HINT)
        except OutputPathError as exc:
            raise StoreError(str(exc)) from None
        _check_writer(self.output)  # before any work too: a missing pandas/pyarrow must not cost a whole sweep
        self.done: dict[str, dict] = {}
        self._fh = None  # a new journal is created with the first row: a run that fails to start leaves nothing
        if os.path.exists(self.journal):
            self._resume()
            self._fh = open(self.journal, "a", encoding="utf-8")

    def _resume(self) -> None:
        with open(self.journal, encoding="utf-8") as fh:
            lines = fh.read().split("\n")
        try:
            head = json.loads(lines[0])
        except ValueError:
            raise StoreError(f"{self.journal}: not a sweep journal (remove it to start over)") from None
        if head.get("digest") != self.digest:
            raise StoreError(f"{self.journal}: belongs to another spec (digest {head.get('digest')}, this spec "
                             f"{self.digest}); remove it or choose another output")
        for line in lines[1:]:
            try:
                row = json.loads(line)
            except ValueError:  # the line an interruption cut short
                continue
            self.done[row["task_id"]] = row
        if lines[-1] != "":  # make sure the next row starts on a line of its own
            with open(self.journal, "a", encoding="utf-8") as fh:
                fh.write("\n")

    def _write(self, obj: dict) -> None:
        self._fh.write(json.dumps(obj, allow_nan=True) + "\n")
        self._fh.flush()

    def add(self, row: dict) -> None:
        """Journal one finished task's row (flushed before returning)."""
        if self._fh is None:
            self._fh = open(self.journal, "w", encoding="utf-8")
            self._write({"digest": self.digest, "total": self.total})
        self.done[row["task_id"]] = row
        self._write(row)

    def finish(self) -> None:
        """Write the table in task order and remove the journal."""
        self.close()
        rows = sorted(self.done.values(), key=lambda r: r["task"])
        write_table(self.output, rows)
        if os.path.exists(self.journal):
            os.unlink(self.journal)

    def close(self) -> None:
        if self._fh is not None and not self._fh.closed:
            os.fsync(self._fh.fileno())
            self._fh.close()


def _check_writer(path: str) -> None:
    import importlib.util

    needed = ["pandas"] + (["pyarrow"] if path.endswith(".parquet") else [])
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if missing:
        raise StoreError(f"{path}: writing the table needs {' and '.join(missing)}, which is not installed: "
                         f"{install_hint('cluster')}")


def write_table(path: str, rows: list[dict]) -> None:
    """Rows as a Parquet or CSV table (columns in first-seen order), written atomically."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    if path.endswith(".parquet"):
        with atomic_write(path, "wb") as fh:
            frame.to_parquet(fh, index=False)
    else:
        with atomic_write(path, "w", encoding="utf-8", newline="") as fh:
            frame.to_csv(fh, index=False, float_format="%.17g")  # 17 digits: every double reads back exactly


def read_table(path: "str | os.PathLike"):
    """A results table back as a pandas DataFrame."""
    import pandas as pd

    path = os.fspath(path)
    if not os.path.exists(path):
        raise StoreError(f"{path}: no such results table")
    if path.endswith(".parquet"):
        return pd.read_parquet(path)
    if path.endswith(".csv"):
        return pd.read_csv(path, float_precision="round_trip")  # pandas 2.x's default parser may miss the last bits
    raise StoreError(f"{path}: expected a .parquet or .csv results table")
