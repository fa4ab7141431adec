"""Golden vectors against RTL: a parameterised SystemVerilog fused dot-product unit, cocotb, Icarus.

``rtl/fedp.sv`` is a small readable fused dot-product-add (one group, RZ, FP32 C and d);
``PARAMETER_SETS`` ties it to catalog entries (Volta's FEDP, a Hopper BF16 and a Hopper FP8
group).  ``BUGS`` are one-line changes applied to a copy of the source (a shift off by one,
a missing carry, a wrong sign of zero, NaN and inf rules, C misaligned, saturation instead
of inf, ...).  ``run_rtl`` compiles a source with Icarus Verilog through cocotb's runner and
replays hex vector files (``vectors export --hex``) with ``rtl/tb_fedp.py``, which stops at
the first failing vector and names it and its family.  Needs the ``[rtl]`` extra (cocotb)
and ``iverilog`` on PATH; ``available()`` says whether both are there.

Example:
    >>> from tcnumerics.vectors.rtlbench import BUGS, PARAMETER_SETS
    >>> len(BUGS) >= 12, sorted(PARAMETER_SETS)
    (True, ['hopper_bf16', 'hopper_fp8', 'volta'])
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

__all__ = ["RTL_DIR", "PARAMETER_SETS", "BUGS", "BUG_MUTANTS", "UNREACHABLE", "available", "source",
           "mutated_source", "run_rtl"]

RTL_DIR = Path(__file__).with_name("rtl")

PARAMETER_SETS: dict = {
    "volta": ("volta.mma.m8n8k4.f32.f16.f16.f32",
              {"L": 4, "EW": 5, "MW": 10, "FN": 0, "F": 23, "ZERO_EXP": -131, "OUT_M": 23}),
    "hopper_bf16": ("hopper.wgmma.m64n8k16.f32.bf16.bf16",
                    {"L": 16, "EW": 8, "MW": 7, "FN": 0, "F": 25, "ZERO_EXP": -133, "OUT_M": 23}),
    "hopper_fp8": ("hopper.wgmma.m64n8k32.f32.e4m3.e4m3",
                   {"L": 32, "EW": 4, "MW": 3, "FN": 1, "F": 13, "ZERO_EXP": -133, "OUT_M": 13}),
}

# name -> (the line as it is in fedp.sv, the line with the bug); each is a one-line change
BUGS: dict = {
    "product_shift_off_by_one": ("sh = emax - pexp[i] + 2 * MW;", "sh = emax - pexp[i] + 2 * MW + 1;"),
    "c_aligned_one_bit_high": ("sh = emax - ec + 23;", "sh = emax - ec + 22;"),
    "missing_carry_in_negation": ("term = pneg[i] ? -$signed(mag) : $signed(mag);",
                                  "term = pneg[i] ? ~$signed(mag) : $signed(mag);"),
    "negative_zero_from_c": ("            d = 32'h0;", "            d = {sc, 31'h0};"),
    "nan_not_canonical": ("if (nan) d = 32'h7FFFFFFF;", "if (nan) d = 32'h7FC00000;"),
    "inf_times_zero_not_nan": ("nan = nan | an[i] | bn[i] | iz[i];", "nan = nan | an[i] | bn[i];"),
    "inf_minus_inf_not_nan": ("nan = nan | (pos_inf & neg_inf);", "nan = nan;"),
    "overflow_saturates": ("d = {neg, 8'hFF, 23'h0};", "d = {neg, 8'hFE, 23'h7FFFFF};"),
    "zero_exponent_off_by_one": ("assign pexp[g] = (psig[g] == 0) ? ZERO_EXP : xexp + yexp;",
                                 "assign pexp[g] = (psig[g] == 0) ? ZERO_EXP + 1 : xexp + yexp;"),
    "subnormal_results_flushed": ("frac = (q >= -149) ? (mag << (q + 149)) : (mag >> (-149 - q));",
                                  "frac = 0;"),
    "subnormal_input_exponent": ("wire signed [31:0] xexp = ((xe == 0) ? 1 : int'(xe)) - BIAS;",
                                 "wire signed [31:0] xexp = int'(xe) - BIAS;"),
    "rounds_up_not_toward_zero": ("frac = (msb >= 23) ? (mag >> (msb - 23)) : (mag << (23 - msb));",
                                  "frac = (msb >= 23) ? ((mag >> (msb - 23)) + 1) : (mag << (23 - msb));"),
    "c_subnormal_hidden_bit": ("sigc = {c[30:23] != 0, c[22:0]};", "sigc = {1'b1, c[22:0]};"),
    "emax_ignores_c": ("emax = ec;", "emax = ZERO_EXP;"),
    "product_sign_from_a_only": ("assign pneg[g] = x[IW-1] ^ y[IW-1];", "assign pneg[g] = x[IW-1];"),
    "output_bias_off_by_one": ("d = {neg, 8'(q + msb + 127), frac[22:0]};",
                               "d = {neg, 8'(q + msb + 126), frac[22:0]};"),
}


# bug -> the mutant (``vectors.mutants``) that models its class: the adequate set is selected to kill it
BUG_MUTANTS: dict = {
    "product_shift_off_by_one": "products_aligned_low",
    "c_aligned_one_bit_high": "c_aligned_high",
    "missing_carry_in_negation": "negation_ones_complement",
    "negative_zero_from_c": "zero_sign_from_c",
    "nan_not_canonical": "nan_bits_other",
    "inf_times_zero_not_nan": "inf_times_zero_is_zero",
    "inf_minus_inf_not_nan": "inf_minus_inf_is_inf",
    "overflow_saturates": "overflow_saturate",
    "zero_exponent_off_by_one": "zero_exponent_+1",
    "subnormal_results_flushed": "flush_outputs",
    "subnormal_input_exponent": "subnormal_exponent_a",
    "rounds_up_not_toward_zero": "group_rounding_ru",
    "c_subnormal_hidden_bit": "subnormal_hidden_bit_c",
    "emax_ignores_c": "c_not_in_emax",
    "product_sign_from_a_only": "product_sign_from_a",
    "output_bias_off_by_one": "output_exponent_low",
}

# parameter set -> bug -> why no input can show it there (benchmarks/rtl_unreachable.py searches for one)
UNREACHABLE: dict = {
    "volta": {
        "overflow_saturates": "no sum reaches 2**128: FP16 products are below 2**32, far under FP32 C's "
                              "ulp at the top binade, and RZ never rounds up past the largest finite",
        "zero_exponent_off_by_one": "every nonzero term aligns at >= -126 (C) or -28 (products), above "
                                    "ZERO_EXP + 1 = -130: emax and the window never see a zero term's exponent",
    },
    "hopper_bf16": {},
    "hopper_fp8": {
        "inf_times_zero_not_nan": "E4M3 has no infinity (FN=1): no operand decodes as inf, so no inf * 0",
        "inf_minus_inf_not_nan": "only C can be infinite (E4M3 has none): +inf and -inf never meet",
        "overflow_saturates": "products are below 2**18: no sum reaches 2**128 under RZ",
        "zero_exponent_off_by_one": "every nonzero term aligns at >= -126 (C) or -12 (products), above "
                                    "ZERO_EXP + 1 = -132",
        "rounds_up_not_toward_zero": "the bug is in the branch for sums of >= 24 bits, and with F=13 a sum of "
                                     "32 products (< 2**15 units each) and C (< 2**14 units) stays below 2**20",
    },
}


def available() -> str:
    """'' when cocotb and iverilog are both usable, else what is missing."""
    try:
        import cocotb_tools.runner  # noqa: F401
    except ImportError:
        return "cocotb is not installed (pip install tcnumerics[rtl])"
    if shutil.which("iverilog") is None:
        return "iverilog is not on PATH (apt-get install iverilog)"
    return ""


def source() -> str:
    """The correct unit's SystemVerilog."""
    return (RTL_DIR / "fedp.sv").read_text()


def mutated_source(bug: str) -> str:
    """The unit's source with one bug from ``BUGS`` applied (exactly one line changes)."""
    if bug not in BUGS:
        raise ValueError(f"bug: unknown {bug!r}; expected one of {', '.join(BUGS)}")
    old, new = BUGS[bug]
    text = source()
    if text.count(old) != 1:
        raise ValueError(f"bug {bug}: its line occurs {text.count(old)} times in fedp.sv, expected once")
    return text.replace(old, new)


def run_rtl(sv_text: str, params: dict, vector_files: list, build_dir: "str | os.PathLike") -> list:
    """Compile ``sv_text`` (top ``fedp``) with ``params`` and replay each hex file; per file
    ``{"vectors": n, "first_failure": None | {"index", "family", "expected", "got"}}``."""
    from cocotb_tools.runner import get_runner

    build = Path(build_dir).resolve()
    build.mkdir(parents=True, exist_ok=True)
    (build / "fedp.sv").write_text(sv_text)
    shutil.copyfile(RTL_DIR / "tb_fedp.py", build / "tb_fedp.py")  # the simulator imports it from its cwd
    runner = get_runner("icarus")
    runner.build(sources=[build / "fedp.sv"], hdl_toplevel="fedp", parameters=params, build_dir=build,
                 always=True, log_file=build / "build.log")
    results = []
    for i, path in enumerate(vector_files):
        out = build / f"result{i}.json"
        if out.exists():
            out.unlink()
        env = {"TCN_VECTORS": os.fspath(Path(path).resolve()), "TCN_RESULT": os.fspath(out.resolve()),
               "PYTHONPATH": os.pathsep.join([os.fspath(build.resolve()), os.environ.get("PYTHONPATH", "")])}
        try:
            runner.test(test_module="tb_fedp", hdl_toplevel="fedp", build_dir=build, test_dir=build,
                        extra_env=env, results_xml=os.fspath(build / f"results{i}.xml"),
                        log_file=build / f"sim{i}.log")
        except SystemExit:  # under pytest the runner exits on a failing cocotb test; the result file tells
            pass
        if not out.exists():
            raise RuntimeError(f"{path}: the simulation wrote no result (see {build / f'sim{i}.log'})")
        results.append(json.loads(out.read_text()))
    return results
