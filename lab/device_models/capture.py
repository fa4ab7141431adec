"""Capture every GEMM a Hugging Face model runs on the GPU: operands, results and cuBLAS kernel names.

Run on the device (H100/H200, torch with CUDA, transformers):

    PYTHONPATH=src python3 lab/device_models/capture.py --out $OUT [--hidden 256 2048] [--dtypes bf16 fp16]

Models are built from a config (random init, no download): GPT-2 (``Conv1D`` -> ``addmm``)
and Llama (``mm``, FP32 rotary ``bmm``), eager attention (``bmm``), 2 layers, for each hidden
size and dtype: a training step (forward + backward), a forward pass, a KV-cache prefill and
one decode step (batch 1), plus probe calls of the other intercepted ops (``F.linear`` with
bias, ``mm(out_dtype=float32)``, ``baddbmm`` with alpha/beta, ``addbmm``, ``mv``, ``addmv``,
``dot``, ``_scaled_mm`` FP8 per-tensor and row-wise, fast and slow accumulation).

Each intercepted aten call is normalised with ``tcnumerics.torch.calls.normalise`` (the same
code the emulator uses) and stored: small calls whole, larger ones as sampled rows of A and
columns of B (the kernel choice depends on the full shape, which is recorded).  Kernel names
come from torch.profiler: each call runs inside a ``record_function`` range and its kernels
are matched through the launch correlation ids of the exported trace.

Output: one ``models_<tag>.npz`` per group (no pickles: metadata is a JSON string stored as
uint8) -- ``lab/device_models/replay.py`` and ``tcnumerics.torch.replay`` read them.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import sys
import time

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile, record_function
from torch.utils._python_dispatch import TorchDispatchMode

from tcnumerics.torch.calls import GEMM_OPS, normalise

WHOLE_LIMIT = 1 << 14  # store a call whole when A and B together, and its result, hold at most this many elements
_INT_VIEW = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32,
             torch.float8_e4m3fn: torch.uint8, torch.float8_e5m2: torch.uint8}


def _bits(t: torch.Tensor) -> np.ndarray:
    """A CPU numpy array of the tensor's bit patterns (contiguous)."""
    t = t.detach().contiguous()
    view = _INT_VIEW.get(t.dtype)
    if view is None:
        raise TypeError(f"unexpected dtype {t.dtype}")
    return t.view(view).cpu().numpy()


def _transposed(t: torch.Tensor) -> bool:
    rows, cols = t.stride()[-2:]
    return rows == 1 and cols != 1 and t.shape[-1] > 1


class Recorder:
    """Collects calls: arrays into ``self.arrays`` (key -> ndarray), metadata into ``self.calls``."""

    def __init__(self, rows: int, seed: int):
        self.rows = rows
        self.rng = np.random.default_rng(seed)
        self.calls: list[dict] = []
        self.arrays: dict[str, np.ndarray] = {}
        self.workload = ""

    def add(self, func, args, kwargs, out, index: int) -> None:
        call = normalise(func, args, kwargs)
        a, b = call.a, call.b
        batched = a.dim() == 3
        M, K = a.shape[-2:]
        N = b.shape[-1]
        whole = a.numel() + b.numel() <= WHOLE_LIMIT and out.numel() <= WHOLE_LIMIT
        pick = (lambda n: np.arange(n)) if whole else \
            (lambda n: np.sort(self.rng.choice(n, size=min(n, self.rows), replace=False)))
        rows, cols = pick(M), pick(N)
        keep_all = whole or call.reshape == "addbmm"  # addbmm's result sums over every batch entry
        batches = (np.arange(a.shape[0]) if keep_all else pick(a.shape[0])[:2]) if batched else None
        key = f"c{index}"
        meta = {"index": index, "workload": self.workload, "op": call.op, "aten": str(func),
                "phase": "backward" if torch._C._current_autograd_node() is not None else "forward",
                "full_shape": list(call.shape), "whole": bool(whole), "alpha": _num(call.alpha),
                "beta": _num(call.beta), "out_dtype": str(call.out_dtype).replace("torch.", ""),
                "use_fast_accum": call.use_fast_accum, "rows": None if whole else rows.tolist(),
                "cols": None if whole else cols.tolist(),
                "batches": None if batches is None or whole else batches.tolist()}
        bi = (lambda t: t[torch.as_tensor(batches, device=t.device)]) if batched else (lambda t: t)
        a_s = bi(a)[..., torch.as_tensor(rows, device=a.device), :]
        b_s = bi(b)[..., :, torch.as_tensor(cols, device=b.device)]
        for name, t, orig in (("a", a_s, a), ("b", b_s, b)):
            tr = _transposed(orig)
            self.arrays[f"{key}_{name}"] = _bits(t.transpose(-1, -2) if tr else t)
            meta[name] = {"dtype": str(orig.dtype).replace("torch.", ""), "transposed": tr,
                          "stride": list(orig.stride())}
        out_batched = batched and call.reshape != "addbmm"  # addbmm sums over the batch: a 2-D result
        if call.c is not None:
            meta["c"], self.arrays[f"{key}_c"] = self._addend(call.c, call.shape, batches, rows, cols, out_batched)
        for name in ("scale_a", "scale_b", "bias"):
            t = getattr(call, name)
            if t is None:
                continue
            if name == "scale_a" and t.numel() > 1:
                t = t.reshape(-1)[torch.as_tensor(rows, device=t.device)]
            elif t.numel() > 1:
                t = t.reshape(-1)[torch.as_tensor(cols, device=t.device)]
            self.arrays[f"{key}_{name}"] = _bits(t)
            meta[name] = {"dtype": str(t.dtype).replace("torch.", ""), "numel": int(getattr(call, name).numel()),
                          "shape": list(getattr(call, name).shape)}
        res = out
        if call.reshape == "vector":
            res = res.unsqueeze(-1)
        elif call.reshape == "scalar":
            res = res.reshape(1, 1)
        res = (bi(res) if out_batched else res)[..., torch.as_tensor(rows, device=res.device), :][..., torch.as_tensor(cols, device=res.device)]
        self.arrays[f"{key}_out"] = _bits(res)
        meta["out"] = {"dtype": str(out.dtype).replace("torch.", "")}
        self.calls.append(meta)

    def _addend(self, c: torch.Tensor, shape, batches, rows, cols, batched: bool):
        """The addend's sampled entries over the output grid; broadcast dimensions (stride 0) kept at size 1."""
        out_shape = (shape[0], shape[1], shape[2]) if batched else (shape[-3], shape[-2])
        picks = ([batches] if batched else []) + [rows, cols]
        view = c.expand(out_shape)
        for d, idx in enumerate(picks):
            if view.stride(d) == 0:
                view = view.narrow(d, 0, 1)
            else:
                view = view.index_select(d, torch.as_tensor(idx, device=c.device))
        return {"dtype": str(c.dtype).replace("torch.", ""), "shape": list(c.shape), "stride": list(c.stride())}, \
            _bits(view)


def _num(v):
    return float(v) if isinstance(v, (int, float)) else float(v.item()) if hasattr(v, "item") else v


class CaptureMode(TorchDispatchMode):
    def __init__(self, recorder: Recorder):
        super().__init__()
        self.recorder = recorder
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if name not in GEMM_OPS or not tensors or not all(t.is_floating_point() for t in tensors[:2]):
            return func(*args, **kwargs)
        index = self.count
        self.count += 1
        with record_function(f"tcncall{index}"):
            out = func(*args, **kwargs)
        self.recorder.add(func, args, kwargs, out, index)
        return out


def kernels_by_call(trace_path: str) -> dict[int, list[str]]:
    """Call index -> names of the GPU kernels launched inside its record_function range."""
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    ranges = sorted((e["ts"], e["ts"] + e.get("dur", 0), int(e["name"][7:]), e.get("tid"))
                    for e in events if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("tcncall"))
    starts = [r[0] for r in ranges]
    corr_call = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            i = bisect.bisect_right(starts, e["ts"]) - 1
            if i >= 0 and ranges[i][0] <= e["ts"] <= ranges[i][1]:
                corr_call[e["args"]["correlation"]] = ranges[i][2]
    out: dict[int, list[str]] = {}
    for e in events:
        if e.get("cat") == "kernel":
            call = corr_call.get(e.get("args", {}).get("correlation"))
            if call is not None:
                out.setdefault(call, []).append(e["name"])
    return out


def build(arch: str, hidden: int, dtype: torch.dtype, device: str):
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    heads = max(4, hidden // 64)
    if arch == "gpt2":
        cfg = GPT2Config(vocab_size=4096, n_positions=256, n_embd=hidden, n_layer=2, n_head=heads)
        cfg._attn_implementation = "eager"
        model = GPT2LMHeadModel(cfg)
    else:
        cfg = LlamaConfig(vocab_size=4096, hidden_size=hidden, intermediate_size=int(hidden * 2.6875 // 16 * 16),
                          num_hidden_layers=2, num_attention_heads=heads, num_key_value_heads=max(1, heads // 2),
                          max_position_embeddings=256)
        cfg._attn_implementation = "eager"
        model = LlamaForCausalLM(cfg)
    return model.to(device=device, dtype=dtype)


def model_workloads(rec: Recorder, mode: CaptureMode, arch: str, hidden: int, dtype, device: str, seed: int):
    torch.manual_seed(seed)
    model = build(arch, hidden, dtype, device)
    g = torch.Generator(device="cpu").manual_seed(seed)
    ids = torch.randint(0, 4096, (2, 48), generator=g).to(device)
    tag = f"{arch}_h{hidden}_{str(dtype).replace('torch.', '')}"
    model.train()
    rec.workload = f"{tag}_train"
    with mode:
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
    model.eval()
    rec.workload = f"{tag}_forward"
    with torch.no_grad(), mode:
        model(input_ids=ids[:, :40])
    prompt = ids[:1, :24]
    with torch.no_grad():
        rec.workload = f"{tag}_prefill"
        with mode:
            out = model(input_ids=prompt, use_cache=True)
        nxt = out.logits[:, -1:].argmax(-1)
        rec.workload = f"{tag}_decode"
        with mode:
            model(input_ids=nxt, past_key_values=out.past_key_values, use_cache=True)
    del model


def probe_workloads(rec: Recorder, mode: CaptureMode, device: str, seed: int):
    """One call each of the other intercepted ops (GPT-2/Llama do not run them)."""
    g = torch.Generator(device="cpu").manual_seed(seed)

    def r(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, generator=g).to(device=device, dtype=dtype)

    def attempt(label, fn):
        try:
            with torch.no_grad(), mode:
                fn()
        except (RuntimeError, NotImplementedError) as e:  # e.g. CUDA-only overloads when tried on the CPU
            print(f"probe {label}: skipped ({str(e).splitlines()[0][:100]})", flush=True)

    F = torch.nn.functional
    for dtype in (torch.bfloat16, torch.float16):
        rec.workload = f"probes_{str(dtype).replace('torch.', '')}"
        x = {k: r(*v, dtype=dtype) for k, v in dict(a=(64, 256), w=(512, 256), bias=(512,), x2=(2, 1024),
                                                      w2=(1024, 1024), b2=(1024,), v=(1024,)).items()}
        attempt("linear+bias", lambda: F.linear(x["a"], x["w"], x["bias"]))
        attempt("linear+bias M=2", lambda: F.linear(x["x2"], x["w2"], x["b2"]))
        attempt("mm out_dtype M=1", lambda: torch.mm(x["x2"][:1], x["w2"], out_dtype=torch.float32))
        attempt("mm out_dtype", lambda: torch.mm(x["a"], x["w"].t(), out_dtype=torch.float32))
        attempt("baddbmm", lambda: torch.baddbmm(r(4, 32, 48, dtype=dtype), r(4, 32, 64, dtype=dtype),
                                                 r(4, 64, 48, dtype=dtype), beta=0.5, alpha=0.25))
        attempt("addmm alpha beta", lambda: torch.addmm(r(64, 96, dtype=dtype), r(64, 128, dtype=dtype),
                                                        r(128, 96, dtype=dtype), beta=2.0, alpha=0.5))
        attempt("addbmm", lambda: torch.addbmm(r(32, 48, dtype=dtype), r(4, 32, 64, dtype=dtype),
                                               r(4, 64, 48, dtype=dtype)))
        attempt("mv", lambda: torch.mv(x["w2"][:256], x["v"]))
        attempt("addmv", lambda: torch.addmv(x["b2"][:256], x["w2"][:256], x["v"]))
        attempt("dot", lambda: torch.dot(x["v"], x["b2"]))
        attempt("einsum", lambda: torch.einsum("bhqd,bhkd->bhqk", r(2, 4, 16, 32, dtype=dtype),
                                               r(2, 4, 16, 32, dtype=dtype)))
    rec.workload = "probes_fp8"
    e4 = torch.float8_e4m3fn
    a = (r(128, 512) * 4).to(e4)
    b = (r(256, 512) * 4).to(e4).t()
    one = torch.tensor(1.0, device=device)
    sa = torch.rand(128, 1, generator=g).to(device) + 0.5
    sb = torch.rand(1, 256, generator=g).to(device) + 0.5
    for fast in (True, False):
        attempt("scaled_mm tensor", lambda: torch._scaled_mm(a, b, one * 0.5, one * 0.25, out_dtype=torch.bfloat16,
                                                             use_fast_accum=fast))
        attempt("scaled_mm row", lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16,
                                                          use_fast_accum=fast))


def save(rec: Recorder, path: str, kernels: dict[int, list[str]]) -> None:
    for meta in rec.calls:
        meta["kernels"] = kernels.get(meta["index"], [])
    meta_json = json.dumps({"format": "tcnumerics.model_calls/1", "torch": torch.__version__,
                            "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
                            "cuda": torch.version.cuda, "calls": rec.calls})
    arrays = dict(rec.arrays, meta=np.frombuffer(meta_json.encode(), np.uint8))
    np.savez_compressed(path, **arrays)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--hidden", type=int, nargs="+", default=[256, 2048])
    ap.add_argument("--dtypes", nargs="+", default=["bf16", "fp16"])
    ap.add_argument("--archs", nargs="+", default=["gpt2", "llama"])
    ap.add_argument("--rows", type=int, default=4, help="sampled rows/columns of calls too large to keep whole")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--no-probes", action="store_true")
    ap.add_argument("--probes-only", action="store_true", help="capture only the probe calls (no models)")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    groups = [] if args.probes_only else [(f"{arch}_h{h}", arch, h) for arch in args.archs for h in args.hidden]
    if not args.no_probes:
        groups.append(("probes", None, None))
    for tag, arch, hidden in groups:
        t0 = time.time()
        rec = Recorder(args.rows if (hidden or 0) <= 256 else max(2, args.rows // 2), args.seed)
        mode = CaptureMode(rec)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
        with profile(activities=activities) as prof:
            if arch is None:
                probe_workloads(rec, mode, args.device, args.seed)
            else:
                for d in args.dtypes:
                    model_workloads(rec, mode, arch, hidden, dtypes[d], args.device, args.seed)
            if args.device == "cuda":
                torch.cuda.synchronize()
        trace = os.path.join("/tmp", f"trace_{tag}.json")
        prof.export_chrome_trace(trace)
        kernels = kernels_by_call(trace)
        path = os.path.join(args.out, f"models_{tag}.npz")
        save(rec, path, kernels)
        print(f"{tag}: {len(rec.calls)} calls, {sum(1 for c in rec.calls if c['index'] in kernels)} with kernels, "
              f"{os.path.getsize(path) / 1e6:.2f} MB, {time.time() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
