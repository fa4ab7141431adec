"""emulate("hopper") inside DDP with NCCL on several GPUs: each rank emulates its own GEMMs on its own GPU, and
the training step's gradients equal the native DDP step's bit for bit wherever every GEMM is modelled.

Each rank builds the same model (a Llama-shaped BF16 model, random init, seed 0), takes its own batch,
runs one native DDP step (forward + backward, gradients all-reduced by NCCL), keeps the gradients, then
the same step under ``emulate("hopper")``.  DDP's all-reduce is native and deterministic for a fixed
topology, so where every GEMM is modelled the gradients must match in every bit.  Each rank prints one JSON
line: gradients compared and differing, GEMM calls and flagged calls, and the flagged call sites.

    python3 lab/device_models/ddp_emulate.py --gpus 2 [--layers 2 --hidden 2048 --tokens 512]
(one process per GPU, started here with torch.multiprocessing; NCCL_NVLS_ENABLE=0 is kept.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def _model(args, device):
    import torch
    import transformers

    cfg = transformers.LlamaConfig(hidden_size=args.hidden, intermediate_size=args.mlp, num_hidden_layers=args.layers,
                                   num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
                                   vocab_size=args.vocab, max_position_embeddings=4096)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device(device):
        model = transformers.LlamaForCausalLM(cfg)
    torch.set_default_dtype(torch.float32)
    return model, cfg


def _step(ddp, ids):
    ddp.zero_grad(set_to_none=True)
    loss = ddp(ids, labels=ids).loss
    loss.backward()
    return loss.detach().clone(), [p.grad.clone() for p in ddp.parameters()]


def rank_main(rank: int, args) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    import tcnumerics.torch as tct

    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    cpu = args.backend == "gloo"  # a dry run of the same steps on the CPU (CI machines have no GPU)
    dist.init_process_group(args.backend, rank=rank, world_size=args.gpus, init_method=f"tcp://127.0.0.1:{args.port}")
    if not cpu:
        torch.cuda.set_device(rank)
    device = torch.device("cpu") if cpu else torch.device("cuda", rank)
    model, cfg = _model(args, device)
    ddp = DistributedDataParallel(model, device_ids=None if cpu else [rank])
    ids = torch.randint(0, cfg.vocab_size, (1, args.tokens), generator=torch.Generator().manual_seed(100 + rank))
    ids = ids.to(device)
    native_loss, native = _step(ddp, ids)
    with tct.emulate("hopper") as run:
        loss, grads = _step(ddp, ids)
    differ = [i for i, (a, b) in enumerate(zip(native, grads)) if not torch.equal(a.view(torch.int16), b.view(torch.int16))]
    report = run.report()
    flagged = [f"{s.op} {s.phase} {'x'.join(map(str, s.shape))} {s.layout}: {s.kernel} ({s.reason[:80]})"
               for s in report if not s.modelled]
    print(json.dumps(dict(rank=rank, gpu="cpu" if cpu else torch.cuda.get_device_name(device), world=args.gpus,
                          loss_equal=bool(torch.equal(native_loss, loss)), gradients=len(native),
                          gradients_differing=len(differ), gemm_calls=report.calls, flagged_calls=report.not_modelled,
                          flagged_sites=flagged)), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gpus", type=int, default=2)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--mlp", type=int, default=5632)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--port", type=int, default=29512)
    p.add_argument("--backend", default="nccl", choices=["nccl", "gloo"], help="gloo: the same steps on the CPU")
    args = p.parse_args(argv)
    import torch
    import torch.multiprocessing as mp

    if args.backend == "nccl" and torch.cuda.device_count() < args.gpus:
        print(f"ddp_emulate: {args.gpus} GPUs asked for, {torch.cuda.device_count()} visible", file=sys.stderr)
        return 2
    mp.spawn(rank_main, args=(args,), nprocs=args.gpus, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
