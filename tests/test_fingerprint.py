"""Fingerprinting: every catalogued behaviour, as a black box, gives back its own parameters."""

import json

import numpy as np
import pytest

import tcnumerics as tc
from tcnumerics.catalog import get_instruction
from tcnumerics.cli import main
from tcnumerics.fingerprint import catalog_dot, fingerprint, structure_of


def _distinct_behaviours():
    """One name per distinct behaviour: entries differing only in name (wgmma N, shapes with the
    same K and model) are the same black box."""
    seen = {}
    for name in tc.instructions():
        s = get_instruction(name)
        key = (s.a_format, s.b_format, s.c_format, s.d_format, s.k, s.model, s.k_order, s.chunk, s.c_entry,
               s.c_add_rounding)
        seen.setdefault(key, name)
    return sorted(seen.values())


BEHAVIOURS = _distinct_behaviours()


def _check_recovered(name: str, fp) -> list:
    spec = get_instruction(name)
    m = spec.model
    problems = []
    if name not in fp.matches:
        problems.append("does not match itself")
    if m.algorithm == "fused":
        if not fp.reproduces:
            problems.append(f"inferred model does not reproduce it ({fp.notes})")
        groups, c_entry = structure_of(spec)
        if fp.groups != groups:
            problems.append(f"groups {fp.groups} != {groups}")
        if fp.group_size != m.group_size and len(groups) > 1:
            problems.append(f"group size {fp.group_size} != {m.group_size}")
        if fp.c_entry != c_entry:
            problems.append(f"C entry {fp.c_entry} != {c_entry}")
        if fp.frac_bits_at_least is None:
            if fp.frac_bits != m.frac_bits:
                problems.append(f"F {fp.frac_bits} != {m.frac_bits}")
        elif m.frac_bits is not None and m.frac_bits < fp.frac_bits_at_least:
            problems.append(f"F >= {fp.frac_bits_at_least} claimed, entry has {m.frac_bits}")
        if m.output_rounding.value not in fp.output_rounding:
            problems.append(f"rounding {fp.output_rounding} misses {m.output_rounding.value}")
        if m.output_mantissa_bits not in fp.output_mantissa_bits:
            problems.append(f"output mantissa {fp.output_mantissa_bits} misses {m.output_mantissa_bits}")
        if fp.zero_exponent is not None and m.frac_bits is not None:
            lo, hi = fp.zero_exponent
            if not ((lo is None or m.zero_exponent >= lo) and m.zero_exponent <= hi):
                problems.append(f"zero exponent {m.zero_exponent} outside {fp.zero_exponent}")
        if spec.c_entry == "ieee_add" and spec.c_add_rounding.value not in fp.c_add_rounding:
            problems.append(f"C addition rounding {fp.c_add_rounding} misses {spec.c_add_rounding.value}")
        if fp.spec is not None and fp.spec.model.nan_bits != m.nan_bits:
            problems.append(f"NaN bits {fp.spec.model.nan_bits:#x} != {m.nan_bits:#x}")
    elif m.algorithm in ("integer", "binary"):
        if fp.kind != m.algorithm or not fp.reproduces:
            problems.append(f"kind {fp.kind}, reproduces {fp.reproduces}")
        if m.algorithm == "integer" and fp.integer.get("overflow") != ("saturate" if m.saturate else "wrap"):
            problems.append(f"overflow {fp.integer}")
        if m.algorithm == "binary" and fp.integer.get("bit_op") != m.bit_op:
            problems.append(f"bit op {fp.integer}")
    else:
        # other datapaths are named by the catalog replay (or reproduced by an equivalent fused model)
        if not (fp.reproduces or m.algorithm in fp.kind):
            problems.append(f"kind {fp.kind!r} does not name {m.algorithm}")
    return problems


def test_every_catalogued_behaviour_recovers_its_parameters():
    failures = {}
    for name in BEHAVIOURS:
        fp = fingerprint(catalog_dot(name, "reference"), name, validation=4)
        problems = _check_recovered(name, fp)
        if problems:
            failures[name] = problems
    assert not failures, json.dumps(failures, indent=1)[:4000]
    assert len(BEHAVIOURS) > 20


def test_hopper_mma_fp8_interleaved_halves_are_discovered():
    name = "hopper.mma.m16n8k32.f32.e4m3.e5m2.f32"
    fp = fingerprint(catalog_dot(name, "reference"), name, validation=8)
    assert fp.groups == [[k for k in range(32) if k % 4 < 2], [k for k in range(32) if k % 4 >= 2]]
    assert fp.c_entry == "ieee_add" and fp.c_add_rounding == ["rne"] and fp.frac_bits == 25
    # the same datapath is catalogued for Blackwell (sm_100 lowers it the same way) and for ptxas
    # 12.4-12.6 (which differs from it only on rare alignments, see tests/test_published.py)
    same = {name, name.replace("hopper.", "blackwell.", 1), name.replace("hopper.", "hopper-ptxas12_4-12_6.", 1)}
    assert fp.reproduces and name in fp.matches and set(fp.matches) <= same
    text = fp.report()
    assert "added last" in text and "F): 25" in text


def test_hopper_fp8_wgmma_e8m13_cut():
    name = "hopper.wgmma.m64n8k32.f32.e4m3.e4m3"
    fp = fingerprint(catalog_dot(name, "reference"), name, validation=8)
    assert fp.frac_bits == 13 and fp.output_mantissa_bits == [13] and fp.output_rounding == ["rz"]
    assert fp.specials["NaN result"] == "canonical 0x7fffffff"


def test_a_perturbed_unit_is_told_apart():
    # a black box that differs from every catalog entry: Hopper bf16 with F=23 and RNE output
    base = get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")
    odd = tc.InstructionSpec("custom.bf16", 16, base.model.with_(frac_bits=23, output_rounding="rne",
                                                                   group_size=4))
    fp = fingerprint(catalog_dot(odd, "reference"), base, validation=8)
    assert fp.frac_bits == 23 and fp.output_rounding[0] == "rne" and fp.group_size == 4
    assert fp.reproduces and fp.matches == []


def test_plain_python_callable_black_box():
    # any callable works: here an exact-integer-wraparound unit written from scratch
    name = "hopper.mma.m16n8k32.satfinite.s32.s8.s8.s32"

    def dot(a, b, c):
        total = (a.astype(np.int8).astype(np.int64) * b.astype(np.int8).astype(np.int64)).sum(axis=1)
        total += c.astype(np.int32).astype(np.int64)
        return (total & 0xFFFFFFFF).astype(np.uint32)

    fp = fingerprint(dot, name, validation=8)
    assert fp.kind == "integer" and fp.integer["overflow"] == "wrap"
    assert name not in fp.matches and "hopper.mma.m16n8k32.s32.s8.s8.s32" in fp.matches


def test_bad_arguments():
    with pytest.raises(TypeError, match="dot"):
        fingerprint(42, "hopper.wgmma.m64n8k16.f32.bf16.bf16")
    with pytest.raises(ValueError, match="validation"):
        fingerprint(catalog_dot("hopper.wgmma.m64n8k16.f32.bf16.bf16"), "hopper.wgmma.m64n8k16.f32.bf16.bf16",
                    validation=0)
    with pytest.raises(ValueError, match="unknown name"):
        fingerprint(catalog_dot("hopper.wgmma.m64n8k16.f32.bf16.bf16"), "hopper.nope")

    def wrong_shape(a, b, c):
        return np.zeros(len(c) + 1, np.uint32)

    with pytest.raises(ValueError, match="black box returned shape"):
        fingerprint(wrong_shape, "hopper.wgmma.m64n8k16.f32.bf16.bf16")


def test_cli(capsys):
    code = main(["fingerprint", "--instruction", "hopper.wgmma.m64n8k16.f32.f16.f16", "--validation", "8",
                 "--engine", "reference"])
    out, err = capsys.readouterr()
    assert code == 0 and "fraction bits kept (F): 25" in out and "hopper.wgmma.m64n8k16.f32.f16.f16" in out
    code = main(["fingerprint", "--instruction", "hopper.mma.m16n8k32.s32.s8.s8.s32", "--json", "--validation", "4"])
    out, err = capsys.readouterr()
    assert code == 0 and json.loads(out)["integer"]["overflow"] == "wrap"
    code = main(["fingerprint", "--instruction", "hopper.nope"])
    out, err = capsys.readouterr()
    assert code == 2 and err.startswith("error:") and err.count("\n") == 1


def test_cli_gpu_without_a_gpu_is_one_line(capsys):
    pytest.importorskip("tcnumerics.probe")
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy present: this checks the machine without one")
    except ImportError:
        pass
    code = main(["fingerprint", "--instruction", "hopper.wgmma.m64n8k16.f32.bf16.bf16", "--gpu"])
    out, err = capsys.readouterr()
    assert code == 2 and err.startswith("error: --gpu") and err.count("\n") == 1


@pytest.mark.parametrize("name", ["hopper.mma.sp.m16n8k8.f32.tf32.tf32.f32", "hopper.mma.sp.m16n8k64.s32.s4.u4.s32",
                                  "hopper.mma.sp.m16n8k32.f32.f16.f16.f32"])
def test_gpu_fingerprint_of_a_sparse_entry_uses_its_scheme(monkeypatch, capsys, name):
    # `fingerprint --gpu` with the GPU replaced by the catalog's sparse model: the sparse unit
    # sees positions in the entry's own scheme (TF32 1:2, s4/u4 pairwise 4:8, 2:4) and the
    # fingerprint of the selected products is the entry's datapath
    import tcnumerics.probe as probe
    from tcnumerics import sparse
    from tcnumerics.fingerprint import _gpu_dot

    seen = []

    def fake_gpu_dot(entry):
        def dot(a, b, c, sparse_index):
            seen.append(sparse_index)
            return sparse.dot_bits(entry, a, b, c, sparse_index)   # validates positions in the scheme
        return dot

    monkeypatch.setattr(probe, "gpu_dot", fake_gpu_dot)
    scheme = sparse.sparsity(name)
    fp = fingerprint(_gpu_dot(name), name, validation=8)
    assert fp.reproduces and name in fp.matches
    idx = seen[0]
    assert idx.shape[1] == get_instruction(name).k
    assert (idx.reshape(len(idx), -1, scheme.kept) == scheme.combinations()[0]).all()
    code = main(["fingerprint", "--instruction", name, "--gpu", "--validation", "4", "--no-match"])
    assert code == 0 and name in capsys.readouterr().out
