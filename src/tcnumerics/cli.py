"""Command-line interface: ``tcnumerics <command> ...`` (also ``python -m tcnumerics``).

Each command group lives in its own module exposing ``register(subparsers)``; the
module is imported only when its command runs, so a broken optional part never stops
the others.  Every error becomes one line on standard error and a non-zero exit:
2 for bad input (usage, unreadable or malformed files, unknown names), 1 for a check
that ran and failed.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from .cli_errors import CLIError, OneLineParser

# command -> module that registers it (``register(subparsers)``)
COMMANDS = {
    "instructions": "tcnumerics.cli",
    "describe": "tcnumerics.cli",
    "vectors": "tcnumerics.vectors.cli",
    "fingerprint": "tcnumerics.fingerprint",
    "reproduce": "tcnumerics.experiments.cli",
    "probe": "tcnumerics.probe.cli",
    "sweep": "tcnumerics.sweep.cli",
}


def register(subparsers) -> None:
    p = subparsers.add_parser("instructions", help="list catalogued instructions")
    p.add_argument("--arch", help="only this architecture (hopper, ampere, ...)")
    p.add_argument("--provenance", action="store_true", help="show each entry's provenance")
    p.set_defaults(func=_cmd_instructions)
    p = subparsers.add_parser("describe", help="show an instruction's unit model and provenance")
    p.add_argument("name")
    p.set_defaults(func=_cmd_describe)


def _cmd_instructions(args) -> int:
    from .catalog import get_instruction, instruction_names

    for name in instruction_names(args.arch):
        print(f"{name}\t{get_instruction(name).provenance}" if args.provenance else name)
    return 0


def _cmd_describe(args) -> int:
    from .catalog import get_instruction

    print(get_instruction(args.name).describe())
    return 0


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = OneLineParser(prog="tcnumerics", description="Bit-exact models of matrix units.")
    sub = parser.add_subparsers(dest="command", parser_class=OneLineParser, metavar="COMMAND")
    seen = set()
    for command, module in COMMANDS.items():
        if only is not None and command != only:
            continue
        if module in seen:
            continue
        seen.add(module)
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue  # that part is not installed in this build
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    try:
        parser = build_parser(command if command in COMMANDS else None)
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        return int(args.func(args) or 0)
    except CLIError as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return exc.code
    except BrokenPipeError:  # output piped into head & co.: not an error
        return 0
    except (ValueError, KeyError, TypeError, OSError, EOFError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"error: {_one_line(msg)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # anything unforeseen still ends in one line, never a traceback
        if os.environ.get("TCNUMERICS_DEBUG"):
            raise
        print(f"error: {type(exc).__name__}: {_one_line(exc)} (set TCNUMERICS_DEBUG=1 for a traceback)",
              file=sys.stderr)
        return 2


def _one_line(message) -> str:
    """An error message squeezed onto one line (empty messages name nothing, so say so)."""
    text = " ".join(str(message).split())
    return text or "unspecified error"


if __name__ == "__main__":
    raise SystemExit(main())
