"""Mutants and mutation-adequate vector sets (tcnumerics.vectors.mutants / adequate)."""

import glob
import os

import numpy as np
import pytest

from tcnumerics.cli import main
from tcnumerics.vectors.adequate import adequate_set, mutants_killed
from tcnumerics.vectors.io import load
from tcnumerics.vectors.mutants import KINDS, evaluate, mutants

HOPPER = "hopper.wgmma.m64n8k16.f32.bf16.bf16"


def test_every_mutant_differs_from_the_unit_somewhere_or_is_proven_equivalent():
    s = adequate_set(HOPPER, seed=0, per_family=64)
    assert s.score == 1.0 and not s.survivors
    assert set(s.equivalent) == {"group_size*2", "k_order_reversed"}
    assert set().union(*map(set, s.kills)) == set(s.mutants)  # the chosen vectors kill them all
    assert set(s.family) >= {"normal", "cancel", "cdom", "special"}  # and every family is represented


def test_a_killed_mutant_really_differs_on_its_vector():
    s = adequate_set("volta.mma.m8n8k4.f32.f16.f16.f32", seed=0, per_family=32)
    by_name = {m.name: m for m in mutants("volta.mma.m8n8k4.f32.f16.f16.f32")}
    for i, names in enumerate(s.kills):
        for name in names:
            assert evaluate(by_name[name], s.a[i:i + 1], s.b[i:i + 1], s.c[i:i + 1])[0] != s.d[i]


def test_deterministic_for_a_seed_and_different_for_another():
    one, two = adequate_set(HOPPER, seed=3, per_family=32), adequate_set(HOPPER, seed=3, per_family=32)
    assert np.array_equal(one.a, two.a) and one.kills == two.kills
    other = adequate_set(HOPPER, seed=4, per_family=32)
    assert not (one.a.shape == other.a.shape and np.array_equal(one.a, other.a))


def test_mutant_kinds_and_integer_units():
    kinds = {m.kind for m in mutants(HOPPER)}
    assert {"frac_bits", "group_size", "group_rounding", "c_entry", "zero_exponent", "flush_inputs",
            "flush_outputs", "nan_bits", "inf_minus_inf", "overflow", "signed_zero"} <= kinds <= set(KINDS)
    s = adequate_set("hopper.mma.m16n8k16.s32.s8.s8.s32", seed=0, per_family=16)
    assert s.score == 1.0 and {"int_saturate", "int_a_u8", "int_b_u8"} == set(s.mutants)


def test_cli_adequate_verifies_and_reports_kills(tmp_path, capsys):
    out = str(tmp_path / "ad.npz")
    assert main(["vectors", "generate", "--adequate", "--instruction", HOPPER, "--count", "32", "-o", out]) == 0
    assert "mutation score 1.000" in capsys.readouterr().out
    assert main(["vectors", "verify", "--mutants", out]) == 0
    text = capsys.readouterr().out
    n = len([m for m in mutants(HOPPER) if not m.equivalent])
    assert "all match" in text and "SURVIVES" not in text and f"{n}/{n}" in text


def test_unit_equals_silicon_captures_on_the_hopper_entry():
    """The adequate set's d is the unit's; the unit is the catalog model, which replays the H200 captures."""
    root = os.path.join(os.path.dirname(__file__), "..", "vectors", "hopper")
    files = [f for f in glob.glob(os.path.join(root, "*.npz")) if load(f).instruction == HOPPER]
    if not files:
        pytest.skip("no silicon captures of the Hopper BF16 entry in this checkout")
    vs = load(files[0])
    n = min(vs.n, 2000)
    from tcnumerics.engines.reference import dot_bits
    from tcnumerics.catalog import get_instruction

    d = dot_bits(get_instruction(HOPPER), vs.a[:n], vs.b[:n], vs.c[:n])
    assert np.array_equal(d, vs.d[:n])
    killed = mutants_killed(HOPPER, vs.a[:n], vs.b[:n], vs.c[:n])
    assert any(v is not None for v in killed.values())


def test_dropping_the_only_killer_of_a_mutant_lowers_the_score():
    """The score is measured, not asserted: remove the vectors that kill a mutant and it survives."""
    name = "volta.mma.m8n8k4.f32.f16.f16.f32"
    s = adequate_set(name, seed=0, per_family=64)
    assert s.score == 1.0
    killed = mutants_killed(name, s.a, s.b, s.c)
    assert all(v is not None for v in killed.values())
    for target in ("c_not_in_emax", "zero_sign_from_c", "subnormal_hidden_bit_c"):
        keep = [i for i, kills in enumerate(s.kills) if target not in kills]
        assert len(keep) < s.n
        after = mutants_killed(name, s.a[keep], s.b[keep], s.c[keep])
        assert after[target] is None, f"{target} still killed without its vectors"
        assert sum(v is not None for v in after.values()) < len(after)  # the score drops below 1


def test_fault_free_datapath_equals_the_reference_on_every_family():
    """faults.dot_bits with Fault() is the unit: bit for bit against engines.reference on each fused entry."""
    from tcnumerics.catalog import get_instruction
    from tcnumerics.engines.reference import dot_bits
    from tcnumerics.vectors.adequate import edge_vectors
    from tcnumerics.vectors.faults import Fault, applies, dot_bits as faulty
    from tcnumerics.vectors.families import families_for, generate

    for name in ("hopper.wgmma.m64n8k16.f32.bf16.bf16", "hopper.wgmma.m64n8k32.f32.e4m3.e4m3",
                 "hopper.mma.m16n8k32.f32.e4m3.e4m3.f32", "ampere.mma.m16n8k16.f16.f16.f16.f16",
                 "volta.wmma.m16n16k16.f32.f16.f16.f32", "blackwell.tcgen05.mma.kind::tf32.f32.tf32.tf32"):
        spec = get_instruction(name)
        assert applies(spec)
        rng = np.random.default_rng(1)
        parts = [generate(spec, f, 32, rng) for f in families_for(spec)] + [edge_vectors(spec)]
        for a, b, c in parts:
            with np.errstate(all="ignore"):
                assert np.array_equal(dot_bits(spec, a, b, c), faulty(spec, a, b, c, Fault())), name


def test_proven_equivalent_mutants_agree_with_the_unit_on_every_candidate():
    """An equivalence argument that is wrong shows here: the mutant differs from the unit somewhere."""
    from tcnumerics.vectors.adequate import kill_matrix, _candidates
    from tcnumerics.catalog import get_instruction

    for name in ("hopper.wgmma.m64n8k32.f32.e4m3.e4m3", "hopper.mma.m16n8k32.f32.e4m3.e4m3.f32",
                 "volta.mma.m8n8k4.f32.f16.f16.f32"):
        spec = get_instruction(name)
        equivalent = [m for m in mutants(spec) if m.equivalent]
        a, b, c, _ = _candidates(spec, 64, np.random.default_rng(2))
        _, kills = kill_matrix(spec, equivalent, a, b, c)
        assert not kills.any(), [m.name for j, m in enumerate(equivalent) if kills[:, j].any()]


def test_every_rtl_bug_class_has_a_modelling_mutant():
    from tcnumerics.vectors.rtlbench import BUG_MUTANTS, BUGS, PARAMETER_SETS, UNREACHABLE

    assert set(BUG_MUTANTS) == set(BUGS)
    for ps, (name, _) in PARAMETER_SETS.items():
        by_name = {m.name: m for m in mutants(name)}
        for bug, mutant in BUG_MUTANTS.items():
            assert mutant in by_name, f"{bug}: no mutant {mutant} for {name}"
            if bug not in UNREACHABLE[ps]:
                assert not by_name[mutant].equivalent, f"{bug} can show on {ps}, yet {mutant} is called equivalent"
