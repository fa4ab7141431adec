"""Would a vocabulary between the grid's take its neighbours' launch?  The large grid's answer, from the table.

    PYTHONPATH=src:lab/device_library python3 lab/device_library/vocab_interpolation.py [--gpu h200]

The training grids survey LM heads at vocabularies that are multiples of 128; ``train_grid_large`` also surveyed the
published tokenizers' vocabularies between them (``train_calls.TOKENIZER_VOCABS``).  For each of those that is a
multiple of 8 (16-byte rows: the aligned kernels), at every hidden size and token count of the grid, this compares
the launch measured at the vocabulary with the launches at the multiples of 128 below and above it, in what decides
the bits: the kernel family and nvjet's split-K slice count.  Where the two neighbours agree and the vocabulary
between them does not, a rule that interpolated would be silently wrong -- so the library flags such calls instead.
Forward (the vocabulary is N) and input gradient (the vocabulary is K) are counted apart.
"""

from __future__ import annotations

import argparse
import collections

import train_calls
from tcnumerics.library import launches
from tcnumerics.library.calls import Call

CLASSES = ("neighbours agree, same", "neighbours agree, different", "neighbours disagree", "not measured")


def _numerics(launch: launches.Launch, c: Call) -> tuple:
    """What of a launch decides the bits: the kernel family (nvjet, or the kernel's name) and the split count."""
    family = "nvjet" if launch.main.startswith("nvjet") else launch.main
    return family, launches.nvjet_split_count(launch, c) if family == "nvjet" else None


def _call(direction: str, tokens: int, vocab: int, hidden: int, gpu: str) -> Call:
    if direction == "forward":  # F.linear: x [T, hidden] @ W[vocab, hidden]^T
        return Call("matmul", "bf16", "bf16", tokens, vocab, hidden, b_t=True, gpu=gpu)
    return Call("matmul", "bf16", "bf16", tokens, hidden, vocab, gpu=gpu)  # grad_y [T, vocab] @ W


def compare(gpu: str = "h200") -> dict[str, collections.Counter]:
    """{direction: Counter of CLASSES} over the tokenizer vocabularies that are multiples of 8, not of 128."""
    table = launches.table(gpu)
    out = {d: collections.Counter() for d in ("forward", "input_grad")}
    for vocab in (v for v in train_calls.TOKENIZER_VOCABS if v % 8 == 0 and v % 128):
        below, above = vocab // 128 * 128, -(-vocab // 128) * 128
        for hidden in train_calls.GRID_HIDDEN + train_calls.FINE_HIDDEN:
            for tokens in train_calls.GRID_TOKENS:
                for direction, counts in out.items():
                    calls = [_call(direction, tokens, v, hidden, gpu) for v in (vocab, below, above)]
                    found = [launches.launch_in(table, c) for c in calls]
                    if None in found:
                        counts["not measured"] += 1
                        continue
                    at, low, high = (_numerics(L, c) for L, c in zip(found, calls))
                    counts["neighbours disagree" if low != high else
                           "neighbours agree, same" if at == low else "neighbours agree, different"] += 1
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpu", default="h200", help="the GPU model whose launch table to read")
    args = ap.parse_args(argv)
    for direction, counts in compare(args.gpu).items():
        print(f"{direction}: " + ", ".join(f"{k} {counts[k]:,}" for k in CLASSES))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
