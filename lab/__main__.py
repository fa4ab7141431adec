"""The lab's one command: ``python -m lab`` lists its tools, ``python -m lab TOOL [ARGS...]`` runs one.

A tool is a script of ``lab/device`` (silicon captures and probes), ``lab/device_library`` (cuBLAS surveys:
survey, capture, fold, fit, replay) or ``lab/device_models`` (model captures and replays), or a top-level ``lab/*.py`` program (``oracle_check.py``, ``attribution_input_gradients.py``, ...);
its name is the file's stem (``folder.stem`` where two folders share one).  The tool runs as ``python3 lab/...``
would run it, with ``src`` and ``lab/device_library`` on the import path.  The device runner (``lab/run.sh``) is
``python -m lab run ...``.  lab/README.md documents the workflow.

    python -m lab                                   # the tools, one line each
    python -m lab replay_survey CAPTURE.npz --side 16
    python -m lab finished                          # the finished investigations: what each found, where it went
    OUT=out python -m lab run gpu-survey h100       # on the device machine
"""
from __future__ import annotations

import ast
import json
import os
import runpy
import subprocess
import sys

LAB = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(LAB)
FOLDERS = ("device_library", "device", "device_models")


def tools() -> dict[str, str]:
    """Tool name -> script path: every lab script that runs as a program."""
    found: dict[str, list[str]] = {}
    for folder in FOLDERS:
        for name in sorted(os.listdir(os.path.join(LAB, folder))):
            path = os.path.join(LAB, folder, name)
            if name.endswith(".py") and '__name__ == "__main__"' in open(path, encoding="utf-8").read():
                found.setdefault(name[:-3], []).append(path)
    for name in sorted(os.listdir(LAB)):  # the lab's own top-level programs (oracle_check, the attribution check, ...)
        path = os.path.join(LAB, name)
        if name.endswith(".py") and not name.startswith("__") and '__name__ == "__main__"' in open(
                path, encoding="utf-8").read():
            found.setdefault(name[:-3], []).append(path)
    out = {}
    for stem, paths in found.items():
        for path in paths:
            key = stem if len(paths) == 1 else f"{os.path.basename(os.path.dirname(path))}.{stem}"
            out[key] = path
    return out


def finished() -> dict:
    """The finished investigations (lab/data/finished.json): tools that left the tree at its ``commit``."""
    with open(os.path.join(LAB, "data", "finished.json"), encoding="utf-8") as fh:
        return json.load(fh)


def finished_line(name: str, record: dict, commit: str) -> str:
    """How to run finished tool ``name``: from a worktree of the commit it left the tree at."""
    return (f"{name} is a finished investigation ({record['found']}; now: {record['now']}); run it from its commit: "
            f"git worktree add /tmp/lab-{commit} {commit} && cd /tmp/lab-{commit} && python -m lab {name} ...")


def summary(path: str) -> str:
    """A script's docstring, first sentence (its own words: nothing to keep in step here)."""
    doc = ast.get_docstring(ast.parse(open(path, encoding="utf-8").read())) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    first = first.split(". ")[0].rstrip(".")
    return first if len(first) <= 90 else first[:87] + "..."


def main(argv: list[str]) -> int:
    table = tools()
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(__doc__.split("\n\n")[0])
        for folder in FOLDERS + ("",):
            names = [k for k, p in table.items() if os.path.dirname(p) == os.path.join(LAB, folder).rstrip(os.sep)]
            print(f"\n{folder or 'lab'}:")
            for k in sorted(names):
                print(f"  {k:<26} {summary(table[k])}")
        print("\nrun:\n  run                        the device runner (lab/run.sh): gpu-survey, dense, capture, bits, ...")
        print("  finished                   the finished investigations (left the tree; lab/data/finished.json)")
        return 0
    name, args = argv[0], argv[1:]
    if name == "run":
        return subprocess.call(["bash", os.path.join(LAB, "run.sh"), *args], cwd=ROOT)
    done = finished()
    if name == "finished":
        for k, record in sorted(done["tools"].items()):
            print(f"{k:<26} {record['path']}: {record['found']}\n{'':<26} now: {record['now']}")
        print(f"(they left the tree at {done['commit']}: python -m lab NAME says how to run one)")
        return 0
    if name in done["tools"]:
        print(finished_line(name, done["tools"][name], done["commit"]), file=sys.stderr)
        return 2
    if name not in table:
        near = [k for k in table if k.endswith("." + name)]
        hint = f"one of {', '.join(near)}" if near else "python -m lab lists them"
        print(f"python -m lab: no tool {name!r} ({hint})", file=sys.stderr)
        return 2
    path = table[name]
    sys.path[:0] = [os.path.join(ROOT, "src"), os.path.join(LAB, "device_library"), os.path.dirname(path)]
    sys.argv = [path, *args]
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
