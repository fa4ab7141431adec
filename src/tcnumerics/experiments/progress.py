"""Progress bars for long experiment runs, written to standard error only.

Standard output is reserved for results (``--json`` prints one JSON array there and
nothing else), so progress always goes to ``sys.stderr``.  On a terminal the bar redraws
in place; otherwise (CI logs, pipes) it prints a few plain lines instead of hundreds.

Example:
    >>> import io
    >>> stream = io.StringIO()
    >>> with Progress(total=4, label="chain", stream=stream, enabled=True) as bar:
    ...     for _ in range(4):
    ...         bar.advance()
    >>> stream.getvalue().splitlines()[-1]
    'chain: 4/4 (100%)'
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """A counter from 0 to ``total`` reported on ``stream`` (default: standard error).

    ``enabled=False`` silences it (``--quiet``); redraws are throttled to ``interval``
    seconds so that a fast loop costs nothing measurable.
    """

    def __init__(self, total: int, label: str, *, stream: TextIO | None = None, enabled: bool = True,
                 interval: float = 0.2) -> None:
        if total < 0:
            raise ValueError(f"total: must be >= 0, got {total}")
        self.total = total
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.interval = interval
        self.done = 0
        self._last = 0.0
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._printed_decile = -1

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def advance(self, steps: int = 1) -> None:
        """Count ``steps`` more units of work done."""
        self.done = min(self.total, self.done + steps)
        if not self.enabled:
            return
        now = time.monotonic()
        if self._tty:
            if now - self._last >= self.interval or self.done == self.total:
                self._last = now
                self.stream.write("\r" + self._line(width=30))
                self.stream.flush()
        else:
            # plain streams: one line per tenth of the work
            decile = (10 * self.done) // max(1, self.total)
            if decile > self._printed_decile and self.done < self.total:
                self._printed_decile = decile
                self.stream.write(self._line() + "\n")

    def close(self) -> None:
        """Print the final state once."""
        if not self.enabled:
            return
        if self._tty:
            self.stream.write("\r" + self._line(width=30) + "\n")
        else:
            self.stream.write(self._line() + "\n")
        self.stream.flush()
        self.enabled = False  # close is idempotent

    def _line(self, width: int = 0) -> str:
        frac = self.done / self.total if self.total else 1.0
        bar = ""
        if width:
            filled = int(round(frac * width))
            bar = "[" + "#" * filled + "." * (width - filled) + "] "
        return f"{self.label}: {bar}{self.done}/{self.total} ({frac:.0%})"
