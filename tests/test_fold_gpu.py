"""The per-GPU survey's CPU side: the training-step call lists (train_calls.py) and the fold (fold_gpu.py).

The fold runs here on a synthetic device output (a handful of launches written by the test, in the format
graph_survey.py writes) against the installed H100 table: what is tested is the table, the manifest entry, the
agreement counts and the docs section it writes -- not any GPU's data.
"""

import json
import os
import sys

import numpy as np
import pytest

pytest.importorskip("torch")  # export_kernels reads the surveys' call lists through kernel_survey (torch)

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "lab", "device_library"))

import fold_gpu  # noqa: E402
import train_calls  # noqa: E402
from dense_calls import DenseSet  # noqa: E402

from tcnumerics.library import gpus, launches, select, unseen  # noqa: E402
from tcnumerics.library.calls import Call  # noqa: E402
from tcnumerics.library.check import observation, write_capture  # noqa: E402

REDUCE = ("void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, false, float, "
          "__nv_bfloat16, __nv_bfloat16, true, false, false, false>(cublasLt::cublasSplitKParams<float>, float const*, "
          "__nv_bfloat16 const*, floa")
H200_ENV = dict(gpu="h200", device="NVIDIA H200", driver="580.159.04", torch="2.11.0+cu130", cuda="13.0",
                cublas="13.1.0.3", sms=132, sets="tiny_train")
needs_table = pytest.mark.skipif(not os.path.exists(gpus.table_path("h100", "launches") or ""),
                                 reason="H100 launch table not installed")


# --- train_calls -----------------------------------------------------------------------------------------------

def test_step_calls_are_autograds_three_gemms():
    fwd, dgrad, wgrad = train_calls.step_calls(32000, 4096, 256, bias=True)  # an LM head at 256 tokens
    assert (fwd["op"], fwd["M"], fwd["N"], fwd["K"], fwd["bias"]) == ("linear", 256, 32000, 4096, True)
    assert (dgrad["op"], dgrad["M"], dgrad["N"], dgrad["K"], dgrad.get("a_t")) == ("matmul", 256, 4096, 32000, None)
    assert (wgrad["M"], wgrad["N"], wgrad["K"], wgrad["a_t"], wgrad["b_t"]) == (32000, 4096, 256, True, False)
    from fit_table import call_of  # the library calls they are: K = the vocabulary, K = tokens
    assert [call_of(dict(c, out="bf16")).kind() for c in (fwd, dgrad, wgrad)] == [
        "linear|bf16||bf16|0|1|bias|1|||0", "matmul|bf16||bf16|0|0|plain|1|||0", "matmul|bf16||bf16|1|0|plain|1|||0"]


def test_the_pack_limits_are_the_librarys():
    assert train_calls.PACK_BITS == dict(launches.KEY_BITS._asdict())
    assert bool(train_calls.storable(256, 2048, 200_000))  # K above 2^17: an LM head's input gradient
    assert not bool(train_calls.storable(32768, 4096, 256)) and not bool(train_calls.storable(16384, 4096, 65536))


def test_the_training_sets():
    split, rest = train_calls.train_splitk_calls(), train_calls.train_rest_calls()
    assert len(split) > 100_000 and len(rest) > len(split)
    for ds in (split, rest):
        b, M, N, K = ds.rows[:, 1:].T
        assert train_calls.storable(M, N, K, b).all()
    assert train_calls.split_prone(*split.rows[:, 2:].T).all() and not train_calls.split_prone(
        *rest.rows[:, 2:].T)[rest.rows[:, 0] < 8].any()
    shapes = {(split.kinds[k][0], bool(split.kinds[k][2].get("a_t")), m, n, kk) for k, _, m, n, kk in split.rows.tolist()}
    for _, n_out, k_in, t, direction in train_calls.ISSUE_CASES:  # every H200 silent miss of the issue is surveyed
        M, N, K = train_calls.step_shapes(n_out, k_in, t)[direction]
        op = "linear" if direction == "forward" else "matmul"
        assert (op, False, M, N, K) in shapes, (n_out, k_in, t, direction)
    assert all(c["id"] == i for i, c in enumerate(split.calls(0, 50)))


def test_the_bit_set_and_the_autograd_cases():
    bits = train_calls.train_bits_calls()
    assert len(bits) == len({c["id"] for c in bits}) > 150
    assert {(c["M"], c["N"], c["K"]) for c in bits} >= {(256, 4096, 14336), (256, 4096, 32000), (1024, 2048, 32000)}
    assert all(c["seed_a"] != c["seed_b"] for c in bits)  # hashed operands: both models get the same inputs
    cases = train_calls.autograd_cases()
    assert len(cases) > 20 and any(c[4] for c in cases) and any(c[3] == 1 for c in cases)


# --- fold_gpu on a synthetic run ---------------------------------------------------------------------------------

KINDS = [("linear", "bf16", dict(bias=False)), ("matmul", "bf16", {})]
ROWS = {  # (kind index, M, N, K): the synthetic H200's launch (names, CTAs, grid z)
    (0, 16, 1024, 14336): (("nvjet_sm90_tst_64x16_64x16_2x1_v_bz_TNT",), 16, 1),  # H100: split 8 -> other numerics
    (0, 16, 4096, 4096): (("nvjet_sm90_tst_128x16_64x11_4x1_v_bz_splitK_TNT", REDUCE), 64, 1),  # the H100's launch
    (1, 64, 4096, 1024): (("nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT",), 32, 1),  # another tile, unsplit: same numerics
    (1, 3, 12345, 777): (("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_NNT",), 193, 1),  # no H100 counterpart
}


def _write_run(out, rows=ROWS, env=H200_ENV, name="tiny_train"):
    """A `lab/run.sh gpu-survey` output: env.json and one dense set's merged file (graph_survey.write_npz's format)."""
    os.makedirs(out, exist_ok=True)
    ds = DenseSet(KINDS, np.array([[k, 1, M, N, K] for (k, M, N, K) in rows], np.int64), name)
    sigs, sig = {}, []
    ctas, gz = [], []
    for k, _, M, N, K in ds.rows.tolist():
        names, c, z = rows[(k, M, N, K)]
        sig.append(sigs.setdefault(" | ".join(names), len(sigs)))
        ctas.append(c), gz.append(z)
    np.savez_compressed(os.path.join(out, f"{name}.npz"), first_id=0, sig=np.array(sig, np.int32),
                        ctas=np.array(ctas, np.int32), grid_z=np.array(gz, np.int16), signatures=np.array(list(sigs)),
                        errors="{}", env=json.dumps(env), seconds=1.0)
    with open(os.path.join(out, "env.json"), "w") as fh:
        json.dump(env, fh)
    return ds


@pytest.fixture
def run(tmp_path, monkeypatch):
    """A synthetic H200 run, a scratch library folder and docs file; the installed manifest restored after."""
    ds = _write_run(str(tmp_path / "out"))
    monkeypatch.setitem(train_calls.ALL_DENSE_SETS, "tiny_train", lambda: ds)
    lib = tmp_path / "lib"
    lib.mkdir()
    docs = tmp_path / "gemm.md"
    docs.write_text("# x\n\n<!-- fold_gpu h200 -->\nTODO (lead): the H200's figures.\n<!-- /fold_gpu h200 -->\nend\n")
    vec = tmp_path / "vectors"
    vec.mkdir()
    yield dict(out=str(tmp_path / "out"), lib=str(lib), docs=str(docs), vectors=str(vec), tmp=tmp_path)
    gpus.set_manifest(None)
    launches.set_table("h200", None)


def _fold(run, *extra):
    return fold_gpu.main(["--gpu", "h200", "--out-dir", run["out"], "--lib", run["lib"], "--docs", run["docs"],
                          "--vectors", run["vectors"], *extra])


@needs_table
def test_fold_reports_without_writing(run, capsys):
    assert _fold(run) == 0
    out = capsys.readouterr().out
    assert "3 of 4 H200 launches have an H100 counterpart: 1 the same GEMM kernels and grid, 2 the same numerics" in out
    assert os.listdir(run["lib"]) == [] and "TODO (lead)" in open(run["docs"]).read()


@needs_table
def test_fold_writes_the_table_manifest_and_docs(run):
    assert _fold(run, "--write") == 0
    table = launches.load_table(os.path.join(run["lib"], "h200_launches.npz"))
    assert table["launch_count"] == 4 and sorted(table["kinds"]) == ["linear|bf16||bf16|0|1|plain|1|||0",
                                                                     "matmul|bf16||bf16|0|0|plain|1|||0"]
    with open(os.path.join(run["lib"], "gpus.json")) as fh:
        m = json.load(fh)
    h200 = m["models"]["h200"]
    assert h200["launches"] == "h200_launches.npz" and h200["kinds"] == sorted(table["kinds"])
    assert h200["agrees_with"]["h100"] == {
        "linear|bf16||bf16|0|1|plain|1|||0": dict(compared=2, same_launch=1, same_structure=1),
        "matmul|bf16||bf16|0|0|plain|1|||0": dict(compared=1, same_launch=0, same_structure=1)}
    assert h200["provenance"]["cublas"] == "13.1.0.3" and "NVIDIA H200" in h200["device_names"]
    assert m["models"]["h100"] == gpus.manifest()["models"]["h100"]  # the other models untouched
    text = open(run["docs"]).read()
    assert "TODO (lead)" not in text and text.endswith("<!-- /fold_gpu h200 -->\nend\n")
    assert "| linear bf16 | 2 | 2 | 1 | 1 | no |" in text and "| matmul bf16 | 2 | 1 | 0 | 1 | no |" in text
    assert "nvjet_sm90_tst_64x16_64x16_2x1_v_bz_splitK_TNT (S = 8) | nvjet_sm90_tst_64x16_64x16_2x1_v_bz_TNT (S = 1)" \
        in text and "16 x 1024 x 14336" in text
    _fold(run, "--write")  # idempotent: the section is replaced, not appended
    assert open(run["docs"]).read() == text

    # the written tables in use: the H200's own launch wins, the unproven kind is flagged elsewhere
    gpus.set_manifest(m)
    launches.set_table("h200", os.path.join(run["lib"], "h200_launches.npz"))
    own = select(Call("linear", "bf16", "bf16", 16, 1024, 14336, b_t=True, gpu="h200"))
    assert own.modelled and own.structure.split_k is None
    other = select(Call("matmul", "bf16", "bf16", 128, 4096, 4096, gpu="h200"))  # unmeasured shape, own kind:
    assert not other.modelled and unseen.voting_table(other.call) == "h200"  # predicted from the H200's own launches
    unseen_kind = select(Call("mm_out", "bf16", "fp32", 128, 4096, 4096, gpu="h200"))  # never measured on it
    assert not unseen_kind.modelled and unseen_kind.reason.startswith("gpu 'h200'"), unseen_kind.reason


@needs_table
def test_a_later_survey_is_added_not_replaced(run, capsys):
    assert _fold(run, "--write") == 0
    with open(os.path.join(run["lib"], "gpus.json")) as fh:
        first = json.load(fh)
    docs = open(run["docs"]).read()
    gpus.set_manifest(first)
    launches.set_table("h200", os.path.join(run["lib"], "h200_launches.npz"))
    assert _fold(run, "--write", "--add") == 0  # the same run again: nothing new to add, every count seen twice
    assert "0 launches added" in capsys.readouterr().out
    with open(os.path.join(run["lib"], "gpus.json")) as fh:
        h200 = json.load(fh)["models"]["h200"]
    assert h200["kinds"] == first["models"]["h200"]["kinds"] and "added" in h200["provenance"]["measured"]
    assert h200["agrees_with"]["h100"]["linear|bf16||bf16|0|1|plain|1|||0"] == dict(compared=4, same_launch=2,
                                                                                    same_structure=2)
    assert launches.load_table(os.path.join(run["lib"], "h200_launches.npz"))["launch_count"] == 4
    assert open(run["docs"]).read() == docs  # the docs section is the first fold's, printed again, not replaced


def test_agreement_counts_are_summed_per_kind():
    old = {"a": dict(compared=2, same_launch=1, same_structure=2)}
    new = {"a": dict(compared=3, same_launch=3, same_structure=3, launches=9), "b": dict(compared=0, same_launch=0,
                                                                                       same_structure=0, launches=1),
           "c": dict(compared=1, same_launch=0, same_structure=0, launches=1)}
    assert fold_gpu.merged_agreement(old, new) == {"a": dict(compared=5, same_launch=4, same_structure=5),
                                                   "c": dict(compared=1, same_launch=0, same_structure=0)}


@needs_table
def test_fold_takes_self_check_captures(run):
    on_h200 = Call("linear", "bf16", "bf16", 32, 1024, 14336, b_t=True, gpu="h200")
    obs = [observation(on_h200, ("nvjet_sm90_tst_64x16_64x16_2x1_v_bz_splitK_TNT", REDUCE), [(64, 1, 1), None]),
           observation(on_h200, ("nvjet_sm90_tst_64x16_64x16_2x1_v_bz_TNT",), None),  # no grid: not foldable
           observation(Call("linear", "bf16", "bf16", 48, 1024, 14336, b_t=True), ("x",), [(1, 1, 1)])]  # an H100's
    path = str(run["tmp"] / "selfcheck.json.gz")
    write_capture(path, obs, H200_ENV)
    assert _fold(run, "--write", "--captures", path) == 0
    table = launches.load_table(os.path.join(run["lib"], "h200_launches.npz"))
    assert table["launch_count"] == 5


def test_a_run_of_another_gpu_is_refused(run):
    with open(os.path.join(run["out"], "env.json"), "w") as fh:
        json.dump(dict(H200_ENV, device="NVIDIA H100 80GB HBM3"), fh)
    with pytest.raises(SystemExit, match="not 'h200'"):
        _fold(run)


def test_the_docs_need_their_markers():
    with pytest.raises(SystemExit, match="fold_gpu h200"):
        fold_gpu.replace_section("no markers here", "h200", "x")
    assert fold_gpu.replace_section("a<!-- fold_gpu h200 -->old<!-- /fold_gpu h200 -->b", "h200", "new") == \
        "a<!-- fold_gpu h200 -->\nnew\n<!-- /fold_gpu h200 -->b"


def _bits_dir(path, values):
    os.makedirs(path)
    recs = [dict(id=i, op="matmul", fmt="bf16", M=2, N=2, K=64, kernels=["nvjet_x"]) for i in range(len(values))]
    with open(os.path.join(path, "index.json"), "w") as fh:
        json.dump(dict(env={}, records=recs), fh)
    arrays = {}
    for i, v in enumerate(values):
        arrays.update({f"d{i}": np.array(v, np.uint16), f"rows{i}": np.arange(2), f"cols{i}": np.arange(2),
                       f"batches{i}": np.zeros(1, np.int64)})
    np.savez(os.path.join(path, "survey.npz"), **arrays)
    return str(path)


def test_bits_are_compared_call_by_call(tmp_path):
    a = _bits_dir(tmp_path / "a", [[[1, 2], [3, 4]], [[5, 6], [7, 8]]])
    b = _bits_dir(tmp_path / "b", [[[1, 2], [3, 4]], [[5, 6], [7, 9]]])
    r = fold_gpu.compare_bits(a, b)
    assert r["compared"] == 2 and r["same"] == 1 and r["differ"][0]["id"] == 1 and r["differ"][0]["share"] == 0.25


def test_table_rows_expand_the_runs_exactly():
    """Expanding a table's runs and re-encoding them gives back every launch (fold_gpu's way into a table)."""
    rows = [("k|bf16||bf16|0|0|plain|1|||0", m, 64, 128, 1, "nvjet_sm90_tst_64x8_64x16_1x1_v_bz_NNT", 8 * -(-m // 8), 1)
            for m in (1, 2, 3, 4, 8, 16, 24)]
    sig_index: dict = {}
    cols = fold_gpu.columns(rows, sig_index)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.npz")
        launches.write_table(path, cols, list(sig_index), "test")
        t = launches.load_table(path)
        back = fold_gpu.table_rows(t, {})
        assert sorted(zip(back["M"].tolist(), back["ctas"].tolist())) == [(r[1], r[6]) for r in rows]
        f, sigs, ctas, gz = fold_gpu.table_lookup(t, rows[0][0], np.array([3, 5, 24]), np.array([64] * 3),
                                                  np.array([128] * 3), np.ones(3, np.int64))
        assert f.tolist() == [True, False, True] and ctas[[0, 2]].tolist() == [8, 24]


def test_the_reference_models_own_run_is_added_to_its_table(tmp_path, monkeypatch, capsys):
    """fold_gpu.py --gpu h100 (the companion run): new launches join the table, ones it holds are kept."""
    import copy

    lin = "linear|bf16||bf16|0|1|plain|1|||0"
    old_rows = [(lin, 16, 1024, 14336, 1, " | ".join(ROWS[(0, 16, 4096, 4096)][0]), 128, 1),
                (lin, 16, 4096, 4096, 1, " | ".join(ROWS[(0, 16, 4096, 4096)][0]), 64, 1)]
    sig_index: dict = {}
    old = str(tmp_path / "old_h100.npz")
    launches.write_table(old, fold_gpu.columns(old_rows, sig_index), list(sig_index), "tiny")
    m = copy.deepcopy(gpus.manifest())
    m["models"]["h100"]["launches"] = old  # an absolute path: the tiny table stands for the H100's
    gpus.set_manifest(m)
    launches.set_table("h100", None)
    try:
        env = dict(H200_ENV, gpu="h100", device="NVIDIA H100 80GB HBM3")
        rows = {(0, 16, 1024, 14336): (("nvjet_sm90_tst_64x16_64x16_2x1_v_bz_TNT",), 16, 1),  # differs: the table's kept
                (0, 16, 4096, 4096): ROWS[(0, 16, 4096, 4096)],  # the same launch again
                (1, 64, 4096, 1024): ROWS[(1, 64, 4096, 1024)]}  # new
        ds = _write_run(str(tmp_path / "out"), rows, env)
        monkeypatch.setitem(train_calls.ALL_DENSE_SETS, "tiny_train", lambda: ds)
        lib = tmp_path / "lib"
        lib.mkdir()
        assert fold_gpu.main(["--gpu", "h100", "--out-dir", str(tmp_path / "out"), "--lib", str(lib), "--write",
                              "--vectors", str(tmp_path)]) == 0
        assert "1 launches added, 1 measured again with another launch" in capsys.readouterr().out
        t = launches.load_table(str(lib / "h100_launches.npz"))
        assert t["launch_count"] == 3 and "tiny; lab/run.sh gpu-survey h100" in str(np.load(lib / "h100_launches.npz")["provenance"])
        kept = launches.launch_in(t, Call("linear", "bf16", "bf16", 16, 1024, 14336, b_t=True))
        assert kept.ctas == 128 and "splitK" in kept.main
    finally:
        gpus.set_manifest(None)
        launches.set_table("h100", None)


def test_the_device_script_names_only_sets_that_exist():
    import re

    import kernel_survey

    text = open(os.path.join(HERE, "..", "lab", "run.sh")).read()
    dense = set(" ".join(re.findall(r'SETS=\$\{SETS:-"([^"]+)"\}', text)).split())
    assert set(train_calls.TRAIN_SETS) <= dense <= set(train_calls.ALL_DENSE_SETS)
    per_gpu = [set(b.split()) for b in re.findall(r'BITS=\$\{BITS:-"([^"]+)"\}', text)]
    assert len(per_gpu) == 2 and all(set(fold_gpu.BIT_SETS) <= b <= set(kernel_survey.SETS) for b in per_gpu)
    assert "for s in $BITS; do" in text
    flags = text[text.index("cmd_flags_survey() {"):]
    flags = flags[:flags.index("\n}\n")]
    default = re.findall(r"GRID=\$\{GRID:-(\w+)\}", flags)  # the grid it surveys: a GRID_SETS set, train_grid by default
    assert default == ["train_grid"] and 'SETS=$GRID cmd_env' in flags and 'cmd_dense "$GRID"' in flags
    named = set(re.findall(r"GRID=(\w+) ", text[:text.index("set -o pipefail")]))  # the usage lines' other grids
    assert named and named <= set(train_calls.GRID_SETS)
    assert "train_check.py" in text and "bits.tgz" in text and "env.json" in text


def test_the_docs_figures_are_the_lists():
    """docs/gemm.md's 'Per GPU model' figures of the survey lists, recomputed."""
    text = open(os.path.join(HERE, "..", "docs", "gemm.md")).read()
    for n in (len(train_calls.train_splitk_calls()), len(train_calls.train_rest_calls()),
              len(train_calls.h100_counterpart_calls()), len(train_calls.train_bits_calls())):
        assert f"{n:,}" in text, n
    assert f"({len(train_calls.published_models())} of them, {len(train_calls.projections(train_calls.published_models()))} " \
           "projection shapes)" in text
    assert f"those three explicit calls ({len(train_calls.autograd_cases())} cases)" in text
