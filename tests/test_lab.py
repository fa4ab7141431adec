"""The lab (lab/, outside the package): one command lists and runs its tools, its model lists are data, its device
runner names only scripts that exist, and the package never imports it."""
import ast
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAB = os.path.join(ROOT, "lab")
sys.path.insert(0, os.path.join(LAB, "device_library"))


def test_python_m_lab_lists_every_tool_and_refuses_an_unknown_one():
    out = subprocess.run([sys.executable, "-m", "lab"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    for tool in ("fold_gpu", "replay_survey", "fit_table", "graph_survey", "survey_ops", "oracle_check",
                 "device_models.capture", "device_library.capture"):
        assert re.search(rf"^  {re.escape(tool)}\s", out.stdout, re.M), tool
    bad = subprocess.run([sys.executable, "-m", "lab", "capture"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "device_models.capture" in bad.stderr


def test_the_model_lists_are_data_and_every_held_out_set_has_its_shapes():
    import model_lists

    with open(model_lists.PATH) as fh:
        lists = json.load(fh)["lists"]
    numbers = model_lists.held_out_numbers()
    assert numbers == list(range(3, numbers[-1] + 1))
    seen: set = set()
    for n in numbers:
        models = model_lists.models(f"holdout{n}")
        assert models and not (set(models) & seen), f"holdout{n} repeats a model of an earlier set"
        seen |= set(models)
        bmm, baddbmm = model_lists.attention(f"holdout{n}")
        assert all(len(s) == 4 for s in bmm + baddbmm) and model_lists.tokens(f"holdout{n}")
    assert all(e.get("note") for e in lists.values())
    with pytest.raises(KeyError, match="no model list 'holdout99'"):
        model_lists.models("holdout99")


def test_every_check_set_holds_models_no_survey_list_or_earlier_check_set_named():
    """The self-check's sets (lab/data/models.json check_set<n>, read by check_training.py) are held out by name:
    none of their models is in a survey's list or an earlier check set, and each shape has its six numbers."""
    import model_lists
    import train_calls

    sets = model_lists.check_sets()
    assert sorted(sets) == list(range(1, len(sets) + 1)) and len(sets) >= 7
    with open(model_lists.PATH) as fh:
        lists = json.load(fh)["lists"]
    seen = set(train_calls.published_models()).union(*(e["models"] for k, e in lists.items()
                                                        if not k.startswith("check_set")))
    known = {1: {"llama3.2-1b", "llama3.2-3b", "gemma2-9b"}}  # in kernel_survey's list; check_set1's note says so
    for n, models in sets.items():
        assert len(models) >= 10 and all(len(v) == 6 and min(v) > 0 for v in models.values()), n
        assert set(models) & seen == known.get(n, set()), f"check_set{n} repeats {sorted(set(models) & seen)}"
        seen |= set(models)
    assert all(name in model_lists._entry("check_set1")["note"] for name in known[1])
    # the README's count of the self-checked models
    with open(os.path.join(ROOT, "README.md")) as fh:
        total, held_out = map(int, re.search(r"training steps of (\d+) published models \((\d+) of them in no survey\)",
                                             fh.read()).groups())
    assert (total, held_out) == (sum(map(len, sets.values())), sum(map(len, sets.values())) - len(known[1]))


def test_dense_rest_gives_the_ranges_the_second_survey_call_ran(tmp_path):
    """The large grid's first device call reached part of each of its 6 slices; the second call (gpu51.sh, archived
    beside it) surveyed the rest as the ranges dense_rest.py prints for the first call's file."""
    import tarfile

    import dense_rest

    with tarfile.open(os.path.join(LAB, "data", "gpu-logs", "h200_2026-11-29h.tar.xz")) as tar:
        npz = tmp_path / "train_grid_large.npz"
        npz.write_bytes(tar.extractfile("h200_2026-11-29h/call1/train_grid_large.npz").read())
        second = tar.extractfile("h200_2026-11-29h/gpu51.sh").read().decode()
    with np.load(npz) as z:
        ranges = dense_rest.rest_ranges(z["sig"], 6)
    ran = [tuple(map(int, m)) for m in re.findall(r"train_grid_large:(\d+):(\d+)", second)]
    assert ranges == ran and sum(b - a for a, b in ranges) == 237_060
    assert dense_rest.rest_ranges(np.zeros(10, np.int32), 3) == []  # every slice reached its end


def test_the_runner_is_valid_bash_and_names_only_scripts_that_exist():
    run_sh = os.path.join(LAB, "run.sh")
    assert subprocess.run(["bash", "-n", run_sh]).returncode == 0
    text = open(run_sh).read()
    named = set(re.findall(r"\$LIB/(\w+\.py)", text))
    assert named >= {"survey_ops.py", "graph_survey.py", "kernel_survey.py", "train_check.py"}
    assert all(os.path.exists(os.path.join(LAB, "device_library", n)) for n in named)
    assert not [f for f in os.listdir(os.path.join(LAB, "device_library")) if f.endswith(".sh")]


def test_the_package_never_imports_the_lab():
    for dirpath, _, files in os.walk(os.path.join(ROOT, "src", "tcnumerics")):
        for f in files:
            if f.endswith(".py"):
                tree = ast.parse(open(os.path.join(dirpath, f), encoding="utf-8").read())
                for node in ast.walk(tree):
                    mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                        [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
                    assert not any(m == "lab" or m.startswith("lab.") for m in mods), os.path.join(dirpath, f)


def test_raw_gpu_logs_live_compressed_in_the_lab():
    """A device run's raw outputs go to lab/data/gpu-logs as one xz archive per run (its README lists them);
    benchmarks/ keeps the scripts and RESULTS.md, the one readable summary."""
    assert not os.path.exists(os.path.join(ROOT, "benchmarks", "gpu")), \
        "benchmarks/gpu: archive it as lab/data/gpu-logs/<run>.tar.xz (lab/data/gpu-logs/README.md)"
    logs = os.path.join(LAB, "data", "gpu-logs")
    archives = sorted(f for f in os.listdir(logs) if f != "README.md")
    assert archives and all(f.endswith(".tar.xz") for f in archives)
    listing = open(os.path.join(logs, "README.md")).read()
    assert all(f"`{a}`" in listing for a in archives)


def test_no_dated_files_outside_the_log_archives():
    """Dated outputs (a session's logs, scripts, probe dumps) live only in lab/data/gpu-logs' archives."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode:
        pytest.skip("not a git checkout")
    dated = [f for f in tracked.stdout.splitlines()
             if re.search(r"20\d\d-\d\d-\d\d", os.path.basename(f)) and not f.startswith("lab/data/gpu-logs/")]
    assert dated == []


def _finished():
    with open(os.path.join(LAB, "data", "finished.json"), encoding="utf-8") as fh:
        return json.load(fh)


def test_every_lab_path_the_repository_cites_exists_or_is_a_finished_investigation():
    """A doc, module or test that names a lab script names one in the tree, or one that left it as a finished
    investigation (lab/data/finished.json), never a path that is simply gone."""
    finished = {r["path"] for r in _finished()["tools"].values()}
    cited = {}
    for top in ("docs", "src", "tests", "benchmarks", "vectors", "lab", "README.md"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)) if top != "README.md" else [(ROOT, [], [top])]:
            if dirpath.startswith(os.path.join(LAB, "data")):
                continue  # the lab's data: archives and the finished list itself
            for f in files:
                if f.endswith((".md", ".py", ".sh")):
                    text = open(os.path.join(dirpath, f), encoding="utf-8", errors="replace").read()
                    for path in re.findall(r"lab/[\w/]+\.(?:py|sh)", text):
                        cited.setdefault(path, os.path.join(dirpath, f))
    missing = {p: where for p, where in cited.items() if "TOOL" not in p and p not in finished
               and not os.path.exists(os.path.join(ROOT, p))}
    assert missing == {}


def test_finished_investigations_left_the_tree_and_say_how_to_run_them():
    record = _finished()
    for name, tool in record["tools"].items():
        assert not os.path.exists(os.path.join(ROOT, tool["path"])), tool["path"]
        assert os.path.basename(tool["path"]) == name + ".py" and tool["found"] and tool["now"]
    out = subprocess.run([sys.executable, "-m", "lab", "probe_simt"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert f"git worktree add /tmp/lab-{record['commit']} {record['commit']}" in out.stderr
    listed = subprocess.run([sys.executable, "-m", "lab", "finished"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert listed.returncode == 0 and all(t["path"] in listed.stdout for t in record["tools"].values())
    if subprocess.run(["git", "rev-parse", "--git-dir"], cwd=ROOT, capture_output=True).returncode == 0 and \
            subprocess.run(["git", "cat-file", "-e", record["commit"]], cwd=ROOT, capture_output=True).returncode == 0:
        for tool in record["tools"].values():  # each one is in the commit the record names
            assert subprocess.run(["git", "cat-file", "-e", f"{record['commit']}:{tool['path']}"], cwd=ROOT,
                                  capture_output=True).returncode == 0, tool["path"]
