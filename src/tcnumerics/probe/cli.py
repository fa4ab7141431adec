"""``tcnumerics probe ...``: the GPU probe from the command line.

Commands (the first two need no GPU):

``probe targets [--arch hopper]``   every catalog entry the probe can issue, with its PTX
``probe source NAME [--n N]``       the CUDA kernel the probe builds for an entry
``probe check NAME...``             build, show the SASS matrix opcodes, self-check on the GPU
``probe capture NAME... -o DIR``    capture every input family of each entry into DIR/<stem>.npz

Example:
    >>> from tcnumerics.cli import main
    >>> main(["probe", "source", "hopper.mma.m16n8k8.f32.tf32.tf32.f32"]) == 0  # doctest: +ELLIPSIS
    extern "C" __global__ void tcn_probe(...
    True
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["register"]


def register(subparsers) -> None:
    p = subparsers.add_parser("probe", help="run single matrix instructions on an NVIDIA GPU (needs CuPy)")
    sub = p.add_subparsers(dest="probe_command", metavar="PROBE_COMMAND")
    sub.required = True
    t = sub.add_parser("targets", help="list the instructions the probe can issue, with their PTX")
    t.add_argument("--arch", default="hopper", help="architecture (the probe issues hopper entries)")
    t.set_defaults(func=_cmd_targets)
    s = sub.add_parser("source", help="print the CUDA kernel the probe builds for an instruction")
    s.add_argument("name")
    s.add_argument("--n", type=int, default=None, help="wgmma N (default 8)")
    s.set_defaults(func=_cmd_source)
    c = sub.add_parser("check", help="build, show SASS matrix opcodes and self-check on the GPU")
    c.add_argument("names", nargs="+", metavar="NAME")
    c.set_defaults(func=_cmd_check)
    k = sub.add_parser("capture", help="capture every input family of each instruction into vector files")
    k.add_argument("names", nargs="*", metavar="NAME")
    k.add_argument("--all", action="store_true", help="every entry of --arch")
    k.add_argument("--arch", default="hopper")
    k.add_argument("-o", "--output", required=True, help="directory for <stem>.npz files")
    k.add_argument("--count", type=int, default=512, help="vectors per family (default 512)")
    k.add_argument("--seed", type=int, default=0)
    k.add_argument("--overwrite", action="store_true", help="replace existing files")
    k.set_defaults(func=_cmd_capture)


def _fail(exc: Exception):
    from ..cli_errors import CLIError

    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return CLIError(f"probe: {msg}", 2)


def _cmd_targets(args) -> int:
    from ..catalog import instruction_names
    from .targets import target

    names = instruction_names(args.arch)
    if not names:
        raise ValueError(f"--arch: no catalog entries for {args.arch!r}")
    for name in names:
        try:
            t = target(name)
        except ValueError as exc:
            print(f"{name}\t(not issuable: {exc})")
            continue
        print(f"{name}\t{t.ptx}\tA {t.a.registers} regs, B {'smem' if t.b is None else f'{t.b.registers} regs'}, "
              f"D {t.cd.registers} regs")
    return 0


def _cmd_source(args) -> int:
    from .kernels import kernel_source
    from .targets import target

    print(kernel_source(target(args.name, args.n)), end="")
    return 0


def _cmd_check(args) -> int:
    from .runtime import Probe, ProbeError

    failed = 0
    for name in args.names:
        try:
            probe = Probe(name)
            result = probe.self_check()
        except ProbeError as exc:
            raise _fail(exc) from None
        status = "ok" if result.ok else f"FAILED ({result.mismatches} elements; {result.detail})"
        print(f"{name}: {probe.sass_note()}; exact-integer self-check on {result.tiles} tiles: {status}")
        failed += not result.ok
    return 1 if failed else 0


def _cmd_capture(args) -> int:
    from ..catalog import get_instruction, instruction_names
    from .capture import capture_entry, file_stem, write_vectors
    from .runtime import Probe, ProbeError, device_description

    if args.count < 1:
        raise ValueError(f"--count: must be >= 1, got {args.count}")
    names = instruction_names(args.arch) if args.all else [get_instruction(n).name for n in args.names]
    if not names:
        raise ValueError("NAME: give instruction names or --all")
    paths = [os.path.join(args.output, file_stem(n) + ".npz") for n in names]
    existing = [p for p in paths if os.path.exists(p)]
    if existing and not args.overwrite:
        raise ValueError(f"-o: {existing[0]} exists (use --overwrite to replace)")
    rng = np.random.default_rng(args.seed)
    try:
        device = device_description()
        for name, path in zip(names, paths):
            probe = Probe(name)
            check = probe.self_check()
            if not check.ok:
                raise ProbeError(f"{name}: fragment self-check failed ({check.detail}); nothing captured")
            arrays = capture_entry(name, args.count, rng, probe=probe, device=device)
            write_vectors(path, arrays, overwrite=args.overwrite)
            print(f"{path}: {len(arrays['c'])} vectors of {name} ({probe.sass_note()})")
    except ProbeError as exc:
        raise _fail(exc) from None
    return 0
