"""``tcnumerics vectors``: generate, verify, export and import golden-vector files.

Exit status: 0 when everything matched, 1 when a replay found mismatches, 2 for bad
input (unknown instruction or family, broken or refused files) -- one line each, never a
traceback.

Example:
    >>> from tcnumerics.cli import main
    >>> main(["vectors", "families", "--instruction", "hopper.mma.m16n8k32.s32.s8.s8.s32"])
    int normal bits cancel special overflow
    0
"""

from __future__ import annotations

import glob
import os
import sys
import time

import numpy as np

__all__ = ["register"]


def register(subparsers) -> None:
    p = subparsers.add_parser("vectors", help="golden-vector files: generate, verify, export, import, show, families, harness")
    sub = p.add_subparsers(dest="vectors_command", metavar="ACTION", parser_class=type(p))
    p.set_defaults(func=lambda args: _usage(p))

    g = sub.add_parser("generate", help="write vectors with d computed by the catalogued model")
    g.add_argument("--instruction", required=True, help="catalog name (tcnumerics instructions lists them)")
    g.add_argument("--families", default="all",
                   help="comma-separated families, or 'all': those that apply to the instruction "
                        "('vectors families --instruction NAME' lists them; default: all)")
    g.add_argument("--count", type=int, default=None,
                   help="vectors per family (required unless --adequate; with it: candidates per family, default 256)")
    g.add_argument("--adequate", action="store_true",
                   help="write a mutation-adequate set: greedy cover over family candidates killing every "
                        "killable one-step mutant of the unit (tcnumerics.vectors.adequate)")
    g.add_argument("-o", "--output", required=True, help="the .npz file to write")
    g.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    g.add_argument("--k", type=int, default=None, help="K per vector: a multiple of the instruction's K (chained)")
    g.add_argument("--engine", default="auto", help="engine computing d (auto, reference, fast, exact)")
    g.add_argument("--overwrite", action="store_true", help="replace OUTPUT if it exists")
    g.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="always draw the progress bar on stderr (default: for long runs on a terminal)")
    g.add_argument("--no-progress", dest="progress", action="store_false")
    g.add_argument("--shards", type=int, default=None,
                   help="split into this many shard files in the directory OUTPUT (with manifest.json), "
                        "generated as parallel tasks; resumes an interrupted run")
    _executor_arguments(g)
    g.set_defaults(func=_cmd_generate)

    v = sub.add_parser("verify", help="replay files through their instruction; exit 0 only if every d matches",
                       description="Replay vector files through their instruction and compare every d.",
                       epilog="exit status: 0 every vector matched; 1 some replay found mismatches; "
                              "2 bad input (a file unreadable or refused, an unknown engine or option)")
    v.add_argument("files", nargs="+", metavar="FILE",
                   help=".npz or hex vector files; a directory stands for the .npz files directly in it")
    v.add_argument("--engine", default="auto", help="engine to replay with (auto, reference, fast, exact)")
    v.add_argument("--rows", type=int, default=1 << 15, help="vectors replayed at once (bounds memory)")
    v.add_argument("--show", type=int, default=3, help="mismatching vectors to print per file")
    v.add_argument("--mutants", action="store_true", help="also report which one-step mutants each file kills")
    _executor_arguments(v)
    v.set_defaults(func=_cmd_verify)

    e = sub.add_parser("export", help="write a file's vectors in the plain-text hex form")
    e.add_argument("--hex", required=True, metavar="FILE", help="the .npz file to export")
    e.add_argument("-o", "--output", required=True, help="the text file to write")
    e.add_argument("--overwrite", action="store_true", help="replace OUTPUT if it exists")
    e.set_defaults(func=_cmd_export)

    h = sub.add_parser("harness", help="write $readmemh files and SystemVerilog / cocotb testbenches for your RTL")
    h.add_argument("file", metavar="FILE", help="a dense .npz vector file (e.g. from generate --adequate)")
    h.add_argument("-o", "--output", required=True, help="the directory to write into")
    h.add_argument("--overwrite", action="store_true", help="replace files already in OUTPUT")
    h.set_defaults(func=_cmd_harness)

    i = sub.add_parser("import", help="read the hex form back into an .npz file")
    i.add_argument("file", metavar="FILE", help="a hex vector file")
    i.add_argument("-o", "--output", required=True, help="the .npz file to write")
    i.add_argument("--overwrite", action="store_true", help="replace OUTPUT if it exists")
    i.set_defaults(func=_cmd_import)

    s = sub.add_parser("show", help="summarise a vector file (instruction, size, families, meta)")
    s.add_argument("files", nargs="+", metavar="FILE")
    s.set_defaults(func=_cmd_show)

    f = sub.add_parser("families", help="list the input families (or those of one instruction)")
    f.add_argument("--instruction", default=None)
    f.set_defaults(func=_cmd_families)


def _executor_arguments(p) -> None:
    p.add_argument("--workers", type=int, default=None,
                   help="shard sets: worker processes (default: the machine's cores)")
    p.add_argument("--scheduler", default=None,
                   help="shard sets: a Dask scheduler address (tcp://host:8786) or 'local'; default: a process pool")


def _generate_shards(args, name: str, fams: list, K: int) -> int:
    from .shards import generate_shards

    show = args.progress if args.progress is not None else sys.stderr.isatty()
    bar = _Progress(args.count * len(fams), show, "generate")
    stats: dict = {}
    try:
        m = generate_shards(name, fams, args.count, args.shards, args.output, seed=args.seed, k=K,
                            engine=args.engine, scheduler=args.scheduler, workers=args.workers,
                            overwrite=args.overwrite, progress=bar.update, stats=stats)
    finally:
        bar.close()
    print(f"{args.output}: {name}, {m['total']} vectors in {m['shards']} shards (K={K}, "
          f"{', '.join(fams)}); manifest.json lists seeds and checksums")
    if stats.get("vectors"):
        print(f"  {stats['vectors']} generated in {stats['wall_s']:.1f} s on {stats['workers_seen']} workers: "
              f"{stats['per_worker_rate']:,.0f} vectors/s per worker ({stats['per_cpu_second']:,.0f} per CPU "
              f"second), peak RSS per worker {stats['peak_rss_mib']:.0f} MiB")
    return 0


def _verify_shards(args, directory: str) -> int:
    from .shards import verify_shards

    def show(r: dict) -> None:
        verdict = (f"error: {r['error']}" if r["error"] else
                   "all match" if not r["mismatches"] and r["checksum_ok"] else
                   f"{r['mismatches']} MISMATCH" + ("" if r["checksum_ok"] else ", checksum differs from manifest"))
        print(f"{os.path.join(directory, r['file'])}: {r['n']} vectors: {verdict}")
        for idx, fam, rec, mod in r.get("first", [])[:max(args.show, 0)]:
            print(f"  vector {idx} ({fam}): recorded d={rec:#x}, model d={mod:#x}")

    rep = verify_shards(directory, engine=args.engine, rows=args.rows, scheduler=args.scheduler,
                        workers=args.workers, on_shard=show)
    print(f"{directory}: {len(rep['shards'])} shards, {rep['vectors']} vectors: {rep['mismatches']} mismatches, "
          f"{len(rep['failed'])} shards failing, {len(rep['bad'])} unreadable "
          f"({rep['per_worker_rate']:,.0f} vectors/s per worker, {rep['per_cpu_second']:,.0f} per CPU second, "
          f"peak RSS per worker {rep['peak_rss_mib']:.0f} MiB)")
    if rep["vectors"] != rep["manifest"]["total"] and not rep["bad"]:
        print(f"error: {directory}: {rep['vectors']} vectors replayed, the manifest says {rep['manifest']['total']}",
              file=sys.stderr)
        return 2
    return 2 if rep["bad"] else 1 if rep["failed"] else 0


def _usage(parser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _cmd_families(args) -> int:
    from .families import FAMILIES, families_for

    print(" ".join(families_for(args.instruction) if args.instruction else FAMILIES))
    return 0


class _Progress:
    """A one-line bar on stderr, redrawn at most every 0.2 s."""

    def __init__(self, total: int, enabled: bool, label: str):
        self.total, self.enabled, self.label = max(total, 1), enabled, label
        self.done, self.last, self.t0 = 0, 0.0, time.monotonic()

    def update(self, n: int, note: str = "") -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.last < 0.2 and self.done < self.total:
            return
        self.last = now
        frac = min(1.0, self.done / self.total)
        bar = "#" * int(frac * 30)
        rate = self.done / max(now - self.t0, 1e-9)
        sys.stderr.write(f"\r{self.label} [{bar:<30}] {frac:6.1%} {self.done}/{self.total} "
                         f"({rate:,.0f}/s) {note:<10}")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _cmd_generate(args) -> int:
    from ..catalog import get_instruction
    from ..engines import get_engine
    from .families import families_for, resolve_k
    from .io import save, _refuse
    from .shards import make_set

    spec = get_instruction(args.instruction)
    get_engine(args.engine)
    if args.adequate:
        return _generate_adequate(args, spec)
    if args.count is None:
        raise ValueError("--count: required (vectors per family) unless --adequate")
    if args.count < 1:
        raise ValueError(f"--count: must be >= 1, got {args.count}")
    applicable = families_for(spec)
    if args.families.strip().lower() == "all":
        fams = applicable
    else:
        fams = [f.strip() for f in args.families.split(",") if f.strip()]
        if not fams:
            raise ValueError("--families: empty list")
        for f in fams:
            if f not in applicable:
                raise ValueError(f"--families: {f!r} does not apply to {spec.name} (choose from {', '.join(applicable)})")
        if len(set(fams)) != len(fams):
            raise ValueError("--families: a family is listed twice")
    K = resolve_k(spec, args.k)
    if args.shards is not None:
        return _generate_shards(args, spec.name, fams, K)
    if args.workers is not None or args.scheduler is not None:
        raise ValueError("--workers, --scheduler: only with --shards (one file is one task)")
    out = os.fspath(args.output)
    if not out.endswith(".npz"):
        raise ValueError(f"--output: vector files end in .npz, got {out!r}")
    _refuse(out, args.overwrite, ())  # fail before the work, not after
    total = args.count * len(fams)
    show = args.progress if args.progress is not None else (sys.stderr.isatty() and total * K >= 1 << 20)
    bar = _Progress(total, show, "generate")
    rng = np.random.default_rng(args.seed)
    try:
        vs = make_set(spec, fams, args.count, rng, K, args.engine, on_step=bar.update, seed=args.seed)
    finally:
        bar.close()
    save(out, vs, overwrite=args.overwrite)
    print(f"{out}: {spec.name}, {total} vectors ({', '.join(f'{f} {args.count}' for f in fams)}), K={K}")
    return 0


def _generate_adequate(args, spec) -> int:
    from .adequate import adequate_set
    from .io import save, _refuse

    for flag, value, default in (("--families", args.families.strip().lower(), "all"), ("--k", args.k, None),
                                 ("--shards", args.shards, None)):
        if value != default:
            raise ValueError(f"{flag}: not with --adequate (candidates come from every family, at the instruction's K)")

    out = os.fspath(args.output)
    if not out.endswith(".npz"):
        raise ValueError(f"--output: vector files end in .npz, got {out!r}")
    _refuse(out, args.overwrite, ())
    per_family = args.count if args.count is not None else 256
    s = adequate_set(spec, seed=args.seed, per_family=per_family)
    save(out, s.to_vector_set(), overwrite=args.overwrite)
    print(f"{out}: {spec.name}, adequate set of {s.n} vectors from {s.candidates} candidates: mutation score "
          f"{s.score:.3f} ({len(s.mutants) - len(s.survivors)}/{len(s.mutants)} non-equivalent mutants killed, "
          f"{len(s.equivalent)} equivalent)" + (f"; survivors: {', '.join(s.survivors)}" if s.survivors else ""))
    return 0


def _report_mutants(path: str) -> None:
    from .adequate import mutants_killed
    from .io import load

    vs = load(path)
    killed = mutants_killed(vs.instruction, vs.a, vs.b, vs.c)
    fam = vs.extra.get("family")
    hit = {m: i for m, i in killed.items() if i is not None}
    print(f"  mutants: {len(hit)}/{len(killed)} non-equivalent killed")
    for m, i in killed.items():
        where = f"vector {i}" + (f" ({fam[i]})" if fam is not None else "") if i is not None else "SURVIVES"
        print(f"    {m}: {where}")


def _cmd_verify(args) -> int:
    from .io import VectorFileError
    from .verify import verify_file
    from ..engines import get_engine

    get_engine(args.engine)
    if args.rows < 1:
        raise ValueError(f"--rows: must be >= 1, got {args.rows}")
    from .shards import MANIFEST

    sharded = [p for p in args.files if os.path.isdir(p) and os.path.exists(os.path.join(p, MANIFEST))]
    if sharded:
        if len(args.files) != 1:
            raise ValueError(f"{sharded[0]}: a shard set (manifest.json) is verified on its own, not with other files")
        return _verify_shards(args, sharded[0])
    if args.workers is not None or args.scheduler is not None:
        raise ValueError("--workers, --scheduler: only for a shard directory (one with manifest.json)")
    broken = failed = 0
    total = mism = 0
    files = []
    for path in args.files:
        if os.path.isdir(path):
            found = sorted(glob.glob(os.path.join(path, "*.npz")))
            if not found:
                raise ValueError(f"{path}: directory holds no .npz vector files")
            files += found
        else:
            files.append(path)
    for path in files:
        try:
            report = verify_file(path, engine=args.engine, rows=args.rows, keep=max(args.show, 0))
        except VectorFileError as exc:
            print(f"error: {exc}", file=sys.stderr)
            broken += 1
            continue
        except (ValueError, TypeError, KeyError) as exc:
            # the file was readable but its instruction could not replay it
            print(f"error: {path}: cannot replay ({exc})", file=sys.stderr)
            broken += 1
            continue
        print(report.summary())
        if args.mutants:
            _report_mutants(path)
        total += report.n
        mism += report.mismatches
        if not report.ok:
            failed += 1
            for m in report.first:
                print(f"  vector {m.index} ({m.family}): recorded d={m.recorded:#x}, model d={m.model:#x}")
    if len(files) > 1:
        print(f"{len(files)} files, {total} vectors: {mism} mismatches, {failed} files failing, "
              f"{broken} unreadable")
    return 2 if broken else 1 if failed else 0


def _cmd_export(args) -> int:
    from .io import load, write_hex

    vs = load(args.hex)
    write_hex(args.output, vs, overwrite=args.overwrite, protect=[args.hex])
    print(f"{args.output}: {vs.n} vectors of {vs.instruction} in hex")
    return 0


def _cmd_harness(args) -> int:
    from .harness import write_harness
    from .io import load

    vs = load(args.file)
    try:
        names = write_harness(vs, args.output, overwrite=args.overwrite)
    except FileExistsError as exc:
        raise ValueError(str(exc)) from None
    print(f"{args.output}: {vs.n} vectors of {vs.instruction}: {', '.join(names)}")
    return 0


def _cmd_import(args) -> int:
    from .io import read_hex, save

    vs = read_hex(args.file)
    save(args.output, vs, overwrite=args.overwrite, protect=[args.file])
    print(f"{args.output}: {vs.n} vectors of {vs.instruction}")
    return 0


def _cmd_show(args) -> int:
    import json

    from .io import VectorFileError, VectorReader, is_hex_file, read_hex

    broken = 0
    for path in args.files:
        try:
            if is_hex_file(path):
                vs = read_hex(path)
                meta, n, fam = vs.meta, vs.n, vs.family
            else:
                with VectorReader(path) as r:
                    meta, n = r.meta, r.n
                    fam = (np.concatenate([ch["family"] for ch in r.chunks(1 << 16, keys=["family"])])
                           if "family" in r.members else None)
        except VectorFileError as exc:
            print(f"error: {exc}", file=sys.stderr)
            broken += 1
            continue
        print(f"{path}: {meta['instruction']}, {n} vectors, K={meta['K']}")
        if fam is not None:
            names, counts = np.unique(np.asarray(fam).astype(str), return_counts=True)
            print("  families: " + ", ".join(f"{a} {b}" for a, b in zip(names, counts)))
        print("  meta: " + json.dumps(meta))
    return 2 if broken else 0
