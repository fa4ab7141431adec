"""Loop the two-rank gloo DDP step of tests/test_torch_parallel.py (issue 33's abort at exit) and count exit codes.

    nice -n 10 python lab/loop_ddp_two_rank.py 50 [--dir /tmp/ddp]

Each rank writes a faulthandler log (all threads' Python stacks on SIGABRT) beside its store; run under
``ulimit -c unlimited`` to keep a core for ``gdb -batch -ex 'thread apply all bt' python core``.  A rank still
running after the join timeout (a loaded machine) is counted apart from one that exited non-zero.
"""

from __future__ import annotations

import argparse
import faulthandler
import multiprocessing as mp
import os
import pathlib
import sys
import tempfile
import time

TESTS = pathlib.Path(__file__).resolve().parents[1] / "tests"


def _rank(rank: int, world: int, store: str, out: str, log: str) -> None:
    fh = open(log, "w")
    faulthandler.enable(file=fh, all_threads=True)
    os.dup2(fh.fileno(), 2)
    sys.path.insert(0, str(TESTS))
    import test_torch_parallel

    test_torch_parallel._ddp_rank(rank, world, store, out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=int)
    parser.add_argument("--dir", default=None, help="where each run's store and logs go (default: a temp dir)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for a rank")
    args = parser.parse_args()
    base = args.dir or tempfile.mkdtemp(prefix="ddp-loop-")
    os.makedirs(base, exist_ok=True)
    ctx = mp.get_context("spawn")
    failed = slow = 0
    for i in range(args.runs):
        d = tempfile.mkdtemp(prefix=f"run{i}-", dir=base)
        procs = [ctx.Process(target=_rank, args=(r, 2, f"{d}/store", f"{d}/o.npz", f"{d}/r{r}.log")) for r in range(2)]
        t0 = time.time()
        for p in procs:
            p.start()
        for p in procs:
            p.join(args.timeout)
        codes = [p.exitcode for p in procs]
        slow += None in codes
        failed += any(c not in (0, None) for c in codes)
        print(i, codes, f"{time.time() - t0:.1f}s", "" if codes == [0, 0] else d, flush=True)
    print(f"{args.runs} runs: {failed} with a rank exiting non-zero, {slow} with a rank past {args.timeout:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
