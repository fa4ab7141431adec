"""The fast engine is fork-safe and thread-safe: same bits in forked children and under threads.

A child forked after its parent ran the parallel kernels (numba's GNU OpenMP pool started)
would be killed by numba on its first parallel launch; the engine runs serial twins there.
The child here computes every kernel kind (vectorised fused, integer fused, integer units;
GEMM and dot) and sends the bits back as raw bytes.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tcnumerics.catalog import get_instruction
from tcnumerics.engines import _fast_numba, fast

pytestmark = pytest.mark.skipif(fast.backend() != "numba", reason="the numba kernels are what forks and threads")

SEED = 20261124
# one entry per kernel family: float64 lanes, integer-only fused (C and D differ), exact integer
SPECS = ("hopper.wgmma.m64n8k16.f32.bf16.bf16", "ada.mma.m16n8k16.f16.f16.f16.f32", "ampere.mma.m16n8k16.s32.s8.s8.s32")


def _random_bits(rng, fmt, shape):
    return rng.integers(0, 1 << fmt.container_bits, shape, dtype=np.uint64).astype(fmt.container_dtype)


def _cases(rng) -> list[tuple]:
    cases = []
    for name in SPECS:
        spec = get_instruction(name)
        k = spec.k if spec.c_format != spec.d_format else 3 * spec.k
        a = _random_bits(rng, spec.a_format, (37, k))
        b = _random_bits(rng, spec.b_format, (21, k))
        c = _random_bits(rng, spec.c_format, (37, 21))
        cases.append((name, a, b, c))
    return cases


def _compute(cases) -> bytes:
    """Every case through gemm_bits and dot_bits, concatenated as raw bytes."""
    out = []
    for name, a, b, c in cases:
        out.append(fast.gemm_bits(name, a, b, c))
        out.append(fast.dot_bits(name, a[:21], b, c[:21, 0]))
    return b"".join(x.tobytes() for x in out)


def _child(conn, cases) -> None:
    conn.send_bytes(_compute(cases))
    conn.send_bytes(b"serial" if _fast_numba.serial_only() else b"parallel")
    conn.close()


def test_forked_child_computes_the_parents_bits():
    cases = _cases(np.random.default_rng(SEED))
    want = _compute(cases)  # the parent starts numba's thread pool
    layer = __import__("numba").threading_layer()
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(send, cases))
    child.start()
    send.close()
    try:
        got = recv.recv_bytes() if recv.poll(240) else b""
        mode = recv.recv_bytes() if got else b""
    except EOFError:  # the child died before sending
        got, mode = b"", b""
    child.join(60)
    assert child.exitcode == 0, f"forked child exited with {child.exitcode} (threading layer {layer})"
    assert got == want
    assert mode == (b"serial" if layer == "omp" else b"parallel")
    assert not _fast_numba.serial_only() and fast.kernel_threads() >= 1


def test_threads_computing_concurrently_agree():
    cases = _cases(np.random.default_rng(SEED + 1))
    want = _compute(cases)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: _compute(cases), range(24)))
    assert all(r == want for r in results)


_WORKQUEUE_SCRIPT = """
import numpy as np
from concurrent.futures import ThreadPoolExecutor
from tcnumerics.engines import fast
rng = np.random.default_rng(1)
a = rng.integers(0, 1 << 16, (40, 64), dtype=np.uint16)
c = np.zeros((40, 40), np.uint32)
s = "hopper.wgmma.m64n8k16.f32.bf16.bf16"
want = fast.gemm_bits(s, a, a, c)
with ThreadPoolExecutor(6) as pool:
    got = list(pool.map(lambda _: fast.gemm_bits(s, a, a, c), range(60)))
import numba
print(numba.threading_layer(), all(np.array_equal(g, want) for g in got))
"""


def test_threads_under_the_workqueue_layer():
    # numba's workqueue layer aborts the process on concurrent launches; the engine serialises them
    env = dict(os.environ, NUMBA_THREADING_LAYER="workqueue")
    run = subprocess.run([sys.executable, "-c", _WORKQUEUE_SCRIPT], env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["workqueue", "True"]
