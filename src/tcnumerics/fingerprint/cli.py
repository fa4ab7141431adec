"""``tcnumerics fingerprint``: the command line over ``fingerprint`` (the catalog entry or, with --gpu, the device)."""

from __future__ import annotations

import json

from ..catalog import get_instruction
from .result import catalog_dot
from .inference import fingerprint
from .device import _gpu_dot

def register(subparsers) -> None:
    p = subparsers.add_parser("fingerprint", help="infer a unit's arithmetic from discriminating vectors")
    p.add_argument("--instruction", required=True, help="catalog name giving the interface (formats, K)")
    p.add_argument("--gpu", action="store_true",
                   help="probe the GPU through tcnumerics.probe.gpu_dot (needs CuPy and a matching GPU); "
                        "default: the catalog entry itself, as a black box on the CPU")
    p.add_argument("--engine", default="auto", help="engine evaluating the catalog entry without --gpu")
    p.add_argument("--validation", type=int, default=256, help="validation vectors per input family")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--no-match", action="store_true", help="skip replaying the catalog entries")
    p.set_defaults(func=_cmd_fingerprint)



def _cmd_fingerprint(args) -> int:
    from ..engines import get_engine

    spec = get_instruction(args.instruction)
    if args.validation < 1:
        raise ValueError(f"--validation: must be >= 1, got {args.validation}")
    if args.gpu:
        dot = _gpu_dot(spec.name)
    else:
        get_engine(args.engine)
        dot = catalog_dot(spec, args.engine)
    fp = fingerprint(dot, spec, validation=args.validation, seed=args.seed, match_catalog=not args.no_match)
    print(json.dumps(fp.to_dict(), indent=1) if args.json else fp.report())
    return 0 if fp.reproduces or fp.matches else 1
