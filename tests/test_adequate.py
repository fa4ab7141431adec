"""Mutants and mutation-adequate vector sets (tcnumerics.vectors.mutants / adequate)."""

import glob
import os

import numpy as np
import pytest

from tcnumerics.catalog import get_instruction
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
                 "volta.mma.m8n8k4.f32.f16.f16.f32", "hopper.wgmma.m64n8k32.f16.e5m2.e5m2",
                 "volta.mma.m8n8k4.f32.f16.f16.f16", "volta.mma.m8n8k4.f16.f16.f16.f32"):
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


# --- every Volta / Ampere / Hopper / Blackwell entry: score 1.0 at seeds 0-3 -----------------------------------
# name -> (mutants the sets must kill, mutants proven equivalent): one entry per class of mutant that once
# survived somewhere (an audit over every entry), and per mutant kind added since
REPRESENTATIVE = {
    # inf x 0 with the inf in E5M2 and the zero in E4M3, +inf with -inf products (edge rows: no family draws them
    # reliably); C's IEEE addition rounded another way; C in the last chunk's group; FP8 products never odd
    "hopper.mma.m16n8k16.f32.e4m3.e5m2.f32": (["inf_times_zero_is_zero", "inf_minus_inf_is_inf", "c_add_rounding_rz",
                                              "c_add_rounding_ru", "c_add_rounding_rd", "c_last_in_chain",
                                              "c_fused_first"], ["product_truncated"]),
    # F +-1, +-2 and C out of emax under RNE FP16 output: ties broken by a term at the window's edge (the K=32
    # entries' F - 1 and F - 2 as well: test_edge_rows_alone_kill_what_the_families_missed); the zero exponent
    # under E5M2's grid
    "hopper.mma.m16n8k16.f16.e5m2.e5m2.f16": (["frac_bits-2", "frac_bits-1", "frac_bits+1", "frac_bits+2",
                                              "c_not_in_emax"], ["zero_exponent_none", "zero_exponent_+1"]),
    # FP16 C at the top of its range above the products: C out of emax; a single group's one inf source
    "blackwell.tcgen05.mma.kind::f8f6f4.f16.e4m3.e4m3": (["c_not_in_emax"], ["inf_minus_inf_is_inf"]),
    # FP16 C into FP32 D: no result can be subnormal
    "volta.mma.m8n8k4.f32.f16.f16.f16": (["product_truncated"], ["flush_outputs"]),
    # FP32 C into FP16 D: a subnormal C vanishes below every window
    "volta.mma.m8n8k4.f16.f16.f16.f32": ([], ["subnormal_hidden_bit_c", "subnormal_exponent_c"]),
    # a chain of four groups: C in the last one; FP16 accumulators between groups can be subnormal
    "volta.wmma.m16n16k16.f16.f16.f16.f32": (["c_last_in_chain", "subnormal_exponent_c", "product_truncated"],
                                             ["subnormal_hidden_bit_c"]),
}


@pytest.mark.parametrize("name", sorted(REPRESENTATIVE))
def test_score_one_at_seeds_0_to_3_on_entries_covering_each_class(name):
    killed, proven = REPRESENTATIVE[name]
    for seed in range(4):
        s = adequate_set(name, seed=seed)
        assert s.score == 1.0, (name, seed, s.survivors)
        assert set(killed) <= set(s.mutants) and set(proven) <= set(s.equivalent), name


@pytest.mark.parametrize("name, names", [
    ("hopper.wgmma.m64n8k32.f16.e4m3.e5m2", ["inf_times_zero_is_zero"]),
    ("hopper.mma.m16n8k16.f32.e4m3.e5m2.f32", ["inf_minus_inf_is_inf", "inf_times_zero_is_zero"]),
    ("hopper.mma.m16n8k32.f16.e5m2.e4m3.f16", ["frac_bits-2", "frac_bits-1", "frac_bits+1", "frac_bits+2",
                                              "c_not_in_emax"]),
    ("blackwell.tcgen05.mma.kind::f8f6f4.f16.e4m3.e4m3", ["c_not_in_emax"]),
    ("volta.wmma.m16n16k16.f16.f16.f16.f32", ["c_last_in_chain"])])
def test_edge_rows_alone_kill_what_the_families_missed(name, names):
    """The mutants the families' draws killed at some seeds only, or never (an audit of every entry at seeds
    0-3 before the window, inf and C-in-chain rows), are killed by the deterministic edge rows: the score on
    them does not depend on the seed."""
    from tcnumerics.vectors.adequate import edge_vectors, kill_matrix

    spec = get_instruction(name)
    by_name = {m.name: m for m in mutants(spec)}
    edge = kill_matrix(spec, [by_name[n] for n in names], *edge_vectors(spec))[1]
    assert edge.any(axis=0).all(), [n for j, n in enumerate(names) if not edge[:, j].any()]


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["volta", "ampere", "hopper", "blackwell"])
def test_score_one_at_seeds_0_to_3_on_every_entry(arch):
    """Every entry ``adequacy_entries`` lists (benchmarks/adequacy.py --all prints the table), and no
    mutant argued equivalent differs from its unit on any candidate (a wrong argument would hide a
    survivor from the score)."""
    from tcnumerics.vectors.adequate import _candidates, adequacy_entries, kill_matrix

    short, wrong = [], []
    for name in adequacy_entries((arch,)):
        short += [(name, seed, s.survivors) for seed in range(4) for s in [adequate_set(name, seed=seed)]
                  if s.score < 1.0]
        spec = get_instruction(name)
        equivalent = [m for m in mutants(spec) if m.equivalent]
        a, b, c, _ = _candidates(spec, 64, np.random.default_rng(5))
        kills = kill_matrix(spec, equivalent, a, b, c)[1]
        wrong += [(name, m.name) for j, m in enumerate(equivalent) if kills[:, j].any()]
    assert not short and not wrong, (short, wrong)


# --- the equivalence arguments added for the entries above, checked exhaustively on the domain each one is about --
def _rows(spec, n: int):
    return (np.zeros((n, spec.k), spec.a_format.container_dtype), np.zeros((n, spec.k), spec.b_format.container_dtype),
            np.zeros(n, spec.c_format.container_dtype))


def _bits(fmt, *values):
    return [fmt.container_dtype(fmt.from_float(np.array([v]))[0]) for v in values]


def _field(fmt, codes):
    return (codes.astype(np.int64) >> (fmt.man_bits + fmt.pad_bits)) & ((1 << fmt.exp_bits) - 1)


def _pairs(a_codes, b_codes):
    """Every (a, b) of the two code lists."""
    return np.repeat(a_codes, len(b_codes)), np.tile(b_codes, len(a_codes))


def _domain_zero_exponent_grid(spec):
    """Every pair of E5M2 codes whose product aligns below -20 (exponent fields <= 8) in slot 0, with slot 1
    zero or the smallest product negative, C zero or FP16's smallest subnormal."""
    fa, fb, fc = spec.a_format, spec.b_format, spec.c_format
    codes = fa.all_bits()[_field(fa, fa.all_bits()) <= 8]
    pa, pb = _pairs(codes, codes)
    tiny_a, tiny_b = _bits(fa, fa.min_subnormal)[0], _bits(fb, -fb.min_subnormal)[0]
    out = []
    for tail, c in (((0, 0), 0), ((tiny_a, tiny_b), 0), ((0, 0), _bits(fc, fc.min_subnormal)[0]),
                    ((tiny_a, tiny_b), _bits(fc, fc.min_subnormal)[0])):
        a, b, cc = _rows(spec, len(pa))
        a[:, 0], b[:, 0], a[:, 1], b[:, 1], cc[:] = pa, pb, tail[0], tail[1], c
        out.append((a, b, cc))
    return out


def _domain_lowest_products(spec):
    """Every pair of codes of the two lowest exponent fields (the products aligning lowest) in slot 0, with
    slot 1 zero or the smallest product negative; C zero."""
    fa, fb = spec.a_format, spec.b_format
    pa, pb = _pairs(fa.all_bits()[_field(fa, fa.all_bits()) <= 1], fb.all_bits()[_field(fb, fb.all_bits()) <= 1])
    out = []
    for tail in ((0, 0), (_bits(fa, fa.min_subnormal)[0], _bits(fb, -fb.min_subnormal)[0])):
        a, b, c = _rows(spec, len(pa))
        a[:, 0], b[:, 0], a[:, 1], b[:, 1] = pa, pb, tail[0], tail[1]
        out.append((a, b, c))
    return out


def _domain_one_inf_source(spec):
    """Slot 0 over every A code (NaNs included) times B = +-max, 1 or NaN; every other product at the largest
    finite of one sign (the FP16 sum overflows); C = +inf, -inf, NaN or 0."""
    fa, fb, fc = spec.a_format, spec.b_format, spec.c_format
    out = []
    for b0 in _bits(fb, fb.max_finite, -fb.max_finite, 1.0) + [fb.container_dtype(fb.nan_bits)]:
        for sign in (1, -1):
            for c in (fc.inf_bits, fc.inf_bits | 0x8000, fc.nan_bits, 0):
                a, b, cc = _rows(spec, 1 << fa.width)
                a[:], b[:] = _bits(fa, fa.max_finite)[0], _bits(fb, sign * fb.max_finite)[0]
                a[:, 0], b[:, 0], cc[:] = fa.all_bits(), b0, c
                out.append((a, b, cc))
    return out


def _domain_small_results(spec):
    """Every FP16 code times +-the smallest subnormal, alone or less the smallest product; every FP16 C with no
    product and with the smallest product: the results nearest zero."""
    fa, fb, fc = spec.a_format, spec.b_format, spec.c_format
    tiny_b, neg_tiny_b = _bits(fb, fb.min_subnormal, -fb.min_subnormal)
    tiny_a = _bits(fa, fa.min_subnormal)[0]
    out = []
    for b0 in (tiny_b, neg_tiny_b):
        for tail in ((0, 0), (tiny_a, neg_tiny_b)):
            a, b, c = _rows(spec, 1 << fa.width)
            a[:, 0], b[:, 0], a[:, 1], b[:, 1] = fa.all_bits(), b0, tail[0], tail[1]
            out.append((a, b, c))
    for a0, b0 in ((0, 0), (tiny_a, neg_tiny_b)):
        a, b, c = _rows(spec, 1 << fc.width)
        a[:, 0], b[:, 0], c[:] = a0, b0, fc.all_bits()
        out.append((a, b, c))
    return out


def _domain_tiny_c(spec):
    """C over every FP32 subnormal whose fraction's top 16 bits are free and the low 7 all ones or all zeros,
    both signs, with no product; C = +-the largest subnormal with every FP16 code times 1 in slot 0."""
    fa, fb = spec.a_format, spec.b_format
    low = 7
    top = np.arange(1 << 16, dtype=np.uint32) << np.uint32(low)
    cs = np.concatenate([top, top | np.uint32((1 << low) - 1)])
    cs = np.concatenate([cs, cs | np.uint32(0x80000000)])
    a, b, c = _rows(spec, len(cs))
    c[:] = cs
    out = [(a, b, c)]
    for big in (0x007FFFFF, 0x807FFFFF):
        a, b, c = _rows(spec, 1 << fa.width)
        a[:, 0], b[:, 0], c[:] = fa.all_bits(), _bits(fb, 1.0)[0], big
        out.append((a, b, c))
    return out


def _domain_all_pairs(spec):
    """Every (A, B) code pair in slot 0 and 1.0 x 1.0 in slot 1 (a product at emax beside it), C zero."""
    fa, fb = spec.a_format, spec.b_format
    pa, pb = _pairs(fa.all_bits(), fb.all_bits())
    a, b, c = _rows(spec, len(pa))
    a[:, 0], b[:, 0] = pa, pb
    a[:, 1], b[:, 1] = _bits(fa, 1.0)[0], _bits(fb, 1.0)[0]
    return [(a, b, c)]


ARGUMENTS = [  # (entry, mutants its argument proves equivalent, the domain the argument is about)
    ("hopper.wgmma.m64n8k32.f16.e5m2.e5m2", ["zero_exponent_none", "zero_exponent_-1", "zero_exponent_+1"],
     _domain_zero_exponent_grid),
    ("hopper.wgmma.m64n8k32.f16.e4m3.e5m2", ["zero_exponent_+1"], _domain_lowest_products),
    ("blackwell.tcgen05.mma.kind::f8f6f4.f16.e4m3.e4m3", ["inf_minus_inf_is_inf"], _domain_one_inf_source),
    ("volta.mma.m8n8k4.f32.f16.f16.f16", ["flush_outputs"], _domain_small_results),
    ("volta.mma.m8n8k4.f16.f16.f16.f32", ["subnormal_hidden_bit_c", "subnormal_exponent_c"], _domain_tiny_c),
    ("hopper.mma.m16n8k16.f32.e4m3.e5m2.f32", ["product_truncated"], _domain_all_pairs),
]


@pytest.mark.parametrize("name, names, domain", ARGUMENTS, ids=[f"{a[0]}:{a[1][0]}" for a in ARGUMENTS])
def test_equivalence_arguments_hold_exhaustively_on_their_domain(name, names, domain):
    """Each argument says where its mutant could differ and why it cannot: every input of that domain agrees."""
    from tcnumerics.engines.reference import dot_bits

    spec = get_instruction(name)
    by_name = {m.name: m for m in mutants(spec)}
    for a, b, c in domain(spec):
        with np.errstate(all="ignore"):
            d = dot_bits(spec, a, b, c)
            for n in names:
                assert by_name[n].equivalent, f"{n} is no longer argued equivalent on {name}"
                differ = np.nonzero(evaluate(by_name[n], a, b, c) != d)[0]
                assert not len(differ), f"{n} differs on {name}, row {differ[:1]}"


@pytest.mark.parametrize("name, mutant, domain, change", [
    ("hopper.wgmma.m64n8k32.f16.e5m2.e5m2", "zero_exponent_+1", _domain_zero_exponent_grid, {"frac_bits": 3}),
    ("blackwell.tcgen05.mma.kind::f8f6f4.f16.e4m3.e4m3", "inf_minus_inf_is_inf", _domain_one_inf_source,
     {"c_entry": "ieee_add"})])
def test_those_domains_tell_the_mutant_apart_once_the_argument_fails(name, mutant, domain, change):
    """The domains above reach what the arguments are about: a unit one parameter away, where the argument
    does not hold (F = 3 truncates below the grid; C added after the group meets an overflow's inf), loses the
    proof and differs on the same domain."""
    from dataclasses import replace

    from tcnumerics.engines.reference import dot_bits

    spec = get_instruction(name)
    spec = replace(spec, model=spec.model.with_(**change)) if "frac_bits" in change else replace(spec, **change)
    m = {x.name: x for x in mutants(spec)}[mutant]
    assert not m.equivalent
    with np.errstate(all="ignore"):
        assert any((evaluate(m, a, b, c) != dot_bits(spec, a, b, c)).any() for a, b, c in domain(spec))


@pytest.mark.parametrize("name, mutant, a0, c, unit, mutated", [
    # (1 + 2**-10)**2 = 1 + 2**-9 + 2**-20: the cut product loses its 2**-20 (FP32 keeps it)
    ("volta.mma.m8n8k4.f32.f16.f16.f32", "product_truncated", 0x3C01, 0x00000000, 0x3F804008, 0x3F804000),
    # four products 1.0 in the first group, C = 2**24: truncated against C there (each below the grid of 2),
    # kept as 4 when they reach C as the running sum of the last group
    ("volta.wmma.m16n16k16.f32.f16.f16.f32", "c_last_in_chain", 0x3C00, 0x4B800000, 0x4B800000, 0x4B800002),
    # 1.0 + (2**24 + 2): a tie between 2**24 + 2 and 2**24 + 4; RNE takes the even one, RZ and RD the lower
    ("hopper.mma.m16n8k32.f32.e4m3.e4m3.f32", "c_add_rounding_rz", 0x38, 0x4B800001, 0x4B800002, 0x4B800001),
    ("hopper.mma.m16n8k32.f32.e4m3.e4m3.f32", "c_add_rounding_rd", 0x38, 0x4B800001, 0x4B800002, 0x4B800001),
    # 1.0 + 2**24: a tie RNE rounds down to the even 2**24, RU up
    ("hopper.mma.m16n8k32.f32.e4m3.e4m3.f32", "c_add_rounding_ru", 0x38, 0x4B800000, 0x4B800000, 0x4B800001)])
def test_new_mutant_kinds_do_what_they_say(name, mutant, a0, c, unit, mutated):
    from tcnumerics.engines.reference import dot_bits

    spec = get_instruction(name)
    m = {x.name: x for x in mutants(spec)}[mutant]
    assert m.kind in KINDS and not m.equivalent
    groups = 4 if mutant == "c_last_in_chain" else 1  # the first group's four products
    a = np.zeros((1, spec.k), spec.a_format.container_dtype)
    a[0, :groups] = a0
    cc = np.array([c], spec.c_format.container_dtype)
    assert (int(dot_bits(spec, a, a, cc)[0]), int(evaluate(m, a, a, cc)[0])) == (unit, mutated)


def test_a_bare_unit_model_works_like_its_catalog_entry():
    """adequate_set, mutants_killed and random_to_match take a UnitModel as mutants does (one instruction of K
    products: default one group)."""
    from tcnumerics.vectors.adequate import random_to_match

    name = "volta.mma.m8n8k4.f32.f16.f16.f32"
    model = get_instruction(name).model
    bare, named = adequate_set(model, seed=0, per_family=32), adequate_set(name, seed=0, per_family=32)
    assert bare.score == 1.0 and bare.mutants == named.mutants and np.array_equal(bare.a, named.a)
    killed = mutants_killed(model, bare.a, bare.b, bare.c)
    assert set(killed) == set(bare.mutants) and None not in killed.values()
    assert random_to_match(model, 2, cap=128) == random_to_match(name, 2, cap=128)
    wide = adequate_set(model, seed=0, per_family=16, k=8)  # two groups chained: the chain's mutants appear
    assert wide.a.shape[1] == 8 and "c_last_in_chain" in wide.mutants and wide.score == 1.0
