"""A survey call's id and operand seeds: the one helper every call list (survey, kernel, dense, training) uses.

    >>> calls = []
    >>> add = adder(calls, "doc")
    >>> add("matmul", "bf16", 2, 3, 4)
    >>> calls[0]["id"], calls[0]["prec"], calls[0]["seed_b"] - calls[0]["seed_a"]
    (0, 'highest', 1)
"""
from __future__ import annotations

import zlib


def adder(calls: list[dict], salt: str):
    """``add(op, fmt, M, N, K, **options)``: append a call with its id and operand seeds (hashed from the
    call and ``salt``, so a call's operands do not depend on its position in the list)."""
    def add(op, fmt, M, N, K, **kw):
        c = dict(op=op, fmt=fmt, M=M, N=N, K=K, prec=kw.pop("prec", "highest"), **kw)
        c["id"] = len(calls)
        h = zlib.crc32((salt + repr(sorted(c.items()))).encode()) % 10 ** 6
        c["seed_a"], c["seed_b"], c["seed_c"] = 3 * h + 1, 3 * h + 2, 3 * h + 3
        calls.append(c)
    return add
