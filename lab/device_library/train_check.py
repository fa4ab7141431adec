"""Device check: the GEMMs autograd launches for an nn.Linear training step are the three calls ``train_calls`` lists.

    PYTHONPATH=src:lab/device_library python3 lab/device_library/train_check.py      # -> $OUT/autograd_check.json

For every ``train_calls.autograd_cases()`` case (BF16): an ``nn.Linear(K_in, N_out, bias)`` forward and backward
over T tokens under torch.profiler (the activities of each step matched to it by its ``record_function`` range, as
``kernel_survey.py`` does), and its three explicit calls (``train_calls.step_calls``) captured into a CUDA graph
(``graph_survey.capture_chunk``).  The cuBLAS launches of both -- every activity but torch's own kernels and copies,
with the GEMM kernels' grids -- must be the same multiset: then a survey of the explicit calls is a survey of
training steps.  Prints and writes the counts and the first differing cases.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter

import torch

import graph_survey
import kernel_survey
import survey_ops
from train_calls import autograd_cases, step_calls

OUT = os.environ.get("OUT", "/tmp/survey_out")


IS_GEMM = graph_survey._is_gemm_kernel()


def _cublas(acts) -> Counter:
    """The cuBLAS part of a list of (name, grid): every activity but torch's kernels and copies; grids kept for the
    GEMM kernels (the split count lives there)."""
    out: Counter = Counter()
    for name, grid in acts:
        if name.startswith("Memcpy") or "at::native" in name:
            continue
        out[(name[:200], tuple(grid) if IS_GEMM(name) and grid else None)] += 1
    return out


def autograd_launches(cases) -> dict[int, list]:
    """{case index: [(name, grid)]}: each case's forward + backward under one profiler session."""
    from torch.profiler import ProfilerActivity, profile, record_function

    steps = []
    for model, n_out, k_in, tokens, bias in cases:
        lin = torch.nn.Linear(k_in, n_out, bias=bias, device="cuda", dtype=torch.bfloat16)
        x = torch.empty(tokens, k_in, device="cuda", dtype=torch.bfloat16).normal_().requires_grad_()
        g = torch.empty(tokens, n_out, device="cuda", dtype=torch.bfloat16).normal_()
        steps.append((lin, x, g))
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i, (lin, x, g) in enumerate(steps):
            with record_function(f"tcn#{i}"):
                lin(x).backward(g)
                torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        path = fh.name
    prof.export_chrome_trace(path)
    with open(path) as fh:
        trace = json.load(fh)
    os.unlink(path)
    acts, _ = kernel_survey.activities_by_call(trace)
    return {i: [(n, g) for _, n, g, _ in a] for i, a in acts.items()}


def explicit_launches(cases) -> dict[int, list]:
    """{case index: [(name, grid)]}: the three explicit calls of each case, captured into CUDA graphs."""
    survey_ops.hashed_gpu = kernel_survey._empty_operand  # values never steer cuBLAS's choice
    drv, stream = graph_survey.Driver(), torch.cuda.Stream()
    with torch.cuda.stream(stream):  # workspaces exist before any capture
        x = torch.ones(64, 64, device="cuda", dtype=torch.bfloat16)
        torch.nn.functional.linear(x, x, x[0]), torch.matmul(x, x)
    stream.synchronize()
    calls = []
    for i, (_, n_out, k_in, tokens, bias) in enumerate(cases):
        for j, c in enumerate(step_calls(n_out, k_in, tokens, "bf16", bias)):
            calls.append(dict(c, id=3 * i + j))
    acts, errors = graph_survey.capture_chunk(drv, calls, stream)
    names = sorted({a[0] for lst in acts.values() for a in lst})
    plain = dict(zip(names, graph_survey.demangle(names)))
    out: dict[int, list] = {}
    for cid, lst in acts.items():
        out.setdefault(cid // 3, []).extend((plain[n], g) for n, g, _ in lst)
    for cid, err in errors.items():
        out.setdefault(cid // 3, []).append((f"error: {err}", None))
    return out


def main() -> int:
    cases = autograd_cases()
    auto, explicit = autograd_launches(cases), explicit_launches(cases)
    differ = []
    for i, case in enumerate(cases):
        a, e = _cublas(auto.get(i, [])), _cublas(explicit.get(i, []))
        if a != e:
            differ.append(dict(case=case, autograd=sorted(a.elements(), key=str), explicit=sorted(e.elements(), key=str)))
    res = dict(cases=len(cases), agree=len(cases) - len(differ), differ=differ[:20],
               env=dict(torch=torch.__version__, cuda=torch.version.cuda, device=torch.cuda.get_device_name(0)))
    with open(os.path.join(OUT, "autograd_check.json"), "w") as fh:
        json.dump(res, fh, default=str)
    print(f"autograd check: {res['agree']} of {len(cases)} nn.Linear training steps launch exactly the kernels of their "
          f"three explicit calls (train_calls.step_calls)", flush=True)
    for d in differ[:3]:
        print("  differs:", d["case"], "\n    autograd", d["autograd"][:4], "\n    explicit", d["explicit"][:4])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
