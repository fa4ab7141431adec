"""The model lists the surveys draw their calls from, read from ``lab/data/models.json``.

A list is a name (``holdout``, ``holdout2`` .. ``holdout13``, ``kernel_survey``, ``kernel_survey2``,
``kernel_survey3``, the self-check's ``check_set1`` onward) and its published model configurations; a held-out set
also carries the token counts and the attention bmm / baddbmm shapes it was drawn with. The numbers live in data,
not in code, so that a new held-out set is a new entry of the file, not a new dated name in a module. Lists are
appended to, never edited: every survey's call ids and operand seeds derive from them, and the captures were made
with them.

    >>> models("holdout2")["mistral-7b"]
    (4096, 14336, 32000, 6144, 128)
    >>> held_out_numbers()[0], held_out_numbers()[-1]
    (3, 13)
"""
from __future__ import annotations

import json
import os
from functools import lru_cache

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "models.json")


@lru_cache(maxsize=None)
def _lists() -> dict:
    with open(PATH, encoding="utf-8") as f:
        return json.load(f)["lists"]


def models(name: str) -> dict[str, tuple[int, ...]]:
    """List ``name``'s models: name -> (hidden, FFN, vocabulary, QKV or KV width[, head dim]), in file order."""
    return {m: tuple(v) for m, v in _entry(name)["models"].items()}


def tokens(name: str) -> tuple[int, ...]:
    """The token counts held-out set ``name`` was drawn with."""
    return tuple(_entry(name)["tokens"])


def attention(name: str) -> tuple[tuple[tuple[int, int, int, int], ...], tuple[tuple[int, int, int, int], ...]]:
    """Held-out set ``name``'s attention shapes (b, M, N, K): the bmm ones and the baddbmm ones."""
    e = _entry(name)
    return tuple(map(tuple, e["attention_bmm"])), tuple(map(tuple, e["attention_baddbmm"]))


def held_out_numbers() -> list[int]:
    """The numbers n of the held-out sets ``holdout{n}`` drawn with token counts and attention shapes (3 onward)."""
    return sorted(int(k[len("holdout"):]) for k, e in _lists().items()
                  if k.startswith("holdout") and "attention_bmm" in e)


def check_sets() -> dict[int, dict[str, tuple[int, ...]]]:
    """The self-check's sets (``check_set1`` onward): n -> model -> (hidden, FFN, heads, KV heads, head dim,
    vocabulary), in file order.

    >>> check_sets()[1]["llama3.2-1b"]
    (2048, 8192, 32, 8, 64, 128256)
    """
    found = {int(k[len("check_set"):]): k for k in _lists() if k.startswith("check_set")}
    return {n: models(found[n]) for n in sorted(found)}


def _entry(name: str) -> dict:
    lists = _lists()
    if name not in lists:
        raise KeyError(f"no model list {name!r} in {PATH} (lists: {', '.join(lists)})")
    return lists[name]
