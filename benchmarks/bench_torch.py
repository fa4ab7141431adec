"""Emulated PyTorch models end to end: ``emulate("hopper")`` and an FP8 unit recipe against the native model.

Models are built from their published shapes (``MODELS``: Hugging Face configs, random init, BF16, eager
attention) on the GPU.  For each ``--what`` the script times the native run and the emulated run on the same
GPU in the same process (warm: one untimed run first, then the best of ``--repeat``), checks the emulated
bits against the native ones (library mode on the GPU it models: logits / every hidden state / every
gradient bit-identical, or which differ), and prints one JSON line per measurement: MACs intercepted, MAC/s
end to end, times the native run, and with ``--profile`` the share of GPU time in the instruction chains,
in the rest of the composition (CuPy kernels), in copies, and in torch's own kernels.

    python benchmarks/bench_torch.py --model llama-1b --layers 2 --tokens 1024 --what forward library fp8
    python benchmarks/bench_torch.py --model llama3-8b --tokens 2048 --what forward
    python benchmarks/bench_torch.py --model llama3-8b --tokens 1024 --what train
    python benchmarks/bench_torch.py --gemm 8192              # tc.gemm on torch CUDA tensors vs cuda.gemm_bits
    python benchmarks/bench_torch.py --device cpu --model tiny --tokens 64 --what cpu-profile

Needs torch and transformers (and CuPy with a GPU for the GPU cases).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time

import numpy as np

MODELS = {  # published shapes; layers may be cut with --layers
    "llama-1b": dict(arch="llama", hidden=2048, mlp=5632, heads=32, kv_heads=4, vocab=32000, layers=22),
    "llama3-8b": dict(arch="llama", hidden=4096, mlp=14336, heads=32, kv_heads=8, vocab=128256, layers=32),
    "mistral-7b": dict(arch="llama", hidden=4096, mlp=14336, heads=32, kv_heads=8, vocab=32000, layers=32),
    "gpt2": dict(arch="gpt2", hidden=768, mlp=3072, heads=12, kv_heads=12, vocab=50257, layers=12),
    "tiny": dict(arch="llama", hidden=256, mlp=688, heads=8, kv_heads=4, vocab=1024, layers=2),
}
FP8_RECIPE = dict(instruction="hopper.wgmma.m64n8k32.f32.e4m3.e4m3", scaling="tensor", promote_every=128)


def build(name: str, layers: int | None, device: str):
    import torch
    import transformers

    m = dict(MODELS[name])
    n_layers = layers or m["layers"]
    torch.manual_seed(0)
    if m["arch"] == "gpt2":
        cfg = transformers.GPT2Config(n_embd=m["hidden"], n_layer=n_layers, n_head=m["heads"], vocab_size=m["vocab"],
                                      n_positions=4096)
        cls = transformers.GPT2LMHeadModel
    else:
        cfg = transformers.LlamaConfig(hidden_size=m["hidden"], intermediate_size=m["mlp"], num_hidden_layers=n_layers,
                                       num_attention_heads=m["heads"], num_key_value_heads=m["kv_heads"],
                                       vocab_size=m["vocab"], max_position_embeddings=8192)
        cls = transformers.LlamaForCausalLM
    cfg._attn_implementation = "eager"
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            model = cls(cfg)
    finally:
        torch.set_default_dtype(default)
    return model.eval(), cfg


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn, device: str, repeat: int):
    """(best seconds over ``repeat`` runs after one warm run, the last result)."""
    out = fn()
    _sync(device)
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        _sync(device)
        best = min(best, time.perf_counter() - t)
    return best, out


def macs_of(report) -> int:
    total = 0
    for site in report:
        total += site.count * int(np.prod(site.shape))
    return total


def _forward(model, ids):
    import torch

    with torch.no_grad():
        out = model(ids, output_hidden_states=True)
    return [out.logits] + list(out.hidden_states)


def _train(model, ids):
    model.zero_grad(set_to_none=True)
    loss = model(ids, labels=ids).loss
    loss.backward()
    return [loss.detach()] + [p.grad for p in model.parameters() if p.grad is not None]


def _differ(a, b) -> int:
    """How many of the tensors differ in any bit."""
    import torch

    return sum(not torch.equal(x.view(torch.int16) if x.dtype == torch.bfloat16 else x,
                               y.view(torch.int16) if y.dtype == torch.bfloat16 else y) for x, y in zip(a, b))


def run_case(args, what: str) -> dict:
    import torch

    import tcnumerics.torch as tct

    model, cfg = build(args.model, args.layers, args.device)
    if what == "train" and args.checkpointing:
        model.gradient_checkpointing_enable()
        model.train()
    ids = torch.randint(0, cfg.vocab_size, (1, args.tokens), device=args.device,
                        generator=torch.Generator(args.device).manual_seed(1))
    step = _train if what == "train" else _forward
    native_s, native = timed(lambda: step(model, ids), args.device, args.repeat)
    native = [t.detach().to("cpu", copy=True) for t in native]  # host copies: an 8B model's gradients are 16 GB
    emulation = tct.emulate(**FP8_RECIPE) if what == "fp8" else tct.emulate("hopper")

    def emulated():
        with emulation:
            return step(model, ids)
    emulated_s, result = timed(emulated, args.device, args.repeat)
    calls = emulation.report()
    per_run = calls.calls // (args.repeat + 1)
    macs = macs_of(calls) // (args.repeat + 1)
    row = dict(model=args.model, layers=cfg.num_hidden_layers, tokens=args.tokens, what=what,
               recipe="fp8 " + json.dumps(FP8_RECIPE) if what == "fp8" else "library hopper",
               device=torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
               native_s=round(native_s, 5), emulated_s=round(emulated_s, 3), x_native=round(emulated_s / native_s, 1),
               gemm_calls=per_run, macs=macs, mac_per_s=float(f"{macs / emulated_s:.3g}"),
               not_modelled=calls.not_modelled // (args.repeat + 1),
               tensors_compared=len(native), tensors_differing=_differ(native, [t.cpu() for t in result]))
    del result
    if args.profile and args.device == "cuda":
        row.update(gpu_profile(emulated))
    if args.host_profile:
        host_profile(emulated)
    del model, native
    torch.cuda.empty_cache() if args.device == "cuda" else None
    return row


def gpu_profile(fn) -> dict:
    """Shares of GPU kernel time: instruction chains, composition (CuPy kernels), copies, torch's kernels."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    t = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    wall = time.perf_counter() - t
    shares = {"chains": 0.0, "composition": 0.0, "copies": 0.0, "torch": 0.0}
    for e in prof.key_averages():
        us = e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
        name = e.key
        if any(k in name for k in ("gemm_tiled", "gemm_scalar", "gemm_fchain", "gemm_tcalign", "gemm_native")):
            shares["chains"] += us
        elif "cupy" in name.lower():
            shares["composition"] += us
        elif "memcpy" in name.lower() or "memset" in name.lower():
            shares["copies"] += us
        else:
            shares["torch"] += us
    busy = sum(shares.values())
    out = {f"gpu_share_{k}": round(v / busy, 4) for k, v in shares.items()}
    out.update(profiled_wall_s=round(wall, 3), gpu_busy_s=round(busy / 1e6, 3))
    return out


def host_profile(fn, top: int = 25) -> None:
    """The host's time in one run, by function (to stderr): where Python spends what the GPU waits for."""
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(top)


def bench_gemm(size: int, repeat: int) -> dict:
    """``tc.gemm`` on torch CUDA tensors (BF16) against ``cuda.gemm_bits`` on the same bits, same GPU."""
    import cupy
    import torch

    import tcnumerics as tc
    from tcnumerics.engines import cuda

    spec = "hopper.wgmma.m64n8k16.f32.bf16.bf16"
    g = torch.Generator("cuda").manual_seed(0)
    A = torch.randn(size, size, device="cuda", generator=g).to(torch.bfloat16)
    B = torch.randn(size, size, device="cuda", generator=g).to(torch.bfloat16)
    a_rows = cupy.from_dlpack(A.view(torch.int16)).view(cupy.uint16)
    b_cols = cupy.ascontiguousarray(cupy.from_dlpack(B.view(torch.int16)).view(cupy.uint16).T)
    zero = cupy.zeros((size, size), cupy.uint32)
    bits_s, bits = timed(lambda: cuda.gemm_bits(spec, a_rows, b_cols, zero), "cuda", repeat)
    gemm_s, out = timed(lambda: tc.gemm(A, B, instruction=spec, engine="cuda"), "cuda", repeat)
    same = bool(cupy.array_equal(cupy.from_dlpack(out.contiguous()).view(cupy.uint32), bits))
    macs = size ** 3
    return dict(case=f"BF16 {size}^3", device=torch.cuda.get_device_name(), gemm_bits_mac_per_s=float(f"{macs / bits_s:.3g}"),
                tc_gemm_torch_mac_per_s=float(f"{macs / gemm_s:.3g}"), ratio=round(bits_s / gemm_s, 3),
                same_bits=same)


def cpu_profile(args) -> dict:
    """Share of a CPU ``emulate("hopper")`` forward spent in the library epilogue (cProfile)."""
    import torch

    import tcnumerics.torch as tct

    model, cfg = build(args.model, args.layers, "cpu")
    ids = torch.randint(0, cfg.vocab_size, (1, args.tokens), generator=torch.Generator().manual_seed(1))
    with tct.emulate("hopper"):
        _forward(model, ids)  # warm: numba compiles, plans cached
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    with tct.emulate("hopper"):
        _forward(model, ids)
    prof.disable()
    wall = time.perf_counter() - t
    stats = pstats.Stats(prof)
    epi = sum(v[3] for k, v in stats.stats.items() if k[2] == "epilogue" and k[0].endswith("structure.py"))
    conv = sum(v[3] for k, v in stats.stats.items() if k[2] in ("from_float", "to_float") and k[0].endswith("formats.py"))
    return dict(model=args.model, tokens=args.tokens, device="cpu", forward_s=round(wall, 3),
                epilogue_share=round(epi / wall, 4), conversion_share=round(conv / wall, 4))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="llama-1b", choices=sorted(MODELS))
    p.add_argument("--layers", type=int, default=None, help="cut the model to this many layers")
    p.add_argument("--tokens", type=int, default=1024)
    p.add_argument("--what", nargs="+", default=["forward"], choices=["forward", "train", "fp8", "cpu-profile"])
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--profile", action="store_true", help="GPU time shares (torch.profiler), one extra run")
    p.add_argument("--checkpointing", action="store_true", help="activation checkpointing for --what train")
    p.add_argument("--host-profile", action="store_true", help="cProfile one emulated run (to stderr)")
    p.add_argument("--gemm", type=int, default=0, help="instead: tc.gemm on CUDA tensors vs gemm_bits at this size")
    args = p.parse_args(argv)
    if args.gemm:
        print(json.dumps(bench_gemm(args.gemm, args.repeat)), flush=True)
        return 0
    for what in args.what:
        row = cpu_profile(args) if what == "cpu-profile" else run_case(args, what)
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
