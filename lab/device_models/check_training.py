"""Training steps of published model shapes under ``emulate("hopper", check=True)``: every GEMM compared on the
spot with what cuBLAS returns for the same operands on this GPU (the self-check).

The models of a check set (``CHECK_SETS[n]``, "CHECK_SET_n" in the docs: ``lab/data/models.json``'s
``check_set<n>``, whose note says when it was drawn) are published configurations none of whose names appears in any
survey, held-out or earlier check set, drawn before any capture of them. Each is built from its shapes
(LlamaForCausalLM: hidden, FFN, heads, KV heads, head dim, vocabulary; ``--layers`` decoder layers, random init,
BF16, eager attention) and takes one training step (forward + backward, no optimizer) at each token count. Prints
one JSON line per (model, tokens), writes every checked call site to ``$OUT/check_<gpu>.json``
(``Checker.summary()``, one document per step) and every observed call to ``$OUT/check_<gpu>_calls.json.gz``
(``Emulation.save_check``: the capture format ``lab/device_library/fold_gpu.py --captures`` folds in).

    python3 lab/device_models/check_training.py --tokens 256 2048 [--set 2] [--models llama3.2-1b ...] [--layers 1]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "device_library"))
from model_lists import check_sets  # noqa: E402  (lab/device_library: the model lists' reader)

# set number -> name -> (hidden, FFN, heads, KV heads, head dim, vocabulary), from each model's published config.json:
# lab/data/models.json's check_set<N> lists, each with a note saying when it was drawn ("CHECK_SET_<N>" in the docs)
CHECK_SETS = check_sets()


def build(shape, layers: int):
    import torch
    import transformers

    hidden, ffn, heads, kv, head_dim, vocab = shape
    # transformers >= 5 refuses a hidden size that is no multiple of the head count at construction, though the
    # attention takes heads x head_dim from the config (GLM-4.5-Air: 96 x 128 over hidden 4096): set it after
    cfg = transformers.LlamaConfig(hidden_size=hidden, intermediate_size=ffn, num_hidden_layers=layers,
                                   num_attention_heads=kv, num_key_value_heads=kv, head_dim=head_dim,
                                   vocab_size=vocab, max_position_embeddings=16384, tie_word_embeddings=False)
    cfg.num_attention_heads = heads
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = transformers.LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(torch.float32)
    return model.train(), cfg


def step(model, ids) -> None:
    model.zero_grad(set_to_none=True)
    model(ids, labels=ids).loss.backward()


def check(name: str, shape, tokens: int, layers: int, gpu: str) -> tuple[dict, dict]:
    import torch

    import tcnumerics.torch as tct

    model, cfg = build(shape, layers)
    ids = torch.randint(0, cfg.vocab_size, (1, tokens), device="cuda", generator=torch.Generator("cuda").manual_seed(7))
    t = time.perf_counter()
    with tct.emulate("hopper", check=True) as run:
        step(model, ids)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t
    rep = run.check_report()
    tot = rep.totals()
    doc = dict(run.mode.checker.summary(), model=name, tokens=tokens, layers=layers)
    observations = run.mode.checker.observations()
    silent = [f"{s.op} {s.phase} {'x'.join(map(str, s.shape))} {s.layout}: {','.join(s.native_kernels)[:120]} "
              f"(predicted {s.predicted[:80]}; {s.max_fraction_differing:.2%} differ)" for s in rep if s.silent]
    flagged_diff = [f"{s.op} {s.phase} {'x'.join(map(str, s.shape))} {s.layout}" for s in rep if s.flagged]
    row = dict(gpu=gpu, model=name, tokens=tokens, layers=layers, seconds=round(seconds, 2), **tot,
               flagged_sites=sum(1 for s in rep if not s.modelled), silent_sites=silent, flagged_differing=flagged_diff)
    del model
    torch.cuda.empty_cache()
    return row, doc, observations


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--set", type=int, default=1, choices=sorted(CHECK_SETS), help="which check set")
    p.add_argument("--models", nargs="+", default=None, help="some of the set's models (default: all)")
    p.add_argument("--tokens", nargs="+", type=int, default=[256, 2048])
    p.add_argument("--layers", type=int, default=1)
    args = p.parse_args(argv)
    models = CHECK_SETS[args.set]
    args.models = args.models or list(models)
    unknown = [m for m in args.models if m not in models]
    if unknown:
        print(f"check_training: unknown models {unknown}; set {args.set} has: {', '.join(models)}", file=sys.stderr)
        return 2
    import torch

    gpu = torch.cuda.get_device_name()
    out_dir = os.environ.get("OUT", "/tmp")
    docs, seen, totals = [], [], dict(calls=0, exact=0, flagged=0, silent=0)
    tag = gpu.replace("NVIDIA ", "").split()[0].lower()
    tag = tag if args.set == 1 else f"{tag}_set{args.set}"
    try:
        for name in args.models:
            for tokens in args.tokens:
                row, doc, observations = check(name, models[name], tokens, args.layers, gpu)
                print(json.dumps(row), flush=True)
                docs.append(doc)
                seen.extend(observations)
                for k in totals:
                    totals[k] += row[k]
    finally:  # the steps that ran are kept when a later model fails
        write_outputs(out_dir, tag, gpu, docs, seen)
    print(json.dumps(dict(gpu=gpu, total=totals, exact_fraction=round(totals["exact"] / max(1, totals["calls"]), 4))))
    return 0


def write_outputs(out_dir: str, tag: str, gpu: str, docs: list, seen: list) -> None:
    import torch

    with open(os.path.join(out_dir, f"check_{tag}.json"), "w") as f:
        json.dump(dict(gpu=gpu, steps=docs), f)
    from tcnumerics.library.check import write_capture

    write_capture(os.path.join(out_dir, f"check_{tag}_calls.json.gz"), seen, dict(device=gpu, torch=torch.__version__,
                                                                                  cuda=torch.version.cuda))


if __name__ == "__main__":
    sys.exit(main())
