"""On the H100: Khattak & Mikaitis' FP8 mma.sync benches, and FP8 mma.sync under several ptxas releases.

Run on the device from the repository root (``PYTHONPATH=src``), with a git-ignored folder
``.pubdev/`` carried along holding

* ``bench/mma_fp8_output_fp32.cu``, ``bench/mma_fp8_output_fp16.cu``: their benches, unmodified
  (BSD-2-Clause, not committed here); the run edits a copy only where the bench asks its user to
  (input type, GPU folder, rows to read);
* ``data/H100/<E4M3|E5M2>/{a,b,c}_H100_*.txt``: their H100 inputs;
* ``cubins/``: what ``published_ptxas.py build`` assembled (``index.json`` names each cubin).

It writes ``$OUT/toolchain.npz`` (every input and every result: bench outputs per type and output
format; per ptxas release and FP8 form, D bits on their inputs with their C and with C = 0 and on
our generated families), ``$OUT/bench_sass.txt`` (cuobjdump of the benches built with this nvcc) and
``$OUT/summary.json``.  The comparison with the catalog runs afterwards on any machine
(``published_compare.py``).

Usage (device)::

    PYTHONPATH=src python3 lab/device/published_device.py .pubdev $OUT
    PYTHONPATH=src python3 lab/device/published_device.py --wgmma .pubdev $OUT   # wgmma, D = 0 and C
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np

FAMILIES = ("normal", "align", "cdom", "cancel", "special", "bits")
PER_FAMILY = 1024


def _hopper_name(form: str) -> str:
    shape, d, a, b, c = form.split(".")
    return f"hopper.mma.{shape}.{d}.{a}.{b}.{c}"


def build_bench(pub: str, work: str, fmt: str, out: str) -> tuple[str, str]:
    """Copy their bench, set the choices its header leaves to the user, build it with this nvcc."""
    src = os.path.join(pub, "bench", f"mma_fp8_output_{out}.cu")
    with open(src, encoding="utf-8-sig") as fh:
        text = fh.read()
    for gpu in ("B200", "L40S", "H200", "H100", "Ada"):  # exactly one GPU macro: H100
        text = re.sub(rf"^(//)?#define {gpu}\b", f"//#define {gpu}", text, flags=re.M)
    text = re.sub(r"^//#define H100\b", "#define H100", text, flags=re.M)
    t = fmt.lower()
    other = "e5m2" if t == "e4m3" else "e4m3"
    text = re.sub(rf"^(//)?#define TYPEC __NV_{other.upper()}", f"//#define TYPEC __NV_{other.upper()}", text, flags=re.M)
    text = re.sub(rf"^(//)?#define FMT {other}", f"//#define FMT {other}", text, flags=re.M)
    text = re.sub(rf"^(//)?#define IN_FORMAT_{other.upper()}", f"//#define IN_FORMAT_{other.upper()}", text, flags=re.M)
    text = re.sub(rf"^(//)?#define TYPEC __NV_{t.upper()}", f"#define TYPEC __NV_{t.upper()}", text, flags=re.M)
    text = re.sub(rf"^(//)?#define FMT {t}", f"#define FMT {t}", text, flags=re.M)
    text = re.sub(rf"^(//)?#define IN_FORMAT_{t.upper()}", f"#define IN_FORMAT_{t.upper()}", text, flags=re.M)
    text = re.sub(r"int rowsToRead = \d+;", "int rowsToRead = 100000;", text)
    os.makedirs(work, exist_ok=True)
    cu = os.path.join(work, f"bench_{t}_{out}.cu")
    with open(cu, "w") as fh:
        fh.write(text)
    exe = cu[:-3]
    subprocess.run(["nvcc", "-O3", "-gencode=arch=compute_90,code=sm_90", "-o", exe, cu], check=True)
    sass = subprocess.run(["cuobjdump", "-sass", exe], capture_output=True, text=True, check=True).stdout
    return exe, sass


def run_bench(pub: str, work: str, exe: str, fmt: str, out: str) -> np.ndarray:
    """Run their bench on their H100 inputs in a fresh folder; its d file as uint32 FP32 bits."""
    run_dir = os.path.join(work, f"run_{fmt}_{out}")
    dest = os.path.join(run_dir, "H100", fmt)
    os.makedirs(dest, exist_ok=True)
    for x in ("a", "b"):
        shutil.copy(os.path.join(pub, "data", "H100", fmt, f"{x}_H100_{fmt}.txt"), dest)
    # both benches read C from the FP32 c file ("outtype" fp32 / "c_..._fp32.txt")
    shutil.copy(os.path.join(pub, "data", "H100", fmt, "c_H100_fp32.txt"), dest)
    subprocess.run([os.path.abspath(exe)], cwd=run_dir, check=True)
    with open(os.path.join(dest, f"d_H100_{'fp32' if out == 'fp32' else 'fp16'}.txt")) as fh:
        return np.array([int(w, 2) for w in fh.read().split()], dtype=np.uint32)


def their_inputs(pub: str, fmt: str) -> dict[str, np.ndarray]:
    """Their H100 FP8 set as the bench hands it to the instruction (lab/device/published_import.py)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from published_import import convert_operands, read_binary_words, read_hex_rows

    folder = os.path.join(pub, "data", "H100", fmt)
    a = convert_operands(read_hex_rows(os.path.join(folder, f"b_H100_{fmt}.txt")), fmt)  # file b is A
    b = convert_operands(read_hex_rows(os.path.join(folder, f"a_H100_{fmt}.txt")), fmt)
    c = read_binary_words(os.path.join(folder, "c_H100_fp32.txt"))
    return {"a": a, "b": b, "c": c}


def family_inputs(name: str, seed: int) -> dict[str, np.ndarray]:
    from tcnumerics.vectors.families import families_for, generate

    rng = np.random.default_rng(seed)
    parts = [generate(name, f, PER_FAMILY, rng) for f in FAMILIES if f in families_for(name)]
    return {x: np.concatenate([p[i] for p in parts]) for i, x in enumerate("abc")}


def run_cubins(pub: str, results: dict, summary: dict) -> None:
    """Every sm_90 cubin through the probe: their inputs (with C and C = 0) and our families."""
    import tcnumerics.probe.runtime as rt

    with open(os.path.join(pub, "cubins", "index.json")) as fh:
        index = json.load(fh)
    fixed = {}
    for i, form in enumerate(index["forms"]):
        name = _hopper_name(form)
        fixed[form] = family_inputs(name, 1000 + i)
        for x, v in fixed[form].items():
            results[f"families/{form}/{x}"] = v
    theirs = {fmt: their_inputs(pub, fmt) for fmt in ("E4M3", "E5M2")}
    builds = [r for r in index["builds"] if r["arch"] == "sm_90" and "cubin" in r]
    builds.append(None)  # None: this machine's nvcc (the probe's own build), for comparison
    original = rt.build_cubin
    for rec in builds:
        label = rec["ptxas"] if rec else "nvcc-device"
        forms = [rec["form"]] if rec else index["forms"]
        for form in forms:
            name = _hopper_name(form)
            if rec:
                rt.build_cubin = lambda source, arch, _p=os.path.join(pub, "cubins", rec["cubin"]): _p
            else:
                rt.build_cubin = original
            probe = rt.Probe(name)
            summary.setdefault("sass", {})[f"{label}/{form}"] = probe.sass_note()
            inp = fixed[form]
            results[f"families/{form}/d@{label}"] = probe.dot(inp["a"], inp["b"], _c_as(inp["c"], form))
            shape, d, ta, tb, _ = form.split(".")
            if shape == "m16n8k32" and ta == tb:
                mine = theirs[ta.upper()]
                c = _c_as(mine["c"], form, from_fp32=True)
                results[f"theirs/{ta}/{d}/d@{label}"] = probe.dot(mine["a"], mine["b"], c)
                results[f"theirs/{ta}/{d}/d_c0@{label}"] = probe.dot(mine["a"], mine["b"], np.zeros_like(c))
    rt.build_cubin = original


def _c_as(c: np.ndarray, form: str, from_fp32: bool = False) -> np.ndarray:
    if form.split(".")[1] == "f16" and from_fp32:  # their FP16 bench: __float2half(c), RNE
        return np.ascontiguousarray(c, np.uint32).view(np.float32).astype(np.float16).view(np.uint16)
    return c


def wgmma_zero_accumulator(pub: str, out: str) -> dict:
    """Their H100 FP8 inputs through wgmma (the probe's kernel) with a zero accumulator, all 5,000."""
    from tcnumerics.probe.runtime import Probe

    results, summary = {}, {}
    for fmt in ("E4M3", "E5M2"):
        t = fmt.lower()
        mine = their_inputs(pub, fmt)
        probe = Probe(f"hopper.wgmma.m64n8k32.f32.{t}.{t}")
        summary[f"wgmma/{t}"] = probe.sass_note()
        results[f"wgmma/{t}/d_c0"] = probe.dot(mine["a"], mine["b"], np.zeros_like(mine["c"]))
        results[f"wgmma/{t}/d_c"] = probe.dot(mine["a"], mine["b"], mine["c"])
    np.savez_compressed(os.path.join(out, "wgmma.npz"), **results)
    return summary


def main(argv: list[str]) -> int:
    if argv[1] == "--wgmma":  # the follow-up run: wgmma with D = 0 on their inputs
        from tcnumerics.probe.runtime import device_description

        os.makedirs(argv[3], exist_ok=True)
        summary = {"device": device_description(), **wgmma_zero_accumulator(argv[2], argv[3])}
        print(json.dumps(summary, indent=1))
        return 0
    pub, out = argv[1], argv[2]
    os.makedirs(out, exist_ok=True)
    work = "/tmp/published_bench"
    results: dict[str, np.ndarray] = {}
    summary: dict = {"nvcc": subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip()
                     .splitlines()[-1]}
    from tcnumerics.probe.runtime import device_description

    summary["device"] = device_description()
    sass_log = []
    for fmt in ("E4M3", "E5M2"):
        for o in ("fp32", "fp16"):
            exe, sass = build_bench(pub, work, fmt, o)
            sass_log.append(f"===== mma_fp8_output_{o}.cu, {fmt}, nvcc -gencode=arch=compute_90,code=sm_90\n{sass}")
            results[f"bench/{fmt.lower()}/{o}"] = run_bench(pub, work, exe, fmt, o)
            print(f"bench {fmt} {o}: {len(results[f'bench/{fmt.lower()}/{o}'])} rows", flush=True)
    with open(os.path.join(out, "bench_sass.txt"), "w") as fh:
        fh.write("\n".join(sass_log))
    run_cubins(pub, results, summary)
    np.savez_compressed(os.path.join(out, "toolchain.npz"), **results)
    with open(os.path.join(out, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
