"""A sweep worker's native threads and the inputs its tasks share (sweep.threads, sweep.shared)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tcnumerics.sweep import expand, parse_spec
from tcnumerics.sweep import shared
from tcnumerics.sweep.workloads import run_task


def test_limit_threads_caps_the_loaded_openblas():
    code = textwrap.dedent("""
        import ctypes, numpy
        from tcnumerics.sweep.threads import _loaded_libraries, limit_threads
        libs = [p for p in _loaded_libraries() if "openblas" in p.lower()]
        if not libs:
            print("no-openblas"); raise SystemExit
        lib = ctypes.CDLL(libs[0])
        get = next(getattr(lib, n) for n in ("openblas_get_num_threads", "scipy_openblas_get_num_threads64_",
                                              "scipy_openblas_get_num_threads") if hasattr(lib, n))
        assert limit_threads(1) >= 1
        print(get())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "OPENBLAS_NUM_THREADS": "2"})
    assert out.returncode == 0, out.stderr
    if out.stdout.strip() == "no-openblas":
        pytest.skip("numpy is not linked against OpenBLAS here")
    assert out.stdout.strip() == "1"


def test_shared_inputs_are_read_only_bounded_and_reused():
    shared._cache.clear()
    calls = []

    def make():
        calls.append(1)
        return np.zeros(3), np.ones(2)

    first = shared.shared_input(("t", 0), make)
    again = shared.shared_input(("t", 0), make)
    assert first is again and len(calls) == 1
    with pytest.raises(ValueError):
        first[0][0] = 1.0
    for i in range(shared.MAX_ENTRIES + 3):
        shared.shared_input(("t", i + 1), make)
    assert len(shared._cache) == shared.MAX_ENTRIES and ("t", 0) not in shared._cache


def test_the_cache_holds_at_most_its_byte_bound(monkeypatch):
    shared._cache.clear()
    monkeypatch.setattr(shared, "MAX_BYTES", 2000)
    shared.shared_input(("big",), lambda: np.zeros(300))  # 2,400 bytes: never kept
    assert ("big",) not in shared._cache
    for i in range(3):  # 800 bytes each: the oldest goes when the third arrives
        shared.shared_input(("mid", i), lambda: np.zeros(100))
    assert list(shared._cache) == [("mid", 1), ("mid", 2)]


def test_rows_do_not_depend_on_what_the_worker_ran_before():
    """A task's row is the same from a cold worker and after other units filled the shared inputs."""
    spec = parse_spec({"sweep": {"seeds": 2},
                       "units": {"base": "hopper.wgmma.m64n8k16.f32.bf16.bf16", "grid": {"frac_bits": [10, 25]}},
                       "workloads": [{"kind": "gemm_error", "M": 4, "N": 8, "K": 96}]})
    tasks = expand(spec)
    shared._cache.clear()
    cold = [run_task(t, engine="fast") for t in tasks]
    shared._cache.clear()
    warm = [run_task(t, engine="fast") for t in reversed(tasks)][::-1]
    assert cold == warm
    assert cold[0]["max_rel_error"] != cold[2]["max_rel_error"]  # the two designs differ on the same operands
