"""The Pareto view of a results table: a metric against one unit parameter, one line per design.

One workload's rows are drawn (the table's first unless told), averaged over seeds; every
other unit or workload parameter that varies splits the lines: the ``line`` parameter picks
the colour, the remaining ones the line style.

Example:
    >>> import pandas as pd
    >>> t = pd.DataFrame({"unit.frac_bits": [8, 25, 8, 25], "unit.group_size": [8, 8, 16, 16],
    ...                   "seed_index": [0, 0, 0, 0], "max_rel_error": [1e-2, 1e-7, 2e-2, 2e-7]})
    >>> [(label, xs) for label, xs, _ in pareto_lines(t, "unit.frac_bits", "max_rel_error")]
    [('group_size=8', [8, 25]), ('group_size=16', [8, 25])]
"""

from __future__ import annotations

import os

from .._extras import install_hint
from .._files import atomic_write, check_output

__all__ = ["pareto_lines", "plot_pareto", "default_axes", "one_workload"]

_METRICS = ("norm_rel_error", "max_rel_error", "mean_rel_error", "rel_error", "mean_abs_error")


def default_axes(table) -> tuple[str, str, str | None]:
    """(x, y, line): the first varying numeric unit parameter (frac_bits preferred), a relative error, and
    group_size (or the next varying parameter) for the lines."""
    varying = [c for c in table.columns if c.startswith(("unit.", "param.")) and table[c].nunique(dropna=False) > 1]
    numeric = [c for c in varying if c.startswith("unit.") and table[c].dtype.kind in "iuf"]
    numeric += [c for c in varying if c.startswith("param.") and table[c].dtype.kind in "iuf"]
    if not numeric:
        raise ValueError("plot: no numeric unit or workload parameter varies in this table; give --x")
    x = "unit.frac_bits" if "unit.frac_bits" in numeric else numeric[0]
    y = next((m for m in _METRICS if m in table.columns and table[m].notna().any()), None)
    if y is None:
        raise ValueError("plot: the table has none of the error metrics; give --y")
    others = [c for c in varying if c != x]
    line = "unit.group_size" if "unit.group_size" in others else (others[0] if others else None)
    return x, y, line


def _short(column: str) -> str:
    return column.split(".", 1)[1] if column.startswith(("unit.", "param.")) else column


def _split_columns(table, x: str) -> list[str]:
    """Every column but ``x`` that names what was run and varies: the unit, unit and workload parameters
    (seeds are the only thing averaged over)."""
    named = [c for c in table.columns if c in ("unit", "entry") or c.startswith(("unit.", "param."))]
    keys = [c for c in named if c != x and table[c].map(_value).nunique() > 1]
    if "entry" in keys and "unit" in keys and (table["entry"].map(_value) == table["unit"].map(_value)).all():
        keys.remove("entry")  # the same names twice
    return keys


def _value(v) -> str:
    """A label's value: NaN (a spec's "none" in a numeric column) as none, 128.0 as 128."""
    if isinstance(v, float):
        if v != v:
            return "none"
        if v.is_integer():
            return str(int(v))
    return str(v)


def _unit_names(names) -> dict[str, str]:
    """Unit names without the dotted suffix they all share (shown once, as the legend's title)."""
    parts = [str(n).split(".") for n in names]
    common = 0
    while all(len(p) > common + 1 for p in parts) and len({tuple(p[len(p) - common - 1:]) for p in parts}) == 1:
        common += 1
    return {str(n): ".".join(p[:len(p) - common]) for n, p in zip(names, parts)}


def pareto_lines(table, x: str, y: str, line: str | None = None) -> list[tuple[str, list, list]]:
    """[(label, xs, mean ys)] -- one per combination of the unit and the other varying parameters
    (``line`` first in the label); only seeds are averaged."""
    for column in (x, y) + ((line,) if line else ()):
        if column not in table.columns:
            raise ValueError(f"plot: no column {column!r} (columns: {', '.join(table.columns)})")
    keys = _split_columns(table, x)
    if line in keys:
        keys.remove(line)
        keys.insert(0, line)
    short_units = _unit_names(table["unit"].unique()) if "unit" in table.columns else {}
    out = []
    groups = table.groupby(keys, sort=False, dropna=False) if keys else [((), table)]
    for values, group in groups:
        values = values if isinstance(values, tuple) else (values,)
        label = ", ".join(short_units.get(str(v), str(v)) if k == "unit" else f"{_short(k)}={_value(v)}"
                          for k, v in zip(keys, values))
        curve = group.groupby(x, sort=True)[y].mean()
        out.append((label or y, curve.index.tolist(), curve.tolist()))
    return out


def one_workload(table, workload: str | None = None):
    """The rows of one workload (default: the table's first), without the columns it leaves empty."""
    if "workload" not in table.columns:
        return table
    names = list(dict.fromkeys(table["workload"]))
    workload = workload or names[0]
    if workload not in names:
        raise ValueError(f"plot: workload {workload!r} is not in the table (it has {', '.join(names)})")
    rows = table[table["workload"] == workload]
    return rows.dropna(axis=1, how="all")


def plot_pareto(table, path: "str | os.PathLike", *, x: str | None = None, y: str | None = None,
                line: str | None = None, title: str | None = None, workload: str | None = None,
                overwrite: bool = True) -> None:
    """Draw the lines of ``pareto_lines`` (log y) for one workload's rows into ``path`` (legend outside)."""
    check_output(path, overwrite, "pass overwrite=True / --overwrite")
    table = one_workload(table, workload)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ValueError(f"plot: needs matplotlib, which is not installed: {install_hint('plot')}") from None
    dx, dy, dline = default_axes(table) if None in (x, y) else (x, y, line)
    x, y, line = x or dx, y or dy, line or dline
    lines = pareto_lines(table, x, y, line)
    colours, markers, styles = {}, {}, {}
    ncol = 1 + len(lines) // 25
    fig, ax = plt.subplots(figsize=(7, max(4.5, 0.16 * len(lines) / ncol + 1)))
    for label, xs, ys in lines:
        head, _, rest = label.partition(", ")
        colour = colours.setdefault(head, f"C{len(colours) % 10}")
        style = styles.setdefault(rest, ("-", "--", ":", "-.")[len(styles) % 4])
        marker = markers.setdefault(rest, "os^vD<>xP*"[len(markers) % 10])
        ax.plot(xs, ys, style, marker=marker, ms=3, color=colour, label=label)
    ax.set_yscale("log")
    ax.set_xlabel(_short(x))
    ax.set_ylabel(f"{y} (mean over seeds)")
    name = table["workload"].iloc[0] if "workload" in table.columns else ""
    ax.set_title(title or f"{name}: {y} vs {_short(x)}")
    ax.grid(True, which="both", alpha=0.3)
    units = table["unit"].unique() if "unit" in table.columns else []
    suffix = str(units[0])[len(_unit_names(units)[str(units[0])]):] if len(units) > 1 else ""
    # outside the axes, right of them: a legend inside covers the data once there are more than a few lines
    ax.legend(fontsize=6, ncol=ncol, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              borderaxespad=0.0, title=f"unit (*{suffix})" if suffix else None, title_fontsize=6)
    fmt = os.path.splitext(os.fspath(path))[1].lstrip(".").lower() or "png"
    with atomic_write(path, "wb", overwrite=overwrite, hint="pass overwrite=True / --overwrite") as fh:
        fig.savefig(fh, dpi=120, format=fmt, bbox_inches="tight")
    plt.close(fig)
