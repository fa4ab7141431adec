"""Sweeps: identical tables locally (any worker count) and on a Dask cluster, no result lost when a
worker dies, resumable output, a sweep started after the parent ran the compiled engine."""

import json
import os
import threading
import time

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

from tcnumerics.cli import main  # noqa: E402
from tcnumerics.sweep import expand, parse_spec, run_sweep  # noqa: E402
from tcnumerics.sweep.executors import LocalExecutor  # noqa: E402
from tcnumerics.sweep.exact import exact_matmul  # noqa: E402

BASE = "hopper.wgmma.m64n8k16.f32.bf16.bf16"
SMALL = {
    "sweep": {"name": "small", "seeds": 2, "seed": 5},
    "units": {"base": BASE, "grid": {"group_size": [8, 16], "frac_bits": [13, 25]}},
    "workloads": [
        {"kind": "gemm_error", "M": 8, "N": 8, "K": 256, "grid": {"scaling": ["none", "row"]}},
        {"kind": "chain", "trials": 2, "length": 2},
        {"kind": "elementwise", "samples": 50},
    ],
}
# tasks long enough (~0.3 s each) for a worker to be killed while others are still queued
SLOW = {
    "sweep": {"name": "slow", "seeds": 6, "seed": 1},
    "units": {"base": BASE, "grid": {"frac_bits": [13, 25]}},
    "workloads": [{"kind": "gemm_error", "M": 24, "N": 24, "K": 4096}],
}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The small spec run by a local pool of one worker, after this process computed with the fast engine."""
    import ml_dtypes
    import tcnumerics as tc

    A = np.ones((64, 64), ml_dtypes.bfloat16)
    tc.gemm(A, A, instruction=BASE)  # the parent has now run the numba engine: workers must not be forked
    out = tmp_path_factory.mktemp("ref") / "small.parquet"
    return run_sweep(parse_spec(SMALL), out, workers=1, progress=False)


@pytest.fixture(scope="module")
def slow_reference(tmp_path_factory):
    return run_sweep(parse_spec(SLOW), tmp_path_factory.mktemp("slow") / "slow.parquet", workers=2, progress=False)


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as c:
        yield c


def _same(a, b):
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_exact=True)


def test_table_has_one_row_per_task_with_unit_columns_and_metrics(reference):
    assert len(reference) == len(expand(parse_spec(SMALL))) == 4 * 4 * 2
    assert list(reference["task"]) == list(range(len(reference)))
    for col in ("unit.group_size", "unit.frac_bits", "param.K", "max_rel_error", "max_ulp_error", "overflow_count",
                "rel_error", "mean_abs_error"):
        assert col in reference.columns
    gemm = reference[reference["workload"] == "gemm_error"]
    # fewer kept bits, larger error: the metrics see the unit parameters
    by_f = gemm.groupby("unit.frac_bits")["norm_rel_error"].mean()
    assert by_f[13] > 10 * by_f[25]


def test_two_local_workers_give_the_same_rows(reference, tmp_path):
    _same(run_sweep(parse_spec(SMALL), tmp_path / "two.parquet", workers=2, progress=False), reference)


def test_dask_cluster_gives_the_same_rows(reference, cluster, tmp_path):
    table = run_sweep(parse_spec(SMALL), tmp_path / "dask.parquet", scheduler=cluster.scheduler_address,
                      progress=False)
    _same(table, reference)


def _kill_when(killed: dict, pid: int, store_path, minimum: int) -> threading.Thread:
    """Kill process ``pid`` once ``minimum`` rows are journaled; ``killed["rows"]``: rows journaled then."""
    def killer():
        journal = str(store_path) + ".journal"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if os.path.exists(journal):
                with open(journal) as fh:
                    rows = sum(1 for _ in fh) - 1
                if rows >= minimum:
                    break
            time.sleep(0.02)
        os.kill(pid, 9)
        killed["rows"] = rows
    t = threading.Thread(target=killer, daemon=True)
    t.start()
    return t


def test_killing_a_dask_worker_mid_run_loses_no_result(cluster, slow_reference, tmp_path):
    import dask
    from distributed import Client

    spec = parse_spec(SLOW)
    killed = {}
    with Client(cluster.scheduler_address) as client:
        pid = list(client.run(os.getpid).values())[0]
    out = tmp_path / "killed.parquet"
    thread = _kill_when(killed, pid, out, minimum=1)
    # results held by the dead worker are recomputed; don't wait dask's default 30 s per dead address
    with dask.config.set({"distributed.comm.timeouts.connect": "3s"}):
        table = run_sweep(spec, out, scheduler=cluster.scheduler_address, progress=False)
    thread.join()
    assert killed["rows"] < len(table)  # the worker died while tasks were still running
    _same(table, slow_reference)


def test_killing_a_local_worker_mid_run_loses_no_result(slow_reference, tmp_path):
    spec = parse_spec(SLOW)
    killed = {}
    with LocalExecutor(workers=2) as ex:
        list(ex.run(abs, [-1, -2]))  # start the pool's processes
        pid = list(ex._pool._processes)[0]
        out = tmp_path / "b.parquet"
        thread = _kill_when(killed, pid, out, minimum=1)
        table = run_sweep(spec, out, executor=ex, progress=False)
    thread.join()
    assert killed["rows"] < len(table)  # the worker died while tasks were still running
    _same(table, slow_reference)


class _Counting(LocalExecutor):
    def run(self, fn, items):
        items = list(items)
        self.ran = len(items)
        yield from super().run(fn, items)


def test_an_interrupted_sweep_resumes_without_recomputing(reference, tmp_path):
    spec = parse_spec(SMALL)
    out = tmp_path / "resume.csv"
    rows = reference.to_dict("records")
    with open(str(out) + ".journal", "w") as fh:  # what an interruption after 10 tasks leaves behind
        fh.write(json.dumps({"digest": spec.digest, "total": len(rows)}) + "\n")
        for row in rows[:10]:
            fh.write(json.dumps({k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in row.items()})
                     + "\n")
        fh.write('{"task": 10, "task_id": "cut sho')
    ex = _Counting(workers=1)
    table = run_sweep(spec, out, executor=ex, progress=False)
    ex.close()
    assert ex.ran == len(rows) - 10
    assert not os.path.exists(str(out) + ".journal")
    assert len(table) == len(rows)
    _same(table[["task_id", "unit"]], reference[["task_id", "unit"]])
    np.testing.assert_array_equal(table["norm_rel_error"].to_numpy(), reference["norm_rel_error"].to_numpy())


def test_a_journal_of_another_spec_is_refused(tmp_path, capsys):
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps(SMALL))
    out = tmp_path / "r.parquet"
    (tmp_path / "r.parquet.journal").write_text(json.dumps({"digest": "other", "total": 3}) + "\n")
    assert main(["sweep", str(spec), "-o", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "belongs to another spec" in err


def test_cli_runs_a_spec_and_draws_the_pareto_view(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    spec = tmp_path / "s.toml"
    spec.write_text(f'[sweep]\nseeds = 1\n[units]\nbase = "{BASE}"\n[units.grid]\nfrac_bits = [10, 25]\n'
                    'group_size = [8, 16]\n[[workloads]]\nkind = "gemm_error"\nM = 4\nN = 4\nK = 64\n')
    out = tmp_path / "r.parquet"
    assert main(["sweep", str(spec), "-o", str(out), "--workers", "1", "--quiet"]) == 0
    assert main(["sweep", str(spec), "-o", str(out), "--quiet"]) == 2  # never overwritten unasked
    assert main(["sweep", "plot", str(out), "-o", str(tmp_path / "p.png")]) == 0
    assert (tmp_path / "p.png").stat().st_size > 1000
    assert "4 rows" in capsys.readouterr().out


def test_exact_matmul_is_exact_where_float64_is_not():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((5, 300)) * 2.0 ** rng.integers(-40, 40, (5, 300))
    B = rng.standard_normal((300, 4))
    from fractions import Fraction

    got = exact_matmul(A, B)
    for i in range(5):
        for j in range(4):
            assert got[i, j] == float(sum(Fraction(a) * Fraction(b) for a, b in zip(A[i], B[:, j])))


def test_pool_workers_do_not_outlive_a_killed_parent():
    import signal
    import subprocess
    import sys

    if not os.path.isdir("/proc/self"):
        pytest.skip("needs /proc to see the workers")
    script = ("from tcnumerics.sweep.executors import LocalExecutor\n"
              "import time\n"
              "ex = LocalExecutor(workers=2)\n"
              "list(ex.run(abs, [-1, -2]))\n"
              "print(*ex._pool._processes, flush=True)\n"
              "time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pids = [int(p) for p in parent.stdout.readline().split()]
    assert len(pids) == 2
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    alive = pids
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [p for p in pids if os.path.exists(f"/proc/{p}") and "zombie" not in _state(p)]
    assert not alive


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return next((line for line in fh if line.startswith("State:")), "").lower()
    except OSError:
        return "zombie"


# ----------------------------------------------------------------------------------------------
# engines: where the arithmetic runs is the sweep's choice, and never changes a row


GEMM_ONLY = {
    "sweep": {"name": "engines", "seeds": 1, "seed": 3},
    "units": {"base": BASE, "grid": {"group_size": [8, 16], "frac_bits": [13, 25]}},
    "workloads": [{"kind": "gemm_error", "M": 6, "N": 5, "K": 96, "grid": {"scaling": ["none", "block"]}}],
}


def _spec_with_engine(engine):
    return parse_spec({**GEMM_ONLY, "sweep": {**GEMM_ONLY["sweep"], "engine": engine}})


def test_the_engine_is_the_specs_choice_and_not_part_of_its_identity():
    assert parse_spec(GEMM_ONLY).engine == "auto"
    assert _spec_with_engine("reference").engine == "reference"
    assert _spec_with_engine("reference").digest == parse_spec(GEMM_ONLY).digest  # a sweep resumes on another engine
    from tcnumerics.sweep.errors import SpecError

    with pytest.raises(SpecError, match=r"sweep\.engine: expected one of auto, .*got 'gpu'"):
        _spec_with_engine("gpu")
    with pytest.raises(SpecError, match=r"workloads\[1\] \(chain\) runs on the CPU engines only"):
        parse_spec({**SMALL, "sweep": {**SMALL["sweep"], "engine": "cuda"}})


def test_the_reference_engine_gives_the_fast_engines_table(tmp_path):
    fast = run_sweep(_spec_with_engine("fast"), tmp_path / "fast.parquet", workers=1, progress=False)
    ref = run_sweep(parse_spec(GEMM_ONLY), tmp_path / "ref.parquet", workers=1, progress=False, engine="reference")
    assert len(fast) == 8 and fast[fast["param.scaling"] == "none"]["norm_rel_error"].gt(0).all()
    _same(ref, fast)


def test_cli_engine_option_runs_and_a_bad_one_is_one_line(tmp_path, capsys):
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps(GEMM_ONLY))
    assert main(["sweep", str(spec), "-o", str(tmp_path / "t.csv"), "--engine", "reference", "--quiet",
                 "--workers", "1"]) == 0
    capsys.readouterr()
    assert main(["sweep", str(spec), "-o", str(tmp_path / "u.csv"), "--engine", "gpu", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "engine: expected one of" in err and not (tmp_path / "u.csv").exists()


def test_the_cuda_engine_gives_the_cpu_table(tmp_path):
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - a CuPy without a usable GPU
        pytest.skip("no CUDA device")
    spec = GEMM_ONLY
    try:  # with torch, a model too: its rows must not depend on the engine either (the model stays on the CPU)
        import torch  # noqa: F401
        spec = {**GEMM_ONLY, "workloads": GEMM_ONLY["workloads"] + [
            {"kind": "model_eval", "model": "mlp", "batch": 8, "width": 32}]}
    except ImportError:
        pass
    cpu = run_sweep(parse_spec(spec), tmp_path / "cpu.parquet", workers=1, progress=False, engine="fast")
    gpu = run_sweep(parse_spec(spec), tmp_path / "gpu.parquet", progress=False, engine="cuda")
    _same(gpu, cpu)



def test_model_eval_rows_do_not_depend_on_the_engine(monkeypatch):
    # the model's own arithmetic stays on the CPU; only its GEMMs move to the GPU engine (here the strict fake
    # device, in this process: a host array handed to it fails).  On an H200 the model on CUDA tensors moved the
    # loss column of the accumulator-design sweep.
    pytest.importorskip("torch")
    import fake_cupy

    from tcnumerics.sweep.units import build_unit
    from tcnumerics.sweep.workloads import WORKLOADS

    spec = build_unit(BASE, {"group_size": 8, "frac_bits": 13})
    params = {"model": "mlp", "batch": 8, "width": 32}
    cpu = WORKLOADS["model_eval"].run(spec, params, 4, "fast")
    fake_cupy.install(monkeypatch)
    calls = []
    real = fake_cupy.sys.modules["tcnumerics.engines.cuda"].accumulate_bits

    def host_in_host_out(spec, a, b, acc, *args, **kw):  # as the real engine: host operands copied in and out
        calls.append(a.shape)
        return real(spec, fake_cupy.ndarray(a), fake_cupy.ndarray(b), fake_cupy.ndarray(acc), *args, **kw).get()

    monkeypatch.setattr("tcnumerics.engines.cuda.accumulate_bits", host_in_host_out)
    assert WORKLOADS["model_eval"].run(spec, params, 4, "cuda") == cpu
    assert calls  # the GEMMs did run on the (fake) GPU engine


def test_a_csv_table_reads_back_every_double_exactly(tmp_path):
    # the resumed-sweep test failed on the device's pandas 2.x: CSV floats came back 16 digits short
    pytest.importorskip("pandas")
    from tcnumerics.sweep.store import read_table, write_table

    rng = np.random.default_rng(7)
    values = np.concatenate([rng.standard_normal(200) * 10.0 ** rng.integers(-300, 300, 200),
                             [0.0005194167545011712, 5e-324, 1.7976931348623157e308, -0.0, np.nan]])
    path = str(tmp_path / "t.csv")
    write_table(path, [{"x": float(v)} for v in values])
    back = read_table(path)["x"].to_numpy()
    np.testing.assert_array_equal(back, values)  # every double, NaN where NaN
    assert np.array_equal(np.signbit(back), np.signbit(values))
