"""Training steps of published model shapes under ``emulate("hopper", check=True)``: every GEMM compared on the
spot with what cuBLAS returns for the same operands on this GPU (the self-check).

The models (``CHECK_SET_1``) were drawn on 2026-11-27, before any capture of them: published configurations
none of whose names appears in any survey or held-out set of ``lab/device_library`` (survey_calls.py,
kernel_calls.py, dense_calls.py).  Each is built from its shapes (LlamaForCausalLM: hidden, FFN, heads, KV
heads, head dim, vocabulary; ``--layers`` decoder layers, random init, BF16, eager attention) and takes one
training step (forward + backward, no optimizer) at each token count.  Prints one JSON line per (model,
tokens), writes every checked call site to ``$OUT/check_<gpu>.json`` (``Checker.summary()``, one document per
step) and every observed call to ``$OUT/check_<gpu>_calls.json.gz`` (``Emulation.save_check``: the capture format
``lab/device_library/fold_gpu.py --captures`` folds in).

    python3 lab/device_models/check_training.py --tokens 256 2048 [--set 2] [--models llama3.2-1b ...] [--layers 1]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

# name: (hidden, FFN, heads, KV heads, head dim, vocabulary) -- from each model's published config.json
CHECK_SET_1 = {
    "llama3.2-1b": (2048, 8192, 32, 8, 64, 128256),
    "llama3.2-3b": (3072, 8192, 24, 8, 128, 128256),
    "gemma2-9b": (3584, 14336, 16, 8, 256, 256000),
    "phi-4": (5120, 17920, 40, 10, 128, 100352),
    "internlm3-8b": (4096, 10240, 32, 2, 128, 128512),
    "olmo2-7b": (4096, 11008, 32, 32, 128, 100352),
    "granite3.1-2b": (2048, 8192, 32, 8, 64, 49155),
    "smollm3-3b": (2048, 11008, 16, 4, 128, 128256),
    "falcon3-1b": (2048, 8192, 8, 4, 256, 131072),
    "exaone3.5-2.4b": (2560, 7168, 32, 8, 80, 102400),
    "mistral-nemo-12b": (5120, 14336, 32, 8, 128, 131072),
}

# Drawn on 2026-11-27 (second session), after CHECK_SET_1's H200 calls were folded in and before any capture of
# these: published configurations none of whose names appears in any survey, held-out or check set above (grep of
# lab/device_library and lab/device_models).  Grok-1 and Arctic: the attention and one expert's / the dense
# residual MLP's shapes (a LlamaForCausalLM of those dimensions, as for every model here).
CHECK_SET_2 = {
    "grok-1": (6144, 32768, 48, 8, 128, 131072),
    "snowflake-arctic": (7168, 4864, 56, 8, 128, 32000),
    "minitron-4b": (3072, 9216, 24, 8, 128, 256000),
    "mistral-nemo-minitron-8b": (4096, 11520, 32, 8, 128, 131072),
    "eurollm-9b": (4096, 12288, 32, 8, 128, 128000),
    "eurollm-1.7b": (2048, 5632, 16, 8, 128, 128000),
    "salamandra-7b": (4096, 11008, 32, 8, 128, 256000),
    "salamandra-2b": (2048, 5440, 16, 16, 128, 256000),
    "viking-7b": (4096, 11008, 32, 32, 128, 131072),
    "qwen2.5-72b": (8192, 29568, 64, 8, 128, 152064),
}  # Llama-3.1-405B (16384, 53248) was drawn too and left out before any run: one layer's step is a third of the set's
#    device time
# Drawn on 2026-11-28 (issue 33, "flags that cry wolf"), before the survey that measures training shapes on a generic
# grid (train_calls.train_grid_calls) and before any capture of them: published configurations none of whose names
# appears in any survey, held-out or check set above (grep of lab/device_library and lab/device_models), and
# whose (hidden, FFN, vocabulary) triple is no surveyed model's.
CHECK_SET_3 = {
    "mobilellm-1b": (1280, 3584, 20, 5, 64, 32000),
    "falcon3-3b": (3072, 9216, 12, 4, 256, 131072),
    "gemma3-270m": (640, 2048, 4, 1, 256, 262144),
    "olmo2-32b": (5120, 27648, 40, 8, 128, 100352),
    "h2o-danube3-4b": (3840, 10240, 32, 8, 120, 32000),
    "seed-coder-8b": (4096, 14336, 32, 8, 128, 155136),
    "qwen3-30b-a3b-expert": (2048, 768, 32, 4, 128, 151936),
    "glm4-32b": (6144, 23040, 48, 2, 128, 151552),
    "exaone3.5-32b": (5120, 27392, 40, 8, 128, 102400),
    "apertus-8b": (4096, 21504, 32, 8, 128, 131072),
}
# Drawn on 2026-11-29 (issue 33, a blind run of the flag-precision check after CHECK_SET_3's fold and the H200's
# launch frontier), before any capture of them: published configurations none of whose names appears in any survey,
# held-out or check set above (lab/data/models.json, lab/device_library, lab/device_models) and whose (hidden, FFN,
# vocabulary) triple is no listed model's.  The mixture-of-experts models are one expert's MLP with the model's
# attention; Kimi-K2's multi-head latent attention is approximated by 64 heads of 128 (its value head dim).
CHECK_SET_4 = {
    "phi4-mini": (3072, 8192, 24, 8, 128, 200064),
    "command-a": (12288, 36864, 96, 8, 128, 256000),
    "command-r-plus": (12288, 33792, 96, 8, 128, 256000),
    "qwen3-235b-a22b-expert": (4096, 1536, 64, 4, 128, 151936),
    "gpt-oss-20b-expert": (2880, 2880, 64, 8, 64, 201088),
    "glm4.5-air-expert": (4096, 1408, 96, 8, 128, 151552),
    "ernie4.5-21b-a3b-expert": (2560, 1536, 20, 4, 128, 103424),
    "seed-oss-36b": (5120, 27648, 80, 8, 128, 155136),
    "minimax-m2-expert": (3072, 1536, 48, 8, 128, 200064),
    "kimi-k2-expert": (7168, 2048, 64, 64, 128, 163840),
}
# Drawn on 2026-11-29 after CHECK_SET_4 ran and before the training grid's supplement (train_calls.GRID_SETS
# "train_grid_fine") was surveyed or any capture of these: names in no list above, no listed (hidden, FFN, vocabulary)
# triple.  MiniCPM3's latent attention as 40 heads of 64.
CHECK_SET_5 = {
    "qwen1.5-moe-a2.7b-expert": (2048, 1408, 16, 16, 128, 151936),
    "granite3.0-3b-a800m-expert": (1536, 512, 24, 8, 64, 49155),
    "minicpm3-4b": (2560, 6400, 40, 40, 64, 73448),
    "minicpm4-8b": (4096, 16384, 32, 2, 128, 73448),
    "pharia1-7b": (4608, 18432, 36, 4, 128, 128000),
    "sarvam-1": (2048, 11008, 16, 8, 128, 68096),
    "rakuten-ai-7b": (4096, 14336, 32, 8, 128, 48000),
    "llm-jp-3-13b": (5120, 13824, 40, 40, 128, 99584),
    "exaone4-1.2b": (2048, 4096, 32, 8, 64, 102400),
    "llama3.1-nemotron-nano-4b": (3072, 9216, 32, 8, 128, 128256),
}
# Drawn on 2026-11-29 after the grid's supplement and the large LM heads were folded, before any run of these: names
# in no list above, no listed (hidden, FFN, vocabulary) triple.  Nemotron-4-340B's LM head (256,000 x 18,432) is
# beyond every survey's operand cap.
CHECK_SET_6 = {
    "sea-lion-7b": (4096, 16384, 32, 32, 128, 256000),
    "nemotron4-340b": (18432, 73728, 96, 8, 192, 256000),
    "minimax-text-01-expert": (6144, 9216, 64, 8, 128, 200064),
    "pythia-410m": (1024, 4096, 16, 16, 64, 50304),
    "opt-2.7b": (2560, 10240, 32, 32, 80, 50272),
    "replit-code-v1.5-3b": (3072, 12288, 24, 24, 128, 32768),
    "granite-8b-code": (4096, 14336, 32, 8, 128, 49152),
    "gpt-neo-1.3b": (2048, 8192, 16, 16, 128, 50257),
    "dolly-v2-3b": (2560, 10240, 32, 32, 80, 50280),
    "starcoderbase-3b": (2816, 11264, 22, 1, 128, 49152),
}
# Drawn on 2026-11-29 (tenth session) after train_calls.train_grid_large_calls was written and before it was surveyed
# or any capture of these: names in no list above, no listed (hidden, FFN, vocabulary) triple.  Older and newer
# published models alike; four use tokenizers whose vocabularies that grid names (OPT's 50,272, GPT-2's 50,257,
# Galactica's 50,000, MiniCPM's 73,448).  ERNIE-4.5-300B and GLM-4.5 are one expert's MLP with the model's attention.
CHECK_SET_7 = {
    "opt-30b": (7168, 28672, 56, 56, 128, 50272),
    "pythia-12b": (5120, 20480, 40, 40, 128, 50688),
    "cerebras-gpt-13b": (5120, 20480, 40, 40, 128, 50257),
    "llama1-33b": (6656, 17920, 52, 52, 128, 32000),
    "qwen1-14b": (5120, 13696, 40, 40, 128, 152064),
    "bloom-176b": (14336, 57344, 112, 112, 128, 250880),
    "ernie4.5-300b-a47b-expert": (8192, 3584, 64, 8, 128, 103424),
    "glm4.5-expert": (5120, 1536, 96, 8, 128, 151552),
    "olmo2-1b": (2048, 8192, 16, 16, 128, 100352),
    "minicpm4-0.5b": (1024, 4096, 16, 2, 64, 73448),
    "galactica-6.7b": (4096, 16384, 32, 32, 128, 50000),
}
CHECK_SETS = {1: CHECK_SET_1, 2: CHECK_SET_2, 3: CHECK_SET_3, 4: CHECK_SET_4, 5: CHECK_SET_5, 6: CHECK_SET_6,
              7: CHECK_SET_7}


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
