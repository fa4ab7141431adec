"""Writers: the output path checked before the work (the user's path named, never a temporary), files
that follow the umask, and the sweep plot's lines (one per unit and per varying parameter)."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from tcnumerics._files import OutputExistsError, OutputPathError, atomic_write, check_output
from tcnumerics.cli import main

INT8 = "hopper.mma.m16n8k32.s32.s8.s8.s32"


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_atomic_write_follows_the_umask_and_names_the_users_path(tmp_path, umask_022):
    out = tmp_path / "x.bin"
    with atomic_write(out) as fh:
        fh.write(b"1")
    assert _mode(out) == 0o644
    os.umask(0o077)
    with atomic_write(tmp_path / "y.bin") as fh:
        fh.write(b"1")
    assert _mode(tmp_path / "y.bin") == 0o600
    with pytest.raises(OutputExistsError, match=r"x\.bin: already exists \(pass overwrite=True"):
        with atomic_write(out, overwrite=False) as fh:
            fh.write(b"2")
    assert out.read_bytes() == b"1"
    missing = tmp_path / "no" / "x.bin"
    with pytest.raises(OutputPathError, match="no/x.bin: its directory does not exist"):
        check_output(missing)
    assert sorted(os.listdir(tmp_path)) == ["x.bin", "y.bin"]  # no temporary left behind


def _cli(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    err = capsys.readouterr().err
    return code, err


@pytest.mark.parametrize("argv", [
    ["vectors", "generate", "--instruction", INT8, "--count", "1", "-o", "{bad}/x.npz"],
    ["vectors", "import", "{vec}.hex", "-o", "{bad}/x.npz"],
    ["vectors", "export", "--hex", "{vec}.npz", "-o", "{bad}/x.hex"],
    ["sweep", "{spec}", "-o", "{bad}/x.parquet"],
    ["sweep", "plot", "{vec}.csv", "-o", "{bad}/x.png"],
    ["reproduce", "fp8-accumulation", "--k", "64", "--plot", "{bad}/x.png"],
])
def test_a_missing_output_directory_is_refused_before_work_naming_the_users_path(tmp_path, capsys, monkeypatch, argv):
    from tcnumerics.vectors import shards

    vec = str(tmp_path / "v")
    spec = tmp_path / "s.toml"
    spec.write_text('[sweep]\nname = "s"\nseeds = 1\n[units]\nentries = ["%s"]\n'
                    '[[workloads]]\nkind = "gemm_error"\nM = 2\nN = 2\nK = 32\n' % INT8)
    assert main(["vectors", "generate", "--instruction", INT8, "--count", "1", "-o", vec + ".npz"]) == 0
    assert main(["vectors", "export", "--hex", vec + ".npz", "-o", vec + ".hex"]) == 0
    (tmp_path / "v.csv").write_text("unit.frac_bits,max_rel_error\n1,0.5\n2,0.25\n")
    capsys.readouterr()
    bad = str(tmp_path / "nonexistent" / "dir")
    monkeypatch.setattr(shards, "make_set", lambda *a, **k: pytest.fail("work started before the output check"))
    code, err = _cli(capsys, *[a.format(bad=bad, vec=vec, spec=spec) for a in argv])
    assert code == 2
    assert bad in err and "does not exist" in err
    assert "tmp" not in err.replace(str(tmp_path), "") and ".part" not in err and ".journal" not in err
    assert "Traceback" not in err


def test_cli_files_come_out_with_the_umask_permissions(tmp_path, umask_022):
    pytest.importorskip("pandas")
    vec = str(tmp_path / "v")
    assert main(["vectors", "generate", "--instruction", INT8, "--count", "1", "-o", vec + ".npz"]) == 0
    assert main(["vectors", "export", "--hex", vec + ".npz", "-o", vec + ".hex"]) == 0
    assert main(["vectors", "generate", "--instruction", INT8, "--count", "1", "--shards", "1", "-o",
                 str(tmp_path / "sh"), "--workers", "1"]) == 0
    files = [vec + ".npz", vec + ".hex"] + [str(p) for p in (tmp_path / "sh").iterdir()]
    assert {f: _mode(f) for f in files} == {f: 0o644 for f in files}


def test_run_sweep_onto_an_existing_file_tells_a_python_caller_overwrite_true(tmp_path):
    pytest.importorskip("pandas")
    from tcnumerics.sweep.runner import run_sweep
    from tcnumerics.sweep.store import StoreError

    out = tmp_path / "r.csv"
    out.write_text("x\n")
    spec = tmp_path / "s.toml"
    spec.write_text('[sweep]\nname = "s"\nseeds = 1\n[units]\nentries = ["%s"]\n'
                    '[[workloads]]\nkind = "gemm_error"\nM = 2\nN = 2\nK = 32\n' % INT8)
    with pytest.raises(StoreError, match=r"r\.csv: already exists \(pass overwrite=True"):
        run_sweep(str(spec), out, progress=False)


# --- sweep plot ---------------------------------------------------------------------------------

def _table():
    pd = pytest.importorskip("pandas")
    rows = []
    units = {"hopper.wgmma.m64n8k32.f32.e4m3.e4m3": 0.1444, "blackwell.tcgen05.mma.kind::f8f6f4.f32.e4m3.e4m3": 3e-6}
    for unit, err in units.items():
        for promote in (np.nan, 128.0):
            for K in (512, 8192):
                for seed in (0, 1):
                    rows.append({"unit": unit, "entry": unit, "workload": "gemm_error", "param.K": K,
                                 "param.promote_every": promote, "seed_index": seed,
                                 "norm_rel_error": err * K / 8192 * (1 if promote != promote else 0.01) * (1 + seed)})
    return pd.DataFrame(rows)


def test_pareto_lines_never_average_units_or_unnamed_parameters():
    from tcnumerics.sweep.plotting import pareto_lines

    lines = {label: (xs, ys) for label, xs, ys in pareto_lines(_table(), "param.K", "norm_rel_error",
                                                               "param.promote_every")}
    assert sorted(lines) == sorted(f"promote_every={p}, {u}" for p in ("none", "128")
                                   for u in ("hopper.wgmma.m64n8k32", "blackwell.tcgen05.mma.kind::f8f6f4"))
    xs, ys = lines["promote_every=none, hopper.wgmma.m64n8k32"]
    assert xs == [512, 8192] and ys[1] == pytest.approx(0.1444 * 1.5)  # the mean over seeds alone
    assert lines["promote_every=none, blackwell.tcgen05.mma.kind::f8f6f4"][1][1] == pytest.approx(3e-6 * 1.5)


def test_sweep_plot_draws_one_line_per_unit_with_the_legend_outside(tmp_path, umask_022, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tcnumerics.sweep import plotting

    drawn = {}
    real_close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: drawn.setdefault("fig", fig))  # read the figure back
    plotting.plot_pareto(_table(), tmp_path / "f.png", x="param.K", y="norm_rel_error", line="param.promote_every")
    fig = drawn["fig"]
    ax = fig.axes[0]
    got = {ln.get_label(): list(ln.get_ydata()) for ln in ax.get_lines()}
    assert len(got) == 4 and not any("nan" in k or "128.0" in k for k in got)
    assert got["promote_every=none, hopper.wgmma.m64n8k32"][1] == pytest.approx(0.1444 * 1.5)
    legend = ax.get_legend()
    fig.canvas.draw()
    box, axes_box = legend.get_window_extent(), ax.get_window_extent()
    assert box.x0 >= axes_box.x1  # right of the data, not over it
    assert "f32.e4m3.e4m3" in legend.get_title().get_text()
    real_close(fig)
    assert _mode(tmp_path / "f.png") == 0o644
