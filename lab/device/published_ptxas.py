"""FP8 ``mma.sync`` under several ptxas releases: PTX in the probe's kernel ABI, cubins, SASS.

Does the lowering of FP8 ``mma.sync`` on sm_90 (and sm_100) depend on the ptxas release?
``build`` (here, no GPU) writes one PTX kernel per FP8 ``mma.sync`` form, assembles it with
every ptxas given (CUDA 12.x/13.x compiler wheels: only their ``bin/ptxas`` is needed) and
records each cubin's SASS; ``published_device.py`` loads the sm_90 cubins through CuPy on an
H100 and replays the same inputs through each.

The kernel is the probe's (``tcnumerics.probe.kernels``): per-thread register images of A, B
and C in, D out, one instruction, so ``tcnumerics.probe.Probe`` packs and unpacks for it.

Usage::

    python lab/device/published_ptxas.py build OUT_DIR --ptxas 12.4=/path/ptxas --ptxas 12.9=... \\
        --cuobjdump /path/cuobjdump
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

KERNEL = "tcn_probe"  # tcnumerics.probe.kernels.KERNEL_NAME: Probe looks this name up
FP8 = ("e4m3", "e5m2")
_MATRIX = re.compile(r"^(HMMA|QGMMA|HGMMA|IMMA|HADD2|FADD|F2FP|HFMA2|I2F|F2F)")


def forms() -> list[str]:
    """Every FP8 mma.sync form sm_90 accepts: '<shape>.<d>.<a>.<b>.<c>'."""
    return [f"{s}.{d}.{a}.{b}.{d}" for s in ("m16n8k32", "m16n8k16") for d in ("f32", "f16")
            for a in FP8 for b in FP8]


def min_ptx_version(form: str, arch: str = "sm_90") -> str:
    """PTX ISA version accepting the form on ``arch``: k32 with FP32 output 8.4 (CUDA 12.4), the
    rest 8.7 (12.8); sm_100 needs 8.6 at least (12.8's ptxas is the first to know it)."""
    return "8.4" if form.startswith("m16n8k32.f32") and arch == "sm_90" else "8.7"


def ptx_source(form: str, arch: str = "sm_90", version: str | None = None) -> str:
    """A PTX module: the probe ABI (A, B, C, E, D, tiles), one ``mma.sync`` of ``form``.

    >>> src = ptx_source("m16n8k32.f32.e4m3.e4m3.f32")
    >>> "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32" in src, src.count("ld.global.u32")
    (True, 10)
    """
    shape, d = form.split(".")[0], form.split(".")[1]
    na, nb = (4, 2) if shape == "m16n8k32" else (2, 1)
    ncd = 4 if d == "f32" else 2
    version = version or min_ptx_version(form, arch)
    regs = lambda p, n, first: [f"%{p}{first + i}" for i in range(n)]  # noqa: E731
    a, b = regs("r", na, 10), regs("r", nb, 20)
    c, dd = (regs("f", ncd, 1), regs("f", ncd, 11)) if d == "f32" else (regs("r", ncd, 30), regs("r", ncd, 40))
    cty = "f32" if d == "f32" else "u32"
    lines = [
        f".version {version}", f".target {arch}", ".address_size 64", "",
        f".visible .entry {KERNEL}(.param .u64 pA, .param .u64 pB, .param .u64 pC, .param .u64 pE,",
        "    .param .u64 pD, .param .u32 ptiles)",
        "{",
        "  .reg .pred %p<2>;", "  .reg .b32 %r<50>;", "  .reg .f32 %f<20>;", "  .reg .b64 %rd<40>;",
        "  ld.param.u64 %rd1, [pA];", "  ld.param.u64 %rd2, [pB];", "  ld.param.u64 %rd3, [pC];",
        "  ld.param.u64 %rd5, [pD];", "  ld.param.u32 %r1, [ptiles];",
        "  mov.u32 %r2, %ctaid.x;", "  mov.u32 %r3, %ntid.x;", "  mov.u32 %r4, %tid.x;",
        "  mad.lo.s32 %r5, %r2, %r3, %r4;  // slot = warp * 32 + lane",
        "  shr.u32 %r6, %r5, 5;",
        "  setp.ge.s32 %p1, %r6, %r1;",
        "  @%p1 bra DONE;  // whole warps leave together",
        "  cvta.to.global.u64 %rd11, %rd1;", "  cvta.to.global.u64 %rd12, %rd2;",
        "  cvta.to.global.u64 %rd13, %rd3;", "  cvta.to.global.u64 %rd15, %rd5;",
        f"  mul.wide.u32 %rd21, %r5, {4 * na};", "  add.s64 %rd21, %rd11, %rd21;",
        f"  mul.wide.u32 %rd22, %r5, {4 * nb};", "  add.s64 %rd22, %rd12, %rd22;",
        f"  mul.wide.u32 %rd23, %r5, {4 * ncd};", "  add.s64 %rd23, %rd13, %rd23;",
        f"  mul.wide.u32 %rd25, %r5, {4 * ncd};", "  add.s64 %rd25, %rd15, %rd25;",
    ]
    lines += [f"  ld.global.u32 {r}, [%rd21+{4 * i}];" for i, r in enumerate(a)]
    lines += [f"  ld.global.u32 {r}, [%rd22+{4 * i}];" for i, r in enumerate(b)]
    lines += [f"  ld.global.{cty} {r}, [%rd23+{4 * i}];" for i, r in enumerate(c)]
    lines.append(f"  mma.sync.aligned.{shape}.row.col.{'.'.join(form.split('.')[1:])}")
    lines.append(f"    {{{', '.join(dd)}}}, {{{', '.join(a)}}}, {{{', '.join(b)}}}, {{{', '.join(c)}}};")
    lines += [f"  st.global.{cty} [%rd25+{4 * i}], {r};" for i, r in enumerate(dd)]
    lines += ["DONE:", "  ret;", "}", ""]
    return "\n".join(lines)


def ptxas_release(ptxas: str) -> str:
    out = subprocess.run([ptxas, "--version"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"V(\d+\.\d+\.\d+)", out)
    return m.group(1) if m else "unknown"


def assemble(ptxas: str, ptx_path: str, arch: str, cubin: str) -> str | None:
    """ptxas -O3 PTX -> cubin; returns the error text when ptxas refuses, else None."""
    res = subprocess.run([ptxas, "-O3", f"--gpu-name={arch}", "-o", cubin, ptx_path], capture_output=True, text=True)
    lines = [x for x in res.stderr.strip().splitlines() if "error" in x] or res.stderr.strip().splitlines()
    return None if res.returncode == 0 else (lines or ["refused"])[0].strip()


def sass_text(cuobjdump: str, cubin: str) -> str:
    return subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True, check=True).stdout


def sass_body(sass: str) -> list[str]:
    """The instructions of the kernel, without addresses and encodings (comparable across releases)."""
    body = []
    for line in sass.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]{4}\*/\s+(.*?)\s*;", line)
        if m:
            body.append(re.sub(r"\s+", " ", m.group(1)))
    return body


def matrix_summary(body: list[str]) -> dict[str, int]:
    """Counts of the opcodes that decide the numerics (tensor ops, conversions, C's addition)."""
    hist: dict[str, int] = {}
    for ins in body:
        op = ins.split()[0] if not ins.startswith("@") else ins.split()[1]
        if _MATRIX.match(op):
            hist[op] = hist.get(op, 0) + 1
    return dict(sorted(hist.items()))


def build(out: str, ptxas: dict[str, str], cuobjdump: str, arches=("sm_90", "sm_100")) -> dict:
    """Assemble every form with every ptxas for every arch; write cubins, SASS and index.json."""
    os.makedirs(out, exist_ok=True)
    index: dict = {"forms": forms(), "builds": []}
    for label, exe in ptxas.items():
        release = ptxas_release(exe)
        for arch in arches:
            for form in forms():
                stem = f"{label}_{arch}_{form.replace('.', '_')}"
                ptx = os.path.join(out, f"{form.replace('.', '_')}_{arch}.ptx")
                with open(ptx, "w") as fh:
                    fh.write(ptx_source(form, arch))
                cubin = os.path.join(out, stem + ".cubin")
                err = assemble(exe, ptx, arch, cubin)
                rec = {"ptxas": release, "label": label, "arch": arch, "form": form, "ptx_version":
                       min_ptx_version(form, arch)}
                if err:
                    rec["refused"] = err
                else:
                    body = sass_body(sass_text(cuobjdump, cubin))
                    rec.update(cubin=os.path.basename(cubin), sass_ops=matrix_summary(body), sass=body)
                index["builds"].append(rec)
    with open(os.path.join(out, "index.json"), "w") as fh:
        json.dump(index, fh, indent=1)
    return index


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("out")
    b.add_argument("--ptxas", action="append", required=True, help="LABEL=PATH (repeat)")
    b.add_argument("--cuobjdump", required=True)
    args = p.parse_args(argv)
    tools = dict(x.split("=", 1) for x in args.ptxas)
    index = build(args.out, tools, args.cuobjdump)
    for rec in index["builds"]:
        what = rec.get("refused") or ", ".join(f"{k} x{v}" for k, v in rec["sass_ops"].items())
        print(f"ptxas {rec['ptxas']:9s} {rec['arch']:6s} {rec['form']:28s} {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
